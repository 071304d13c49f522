# ruff: noqa: F811 - the tag fixture of test_connections_ui is imported by name
"""An agent run in the Workspace that reads mail (issue 17, "done when"), in real Chromium.

The admin connects Microsoft 365 on the Connections page (consent at the identity platform stand-in,
tests/msgraph_server.py), a mail arrives in the stand-in's mailbox, and in the Workspace chat the
scripted model (tests/ai_server.py) requests the `email` toolbox, reads the inbox with
outlook_readEmails and answers quoting the mail's subject. The page shows the escalation, the tool
call with its result and the answer; the model's recorded requests show what the agent offered and
sent it round by round: the e-mail tools only after the request, and the real mail in the tool result.
"""

from __future__ import annotations

import json
import re
from urllib.parse import parse_qs, urlsplit

import pytest
from playwright.sync_api import Page, expect

from tests.e2e.conftest import RunningApp
from tests.e2e.test_connections_ui import open_connections, row, tag  # noqa: F401 - tag is a fixture
from tests.e2e.test_workspace_ui import call

pytestmark = pytest.mark.e2e

OUTLOOK_TOOLS = {"outlook_readEmails", "outlook_searchEmails", "outlook_draftEmail", "outlook_sendDraft"}


def tool_names(request) -> set[str]:
    return {t["function"]["name"] for t in request.json.get("tools") or []}


def request_toolbox_enum(request) -> list[str]:
    for tool in request.json.get("tools") or []:
        if tool["function"]["name"] == "requestToolbox":
            return tool["function"]["parameters"]["properties"]["toolboxId"]["enum"]
    return []


def connect_microsoft_365(page: Page, label: str) -> str:
    """The consent, accepted at the stand-in, from the Connections page: the new connection's id."""
    open_connections(page)
    page.locator("#oauth-label-msft").fill(label)
    page.locator("#connect-msft").click()
    expect(page.get_by_role("heading", name="Permissions requested")).to_be_visible()
    page.get_by_role("button", name="Accept").click()
    expect(page).to_have_url(re.compile(r"/connections\?connected="))
    expect(row(page, label).locator(".connection-status")).to_have_attribute("data-status", "active")
    return parse_qs(urlsplit(page.url).query)["connected"][0]


def ask_in_new_chat(page: Page, prompt: str) -> None:
    """From any page of the shell: the Workspace, a new chat, `prompt` sent."""
    page.locator("#nav-workspace").click()
    expect(page).to_have_url(re.compile(r"/workspace$"), timeout=30_000)
    page.locator("#chat-new").click()
    box = page.locator("#chat-input")
    expect(box).to_be_enabled()
    box.fill(prompt)
    box.press("Enter")


def test_the_agent_requests_email_reads_the_inbox_and_answers_with_the_mail(page: Page, running_app: RunningApp,
                                                                             tag: str):
    graph, ai = running_app.graph, running_app.ai
    graph.reset()
    subject = f"Offer {tag} for the Basel office accepted"
    graph.add_mail(subject=subject, body="We accept your offer; contract follows next week.",
                   sender=("Carla Client", "carla@client.example"))
    connection_id = connect_microsoft_365(page, f"Outlook {tag}")

    ai.clear()
    ai.reply(None, tool_calls=[call("requestToolbox", {"toolboxId": "email", "reason": "read the inbox"}, "m1")])
    ai.reply(None, tool_calls=[call("outlook_readEmails", {"connectionId": connection_id, "top": 5}, "m2")])
    answer = f"Carla Client wrote: “{subject}”. The contract follows next week."
    ai.reply(answer)

    ask_in_new_chat(page, f"Did Carla answer about the offer? ({tag})")

    expect(page.locator(".assistant-message").last).to_have_text(answer)
    escalation = page.locator(".escalation-card").last
    expect(escalation).to_contain_text("read the inbox")
    tool = page.locator(".tool-card", has_text="outlook_readEmails")
    expect(tool).to_have_count(1)
    expect(tool.locator(".card-status")).to_have_text("ok")
    tool.locator("summary").click()
    expect(tool.locator(".tool-result")).to_contain_text(subject)

    first, second, third = ai.chat_requests
    assert "email" in request_toolbox_enum(first) and not tool_names(first) & OUTLOOK_TOOLS
    assert OUTLOOK_TOOLS | {"email_sendMail"} <= tool_names(second)  # offered once requested
    results = {m["tool_call_id"]: m["content"] for m in third.messages if m.get("role") == "tool"}
    mails = json.loads(results["m2"])["mails"]
    assert [(m["subject"], m["from"]) for m in mails] == [(subject, "Carla Client <carla@client.example>")]
    assert "contract follows next week" in mails[0]["body"]
