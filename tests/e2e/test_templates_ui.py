"""Templates and creating workflows in the browser (issue 16, items 2, 7 and 8): every template card
is whole, with its "Use this template" button reachable, at 1366×768 and 1920×1080; each card says
what its template needs and whether this installation has it; every template marked "runs as it
is" opens in the editor with its sample input as real, editable test input and completes its first
Test run (the expense approval once approved in the Inbox); a template missing something fails its
Test run at once, saying what; "Create workflow" opens the editor; the empty Workflows page gives
the advice the user's rights allow.

The e2e app has a scripted AI provider, no web search, and Microsoft 365 set up (its stand-in) but no
connection chosen in any template: the flagship template (mail → AI → SharePoint) says it needs a mail
and a Microsoft 365 connection, and its Test run fails at once naming both.
"""

from __future__ import annotations

import json
import re
import uuid

import httpx
import pytest
from playwright.sync_api import Locator, Page, expect
from sqlmodel import Session

from backend.auth import hash_password
from backend.db.engine import make_engine
from backend.db.models import FeatureInstance, Mandate, User
from backend.tenancy import create_feature_instance, create_mandate, grant_instance_roles, grant_mandate_roles
from backend.workflows import templates
from backend.workflows.node_types import node_type
from tests.e2e.conftest import ADMIN_PASSWORD, RunningApp
from tests.e2e.test_editor_ui import api
from tests.e2e.test_workflows_ui import open_instance, sign_in

pytestmark = pytest.mark.e2e

VIEWPORTS = {"1366x768": {"width": 1366, "height": 768}, "1920x1080": {"width": 1920, "height": 1080}}
SMALL = VIEWPORTS["1366x768"]
TEMPLATES = templates.templates()
# "Runs as it is": needs nothing beyond `make run` (the sandbox it may need is installed).
RUNNABLE = [t.id for t in TEMPLATES if not t.connections]


def card(page: Page, template_id: str) -> Locator:
    return page.locator(f'.template-card[data-template="{template_id}"]')


def open_templates(page: Page, size: dict[str, int] = SMALL) -> None:
    """Sign in as admin at `size`, show the default instance's workflows and open "From template"."""
    page.set_viewport_size(size)
    sign_in(page, "admin", ADMIN_PASSWORD)
    expect(page).to_have_url(re.compile(r"/workflows$"))
    open_instance(page, "Graphical Editor")
    page.locator("#open-templates").click()
    expect(page.locator(".template-card")).to_have_count(len(TEMPLATES))


def use_template(page: Page, template_id: str) -> str:
    """Click the card's "Use this template"; the editor opens the new workflow. Its id."""
    page.locator(f"#use-template-{template_id}").click()
    # The URL changes once the editor's page is loaded (the first visit compiles it).
    expect(page).to_have_url(re.compile(r"/editor/\w+$"), timeout=90_000)
    graph = templates.template(template_id).graph
    expect(page.locator(".poweron-node")).to_have_count(len(graph["nodes"]), timeout=90_000)
    page.locator("#tab-trace").click()
    return page.url.rsplit("/", 1)[-1]


def is_clipped(element: Locator) -> bool:
    """Whether the element's content overflows its box (cut off or hidden)."""
    return element.evaluate("e => e.scrollHeight > e.clientHeight + 1 || e.scrollWidth > e.clientWidth + 1")


def center(element: Locator) -> None:
    """Scroll `element` to the middle of its scrolling list (scrolling "if needed" may stop a
    fraction of a pixel short of the edge)."""
    element.evaluate("e => e.scrollIntoView({block: 'center'})")


@pytest.mark.parametrize("size", list(VIEWPORTS.values()), ids=list(VIEWPORTS))
def test_every_card_is_whole_and_its_button_takes_a_click(page: Page, size: dict[str, int]):
    open_templates(page, size)
    for template in TEMPLATES:
        shown, button = card(page, template.id), page.locator(f"#use-template-{template.id}")
        center(button)
        expect(button).to_be_in_viewport(ratio=1)  # wholly visible: not cut by the dialog or the window
        box = button.bounding_box()
        assert box is not None and box["x"] >= 0 and box["y"] >= 0
        assert box["x"] + box["width"] <= size["width"] and box["y"] + box["height"] <= size["height"]
        button.click(trial=True)  # nothing covers it: it would receive the click
        description = shown.locator(".template-description")
        expect(description).to_have_text(template.description)
        center(description)
        expect(description).to_be_in_viewport(ratio=1)
        assert not is_clipped(description) and not is_clipped(shown), f"{template.id} is cut off"
    page.locator("#template-list").evaluate("e => e.scrollTop = 0")
    expect(card(page, "expense-approval").locator(".template-runs")).to_have_text("runs as it is")


def test_each_card_says_what_its_template_needs_and_whether_it_is_here(page: Page):
    open_templates(page)
    for template_id in RUNNABLE:
        expect(card(page, template_id).locator(".template-runs")).to_be_visible()
        expect(card(page, template_id).locator(".template-need")).to_have_count(0)
    digest = card(page, "daily-web-digest")
    expect(digest.locator(".template-need")).to_have_text([
        re.compile(r"^Needs web search — not configured here: set POWERON_SEARCH_URL"),
        "Needs an AI provider — configured here",  # the e2e app has one
    ])
    expect(digest.locator('.template-need[data-met="false"]')).to_have_count(1)
    expect(digest.locator(".template-needs-setup")).to_have_text("needs setup")
    flagship = card(page, "email-attachment-analysis")
    expect(flagship.locator(".template-need")).to_have_text([
        "Needs a mail connection — none chosen: add a mail connection on the Connections page and choose it in "
        "the node (connectionId)",
        "Needs an AI provider — configured here",
        "Needs a Microsoft 365 connection — none chosen: add a Microsoft 365 connection on the Connections page and "
        "choose it in the node (connectionId)",
    ])
    expect(flagship.locator('.template-need[data-met="false"]')).to_have_count(2)
    expect(flagship.locator(".template-needs-setup")).to_have_text("needs setup")
    summary = card(page, "summarise-file")
    expect(summary.locator(".template-need")).to_have_text(["Needs an AI provider — configured here"])
    expect(summary.locator(".template-ready")).to_have_text("set up here")
    expect(summary.locator(".template-runs")).to_have_count(0)


def approve_in_the_inbox(page: Page, running_app: RunningApp, workflow_id: str) -> str:
    """Approve the pending task of the workflow's run on the Inbox page; the run's id."""
    headers, instance = api(running_app)
    runs = httpx.get(f"{running_app.api_url}/api/graphicalEditor/{instance}/runs",
                     params={"workflowId": workflow_id}, headers=headers).json()
    run_id = runs[0]["id"]
    tasks = httpx.get(f"{running_app.api_url}/api/tasks", params={"status": "pending"}, headers=headers).json()
    task_id = next(t["id"] for t in tasks if t["runId"] == run_id)
    page.locator("#nav-inbox").click()
    expect(page).to_have_url(re.compile(r"/inbox$"))
    row = page.locator(f'#task-list .task-row[data-task-id="{task_id}"]')
    expect(row).to_be_visible(timeout=60_000)  # the first visit compiles the page
    row.click()
    page.locator("#task-approve").click()
    expect(page.locator("#inbox-notice")).to_contain_text("Approved — the run continued")
    return run_id


@pytest.mark.parametrize("template_id", RUNNABLE)
def test_a_template_that_runs_as_it_is_completes_its_first_test_run(page: Page, running_app: RunningApp,
                                                                    template_id: str):
    template = templates.template(template_id)
    open_templates(page)
    expect(card(page, template_id).locator(".template-runs")).to_have_text("runs as it is")
    workflow_id = use_template(page, template_id)
    test_input = page.locator("#run-input")
    expect(test_input).to_be_editable()
    assert json.loads(test_input.input_value()) == template.sample_input  # real text, not a placeholder
    page.locator("#test-run").click()
    summary = page.locator("#run-summary")
    if any(node_type(n["type"]).is_human for n in template.graph["nodes"]):
        expect(summary).to_contain_text("paused (waiting for a person: see the Inbox)", timeout=60_000)
        run_id = approve_in_the_inbox(page, running_app, workflow_id)
        page.goto(f"/editor/{workflow_id}?run={run_id}")
    expect(summary).to_contain_text("completed", timeout=60_000)
    expect(page.locator("#run-error")).to_have_count(0)


def test_the_ai_template_runs_with_the_provider_of_this_installation(page: Page, running_app: RunningApp):
    running_app.ai.reply("- Revenue CHF 4.2 million (+12%)\n- Margin down to 38%")
    open_templates(page)
    use_template(page, "summarise-file")
    assert json.loads(page.locator("#run-input").input_value())["fileName"] == "q3-sales-report.pdf"
    page.locator("#test-run").click()
    expect(page.locator("#run-summary")).to_contain_text("completed", timeout=60_000)
    expect(page.locator('#trace .trace-row[data-node="save"]')).to_have_attribute("data-status", "completed")


@pytest.mark.parametrize(("template_id", "messages"), [
    ("email-attachment-analysis", [
        "it needs a mail connection for node 'mail' (Wait for e-mail) — none chosen: add a mail connection on the "
        "Connections page",
        "it needs a Microsoft 365 connection for node 'upload' (Upload the analysis), node 'original' (Upload the "
        "attachment) — none chosen: add a Microsoft 365 connection on the Connections page"]),
    ("daily-web-digest", ["it needs web search for node 'search' (Web search) — not configured here: set "
                          "POWERON_SEARCH_URL"]),
])
def test_a_template_missing_something_fails_its_test_run_at_once_saying_what(page: Page, running_app: RunningApp,
                                                                           template_id: str, messages: list[str]):
    open_templates(page)
    expect(card(page, template_id).locator(".template-needs-setup")).to_be_visible()
    workflow_id = use_template(page, template_id)
    assert json.loads(page.locator("#run-input").input_value()) == templates.template(template_id).sample_input
    page.locator("#test-run").click()
    expect(page.locator("#run-summary")).to_contain_text("failed")
    for message in messages:
        expect(page.locator("#run-error")).to_contain_text(message)
    # Nothing ran: no node to retry from or ask about, no node coloured as skipped.
    expect(page.locator("#trace-empty")).to_have_text("No node ran in this run.")
    expect(page.locator("#retry-failed")).to_have_count(0)
    expect(page.locator('.poweron-node[data-status="skipped"]')).to_have_count(0)
    headers, instance = api(running_app)
    base = f"{running_app.api_url}/api/graphicalEditor/{instance}"
    runs = httpx.get(f"{base}/runs", params={"workflowId": workflow_id}, headers=headers).json()
    assert [(r["status"], r["pauseReason"]) for r in runs] == [("failed", None)]
    assert httpx.get(f"{base}/runs/{runs[0]['id']}", headers=headers).json()["steps"] == []  # nothing ran or waits


def test_create_workflow_opens_the_editor_of_the_new_workflow(page: Page):
    page.set_viewport_size(SMALL)
    sign_in(page, "admin", ADMIN_PASSWORD)
    expect(page).to_have_url(re.compile(r"/workflows$"))
    open_instance(page, "Graphical Editor")
    name = f"Onboarding checklist {uuid.uuid4().hex[:6]}"
    page.locator("#new-workflow-name").fill(name)
    page.locator("#create-workflow").click()
    expect(page).to_have_url(re.compile(r"/editor/\w+$"), timeout=90_000)  # the first visit compiles the editor
    expect(page.locator("#workflow-name")).to_have_text(name)
    expect(page.locator(".poweron-node")).to_have_count(1)  # a new workflow starts with its manual trigger
    page.locator("#nav-workflows").click()
    open_instance(page, "Graphical Editor")
    expect(page.locator(".workflow-name", has_text=name)).to_have_count(1)


def _member(session: Session, username: str, password: str, instance: FeatureInstance, mandate_role: str,
            instance_role: str) -> None:
    """A user of the instance's mandate holding one mandate role and one role in the instance."""
    user = User(username=username, display_name=username.capitalize(), password_hash=hash_password(password))
    session.add(user)
    session.flush()
    grant_mandate_roles(session, user, session.get(Mandate, instance.mandate_id), [mandate_role])
    grant_instance_roles(session, user, instance, [instance_role])


def test_the_empty_workflows_page_advises_what_the_users_rights_allow(page: Page, running_app: RunningApp):
    suffix, password = uuid.uuid4().hex[:6], "empty-pass-1"
    maker, viewer = f"maker{suffix}", f"viewer{suffix}"
    engine = make_engine(f"sqlite:///{running_app.log.parent / 'e2e.db'}")
    try:
        with Session(engine, expire_on_commit=False) as session:
            # Named to sort after "Graphical Editor": the admin's Workflows page still opens that one.
            mandate = create_mandate(session, f"Untouched {suffix}")
            instance = create_feature_instance(session, mandate, "graphicalEditor", f"Untouched flows {suffix}")
            _member(session, maker, password, instance, "user", "graphicalEditor-admin")
            _member(session, viewer, password, instance, "viewer", "graphicalEditor-viewer")
            session.commit()
    finally:
        engine.dispose()
    page.set_viewport_size(SMALL)
    sign_in(page, maker, password)
    expect(page).to_have_url(re.compile(r"/workflows$"))
    empty = page.locator("#empty-state")
    expect(empty).to_contain_text("Create the first workflow of this instance with the name field above")
    expect(page.locator("#new-workflow-name")).to_be_visible()
    page.locator("#logout-button").click()
    expect(page).to_have_url(re.compile(r"/login$"))

    sign_in(page, viewer, password)
    expect(page).to_have_url(re.compile(r"/workflows$"))
    expect(empty).to_contain_text("Your roles here let you see workflows but not create them")
    expect(empty).not_to_contain_text("name field")
    expect(page.locator("#new-workflow-name")).to_have_count(0)
    expect(page.locator("#open-templates")).to_have_count(0)
