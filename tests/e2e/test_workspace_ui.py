"""The Workspace page against the scripted AI server (issue 8, part 1): a person types a prompt,
presses Enter and watches the agent request a toolbox, call a tool and stream its answer in
parts; the chat is listed, reopens with its history after a reload and continues; a hanging
answer is stopped and the chat bar works again.
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Callable

from playwright.sync_api import Page, expect
from sqlmodel import Session, select

from backend.auth import hash_password
from backend.db.engine import make_engine
from backend.db.models import FeatureInstance, Mandate, User
from backend.tenancy import grant_instance_roles, grant_mandate_roles
from tests.e2e.conftest import ADMIN_PASSWORD, RunningApp
from tests.e2e.test_workflows_ui import sign_in

pytestmark = __import__("pytest").mark.e2e

ANSWER = "Done: the address in your text is now replaced by a neutral placeholder for privacy."


def open_workspace(page: Page) -> None:
    sign_in(page, "admin", ADMIN_PASSWORD)
    expect(page).to_have_url(re.compile(r"/workflows$"))
    page.locator("#nav-workspace").click()
    # the URL changes once the page's modules are in (markdown, code highlighting: slow on a busy machine)
    expect(page).to_have_url(re.compile(r"/workspace$"), timeout=30_000)
    expect(page.locator("#page-title")).to_have_text("Workspace")
    expect(page.locator("#chat-input")).to_be_enabled()


def call(name: str, arguments: dict, call_id: str) -> dict:
    return {"id": call_id, "name": name, "arguments": arguments}


def test_a_prompt_streams_tools_escalation_and_text_and_the_chat_reopens(page: Page, running_app: RunningApp):
    ai = running_app.ai
    ai.clear()
    ai.reply(None, tool_calls=[call("requestToolbox", {"toolboxId": "ai", "reason": "hide personal data"}, "c1")])
    ai.reply(None, tool_calls=[call("ai_neutralizeData", {"text": "Write to anna.muster@example.com", "names": None,
                                                          "kinds": None}, "c2")])
    ai.reply(ANSWER, pace=0.3)
    title = f"Hide this {uuid.uuid4().hex[:6]}"  # a prompt that preselects no toolbox (issue 21)

    open_workspace(page)
    box = page.locator("#chat-input")
    box.click()
    box.type(title)
    box.press("Shift+Enter")  # a line break, not a send
    box.type("Write to anna.muster@example.com")
    expect(box).to_have_value(f"{title}\nWrite to anna.muster@example.com")
    box.press("Enter")

    expect(page.locator(".user-message").last).to_contain_text("Write to anna.muster@example.com")
    expect(box).to_have_value("")
    escalation = page.locator(".escalation-card")
    expect(escalation).to_have_count(1)
    expect(escalation).to_contain_text("hide personal data")
    tool = page.locator(".tool-card")
    expect(tool).to_have_count(1)
    expect(tool).to_contain_text("ai_neutralizeData")
    answer = page.locator(".assistant-message").last
    expect(answer).to_contain_text("Done: the address")  # the first words, while the rest still streams
    assert "privacy." not in answer.inner_text()
    expect(page.locator("#chat-stop")).to_be_visible()
    expect(answer).to_have_text(ANSWER)
    expect(page.locator(".usage-line").last).to_contain_text("tokens in")
    expect(page.locator("#chat-send")).to_be_visible()
    expect(tool.locator(".card-status")).to_have_text("ok")
    expect(tool.locator(".tool-duration")).to_have_text(re.compile(r"^\d+ ms$"))
    tool.locator("summary").click()
    expect(tool.locator(".tool-result")).to_contain_text("[EMAIL_1]")
    item = page.locator(".chat-item", has_text=title)
    expect(item).to_have_count(1)

    # After a new chat and a reload, the chat reopens from the list with its history …
    page.locator("#chat-new").click()
    expect(page.locator("#chat-empty")).to_be_visible()
    page.reload()
    expect(page.locator("#chat-list")).to_be_visible()
    page.locator(".chat-item", has_text=title).locator(".chat-title").click()
    expect(page.locator("#chat-heading")).to_have_text(title)
    expect(page.locator(".assistant-message").last).to_have_text(ANSWER)
    expect(page.locator(".escalation-card")).to_contain_text("hide personal data")
    expect(page.locator(".tool-card")).to_contain_text("ai_neutralizeData")

    # … and continues the conversation: the model sees the earlier turn.
    ai.reply("Second answer:\n\n```python\nprint('hello')\n```")
    page.locator("#chat-input").fill("And now?")
    page.locator("#chat-send").click()
    last = page.locator(".assistant-message").last
    expect(last).to_contain_text("Second answer:")
    expect(last).to_contain_text("print('hello')")
    expect(last.locator("button")).to_have_count(1)  # the code block's copy button
    assert ANSWER in ai.last_chat.text_of("assistant")
    expect(page.locator(".chat-item", has_text=title)).to_have_count(1)


def test_a_streaming_answer_is_stopped_and_the_chat_bar_works_again(page: Page, running_app: RunningApp):
    ai = running_app.ai
    ai.clear()
    ai.reply("Partial words then nothing more ever arrives", hang_after=2)
    open_workspace(page)
    page.locator("#chat-new").click()
    page.locator("#chat-input").fill(f"Hang {uuid.uuid4().hex[:6]}")
    page.locator("#chat-input").press("Enter")

    expect(page.locator(".assistant-message").last).to_have_text(re.compile(r"^Partial words\s*$"))
    page.locator("#chat-stop").click()
    expect(page.locator(".chat-cancelled").last).to_contain_text("Stopped")
    expect(page.locator("#chat-stop")).to_have_count(0)
    expect(page.locator("#chat-send")).to_be_enabled()

    ai.reply("Back again.")
    page.locator("#chat-input").fill("Still there?")
    page.locator("#chat-input").press("Enter")
    expect(page.locator(".assistant-message").last).to_have_text("Back again.")


def sign_in_as_workspace_viewer(page: Page, running_app: RunningApp, display_name: str,
                                prepare: Callable[[Session, User, FeatureInstance], None] | None = None) -> None:
    """In the app's database: a new user with the viewer roles of the default Workspace (after
    `prepare(session, admin, workspace)`, if given); then sign them in and open the Workspace."""
    username, password = f"viewer{uuid.uuid4().hex[:6]}", "viewer-pass-1"
    engine = make_engine(f"sqlite:///{running_app.log.parent / 'e2e.db'}")
    try:
        with Session(engine, expire_on_commit=False) as session:
            instance = session.exec(select(FeatureInstance).where(FeatureInstance.feature_code == "workspace")
                                    .where(FeatureInstance.label == "Workspace")).first()
            if prepare is not None:
                prepare(session, session.exec(select(User).where(User.username == "admin")).one(), instance)
            viewer = User(username=username, display_name=display_name, password_hash=hash_password(password))
            session.add(viewer)
            session.flush()
            grant_mandate_roles(session, viewer, session.get(Mandate, instance.mandate_id), ["viewer"])
            grant_instance_roles(session, viewer, instance, ["workspace-viewer"])
            session.commit()
    finally:
        engine.dispose()
    sign_in(page, username, password)
    expect(page.locator("#current-user")).to_have_text(display_name)
    page.locator("#nav-workspace").click()
    # the URL changes once the page's modules are in (markdown, code highlighting: slow on a busy machine)
    expect(page).to_have_url(re.compile(r"/workspace$"), timeout=30_000)


def test_a_viewer_without_use_agent_reads_but_cannot_send(page: Page, running_app: RunningApp):
    sign_in_as_workspace_viewer(page, running_app, "Vera Viewer")
    # no field or button they may not use, and the page says why (issue 16)
    expect(page.locator("#chat-disabled-reason")).to_contain_text("useAgent")
    expect(page.locator("#chat-input")).to_have_count(0)
    expect(page.locator("#chat-send")).to_have_count(0)
    expect(page.locator("#chat-new")).to_have_count(0)
    expect(page.locator("#chat-empty")).to_have_text("Open a chat on the left to read it.")


def test_an_error_is_shown_in_place_and_retry_sends_the_prompt_again(page: Page, running_app: RunningApp):
    ai = running_app.ai
    ai.clear()
    ai.fail(500, "model overloaded")
    open_workspace(page)
    page.locator("#chat-new").click()
    prompt = f"Flaky {uuid.uuid4().hex[:6]}"
    page.locator("#chat-input").fill(prompt)
    page.locator("#chat-input").press("Enter")
    error = page.locator(".chat-error").last
    expect(error).to_contain_text("500")
    ai.reply("Recovered.")
    error.locator(".chat-retry").click()
    expect(page.locator(".assistant-message").last).to_have_text("Recovered.")
    assert ai.last_chat.user_text.endswith(prompt)
