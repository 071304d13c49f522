# ruff: noqa: F811 - the fixtures of test_msft_oauth are imported by name, and tests take them as arguments
"""What a workflow needs beyond the embedded default (issue 16, item 2; issue 17): derived from the node
types' declared needs and, for node actions that work with connections, from their connection types;
said by the templates before use, and checked when a run starts: a run missing an AI provider, web
search, a mail connection or a connection of the right type (Microsoft 365 for SharePoint) fails at
once, naming what, for which nodes and how to fix it, instead of waiting (an e-mail step without a
mailbox waited forever) or failing halfway."""

from __future__ import annotations

import uuid
from typing import Any

import pytest
from sqlmodel import select

from backend.actions import get_registry
from backend.config import reset_settings_cache
from backend.connectors.types import connection_types
from backend.db import session_scope
from backend.db.models import Notification, User, Workflow
from backend.engine import executor
from backend.engine.expressions import ExpressionScope
from backend.engine.nodes import NodeCall, StepError, check_email
from backend.notifications import notifier
from backend.workflows import requirements, service, templates
from backend.workflows.node_types import palette
from tests.integration.test_msft_oauth import _stand_in, admin, graph  # noqa: F401 - fixtures
from tests.mail_servers import imap_server

START = {"id": "start", "type": "trigger.manual", "parameters": {}, "position": {"x": 0, "y": 0}}
NO_AI = {"OPENAI_API_KEY": "", "POWERON_AI_PROVIDERS": "", "POWERON_SEARCH_URL": "", "POWERON_MSFT_TENANT": "",
         "POWERON_MSFT_CLIENT_ID": "", "POWERON_MSFT_CLIENT_SECRET": ""}
MSFT_UNSET = ("none can be set up here: Microsoft 365 is not set up on this server: set POWERON_MSFT_TENANT, "
              "POWERON_MSFT_CLIENT_ID, POWERON_MSFT_CLIENT_SECRET (an app registration in Microsoft Entra ID")


def edge(source: str, target: str) -> dict[str, str]:
    return {"source": source, "target": target}


def mail_step(connection: str = "") -> dict[str, Any]:
    return {"id": "mail", "type": "email.checkEmail", "label": "Wait for e-mail",
            "parameters": {"connectionId": connection, "folder": "Inbox"}}


def text_step(node_id: str, text: str) -> dict[str, Any]:
    return {"id": node_id, "type": "context.transform", "parameters": {"data": {}, "template": text}}


@pytest.fixture
def offline(monkeypatch):
    """No AI provider, no web search, no Microsoft 365 app registration (an empty variable also hides a .env
    value)."""
    for name, value in NO_AI.items():
        monkeypatch.setenv(name, value)
    reset_settings_cache()
    yield
    reset_settings_cache()


@pytest.fixture
def mailbox(api):
    """A mail connection (to pymap, with nothing new in it: runs wait at their e-mail step); its id."""
    with imap_server() as imap:
        created = api.client.post("/api/connections", json={"type": "imap", "label": "Inbox",
                                                            "settings": imap.settings()}, headers=api.auth)
        assert created.status_code == 201, created.text
        yield created.json()["id"]


def create(api, **body) -> dict:
    answer = api.client.post(f"{api.base()}/workflows", json={"name": f"wf-{uuid.uuid4().hex[:8]}", **body},
                             headers=api.auth)
    assert answer.status_code == 201, answer.text
    return answer.json()


def run(api, workflow_id: str, run_input: Any = None) -> dict:
    answer = api.client.post(f"{api.base()}/workflows/{workflow_id}/runs", json={"input": run_input},
                             headers=api.auth)
    assert answer.status_code == 201, answer.text
    return answer.json()


def listed_templates(api) -> dict[str, dict]:
    answer = api.client.get(f"{api.base()}/templates", headers=api.auth)
    assert answer.status_code == 200, answer.text
    return {t["id"]: t for t in answer.json()}


# --- declared needs and what templates derive from them ----------------------------------------


def test_every_declared_need_is_a_known_requirement():
    declared = {need for kind in palette() for need in kind.needs}
    declared |= {need for action in get_registry().actions.values() for need in action.needs}
    assert declared == {r.id for r in requirements.REQUIREMENTS}
    for need in declared:
        assert requirements.requirement(need).id == need
    kinds = ", ".join(kind.id for kind in connection_types())  # every registered type (clickup, imap, …, sql)
    with pytest.raises(KeyError, match=r"known: ai, webSearch, mail, sandbox, or connection types joined by '\|' "
                                       rf"\({kinds}\)"):
        requirements.requirement("fax")


def test_a_node_action_with_connection_types_needs_a_connection_of_one_of_them():
    """One rule for every such action (none declares it): its types joined by "|", unless it declares a
    connection requirement of its own (email.sendMail: "mail")."""
    for action in get_registry().graph_nodes():
        needs = requirements.node_needs({"type": action.id})
        derived = [n for n in needs if n not in action.needs]
        if not action.connection_types or "mail" in action.needs:
            assert derived == [], action.id
            continue
        assert derived == ["|".join(action.connection_types)], action.id
        wanted = requirements.requirement(derived[0])
        assert wanted.connection and not wanted.built_in
    assert requirements.node_needs({"type": "sharepoint.upload"}) == ("msft",)
    assert requirements.node_needs({"type": "email.sendMail"}) == ("mail",)
    assert requirements.requirement("msft").label == "a Microsoft 365 connection"
    assert requirements.requirement("imap|msft").label == "an E-mail (IMAP/SMTP) or Microsoft 365 connection"
    for unknown in ("fax", "msft|fax", "msft|msft"):
        with pytest.raises(KeyError):
            requirements.requirement(unknown)


def test_a_templates_connections_are_derived_from_its_nodes():
    derived = {t.id: t.connections for t in templates.templates()}
    assert derived == {"expense-approval": (), "daily-web-digest": ("webSearch", "ai"), "summarise-file": ("ai",),
                       "webhook-notification": (), "email-attachment-analysis": ("mail", "ai", "msft"),
                       "jira-to-clickup-sync": ("jira", "clickup"),
                       "receipt-email-booking": ("mail", "ai"),
                       "daily-inbox-digest": ("imap|msft", "ai", "mail"), "clickup-overdue-mail": ("clickup", "mail")}
    # The sandbox is needed but part of the embedded default (make run installs bubblewrap).
    webhook = templates.template("webhook-notification")
    assert [(n.id, n.requirement.built_in) for n in webhook.needs()] == [("sandbox", True)]


def test_the_templates_say_what_they_need_and_whether_it_is_here(api, offline):
    by_id = listed_templates(api)
    assert all(t["sampleInput"] for t in by_id.values()), "every template brings sample test input"
    digest = by_id["daily-web-digest"]
    assert digest["connections"] == ["webSearch", "ai"] and digest["runsAsItIs"] is False
    texts = [n["text"] for n in digest["needs"]]
    assert texts[0].startswith("Needs web search — not configured here: set POWERON_SEARCH_URL")
    assert texts[1] == ("Needs an AI provider — not configured here: set OPENAI_API_KEY (or POWERON_AI_PROVIDERS "
                        "for several providers)")
    assert [n["nodes"] for n in digest["needs"]] == [["search"], ["digest"]]
    flagship = by_id["email-attachment-analysis"]
    assert [(n["id"], n["available"], n["nodes"]) for n in flagship["needs"]] == [
        ("mail", False, ["mail"]), ("ai", False, ["analyse"]), ("msft", False, ["upload", "original"])]
    mail, _ai, msft = (n["text"] for n in flagship["needs"])
    assert "Needs a mail connection — none chosen: add a mail connection on the Connections page" in mail
    assert msft.startswith(f"Needs a Microsoft 365 connection — {MSFT_UNSET}")
    assert flagship["connections"] == ["mail", "ai", "msft"] and flagship["runsAsItIs"] is False
    for runnable in ("expense-approval", "webhook-notification"):
        assert by_id[runnable]["runsAsItIs"] is True and by_id[runnable]["connections"] == []
    assert [(n["id"], n["available"], n["builtIn"]) for n in by_id["webhook-notification"]["needs"]] == \
        [("sandbox", True, True)]
    # The ClickUp and Jira templates need their connections, chosen in their nodes.
    sync = by_id["jira-to-clickup-sync"]
    assert sync["connections"] == ["jira", "clickup"] and sync["runsAsItIs"] is False
    assert [n["text"] for n in sync["needs"]] == [
        "Needs a Jira connection — none chosen: add a Jira connection on the Connections page and choose it in the "
        "node (connectionId)",
        "Needs a ClickUp connection — none chosen: add a ClickUp connection on the Connections page and choose it in "
        "the node (connectionId)"]


def test_with_an_ai_provider_the_card_says_it_is_configured(api, ai_server):
    summary = listed_templates(api)["summarise-file"]
    assert summary["needs"][0]["text"] == "Needs an AI provider — configured here"
    assert summary["needs"][0]["available"] is True
    # An AI provider is not part of `make run`: the template needs it, and has it here.
    assert summary["connections"] == ["ai"] and summary["runsAsItIs"] is False


# --- a run missing something fails at once -------------------------------------------------------


def test_the_email_attachment_template_fails_at_once_naming_the_mail_connection(api, offline):
    workflow = create(api, templateId="email-attachment-analysis")
    assert workflow["testInput"] == {"subjectContains": "Invoice", "site": "Finance", "folder": "/Documents/Invoices"}
    failed = run(api, workflow["id"], workflow["testInput"])
    assert failed["status"] == "failed" and failed["pauseReason"] is None, failed
    error = failed["error"]
    assert error.startswith("this workflow cannot run here: it needs a mail connection for node 'mail' "
                            "(Wait for e-mail) — none chosen: add a mail connection on the Connections page"), error
    assert "it needs an AI provider for node 'analyse' (Analyse the attachment) — not configured here: set " \
           "OPENAI_API_KEY" in error
    assert ("it needs a Microsoft 365 connection for node 'upload' (Upload the analysis), node 'original' (Upload "
            f"the attachment) — {MSFT_UNSET}") in error
    assert failed["steps"] == []  # nothing ran, nothing waits
    listed = api.client.get(f"{api.base()}/runs", params={"status": "paused"}, headers=api.auth).json()
    assert listed == []


def test_each_missing_thing_is_named_with_its_nodes_and_a_reachable_need_only(api, offline):
    graph = {"nodes": [START, {"id": "ask", "type": "ai.prompt", "label": "Ask", "parameters": {"prompt": "Hi"}},
                       {"id": "pick", "type": "ai.decide",
                        "parameters": {"question": "Which?", "options": ["a", "b"]}},
                       {"id": "find", "type": "core.webSearch", "parameters": {"query": "news"}},
                       {"id": "hook", "type": "trigger.webhook", "parameters": {"path": "in"}},
                       {"id": "late", "type": "ai.summarize", "parameters": {"text": "{{ input }}"}}],
             "edges": [edge("start", "ask"), edge("ask", "pick"), {**edge("pick", "find"), "sourceHandle": "a"},
                       edge("hook", "late")]}
    failed = run(api, create(api, graph=graph)["id"])
    assert failed["status"] == "failed"
    assert "it needs an AI provider for node 'ask' (Ask), node 'pick' — not configured" in failed["error"]
    assert "it needs web search for node 'find' — not configured here: set POWERON_SEARCH_URL" in failed["error"]
    assert "late" not in failed["error"]  # only the webhook's branch needs it, and the run starts at start
    # A manual run of a graph whose only AI node hangs off the other trigger runs as it is.
    other = {"nodes": [START, text_step("fine", "fine"), {"id": "hook", "type": "trigger.webhook",
                                                          "parameters": {"path": "in"}},
                       {"id": "late", "type": "ai.summarize", "parameters": {"text": "{{ input }}"}}],
             "edges": [edge("start", "fine"), edge("hook", "late")]}
    assert run(api, create(api, graph=other)["id"])["status"] == "completed"


def test_a_usable_mail_connection_lets_the_run_wait_for_its_mail(api, mailbox):
    waiting = run(api, create(api, graph={"nodes": [START, mail_step(mailbox)], "edges": [edge("start", "mail")]})
                  ["id"])
    assert (waiting["status"], waiting["pauseReason"]) == ("paused", "email"), waiting
    # No connection chosen: fails at once, saying which.
    unchosen = run(api, create(api, graph={"nodes": [START, mail_step("")], "edges": [edge("start", "mail")]})["id"])
    assert unchosen["status"] == "failed"
    assert "needs a mail connection for node 'mail' (Wait for e-mail) — none chosen: add a mail connection on " \
           "the Connections page and choose it in the node (connectionId)" in unchosen["error"]


def upload_step(connection: str) -> dict[str, Any]:
    return {"id": "upload", "type": "sharepoint.upload", "label": "File it",
            "parameters": {"connectionId": connection, "file": "/report.txt", "site": "Finance",
                           "folderPath": "/Documents"}}


def test_a_sharepoint_step_needs_a_microsoft_365_connection_chosen_in_it(graph, admin, api, mailbox):
    """The derived requirement: none chosen, one of another type, then a Microsoft 365 one (the step runs)."""
    def started(connection: str) -> dict:
        return run(api, create(api, graph={"nodes": [START, upload_step(connection)],
                                           "edges": [edge("start", "upload")]})["id"])

    unchosen = started("")
    assert unchosen["status"] == "failed" and unchosen["steps"] == []
    assert unchosen["error"] == ("this workflow cannot run here: it needs a Microsoft 365 connection for node 'upload' "
                                 "(File it) — none chosen: add a Microsoft 365 connection on the Connections page "
                                 "and choose it in the node (connectionId)")
    other_type = started(mailbox)
    assert other_type["status"] == "failed" and other_type["steps"] == []
    assert other_type["error"].endswith("— connection 'Inbox' is an E-mail (IMAP/SMTP) connection: choose a "
                                        "Microsoft 365 connection (connectionId)")
    microsoft = started(admin.connect(label="Anna's Microsoft 365"))
    # It may run: the step itself then says what is wrong (no such file in the workspace).
    assert microsoft["status"] == "failed" and "/report.txt" in {s["nodeId"]: s for s in microsoft["steps"]}[
        "upload"]["error"]


def test_the_email_step_fails_at_once_when_its_connection_turns_out_empty(api, mailbox):
    """A connection given as an expression is known only in the run: the step itself refuses to wait."""
    graph = {"nodes": [START, mail_step("{{ input.connection }}")], "edges": [edge("start", "mail")]}
    failed = run(api, create(api, graph=graph)["id"], {"connection": ""})
    assert failed["status"] == "failed", failed
    step = {s["nodeId"]: s for s in failed["steps"]}["mail"]
    assert step["status"] == "failed"
    assert step["error"] == ("needs a mail connection — none chosen: add a mail connection on the Connections page "
                             "and choose it in the node (connectionId)")
    assert run(api, create(api, graph=graph)["id"], {"connection": mailbox})["status"] == "paused"


def test_an_unknown_mail_connection_fails_the_email_step_itself_at_once(api):
    """Whatever let a run reach it (a run started before this check, a retry), the step does not wait."""
    with session_scope() as session:
        admin = session.exec(select(User).where(User.username == "admin")).one()
        call = NodeCall(mail_step("conn-1"), {"connectionId": "conn-1", "folder": "Inbox"},
                        ExpressionScope(input=None), session=session, user=admin, run=None)
        with pytest.raises(StepError, match="^needs a mail connection — connection conn-1 not found: choose one of "
                                            "yours on the Connections page"):
            check_email(call)


@pytest.fixture
def running_notifier(app_config):
    started = notifier.start_notifier()
    try:
        yield started
    finally:
        notifier.stop_notifier()


def test_an_unattended_run_missing_something_fails_at_once_and_tells_the_owner(api, offline, running_notifier):
    """A scheduled run of the digest template (no web search, no AI here) fails as it starts."""
    workflow_id = create(api, templateId="daily-web-digest")["id"]
    with session_scope() as session:
        admin = session.exec(select(User).where(User.username == "admin")).one()
        workflow = session.get(Workflow, workflow_id)
        version = service.publish(session, admin, workflow)
        started = executor.start_run(session, admin, workflow, version, {"scheduledAt": "2025-03-03T06:00:00+00:00"},
                                     trigger="schedule")
        run_id, status = started.id, started.status
    assert status == "failed"
    assert running_notifier.wait_idle()
    with session_scope() as session:
        told = session.exec(select(Notification).where(Notification.run_id == run_id)).all()
    assert len(told) == 1 and "needs web search for node 'search' (Web search)" in told[0].message
