"""The pages a person uses on a phone, at 390×844 with touch (issue 23, part 3): sign in, open the
navigation from the menu button, approve a task and fill in a form in the Inbox by tapping, read
the Monitor, the Notifications and a Workspace chat with the agent's answer, and see the editor's
"larger screen" notice.

Every page is photographed into tests/e2e/artifacts/phone/ (git-ignored) and checked for what a
phone user would notice: no page wider than the screen (no sideways scrolling), a navigation that
opens from the menu and navigates, and buttons high enough to tap (44 px).
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from playwright.sync_api import Browser, Locator, Page, expect

from tests.e2e.conftest import ADMIN_PASSWORD, RunningApp
from tests.e2e.test_editor_ui import api
from tests.e2e.test_inbox_ui import approval_graph, form_graph, run_status, start_paused

pytestmark = pytest.mark.e2e

PHONE = {"width": 390, "height": 844}
SHOTS = Path(__file__).resolve().parent / "artifacts" / "phone"
TAP = 44  # px: the least height of what a phone user taps


@pytest.fixture
def phone(browser: Browser, running_app: RunningApp) -> Iterator[Page]:
    """A signed-out page in a phone's browser: 390×844, touch, mobile viewport."""
    context = browser.new_context(base_url=running_app.ui_url, viewport=PHONE, is_mobile=True, has_touch=True,
                                  device_scale_factor=2)
    context.set_default_timeout(30_000)
    page = context.new_page()
    yield page
    context.close()


def fits(page: Page, name: str) -> None:
    """Photograph the page as `name` and check that it is exactly as wide as the screen: nothing
    sticks out to the right, so there is no sideways scrolling."""
    SHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SHOTS / f"{name}.png"), full_page=True)
    widths = page.evaluate("() => ({inner: window.innerWidth, html: document.documentElement.scrollWidth,"
                           " body: document.body.scrollWidth})")
    assert widths == {"inner": PHONE["width"], "html": PHONE["width"], "body": PHONE["width"]}, (name, widths)


def tall(locator: Locator, what: str) -> None:
    """`locator` is visible and at least `TAP` px high (a finger hits it)."""
    expect(locator).to_be_visible()
    box = locator.bounding_box()
    assert box is not None and box["height"] >= TAP, f"{what}: {box}"
    assert box["x"] >= 0 and box["x"] + box["width"] <= PHONE["width"], f"{what} is off screen: {box}"


def navigate(page: Page, entry: str, path: str) -> None:
    """Open the menu with its button, tap the navigation `entry` (e.g. "inbox"), land on `path`;
    the menu closes again."""
    menu = page.locator("#nav")
    expect(menu).to_be_hidden()
    tall(page.locator("#nav-menu-button"), "the menu button")
    page.locator("#nav-menu-button").tap()
    expect(menu).to_be_visible()
    tall(page.locator(f"#nav-{entry}"), f"the navigation entry {entry}")
    page.locator(f"#nav-{entry}").tap()
    expect(page).to_have_url(re.compile(f"{path}$"), timeout=60_000)  # the first visit compiles the page
    expect(menu).to_be_hidden()


def sign_in_by_tapping(page: Page) -> None:
    page.goto("/login")
    expect(page.locator("#login-submit")).to_be_visible(timeout=60_000)
    fits(page, "login")
    tall(page.locator("#login-submit"), "Sign in")
    tall(page.locator(".rt-TextFieldRoot", has=page.locator("#login-username")), "the username field")
    page.locator("#login-username").fill("admin")
    page.locator("#login-password").fill(ADMIN_PASSWORD)
    page.locator("#login-submit").tap()
    expect(page).to_have_url(re.compile(r"/workflows$"), timeout=60_000)
    expect(page.locator("#page-title")).to_have_text("Workflows")


def test_a_phone_user_approves_fills_in_monitors_reads_and_chats(phone: Page, running_app: RunningApp):
    page = phone
    suffix = uuid.uuid4().hex[:6]
    approve_title, waiting_title, form_title = (f"Phone approval {suffix}", f"Phone waits {suffix}",
                                                f"Phone form {suffix}")
    workflow_id, approve_run, approve_task = start_paused(running_app, approval_graph(approve_title), "Phone approve")
    _waiting_workflow, waiting_run, _waiting_task = start_paused(running_app, approval_graph(waiting_title),
                                                                "Phone waiting")
    _form_workflow, form_run, form_task = start_paused(running_app, form_graph(form_title), "Phone form")
    try:
        sign_in_by_tapping(page)
        # Workflows, where a sign-in lands: the create form wraps, the table is cards.
        expect(page.locator("#workflow-table .workflow-row").first).to_be_visible(timeout=60_000)
        expect(page.locator("#workflow-table thead")).to_be_hidden()
        fits(page, "workflows")
        # The navigation is one: its entries keep their ids, hidden in the closed menu.
        expect(page.locator("#nav-inbox")).to_have_count(1)
        navigate(page, "inbox", "/inbox")
        task = page.locator(f'#task-list .task-row[data-task-id="{approve_task}"]')
        expect(task).to_contain_text(approve_title, timeout=60_000)
        page.locator("#nav-menu-button").tap()
        expect(page.locator("#nav")).to_be_visible()
        fits(page, "menu-open")
        page.locator("#nav-backdrop").tap(position={"x": 370, "y": 400})  # beside the drawer: it closes
        expect(page.locator("#nav")).to_be_hidden()

        # Inbox: the pending tasks as cards; a tapped task opens in place of the list.
        expect(page.locator("#task-list thead")).to_be_hidden()  # cards, no header row
        fits(page, "inbox")
        task.tap()
        panel = page.locator("#task-panel")
        expect(panel).to_contain_text("Please check the offer.")
        expect(page.locator("#pending-list")).to_be_hidden()
        tall(page.locator("#task-approve"), "Approve")
        tall(page.locator("#task-reject"), "Reject")
        tall(page.locator("#task-close"), "the panel's close button")
        fits(page, "inbox-approval")
        page.locator("#task-comment").fill("Fine from my phone")
        page.locator("#task-approve").tap()
        expect(page.locator("#inbox-notice")).to_contain_text("Approved — the run continued")
        expect(page.locator(f'.task-row[data-task-id="{approve_task}"]')).to_have_count(0)
        assert run_status(running_app, approve_run)["status"] == "completed"

        # A form task: its fields and Submit fit the screen.
        page.locator(f'#task-list .task-row[data-task-id="{form_task}"]').tap()
        expect(page.locator("#task-field-amount")).to_be_visible()
        tall(page.locator("#task-submit"), "Submit")
        fits(page, "inbox-form")
        page.locator("#task-field-amount").fill("980")
        page.locator("#task-submit").tap()
        expect(page.locator("#inbox-notice")).to_contain_text("Submitted — the run continued")
        assert run_status(running_app, form_run)["status"] == "completed"
        expect(page.locator("#pending-list")).to_be_visible()  # the list is back

        page.locator("#tab-history").tap()
        finished = page.locator(f'#task-history .history-task-row[data-task-id="{approve_task}"]')
        expect(finished).to_contain_text("Approved")
        expect(finished).to_contain_text("admin")
        fits(page, "inbox-history")

        # Monitor: the waiting run live, the finished ones in the history, every table as cards.
        navigate(page, "monitor", "/monitor")
        expect(page.locator("#live-runs .live-run", has_text="Phone waiting")).not_to_have_count(0)
        history = page.locator(f'#run-history .history-row[data-run-id="{approve_run}"]')
        expect(history).to_contain_text("completed", timeout=60_000)
        expect(page.locator("#history-table thead")).to_be_hidden()
        tall(page.locator("#monitor-status"), "the status filter")
        fits(page, "monitor")

        # Notifications (the bell): the new tasks were told.
        tall(page.locator("#notifications-bell"), "the bell")
        page.locator("#notifications-bell").tap()
        expect(page).to_have_url(re.compile(r"/notifications$"), timeout=60_000)
        expect(page.locator("#notification-list .notification-row").first).to_be_visible()
        tall(page.locator("#mark-all-read"), "Mark all read")
        fits(page, "notifications")

        # Workspace: a prompt sent by tapping Send, the agent's answer under it.
        ai = running_app.ai
        ai.clear()
        answer = "Here is a short answer that fits on a phone screen without any sideways scrolling at all."
        ai.reply(answer)
        navigate(page, "workspace", "/workspace")
        expect(page.locator("#chat-input")).to_be_enabled(timeout=60_000)
        page.locator("#chat-input").fill(f"Hello from a phone {suffix}")
        tall(page.locator("#chat-send"), "Send")
        page.locator("#chat-send").tap()
        expect(page.locator(".assistant-message").last).to_have_text(answer, timeout=60_000)
        expect(page.locator(".chat-item", has_text=f"Hello from a phone {suffix}")).to_have_count(1)
        tall(page.locator(".chat-item").first, "a chat in the list")
        fits(page, "workspace")

        # The editor says it needs a larger screen instead of a cramped canvas.
        page.goto(f"/editor/{workflow_id}")
        notice = page.locator("#editor-small-screen")
        expect(notice).to_contain_text("The editor needs a larger screen", timeout=90_000)
        expect(page.locator("#editor-main")).to_be_hidden()
        fits(page, "editor")
    finally:
        headers, instance = api(running_app)
        httpx.post(f"{running_app.api_url}/api/graphicalEditor/{instance}/runs/{waiting_run}/cancel", headers=headers)


def test_a_wide_screen_keeps_the_side_navigation_and_the_editor(page: Page, running_app: RunningApp):
    """At 1280 px nothing of the phone layout shows: the navigation stands on the left without a
    menu button, the top bar names the user beside "Log out", tables have their header row and the
    editor shows its canvas."""
    workflow_id, run_id, task_id = start_paused(running_app, approval_graph(f"Wide {uuid.uuid4().hex[:6]}"), "Wide")
    try:
        page.set_viewport_size({"width": 1280, "height": 800})
        page.goto("/login")
        page.locator("#login-username").fill("admin")
        page.locator("#login-password").fill(ADMIN_PASSWORD)
        page.locator("#login-submit").click()
        expect(page).to_have_url(re.compile(r"/workflows$"), timeout=60_000)
        expect(page.locator("#nav")).to_be_visible()
        expect(page.locator("#nav-menu-button")).to_be_hidden()
        expect(page.locator("#nav-menu-close")).to_be_hidden()
        expect(page.locator("#current-user")).to_be_visible()
        expect(page.locator("#logout-button")).to_have_text("Log out")
        page.locator("#nav-inbox").click()
        expect(page).to_have_url(re.compile(r"/inbox$"), timeout=60_000)
        expect(page.locator(f'#task-list .task-row[data-task-id="{task_id}"]')).to_be_visible(timeout=60_000)
        expect(page.locator("#task-list thead")).to_be_visible()
        expect(page.locator("#nav")).to_be_visible()  # choosing an entry leaves the navigation where it is
        page.goto(f"/editor/{workflow_id}")
        expect(page.locator(".poweron-node").first).to_be_visible(timeout=90_000)
        expect(page.locator("#editor-small-screen")).to_be_hidden()
    finally:
        headers, instance = api(running_app)
        httpx.post(f"{running_app.api_url}/api/graphicalEditor/{instance}/runs/{run_id}/cancel", headers=headers)
