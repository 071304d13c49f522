"""The Monitor page in the browser (issue 10): a person sees at a glance what runs, what failed and
what waits for them. Runs started through the REST API show up in the history with their
durations, the failure under recent failures opens its trace in the editor, the status filter
narrows the history, and a run that pauses for an approval appears under "Running now" while the
page is open (its timer refreshes the live list). Test runs (the editor's Test run of a draft) stay
out of the default view, production runs, and show under "Test runs" (issue 16).
"""

from __future__ import annotations

import re
from typing import Any

import httpx
from playwright.sync_api import Page, expect

from tests.e2e.conftest import ADMIN_PASSWORD, RunningApp
from tests.e2e.test_admin_ui import choose
from tests.e2e.test_editor_ui import WIDE, api, new_workflow, node, open_editor
from tests.e2e.test_inbox_ui import at_rest
from tests.e2e.test_workflows_ui import pick, sign_in

pytestmark = __import__("pytest").mark.e2e

START = {"id": "start", "type": "trigger.manual", "position": {"x": 0, "y": 0}}
CODE = ("def main(input):\n    if input['input'].get('fail'):\n        raise ValueError('boom on purpose')\n"
        "    return {'ok': True}\n")
PYTHON_GRAPH = {"nodes": [START, {"id": "python", "type": "script.python", "parameters": {"code": CODE},
                                  "position": {"x": 300, "y": 0}}],
                "edges": [{"source": "start", "target": "python"}]}
DURATION = re.compile(r"\d+(\.\d)? (ms|s|min)")


def approval_graph(user_id: str) -> dict[str, Any]:
    return {"nodes": [START, {"id": "ok", "type": "input.approval", "position": {"x": 300, "y": 0},
                              "parameters": {"title": "Approve the monitor test", "assignee": {"user": user_id}}}],
            "edges": [{"source": "start", "target": "ok"}]}


def published_workflow(running_app: RunningApp, prefix: str, graph: dict) -> tuple[str, str]:
    """A new workflow whose graph is published: its runs are production runs."""
    workflow_id, name = new_workflow(running_app, prefix, graph)
    headers, instance = api(running_app)
    answer = httpx.post(f"{running_app.api_url}/api/graphicalEditor/{instance}/workflows/{workflow_id}/publish",
                        headers=headers)
    assert answer.status_code == 200, answer.text
    return workflow_id, name


def start_run(running_app: RunningApp, workflow_id: str, payload: Any = None) -> dict:
    headers, instance = api(running_app)
    answer = httpx.post(f"{running_app.api_url}/api/graphicalEditor/{instance}/workflows/{workflow_id}/runs",
                        headers=headers, json={"input": payload}, timeout=60)
    assert answer.status_code == 201, answer.text
    return at_rest(running_app, answer.json())


def test_the_monitor_shows_runs_failures_and_what_waits(page: Page, running_app: RunningApp):
    workflow_id, name = published_workflow(running_app, "Monitored", PYTHON_GRAPH)
    ok = start_run(running_app, workflow_id, {"fail": False})
    failed = start_run(running_app, workflow_id, {"fail": True})
    assert (ok["status"], failed["status"]) == ("completed", "failed")
    headers, instance = api(running_app)
    me = httpx.get(f"{running_app.api_url}/api/me", headers=headers).json()["id"]
    waiting_id, waiting_name = published_workflow(running_app, "Waiting", approval_graph(me))

    page.set_viewport_size(WIDE)
    sign_in(page, "admin", ADMIN_PASSWORD)
    expect(page).to_have_url(re.compile(r"/workflows$"))
    page.locator("#nav-monitor").click()
    expect(page).to_have_url(re.compile(r"/monitor$"))
    expect(page.locator("#run-history")).to_be_visible(timeout=90_000)  # the first visit compiles the page
    for element in ("monitor-kind", "monitor-instance", "monitor-workflow", "monitor-status", "monitor-range",
                    "live-runs", "upcoming-runs", "runs-per-day", "error-rate", "costs"):
        expect(page.locator(f"#{element}")).to_be_visible()

    # A run that pauses while the page is open appears under "Running now" (the 3-second timer).
    paused = start_run(running_app, waiting_id)
    assert paused["status"] == "paused"
    try:
        check_the_monitor(page, workflow_id, name, failed["id"], waiting_name)
    finally:  # no approval is left waiting for the admin in later tests
        httpx.post(f"{running_app.api_url}/api/graphicalEditor/{instance}/runs/{paused['id']}/cancel",
                   headers=headers)


def check_the_monitor(page: Page, workflow_id: str, name: str, failed_id: str, waiting_name: str) -> None:
    live = page.locator("#live-runs .live-run", has_text=waiting_name)
    expect(live).to_have_count(1, timeout=15_000)
    expect(live).to_contain_text("paused")
    expect(live).to_contain_text("waits for a person")
    expect(live.locator(".live-duration")).to_contain_text(DURATION)

    history = page.locator("#run-history .history-row", has_text=name)
    expect(history).to_have_count(2)
    expect(history.filter(has_text="completed").locator(".history-duration")).to_contain_text(DURATION)
    expect(history.filter(has_text="failed").locator(".history-duration")).to_contain_text(DURATION)
    failure = page.locator(".failure-row", has_text=name)
    expect(failure).to_have_count(1)
    expect(failure).to_contain_text("boom on purpose")

    choose(page, "monitor-status", "failed")
    expect(history).to_have_count(1)
    expect(history).to_contain_text("failed")
    expect(page.locator("#run-history .history-row", has_text=waiting_name)).to_have_count(0)
    choose(page, "monitor-status", "All statuses")
    expect(history).to_have_count(2)

    pick_workflow(page, name)  # the label carries the instance when there are several
    expect(page.locator("#run-history .history-row")).to_have_count(2)
    expect(page.locator("#live-runs .live-run")).to_have_count(0)  # the approval is another workflow's

    failure.locator(".open-trace").click()
    expect(page).to_have_url(re.compile(rf"/editor/{workflow_id}\?run={failed_id}$"), timeout=90_000)
    expect(page.locator(".trace-row", has_text="python").first).to_be_visible(timeout=90_000)  # first visit compiles
    expect(node(page, "python")).to_have_attribute("data-status", "failed")
    expect(page.locator("#run-error")).to_contain_text("boom on purpose")


def test_a_history_row_opens_its_trace_and_the_range_shows_an_honest_empty_state(page: Page,
                                                                               running_app: RunningApp):
    workflow_id, name = published_workflow(running_app, "Traced", PYTHON_GRAPH)
    done = start_run(running_app, workflow_id, {"fail": False})
    page.set_viewport_size(WIDE)
    sign_in(page, "admin", ADMIN_PASSWORD)
    expect(page).to_have_url(re.compile(r"/workflows$"))
    page.goto("/monitor")
    row = page.locator("#run-history .history-row", has_text=name)
    expect(row).to_have_count(1, timeout=90_000)
    expect(page.locator("#history-first")).to_be_disabled()
    row.locator(".history-trace").click()
    expect(page).to_have_url(re.compile(rf"/editor/{workflow_id}\?run={done['id']}$"), timeout=90_000)
    expect(page.locator(".trace-row", has_text="python").first).to_be_visible(timeout=90_000)
    expect(node(page, "python")).to_have_attribute("data-status", "completed")

    page.goto("/monitor")
    pick_workflow(page, name)
    expect(page.locator("#run-history .history-row")).to_have_count(1)
    choose(page, "monitor-status", "cancelled")
    expect(page.locator("#run-history .history-row")).to_have_count(0)
    expect(page.locator("#history-empty")).to_have_text(
        "No production runs in this range. Test runs from the editor are under \u201cTest runs\u201d.")
    choose(page, "monitor-kind", "All runs")
    expect(page.locator("#history-empty")).to_have_text("No runs in this range")


def pick_workflow(page: Page, name: str) -> None:
    pick(page, page.locator("#monitor-workflow"), page.get_by_role("option", name=re.compile(re.escape(name))))
    expect(page.locator("#monitor-workflow")).to_contain_text(name)


def test_a_failed_test_run_in_the_editor_stays_out_of_the_production_view(page: Page, running_app: RunningApp):
    """Trying a draft out in the editor raises no production figure: the default Monitor view does
    not show the failed test run; "Test runs" shows it, with its failure and error rate."""
    workflow_id, name = new_workflow(running_app, "Tried out", PYTHON_GRAPH)  # a draft: its runs are tests
    open_editor(page, workflow_id)
    page.locator("#tab-trace").click()
    page.locator("#run-input").fill('{"fail": true}')
    page.locator("#test-run").click()
    expect(node(page, "python")).to_have_attribute("data-status", "failed", timeout=60_000)

    page.goto("/monitor")
    expect(page.locator("#monitor-kind")).to_have_text("Production runs", timeout=90_000)
    pick_workflow(page, name)
    expect(page.locator("#history-empty")).to_contain_text("No production runs in this range")
    expect(page.locator("#run-history .history-row")).to_have_count(0)
    expect(page.locator(".failure-row", has_text=name)).to_have_count(0)
    expect(page.locator("#count-total")).to_have_text("0")
    expect(page.locator("#count-failed")).to_have_text("0")
    expect(page.locator("#count-error-rate")).to_have_text("–")

    choose(page, "monitor-kind", "Test runs")
    row = page.locator("#run-history .history-row", has_text=name)
    expect(row).to_have_count(1)
    expect(row).to_have_attribute("data-test", "true")
    expect(row.locator(".test-run-badge")).to_have_text("test")
    expect(row).to_contain_text("failed")
    failure = page.locator(".failure-row", has_text=name)
    expect(failure).to_contain_text("boom on purpose")
    expect(page.locator("#count-total")).to_have_text("1")
    expect(page.locator("#count-failed")).to_have_text("1")
    expect(page.locator("#count-error-rate")).to_have_text("100.0 %")
    expect(page.locator("#upcoming-empty")).to_contain_text("Schedules start production runs")

    choose(page, "monitor-kind", "All runs")
    expect(row).to_have_count(1)
    expect(page.locator("#count-total")).to_have_text("1")
