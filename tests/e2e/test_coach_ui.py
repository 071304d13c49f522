"""The Coach page (CommCoach, issue 22 part 3) in real Chromium against the scripted AI server.

An administrator creates a CommCoach instance over REST and gives it a persona; on /coach they
send a message, see the coach's scripted reply (the persona reached the model), click
"Summarise session" and see the summary above the chat, also after reopening the chat.
"""

from __future__ import annotations

import re
import uuid
from pathlib import Path

import httpx
from playwright.sync_api import Page, expect

from tests.e2e.conftest import ADMIN_PASSWORD, RunningApp
from tests.e2e.test_instance_header_ui import admin_headers
from tests.e2e.test_workflows_ui import sign_in

pytestmark = __import__("pytest").mark.e2e

SHOTS = Path("/tmp/shots22")
PERSONA = "You coach the user for a salary negotiation. Ask one question at a time and quote their wording."
REPLY = "Good start. What number do you have in mind, and why is it fair?"
SUMMARY = ("**Key topics**\n- Opening a salary negotiation\n\n**What went well**\n- A clear, polite opening\n\n"
           "**What to practise next**\n- Name your number first and give one reason for it")


def create_coach(running_app: RunningApp) -> tuple[str, str]:
    """A CommCoach instance in the Default mandate with PERSONA; (its id, its label)."""
    api, headers = running_app.api_url, admin_headers(running_app)
    me = httpx.get(f"{api}/api/me", headers=headers).json()
    mandate = next(m["id"] for m in me["mandates"] if m["name"] == "Default")
    label = f"Coach {uuid.uuid4().hex[:6]}"
    created = httpx.post(f"{api}/api/mandates/{mandate}/instances", headers=headers,
                         json={"featureCode": "commcoach", "label": label})
    assert created.status_code == 201, created.text
    instance = created.json()["id"]
    persona = httpx.put(f"{api}/api/commcoach/{instance}/settings", headers=headers, json={"systemPrompt": PERSONA})
    assert persona.status_code == 200, persona.text
    return instance, label


def test_a_coaching_chat_is_answered_and_its_session_summarised(page: Page, running_app: RunningApp):
    ai = running_app.ai
    ai.clear()
    _instance, label = create_coach(running_app)

    sign_in(page, "admin", ADMIN_PASSWORD)
    expect(page).to_have_url(re.compile(r"/workflows$"))
    page.locator("#nav-coach").click()
    expect(page).to_have_url(re.compile(r"/coach$"), timeout=30_000)
    expect(page.locator("#page-title")).to_have_text("Coach")
    expect(page.locator("#instance-header")).to_contain_text(label)
    expect(page.locator("#chat-list-empty")).to_be_visible()

    ai.reply(REPLY)
    prompt = f"I want to ask my manager for a raise {uuid.uuid4().hex[:4]}"
    box = page.locator("#chat-input")
    expect(box).to_be_enabled()
    box.fill(prompt)
    box.press("Enter")
    expect(page.locator(".user-message").last).to_contain_text(prompt)
    expect(page.locator(".assistant-message").last).to_have_text(REPLY)
    expect(page.locator(".chat-item", has_text=prompt)).to_have_count(1)
    expect(page.locator("#chat-heading")).to_have_text(prompt)
    assert PERSONA in ai.last_chat.system_text
    assert not any(t["function"]["name"] == "requestToolbox" for t in ai.last_chat.json.get("tools") or [])
    expect(page.locator("#coach-summary")).to_have_count(0)

    ai.reply(SUMMARY)
    page.locator("#coach-summarise").click()
    summary = page.locator("#coach-summary")
    expect(summary).to_contain_text("What to practise next")
    expect(summary).to_contain_text("Name your number first")
    expect(page.locator("#coach-summarise")).to_have_text("Summarise again")
    assert prompt in ai.last_chat.user_text and REPLY in ai.last_chat.user_text

    # The persona is shown in the settings panel to whoever may change it.
    page.locator("#coach-persona").click()
    expect(page.locator("#coach-persona-input")).to_have_value(PERSONA)
    page.locator("#coach-persona-close").click()
    expect(page.locator("#coach-persona-input")).to_have_count(0)

    SHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SHOTS / "coach.png"), full_page=True)

    # A new chat has no summary; the first one reopens with its own.
    page.locator("#chat-new").click()
    expect(page.locator("#coach-summary")).to_have_count(0)
    page.reload()
    page.locator(".chat-item", has_text=prompt).locator(".chat-title").click()
    expect(page.locator("#chat-heading")).to_have_text(prompt)
    expect(page.locator("#coach-summary")).to_contain_text("Name your number first")
