"""The Inbox in the browser (issue 10, part 2; spec §7.3): runs started through REST pause at an
approval or a form; the badge counts the pending tasks, the Inbox lists them, approving or
submitting (after an inline error) lets the run go on, cancelling with a reason cancels the run and
shows the reason in the history, and a viewer sees a task read only.
"""

from __future__ import annotations

import re
import uuid

import httpx
from playwright.sync_api import Page, expect
from sqlmodel import Session, select

from backend.auth import hash_password
from backend.db.engine import make_engine
from backend.db.models import FeatureInstance, Mandate, User
from backend.tenancy import grant_instance_roles, grant_mandate_roles
from tests.e2e.conftest import ADMIN_PASSWORD, RunningApp
from tests.e2e.test_editor_ui import api, new_workflow
from tests.e2e.test_workflows_ui import sign_in
from tests.scale_cluster import wait_until

pytestmark = __import__("pytest").mark.e2e

START = {"id": "start", "type": "trigger.manual", "parameters": {}, "position": {"x": 0, "y": 0}}
PYTHON = {"id": "python", "type": "script.python", "position": {"x": 500, "y": 0},
          "parameters": {"code": "def main(input):\n    return {'ok': True}\n"}}


def approval_graph(title: str) -> dict:
    ask = {"id": "ask", "type": "input.approval", "position": {"x": 250, "y": 0},
           "parameters": {"title": title, "message": "Please check the offer.",
                          "assignee": {"role": "graphicalEditor-admin"}}}
    return {"nodes": [START, ask, PYTHON],
            "edges": [{"source": "start", "target": "ask"},
                      {"source": "ask", "target": "python", "sourceHandle": "approved"}]}


def form_graph(title: str) -> dict:
    ask = {"id": "ask", "type": "input.form", "position": {"x": 250, "y": 0},
           "parameters": {"title": title, "assignee": {"role": "graphicalEditor-admin"},
                          "fields": [{"name": "amount", "label": "Amount", "type": "number", "required": True},
                                     {"name": "offer", "label": "Offer", "type": "file"}]}}
    return {"nodes": [START, ask, PYTHON],
            "edges": [{"source": "start", "target": "ask"}, {"source": "ask", "target": "python"}]}


def start_paused(running_app: RunningApp, graph: dict, prefix: str) -> tuple[str, str, str]:
    """Create and publish the workflow (its runs are production runs, which the Monitor shows by
    default), run it through REST until it waits; (workflow id, run id, task id)."""
    headers, instance = api(running_app)
    workflow_id, _name = new_workflow(running_app, prefix, graph)
    base = f"{running_app.api_url}/api/graphicalEditor/{instance}"
    published = httpx.post(f"{base}/workflows/{workflow_id}/publish", headers=headers)
    assert published.status_code == 200, published.text
    answer = httpx.post(f"{base}/workflows/{workflow_id}/runs", json={"input": {}}, headers=headers, timeout=60)
    assert answer.status_code == 201, answer.text
    run = at_rest(running_app, answer.json())
    assert run["status"] == "paused" and run["pauseReason"] == "humanTask", run
    listed = httpx.get(f"{running_app.api_url}/api/tasks", params={"status": "pending"}, headers=headers).json()
    task_id = next(t["id"] for t in listed if t["runId"] == run["id"])
    return workflow_id, run["id"], task_id


def at_rest(running_app: RunningApp, run: dict) -> dict:
    """`run` once it stopped running: the start request waits a while only (POWERON_RUN_WAIT_SECONDS),
    which a busy machine may need longer than."""
    if run["status"] != "running":
        return run
    return wait_until(lambda: (now := run_status(running_app, run["id"]))["status"] != "running" and now,
                      60, f"run {run['id']} to come to rest")


def run_status(running_app: RunningApp, run_id: str) -> dict:
    headers, instance = api(running_app)
    return httpx.get(f"{running_app.api_url}/api/graphicalEditor/{instance}/runs/{run_id}", headers=headers).json()


def open_inbox(page: Page, username: str = "admin", password: str = ADMIN_PASSWORD) -> None:
    sign_in(page, username, password)
    expect(page).to_have_url(re.compile(r"/workflows$"))
    page.locator("#nav-inbox").click()
    expect(page).to_have_url(re.compile(r"/inbox$"))


def row(page: Page, task_id: str):
    return page.locator(f'#task-list .task-row[data-task-id="{task_id}"]')


def test_approving_a_task_lets_the_run_complete(page: Page, running_app: RunningApp):
    title = f"Approve offer {uuid.uuid4().hex[:6]}"
    workflow_id, run_id, task_id = start_paused(running_app, approval_graph(title), "Inbox approval")
    sign_in(page, "admin", ADMIN_PASSWORD)
    expect(page).to_have_url(re.compile(r"/workflows$"))
    badge = page.locator("#inbox-count")
    expect(badge).to_be_visible(timeout=30_000)
    before = int(badge.inner_text())
    assert before >= 1
    _other_workflow, other_run, _other_task = start_paused(running_app, approval_graph(f"{title} (2)"), "Inbox live")
    expect(badge).to_have_text(str(before + 1), timeout=20_000)  # a new task shows without reloading the page
    page.locator("#nav-inbox").click()
    expect(page).to_have_url(re.compile(r"/inbox$"))
    expect(row(page, task_id)).to_contain_text(title, timeout=60_000)  # the first visit compiles the page
    row(page, task_id).click()
    panel = page.locator("#task-panel")
    expect(panel).to_contain_text(title)
    expect(panel).to_contain_text("Please check the offer.")
    expect(page.locator("#task-run-link")).to_have_attribute("href", f"/editor/{workflow_id}?run={run_id}")
    page.locator("#task-comment").fill("Looks fine")
    page.locator("#task-approve").click()
    expect(page.locator("#inbox-notice")).to_contain_text("Approved — the run continued")
    expect(row(page, task_id)).to_have_count(0)
    assert run_status(running_app, run_id)["status"] == "completed"
    page.locator("#tab-history").click()
    history = page.locator(f'#task-history .history-task-row[data-task-id="{task_id}"]')
    expect(history).to_contain_text("Approved")
    expect(history).to_contain_text("admin")

    page.locator("#nav-monitor").click()  # the monitor shows the run completed, with its duration
    finished = page.locator(f'#run-history .history-row[data-run-id="{run_id}"]')
    expect(finished).to_contain_text("completed", timeout=60_000)
    expect(finished.locator(".history-duration")).to_have_text(re.compile(r"\d"))
    # A mail's or a push's link (/inbox?task=…) opens that task directly.
    other_task = next(t["id"] for t in httpx.get(f"{running_app.api_url}/api/tasks", params={"status": "pending"},
                                                  headers=api(running_app)[0]).json() if t["runId"] == other_run)
    page.goto(f"/inbox?task={other_task}")
    expect(page.locator("#task-panel")).to_contain_text(f"{title} (2)")
    headers, _instance = api(running_app)
    httpx.post(f"{running_app.api_url}/api/graphicalEditor/{_instance}/runs/{other_run}/cancel", headers=headers)


def test_a_form_task_shows_the_inline_error_then_completes(page: Page, running_app: RunningApp, tmp_path):
    title = f"Give the amount {uuid.uuid4().hex[:6]}"
    _workflow_id, run_id, task_id = start_paused(running_app, form_graph(title), "Inbox form")
    open_inbox(page)
    row(page, task_id).click()
    expect(page.locator("#task-field-amount")).to_be_visible()
    page.locator("#task-submit").click()
    expect(page.locator("#task-error-amount")).to_have_text("required")
    expect(page.locator("#inbox-error")).to_contain_text("Please correct the marked fields.")
    assert run_status(running_app, run_id)["status"] == "paused"
    page.locator("#task-field-amount").fill("1250")
    offer = tmp_path / "offer.txt"
    offer.write_text("Offer: 1250 CHF")
    page.locator("#task-file-upload input[type=file]").set_input_files(str(offer))
    expect(page.locator("#inbox-notice")).to_contain_text("Uploaded offer.txt for offer")
    expect(page.locator("#task-field-offer")).to_have_value(f"/inbox/{task_id}/offer.txt")
    page.locator("#task-submit").click()
    expect(page.locator("#inbox-notice")).to_contain_text("Submitted — the run continued")
    expect(row(page, task_id)).to_have_count(0)
    run = run_status(running_app, run_id)
    assert run["status"] == "completed", run
    ask = next(s for s in run["steps"] if s["nodeId"] == "ask")
    assert ask["output"] == {"amount": 1250, "offer": f"/inbox/{task_id}/offer.txt"}


def test_cancelling_with_a_reason_cancels_the_run_and_the_history_shows_it(page: Page, running_app: RunningApp):
    title = f"Cancel me {uuid.uuid4().hex[:6]}"
    _workflow_id, run_id, task_id = start_paused(running_app, approval_graph(title), "Inbox cancel")
    open_inbox(page)
    row(page, task_id).click()
    page.locator("#task-cancel").click()
    page.locator("#task-cancel-reason").fill("The offer was withdrawn")
    page.locator("#task-cancel-confirm").click()
    expect(page.locator("#inbox-notice")).to_contain_text("Cancelled the task")
    expect(row(page, task_id)).to_have_count(0)
    run = run_status(running_app, run_id)
    assert run["status"] == "cancelled" and run["error"].endswith(": The offer was withdrawn"), run
    page.locator("#tab-history").click()
    history = page.locator(f'#task-history .history-task-row[data-task-id="{task_id}"]')
    expect(history).to_contain_text("Cancelled")
    expect(history).to_contain_text("The offer was withdrawn")


def test_a_viewer_sees_the_task_read_only(page: Page, running_app: RunningApp):
    title = f"Not for viewers {uuid.uuid4().hex[:6]}"
    workflow_id, run_id, task_id = start_paused(running_app, approval_graph(title), "Inbox viewer")
    username, password = f"viewer{uuid.uuid4().hex[:6]}", "viewer-pass-1"
    engine = make_engine(f"sqlite:///{running_app.log.parent / 'e2e.db'}")
    try:
        with Session(engine, expire_on_commit=False) as session:
            instance = session.exec(select(FeatureInstance).where(FeatureInstance.feature_code == "graphicalEditor")
                                    .where(FeatureInstance.label == "Graphical Editor")).first()
            viewer = User(username=username, display_name="Vic Viewer", password_hash=hash_password(password))
            session.add(viewer)
            session.flush()
            grant_mandate_roles(session, viewer, session.get(Mandate, instance.mandate_id), ["viewer"])
            grant_instance_roles(session, viewer, instance, ["graphicalEditor-viewer"])
            session.commit()
    finally:
        engine.dispose()
    open_inbox(page, username, password)
    expect(row(page, task_id)).to_contain_text("read only")
    expect(page.locator("#inbox-count")).to_have_count(0)
    row(page, task_id).click()
    expect(page.locator("#task-readonly")).to_have_text("You can see this task but not complete it.")
    expect(page.locator("#task-approve")).to_have_count(0)
    expect(page.locator("#task-cancel")).to_have_count(0)
    assert run_status(running_app, run_id)["status"] == "paused"
    page.locator("#nav-monitor").click()  # a viewer sees the monitor, with the waiting run
    expect(page.locator(f'#run-history .history-row[data-run-id="{run_id}"]')).to_contain_text("paused",
                                                                                               timeout=60_000)
    page.goto(f"/editor/{workflow_id}")  # and the workflow in the editor, read only
    expect(page.locator("#save-status")).to_have_attribute("data-state", "readonly", timeout=60_000)
    expect(page.locator(".poweron-node")).to_have_count(3)
    expect(page.locator("#test-run")).to_have_count(0)
    expect(page.locator("#palette-search")).to_be_visible()
    expect(page.get_by_text("Read only: nodes cannot be added here.")).to_be_visible()
