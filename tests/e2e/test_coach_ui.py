"""The Coach page (CommCoach, issue 22 part 3) in real Chromium against the scripted AI server.

An administrator creates a CommCoach instance over REST and gives it a persona; on /coach they
send a message, see the coach's scripted reply (the persona reached the model), click
"Summarise session" and see the summary above the chat, also after reopening the chat.
"""

from __future__ import annotations

import json
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
VIEWER_PASSWORD = "viewer-pass-123"
PERSONA = "You coach the user for a salary negotiation. Ask one question at a time and quote their wording."
NEW_PERSONA = "You coach the user for presentations to the board. Be brief."
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

    SHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SHOTS / "coach.png"), full_page=True)

    # The persona is edited in its panel by whoever may configure; the next turn uses it.
    page.locator("#coach-persona").click()
    persona = page.locator("#coach-persona-input")
    expect(persona).to_have_value(PERSONA)
    persona.fill(NEW_PERSONA)
    page.locator("#coach-persona-save").click()
    expect(page.locator("#coach-notice")).to_contain_text("persona is saved")
    expect(persona).to_have_count(0)
    ai.reply("Which sentence would you open with?")
    page.locator("#chat-input").fill("Let us go on.")
    page.locator("#chat-input").press("Enter")
    expect(page.locator(".assistant-message").last).to_have_text("Which sentence would you open with?")
    assert NEW_PERSONA in ai.last_chat.system_text and PERSONA not in ai.last_chat.system_text

    # A new chat has no summary; the first one reopens with its own.
    page.locator("#chat-new").click()
    expect(page.locator("#coach-summary")).to_have_count(0)
    page.reload()
    page.locator(".chat-item", has_text=prompt).locator(".chat-title").click()
    expect(page.locator("#chat-heading")).to_have_text(prompt)
    expect(page.locator("#coach-summary")).to_contain_text("Name your number first")

    # The chats list is the Workspace's (components/chat_list.py, state/chat_list.py): rename, delete.
    title = f"Salary talk {uuid.uuid4().hex[:4]}"
    page.locator(".chat-item", has_text=prompt).locator(".chat-rename").click()
    page.locator("#chat-rename-input").fill(title)
    page.locator("#chat-rename-save").click()
    expect(page.locator("#coach-notice")).to_contain_text(f"Renamed to '{title}'")
    expect(page.locator("#chat-heading")).to_have_text(title)
    page.locator(".chat-item", has_text=title).locator(".chat-delete").click()
    page.locator("#confirm-chat-delete").click()
    expect(page.locator("#coach-notice")).to_contain_text(f"Deleted '{title}'")
    expect(page.locator(".chat-item", has_text=title)).to_have_count(0)
    expect(page.locator("#coach-summary")).to_have_count(0)
    expect(page.locator("#chat-heading")).to_have_text("New coaching chat")


def test_a_viewer_reads_the_chats_and_summaries_but_cannot_chat_summarise_or_change_the_persona(
        page: Page, running_app: RunningApp):
    ai = running_app.ai
    ai.clear()
    instance, label = create_coach(running_app)
    api, headers = running_app.api_url, admin_headers(running_app)
    prompt = f"Help me give feedback to a colleague {uuid.uuid4().hex[:4]}"
    ai.reply("What happened, in two sentences?")
    with httpx.stream("POST", f"{api}/api/commcoach/{instance}/agent", headers=headers, json={"prompt": prompt},
                      timeout=60) as response:
        assert response.status_code == 200
        events = [json.loads(line[len("data: "):]) for line in response.iter_lines() if line.startswith("data: ")]
    chat_id = events[0]["chatId"]
    assert events[-1]["text"] == "What happened, in two sentences?"
    ai.reply("**Key topics**\n- Feedback to a colleague")
    assert httpx.post(f"{api}/api/commcoach/{instance}/agent/chats/{chat_id}/summary", headers=headers,
                      timeout=60).status_code == 200
    me = httpx.get(f"{api}/api/me", headers=headers).json()
    mandate = next(m["id"] for m in me["mandates"] if m["name"] == "Default")
    username = f"vera-{uuid.uuid4().hex[:6]}"
    user = httpx.post(f"{api}/api/mandates/{mandate}/users", headers=headers,
                      json={"username": username, "password": VIEWER_PASSWORD, "roles": ["viewer"]})
    assert user.status_code == 201, user.text
    granted = httpx.post(f"{api}/api/instances/{instance}/access", headers=headers,
                         json={"userId": user.json()["id"], "roles": ["commcoach-viewer"]})
    assert granted.status_code == 200, granted.text

    sign_in(page, username, VIEWER_PASSWORD)
    page.locator("#nav-coach").click()
    expect(page).to_have_url(re.compile(r"/coach$"), timeout=30_000)
    expect(page.locator("#instance-header")).to_contain_text(label)
    expect(page.locator("#chat-disabled-reason")).to_contain_text("not talk to the coach")
    expect(page.locator("#chat-input")).to_have_count(0)
    expect(page.locator("#chat-new")).to_have_count(0)
    page.locator(".chat-item", has_text=prompt).locator(".chat-title").click()
    expect(page.locator("#chat-heading")).to_have_text(prompt)
    expect(page.locator(".assistant-message").last).to_have_text("What happened, in two sentences?")
    expect(page.locator("#coach-summary")).to_contain_text("Feedback to a colleague")
    expect(page.locator("#coach-summarise")).to_have_count(0)
    page.locator("#coach-persona").click()
    expect(page.locator("#coach-persona-input")).to_have_value(PERSONA)
    expect(page.locator("#coach-persona-input")).to_have_attribute("readonly", "")
    expect(page.locator("#coach-persona-save")).to_have_count(0)
    page.keyboard.press("Escape")
    expect(page.locator("#coach-persona-input")).to_have_count(0)
