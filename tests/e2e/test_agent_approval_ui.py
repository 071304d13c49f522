# ruff: noqa: F811 - the tag fixture of test_connections_ui is imported by name
"""Issue 21's "done when" in real Chromium: a Workspace chat whose request needs e-mail gets the
e-mail toolbox in round 1 without a requestToolbox call (the automatic preselection), the agent's
sendMail waits for approval in the chat, and approving it there sends exactly one mail to the SMTP
test server (aiosmtpd). The Inbox lists the same request with the tool and its arguments.
"""

from __future__ import annotations

import re
import time

import httpx
import pytest
from playwright.sync_api import Page, expect

from tests.e2e.conftest import RunningApp
from tests.e2e.test_connections_ui import create_connection, tag  # noqa: F401 - tag is a fixture
from tests.e2e.test_editor_ui import api
from tests.e2e.test_workspace_mail_agent_ui import ask_in_new_chat, tool_names
from tests.e2e.test_workspace_ui import call, open_workspace

pytestmark = pytest.mark.e2e


def received_with(running_app: RunningApp, subject: str) -> list:
    return [m for m in running_app.smtp.received if m["Subject"] == subject]


def test_an_email_request_gets_email_at_once_and_sending_waits_for_approval_in_the_chat(
        page: Page, running_app: RunningApp, tag: str):
    connection_id = create_connection(running_app, f"Mailbox {tag}")
    ai = running_app.ai
    ai.clear()
    subject = f"Quarterly report {tag}"
    reason = "You asked me to mail the report to Anna; I am sending it now."
    mail = {"connectionId": connection_id, "to": ["anna@example.com"], "subject": subject,
            "body": "Here is the quarterly report, as discussed."}
    ai.reply(reason, tool_calls=[call("email_sendMail", mail, "s1")])
    ai.reply("The report is on its way to Anna.")

    open_workspace(page)
    ask_in_new_chat(page, f"Please send an e-mail to anna@example.com with the quarterly report ({tag})")

    card = page.locator(".approval-card").last
    expect(card).to_have_attribute("data-status", "pending", timeout=30_000)
    expect(card.locator(".approval-tool")).to_contain_text("email_sendMail")
    expect(card.locator(".approval-reason")).to_have_text(reason)
    expect(card).to_contain_text(subject)
    expect(page.locator("#chat-streaming")).to_have_count(0)  # the run waits; the chat is free
    # Round 1 already offered the e-mail tools: no requestToolbox call, no escalation card.
    first = ai.chat_requests[0]
    assert "email_sendMail" in tool_names(first)
    expect(page.locator(".escalation-card")).to_have_count(0)
    assert received_with(running_app, subject) == []

    # The Inbox holds the same request, with the tool and its arguments.
    headers = api(running_app)[0]
    tasks = httpx.get(f"{running_app.api_url}/api/tasks", headers=headers).json()
    task = next(t for t in tasks if t["data"].get("arguments", {}).get("subject") == subject)
    assert task["data"]["tool"] == "email_sendMail" and task["status"] == "pending"

    card.locator(".approval-approve").click()
    expect(card).to_have_attribute("data-status", "approved")
    expect(page.locator(".assistant-message").last).to_have_text("The report is on its way to Anna.")
    tool = page.locator(".tool-card", has_text="email_sendMail")
    expect(tool.locator(".card-status")).to_have_text("ok")
    deadline = time.monotonic() + 10
    while not received_with(running_app, subject) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert len(received_with(running_app, subject)) == 1
    expect(card.locator(".approval-approve")).to_have_count(0)  # decided: no second click
    after = httpx.get(f"{running_app.api_url}/api/tasks?status=completed", headers=headers).json()
    assert any(t["id"] == task["id"] and t["data"]["approved"] is True for t in after)

    # A message over the agent's limit is refused in place, naming the limit; the text stays in the box.
    box = page.locator("#chat-input")
    box.fill("Bitte zusammenfassen: " + "x" * 25_000)
    box.press("Enter")
    expect(page.locator("#workspace-error")).to_contain_text("at most 20,000")
    expect(box).to_have_value(re.compile(r"^Bitte zusammenfassen: x+$"))
    expect(page.locator(".user-message")).to_have_count(1)
