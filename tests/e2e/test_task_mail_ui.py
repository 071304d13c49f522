"""An approval reaches its assignee by mail and is decided on a phone (issue 23, done-when): the run
pauses at an approval → the assignee's mail arrives at the suite's SMTP server → its Approve link,
opened in Chromium at 390×844, asks to sign in, comes back after the sign-in, approves → the task
and the run complete. The same link opened again, and an altered link, say why nothing happens.
Each page is screenshotted and checked for horizontal overflow."""

from __future__ import annotations

import re
import uuid
from pathlib import Path

import httpx
import pytest
from playwright.sync_api import Browser, BrowserContext, Page, expect
from sqlmodel import Session, select

from backend.auth import hash_password
from backend.db.engine import make_engine
from backend.db.models import FeatureInstance, Mandate, User
from backend.tenancy import grant_instance_roles, grant_mandate_roles
from tests.e2e.conftest import ADMIN_PASSWORD, RunningApp
from tests.e2e.test_editor_ui import api, new_workflow
from tests.e2e.test_inbox_ui import approval_graph, at_rest, run_status
from tests.e2e.test_workflows_ui import open_instance, sign_in
from tests.scale_cluster import wait_until

pytestmark = pytest.mark.e2e

PHONE = {"viewport": {"width": 390, "height": 844}, "is_mobile": True, "has_touch": True, "device_scale_factor": 2}
SHOTS = Path("/tmp/shots23")
LINK = re.compile(r"(https?://[^\s\"<>]+/act/([A-Za-z0-9_-]+))\?do=approve")
PASSWORD = "phone-pass-1234"


def make_assignee(running_app: RunningApp, username: str) -> str:
    """A member of the default mandate who may use the Graphical Editor, with an e-mail address."""
    engine = make_engine(f"sqlite:///{running_app.log.parent / 'e2e.db'}")
    try:
        with Session(engine, expire_on_commit=False) as session:
            instance = session.exec(select(FeatureInstance).where(FeatureInstance.feature_code == "graphicalEditor")
                                    .where(FeatureInstance.label == "Graphical Editor")).first()
            user = User(username=username, display_name="Mara Mobile", email=f"{username}@example.com",
                        password_hash=hash_password(PASSWORD))
            session.add(user)
            session.flush()
            grant_mandate_roles(session, user, session.get(Mandate, instance.mandate_id), [])
            grant_instance_roles(session, user, instance, ["graphicalEditor-user"])
            session.commit()
            return user.id
    finally:
        engine.dispose()


def fits(page: Page, name: str) -> None:
    """Screenshot the page and check that nothing is wider than the phone's screen."""
    SHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SHOTS / f"{name}.png"), full_page=True)
    widths = page.evaluate("() => [document.documentElement.scrollWidth, document.body.scrollWidth, innerWidth]")
    assert widths[0] == widths[2] == 390 and widths[1] <= 390, f"{name}: content wider than the screen: {widths}"


def tall_enough(page: Page, selector: str) -> None:
    box = page.locator(selector).bounding_box()
    assert box is not None and box["height"] >= 44, f"{selector} is too small to tap: {box}"


def mail_for(running_app: RunningApp, address: str, title: str):
    return wait_until(lambda: next((m for m in running_app.smtp.received
                                    if m["To"] == address and title in (m["Subject"] or "")), None),
                      60, f"the task mail to {address}")


def body_of(mail) -> str:
    part = next(p for p in mail.walk() if p.get_content_type() == "text/plain")
    return part.get_payload(decode=True).decode(part.get_content_charset() or "utf-8")


def approval_for(running_app: RunningApp, title: str) -> tuple[str, dict]:
    """A new assignee with an address (username) and an approval graph assigned to them."""
    username = f"mara{uuid.uuid4().hex[:6]}"
    graph = approval_graph(title)
    graph["nodes"][1]["parameters"]["assignee"] = {"user": make_assignee(running_app, username)}
    return username, graph


def run_until_task(running_app: RunningApp, workflow_id: str) -> str:
    """Publish and run the workflow as the admin until it waits at its approval; the run id."""
    headers, instance = api(running_app)
    base = f"{running_app.api_url}/api/graphicalEditor/{instance}"
    assert httpx.post(f"{base}/workflows/{workflow_id}/publish", headers=headers).status_code == 200
    started = httpx.post(f"{base}/workflows/{workflow_id}/runs", json={"input": {}}, headers=headers, timeout=60)
    assert started.status_code == 201, started.text
    run_id = at_rest(running_app, started.json())["id"]
    assert run_status(running_app, run_id)["pauseReason"] == "humanTask"
    return run_id


def phone_page(browser: Browser) -> tuple[BrowserContext, Page]:
    context = browser.new_context(**PHONE)
    context.set_default_timeout(30_000)
    return context, context.new_page()


def test_the_approve_link_of_the_mail_completes_the_task_and_the_run_on_a_phone(browser: Browser,
                                                                                 running_app: RunningApp):
    title = f"Approve offer {uuid.uuid4().hex[:6]}"
    username, graph = approval_for(running_app, title)
    run_id = run_until_task(running_app, new_workflow(running_app, "Mail approval", graph)[0])

    mail = mail_for(running_app, f"{username}@example.com", title)
    found = LINK.search(body_of(mail))
    assert found, body_of(mail)
    approve_url, token = found.group(0), found.group(2)
    assert approve_url.startswith(running_app.ui_url), approve_url

    context, page = phone_page(browser)
    try:
        page.goto(approve_url)
        expect(page.locator("#link-title")).to_have_text(title, timeout=90_000)  # the first visit compiles it
        expect(page.locator("#link-message")).to_have_text("Please check the offer.")
        expect(page.locator("#link-state")).to_have_attribute("data-state", "signIn")
        expect(page.locator("#link-approve")).to_have_count(0)  # nothing to decide before signing in
        fits(page, "1-link-signed-out")
        tall_enough(page, "#link-sign-in")

        page.locator("#link-sign-in").tap()
        expect(page).to_have_url(re.compile(r"/login\?next="))
        page.locator("#login-username").fill(username)
        page.locator("#login-password").fill(PASSWORD)
        fits(page, "2-login")
        page.locator("#login-submit").tap()

        expect(page).to_have_url(re.compile(rf"/act/{token}\?do=approve$"))
        expect(page.locator("#link-state")).to_have_attribute("data-state", "open")
        expect(page.locator("#link-reason")).to_have_text("You decide as Mara Mobile.")
        fits(page, "3-link-signed-in")
        tall_enough(page, "#link-approve")
        tall_enough(page, "#link-reject")
        page.locator("#link-comment").fill("Fine by me")
        page.locator("#link-approve").tap()

        expect(page.locator("#link-state")).to_have_attribute("data-state", "finished")
        expect(page.locator("#link-reason")).to_have_text("Done: approved by Mara Mobile. The workflow goes on.")
        fits(page, "4-link-approved")
        assert wait_until(lambda: run_status(running_app, run_id)["status"] == "completed", 60, "the run to complete")
        mine = {"Authorization": "Bearer " + httpx.post(
            f"{running_app.api_url}/api/auth/login", json={"username": username, "password": PASSWORD}).json()["token"]}
        done = httpx.get(f"{running_app.api_url}/api/tasks", params={"status": "completed"}, headers=mine).json()
        task = next(t for t in done if t["runId"] == run_id)
        assert task["decidedVia"] == "mail" and task["data"] == {"approved": True, "comment": "Fine by me"}

        # The same link again (a second click, or the mail opened later): it says who decided.
        page.goto(approve_url)
        expect(page.locator("#link-state")).to_have_attribute("data-state", "finished")
        expect(page.locator("#link-reason")).to_contain_text("This task was already approved by Mara Mobile")
        expect(page.locator("#link-reason")).to_contain_text("from the mail; nothing was changed")
        expect(page.locator("#link-approve")).to_have_count(0)
        fits(page, "5-link-used")

        # An altered link is refused with a clear page.
        page.goto(approve_url.replace(token, token[:-2] + ("xy" if not token.endswith("xy") else "ab")))
        expect(page.locator("#link-state")).to_have_attribute("data-state", "invalid")
        expect(page.locator("#link-reason")).to_contain_text("This link is not valid")
        expect(page.locator("#link-title")).to_have_count(0)
        fits(page, "6-link-altered")
    finally:
        context.close()


def test_where_the_admin_allows_one_click_the_reject_link_decides_without_signing_in(page: Page, browser: Browser,
                                                                                      running_app: RunningApp):
    title = f"Quick check {uuid.uuid4().hex[:6]}"
    username, graph = approval_for(running_app, title)
    headers, instance = api(running_app)
    workflow_id, name = new_workflow(running_app, "One click", graph)

    # The mandate admin allows one-click decisions for this workflow on the Workflows page.
    sign_in(page, "admin", ADMIN_PASSWORD)
    expect(page).to_have_url(re.compile(r"/workflows$"))
    open_instance(page, "Graphical Editor")
    switch = page.locator(".workflow-row", has_text=name).locator(".mail-one-click-switch")
    expect(switch).to_have_attribute("aria-checked", "false")
    switch.click()
    expect(page.get_by_text(f"Approvals of '{name}' can now be decided from the mail's link without signing in.")
           ).to_be_visible()
    stored = httpx.get(f"{running_app.api_url}/api/graphicalEditor/{instance}/workflows/{workflow_id}",
                       headers=headers).json()
    assert stored["mailOneClick"] is True

    run_id = run_until_task(running_app, workflow_id)
    mail = mail_for(running_app, f"{username}@example.com", title)
    reject_url = re.search(r"https?://\S+/act/[A-Za-z0-9_-]+\?do=reject", body_of(mail)).group(0)

    context, phone = phone_page(browser)
    try:
        phone.goto(reject_url)
        expect(phone.locator("#link-state")).to_have_attribute("data-state", "open", timeout=90_000)
        expect(phone.locator("#link-reason")).to_have_text("You decide as Mara Mobile, to whom this link was sent.")
        fits(phone, "7-link-one-click")
        phone.locator("#link-comment").fill("Not this quarter")
        phone.locator("#link-reject").tap()
        expect(phone.locator("#link-reason")).to_have_text("Done: rejected by Mara Mobile. The workflow goes on.")
        fits(phone, "8-link-rejected")
    finally:
        context.close()
    assert wait_until(lambda: run_status(running_app, run_id)["status"] == "completed", 60, "the run to end")
