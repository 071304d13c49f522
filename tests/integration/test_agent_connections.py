# ruff: noqa: F811 - the fixtures of test_msft_oauth and test_connections are imported by name
"""The toolbox-follows-connections rule (spec §5.3, issue 17) on the model's recorded requests.

The Workspace agent runs through its SSE endpoint as a user of a mandate, with the scripted model
(tests/ai_server.py) recording every request. What the model is offered — the `requestToolbox` enum,
the system prompt's toolbox catalogue and the tools of each round — follows the user's *active*
connections: their own, or one shared with their mandate; Microsoft 365 connections are made by the
real consent against the Graph stand-in (tests/msgraph_server.py), IMAP/SMTP ones against pymap and
aiosmtpd (tests/mail_servers.py).
"""

from __future__ import annotations

import json

import pytest

from backend.db import session_scope
from backend.db.models import Connection
from backend.statemachines import connection as lifecycle
from tests.integration.test_admin_api import Mandate, add_user, make_mandate, signed_in
from tests.integration.test_agent import call, of, request_toolbox_enum, stream, tool_names, tool_results
from tests.integration.test_connections import mail  # noqa: F401 - fixture
from tests.integration.test_msft_oauth import _stand_in, browser, graph  # noqa: F401 - fixtures

MSFT_BOXES = {"email", "sharepoint"}
OUTLOOK_TOOLS = {"outlook_readEmails", "outlook_searchEmails", "outlook_draftEmail", "outlook_sendDraft"}
SHAREPOINT_TOOLS = {"sharepoint_listSites", "sharepoint_listFolder", "sharepoint_findDoc", "sharepoint_readDocs",
                    "sharepoint_upload"}
CATALOGUE_HEADING = "Toolboxes you can request with requestToolbox"


def catalogue(request) -> set[str]:
    """The toolbox ids of the system prompt's catalogue (the lines `- <id>: …` after its heading)."""
    text = request.system_text
    if CATALOGUE_HEADING not in text:
        return set()
    lines = text.split(CATALOGUE_HEADING, 1)[1].splitlines()[1:]
    boxes = set()
    for line in lines:
        if not line.startswith("- "):
            break
        boxes.add(line[2:].split(":", 1)[0])
    return boxes


def offered(request) -> tuple[set[str], set[str], set[str]]:
    """What one model request offered: the requestToolbox enum, the catalogue, the tool names."""
    return set(request_toolbox_enum(request) or []), catalogue(request), set(tool_names(request))


def ask(api, ai_server, headers: dict, workspace_id: str, answer: str = "Nothing to do.") -> tuple[set, set, set]:
    """One run that answers at once: what its only model request offered."""
    ai_server.clear()
    ai_server.reply(answer)
    events = stream(api, "What can you do for me?", instance_id=workspace_id, headers=headers)
    assert of(events, "final")[0]["text"] == answer
    (request,) = ai_server.chat_requests
    return offered(request)


def assert_without_microsoft(enum: set[str], boxes: set[str], tools: set[str]) -> None:
    assert not enum & MSFT_BOXES and not boxes & MSFT_BOXES, (enum, boxes)
    assert not tools & (OUTLOOK_TOOLS | SHAREPOINT_TOOLS | {"email_sendMail"}), tools
    # The catalogue itself is there: each toolbox requestable, or already attached by the selector
    # (a request about mail may preselect `ai`, whose summaries read mail too).
    active = {name.split("_", 1)[0] for name in tools}
    assert {"ai", "workflow"} <= (enum & boxes) | active, (enum, boxes, active)


def assert_with_microsoft(enum: set[str], boxes: set[str]) -> None:
    assert MSFT_BOXES <= enum and MSFT_BOXES <= boxes, (enum, boxes)


@pytest.fixture
def acme(api, graph) -> Mandate:
    """Mandate Acme with Anna, a plain user (who may talk to the Workspace agent)."""
    mandate = make_mandate(api, "Acme", "acme-admin")
    anna = add_user(api, mandate, "anna", ["user"])
    granted = api.client.post(f"/api/instances/{mandate.workspace_id}/access",
                              json={"userId": anna, "roles": ["workspace-user"]}, headers=mandate.admin)
    assert granted.status_code in (200, 201), granted.text
    return mandate


def test_microsoft_tools_come_with_the_users_connection_and_go_when_it_expires(api, ai_server, graph, acme):
    anna = signed_in("anna")
    # Without a connection: neither offered nor requestable; asking anyway is refused with the reason.
    ai_server.reply(None, tool_calls=[call("requestToolbox", {"toolboxId": "email", "reason": "read my mail"}, "r1")])
    ai_server.reply("I cannot reach your mail.")
    events = stream(api, "Read my mail", instance_id=acme.workspace_id, headers=anna)
    first, second = ai_server.chat_requests
    assert_without_microsoft(*offered(first))
    assert of(events, "toolbox.refused")[0]["toolboxId"] == "email"
    refusal = json.loads(tool_results(second)["r1"])
    assert "no active connection" in refusal["error"] and not set(refusal["requestable"]) & MSFT_BOXES
    assert not set(tool_names(second)) & (OUTLOOK_TOOLS | SHAREPOINT_TOOLS)

    # Anna consents: from her next run on, both toolboxes are requestable, and once requested their
    # tools are offered and work.
    connection_id = browser(anna).connect(mandateId=acme.id, label="Anna's Outlook")
    graph.add_mail(subject="Budget review moved to Thursday", sender=("Carla Client", "carla@client.example"))
    ai_server.clear()
    ai_server.reply(None, tool_calls=[call("requestToolbox", {"toolboxId": "email", "reason": "read mail"}, "e1")])
    ai_server.reply(None, tool_calls=[call("outlook_readEmails", {"connectionId": connection_id, "top": 5}, "e2")])
    ai_server.reply("Carla wrote: Budget review moved to Thursday.")
    # (a request that names no toolbox: nothing is preselected; see test_agent_selection for that)
    events = stream(api, "Anything new for me?", instance_id=acme.workspace_id, headers=anna)
    first, second, third = ai_server.chat_requests
    enum, boxes, tools = offered(first)
    assert_with_microsoft(enum, boxes)
    assert not tools & (OUTLOOK_TOOLS | SHAREPOINT_TOOLS)  # requestable, not yet offered
    enum, boxes, tools = offered(second)
    assert OUTLOOK_TOOLS | {"email_sendMail"} <= tools and not tools & SHAREPOINT_TOOLS
    assert "email" not in enum and "sharepoint" in enum and "sharepoint" in boxes
    # The grant names the connections the tools' connectionId takes (so the model need not ask).
    granted = json.loads(tool_results(second)["e1"])
    assert granted["connections"] == [{"connectionId": connection_id, "label": "Anna's Outlook", "type": "msft",
                                       "typeLabel": "Microsoft 365"}]
    mails = json.loads(tool_results(third)["e2"])["mails"]
    assert [m["subject"] for m in mails] == ["Budget review moved to Thursday"]
    assert of(events, "final")[0]["text"] == "Carla wrote: Budget review moved to Thursday."

    # Microsoft stops accepting the sign-in; the Connections page's Test marks it expired: the next
    # run offers neither toolbox again.
    graph.revoke_refresh_tokens()
    graph.expire_access_tokens()
    tested = api.client.post(f"/api/connections/{connection_id}/test", headers=anna).json()
    assert tested["ok"] is False and tested["status"] == lifecycle.EXPIRED
    assert_without_microsoft(*ask(api, ai_server, anna, acme.workspace_id))


def test_a_tool_call_that_expires_the_connection_is_told_to_the_model_and_the_next_run_drops_it(
        api, ai_server, graph, acme):
    anna = signed_in("anna")
    connection_id = browser(anna).connect(mandateId=acme.id, label="Anna's Outlook")
    graph.revoke_refresh_tokens()
    graph.expire_access_tokens()
    ai_server.reply(None, tool_calls=[call("requestToolbox", {"toolboxId": "email", "reason": "read mail"}, "x1")])
    ai_server.reply(None, tool_calls=[call("outlook_readEmails", {"connectionId": connection_id}, "x2")])
    ai_server.reply("Your Microsoft 365 connection has expired; reconnect it on the Connections page.")
    events = stream(api, "Any news?", instance_id=acme.workspace_id, headers=anna)
    assert not of(events, "error"), of(events, "error")
    error = json.loads(tool_results(ai_server.chat_requests[2])["x2"])["error"]
    assert "Microsoft no longer accepts the sign-in" in error and "reconnect it on the Connections page" in error
    assert of(events, "final")[0]["text"].startswith("Your Microsoft 365 connection has expired")
    with session_scope() as session:
        assert session.get(Connection, connection_id).status == lifecycle.EXPIRED
    assert_without_microsoft(*ask(api, ai_server, anna, acme.workspace_id))


def test_only_a_connection_shared_with_the_users_mandate_counts_besides_their_own(api, ai_server, graph, acme):
    anna = signed_in("anna")
    # Bert's own connection in Anna's mandate, and one shared in another mandate: not Anna's to use.
    add_user(api, acme, "bert", ["user"])
    browser(signed_in("bert")).connect(mandateId=acme.id, label="Bert's Outlook")
    beta = make_mandate(api, "Beta", "beta-admin")
    betas = browser(beta.admin).connect(mandateId=beta.id, label="Beta team")
    assert api.client.patch(f"/api/connections/{betas}", json={"shared": True}, headers=beta.admin).json()["shared"]
    # Acme's admin connects the team mailbox, not shared yet.
    team = browser(acme.admin).connect(mandateId=acme.id, label="Acme team")
    assert_without_microsoft(*ask(api, ai_server, anna, acme.workspace_id))

    # Shared with Acme: Anna is offered both toolboxes in her next run.
    shared = api.client.patch(f"/api/connections/{team}", json={"shared": True}, headers=acme.admin)
    assert shared.status_code == 200 and shared.json()["shared"] is True
    assert_with_microsoft(*ask(api, ai_server, anna, acme.workspace_id)[:2])
    # Sharing stopped: gone again; shared again and then revoked: gone for good.
    api.client.patch(f"/api/connections/{team}", json={"shared": False}, headers=acme.admin)
    assert_without_microsoft(*ask(api, ai_server, anna, acme.workspace_id))
    api.client.patch(f"/api/connections/{team}", json={"shared": True}, headers=acme.admin)
    assert_with_microsoft(*ask(api, ai_server, anna, acme.workspace_id)[:2])
    with session_scope() as session:
        lifecycle.revoke(session, session.get(Connection, team))
    assert_without_microsoft(*ask(api, ai_server, anna, acme.workspace_id))
    # Beta's members, by contrast, have theirs.
    beta_enum, beta_boxes, _tools = ask(api, ai_server, beta.admin, beta.workspace_id)
    assert_with_microsoft(beta_enum, beta_boxes)


def test_an_imap_mailbox_offers_email_with_sending_only(api, ai_server, mail):
    workspace = next(i["id"] for i in api.client.get("/api/me", headers=api.auth).json()["instances"]
                     if i["featureCode"] == "workspace")
    created = api.client.post("/api/connections", json={"type": "imap", "label": "Office mailbox", "settings": mail},
                              headers=api.auth)
    assert created.status_code == 201, created.text
    ai_server.reply(None, tool_calls=[call("requestToolbox", {"toolboxId": "email", "reason": "send"}, "m1")])
    ai_server.reply(None, tool_calls=[call("requestToolbox", {"toolboxId": "sharepoint", "reason": "docs"}, "m2")])
    ai_server.reply("I can send mail, but not read SharePoint.")
    events = stream(api, "Anything new for me?", instance_id=workspace)
    first, second, third = ai_server.chat_requests
    enum, boxes, _tools = offered(first)
    # email.sendMail works over IMAP/SMTP as well as Microsoft 365: the e-mail toolbox is requestable,
    # SharePoint (Microsoft 365 only) is not.
    assert "email" in enum and "email" in boxes and "sharepoint" not in enum and "sharepoint" not in boxes
    tools = set(tool_names(second))
    assert "email_sendMail" in tools and not tools & (OUTLOOK_TOOLS | SHAREPOINT_TOOLS)
    refusal = json.loads(tool_results(third)["m2"])
    assert "no active connection" in refusal["error"]
    assert [e["toolboxId"] for e in of(events, "toolbox.escalated")] == ["email"]
    assert [e["toolboxId"] for e in of(events, "toolbox.refused")] == ["sharepoint"]
