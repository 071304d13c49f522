"""The Graphical Editor in the browser (issue 9): a person builds a workflow by drag and drop,
sets parameters, test-runs it and watches the colours and the trace, publishes it and opens the
previous version read only; refused connections, undo, two tabs, bad input, templates, the
AI chat's changes and debugging a failed run.
"""

from __future__ import annotations

import json
import re
import uuid

import httpx
from playwright.sync_api import Page, expect

from backend.workflows import templates
from tests.e2e.conftest import ADMIN_PASSWORD, RunningApp
from tests.e2e.test_workflows_ui import sign_in

pytestmark = __import__("pytest").mark.e2e

WIDE = {"width": 1700, "height": 1000}


def api(running_app: RunningApp) -> tuple[dict[str, str], str]:
    """The admin's bearer header and the first Graphical Editor instance."""
    token = httpx.post(f"{running_app.api_url}/api/auth/login",
                       json={"username": "admin", "password": ADMIN_PASSWORD}).json()["token"]
    headers = {"Authorization": f"Bearer {token}"}
    me = httpx.get(f"{running_app.api_url}/api/me", headers=headers).json()
    instance = next(i["id"] for i in me["instances"] if i["featureCode"] == "graphicalEditor"
                    and i["label"] == "Graphical Editor")
    return headers, instance


def new_workflow(running_app: RunningApp, prefix: str, graph: dict | None = None) -> tuple[str, str]:
    headers, instance = api(running_app)
    name = f"{prefix} {uuid.uuid4().hex[:6]}"
    body = {"name": name, **({"graph": graph} if graph else {})}
    answer = httpx.post(f"{running_app.api_url}/api/graphicalEditor/{instance}/workflows", headers=headers,
                        json=body)
    assert answer.status_code == 201, answer.text
    return answer.json()["id"], name


def open_editor(page: Page, workflow_id: str, signed_in: bool = False) -> None:
    page.set_viewport_size(WIDE)
    if not signed_in:
        sign_in(page, "admin", ADMIN_PASSWORD)
        expect(page).to_have_url(re.compile(r"/workflows$"))
    page.goto(f"/editor/{workflow_id}")
    expect(page.locator(".poweron-node").first).to_be_visible(timeout=90_000)  # the first visit compiles the page
    expect(saved(page)).to_have_attribute("data-state", "saved")


def saved(page: Page):
    return page.locator("#save-status")


def node(page: Page, node_id: str):
    return page.locator(f'[data-testid="node-{node_id}"]')


def drop(page: Page, type_id: str, x: float, y: float) -> None:
    """Drag a palette entry onto the canvas at (x, y), fractions of the canvas."""
    pane = page.locator("#canvas .react-flow__pane")
    box = pane.bounding_box()
    entry = page.locator(f"#palette-{type_id.replace('.', '-')}")
    entry.scroll_into_view_if_needed()
    entry.drag_to(pane, target_position={"x": box["width"] * x, "y": box["height"] * y})


def connect(page: Page, source: str, handle: str, target: str) -> None:
    page.locator(f'[data-testid="handle-{source}-{handle}"]').drag_to(
        page.locator(f'.react-flow__node[data-id="{target}"] .react-flow__handle-left'))


def fit_view(page: Page) -> None:
    page.locator(".react-flow__controls-fitview").click()


def set_field(page: Page, name: str, value: str) -> None:
    field = page.locator(f"#param-{name}")
    field.fill(value)
    page.locator("#node-label").click()  # leaving the field stores it


def select(page: Page, node_id: str) -> None:
    node(page, node_id).click()
    page.locator("#tab-parameters").click()
    expect(page.locator("#parameters-panel")).to_be_visible()


CODE_V1 = "def main(input):\n    return {'doubled': 2 * input['input']['n']}\n"


def test_build_run_publish_and_open_the_previous_version(page: Page, running_app: RunningApp):
    workflow_id, _name = new_workflow(running_app, "Built by hand")
    open_editor(page, workflow_id)

    drop(page, "script.python", 0.05, 0.08)
    expect(page.locator(".poweron-node")).to_have_count(2)
    expect(page.locator("#param-code")).to_be_visible()  # the dropped node is selected
    set_field(page, "code", CODE_V1)
    expect(saved(page)).to_have_attribute("data-state", "saved")
    # Nodes go top-left, bottom-left and top-right: the minimap sits bottom-right, the controls bottom-left.
    drop(page, "flow.ifElse", 0.12, 0.6)
    expect(page.locator(".poweron-node")).to_have_count(3)
    set_field(page, "condition", "{{ nodes.python.output.doubled > 10 }}")
    drop(page, "flow.stop", 0.58, 0.08)
    expect(page.locator(".poweron-node")).to_have_count(4)
    set_field(page, "message", "big enough")
    fit_view(page)

    connect(page, "start", "out", "python")
    connect(page, "python", "out", "ifElse")
    connect(page, "ifElse", "true", "stop")
    expect(page.locator(".react-flow__edge")).to_have_count(3)
    expect(page.locator(".react-flow__edge-text", has_text="true")).to_have_count(1)  # the branch is labelled
    expect(saved(page)).to_have_attribute("data-state", "saved")
    expect(page.locator("#graph-problems")).to_have_count(0)

    page.locator("#tab-trace").click()
    page.locator("#run-input").fill('{"n": 21}')
    page.locator("#test-run").click()
    for node_id in ("start", "python", "ifElse", "stop"):
        expect(node(page, node_id)).to_have_attribute("data-status", "completed")
    expect(page.locator("#run-summary")).to_contain_text("completed")
    rows = page.locator(".trace-row")
    expect(rows).to_have_count(4)
    expect(rows.nth(1)).to_contain_text("python")
    expect(rows.nth(1)).to_contain_text(re.compile(r"\d+(\.\d)? m?s"))
    rows.nth(1).get_by_text("Input and output").click()
    expect(rows.nth(1)).to_contain_text('"doubled": 42')
    select(page, "python")
    expect(page.locator("#node-last-run")).to_contain_text('"doubled": 42')  # clicking a node shows its last step
    select(page, "ifElse")  # expressions autocomplete the outputs of earlier nodes, from the last run's data
    options = page.locator("#expression-options option")
    expect(page.locator('#expression-options option[value="{{ nodes.python.output.doubled }}"]')).to_have_count(1)
    values = [options.nth(i).get_attribute("value") for i in range(options.count())]
    assert "{{ nodes.python.output.doubled }}" in values and "{{ input.n }}" in values
    assert not any("nodes.stop" in v for v in values)  # not from nodes after this one

    page.locator("#tab-trace").click()
    run_id = page.locator("#run-summary").inner_text().split()[1].rstrip(":")
    headers, instance = api(running_app)
    runs = httpx.get(f"{running_app.api_url}/api/graphicalEditor/{instance}/runs",
                     params={"workflowId": workflow_id}, headers=headers).json()
    full_id = next(r["id"] for r in runs if r["id"].startswith(run_id))
    page.goto(f"/editor/{workflow_id}?run={full_id}")  # a link to a run opens its trace
    expect(page.locator(".trace-row")).to_have_count(4)
    expect(node(page, "stop")).to_have_attribute("data-status", "completed")

    page.locator("#tab-versions").click()
    page.locator("#publish-draft").click()
    expect(page.locator("#editor-notice")).to_contain_text("Published version 1")
    expect(page.locator("#version-1")).to_contain_text("published")

    select(page, "python")
    set_field(page, "code", CODE_V1.replace("2 *", "3 *"))
    expect(saved(page)).to_have_attribute("data-state", "saved")
    page.locator("#tab-versions").click()
    expect(page.locator("#version-2")).to_contain_text("draft")
    expect(page.locator("#version-1")).to_contain_text("published")  # editing never changes the published one
    page.locator("#publish-draft").click()
    expect(page.locator("#version-1")).to_contain_text("archived")
    expect(page.locator("#version-2")).to_contain_text("published")

    page.locator("#open-version-1").click()
    expect(page.locator("#readonly-banner")).to_contain_text("version 1")
    expect(saved(page)).to_have_attribute("data-state", "readonly")
    select(page, "python")
    expect(page.locator("#param-code")).to_have_value(CODE_V1)
    expect(page.locator("#param-code")).to_be_disabled()
    expect(page.locator("#test-run")).to_be_disabled()
    page.locator("#back-to-draft").click()
    expect(page.locator("#readonly-banner")).to_have_count(0)
    select(page, "python")
    expect(page.locator("#param-code")).to_have_value(re.compile(r"3 \*"))


def test_refused_connections_delete_and_undo(page: Page, running_app: RunningApp):
    graph = {"nodes": [{"id": "start", "type": "trigger.manual", "position": {"x": 0, "y": 0}},
                       {"id": "check", "type": "flow.ifElse", "parameters": {"condition": "{{ true }}"},
                        "position": {"x": 300, "y": 0}},
                       {"id": "after", "type": "flow.merge", "position": {"x": 600, "y": 150}}],
            "edges": [{"source": "start", "target": "check"}, {"source": "check", "sourceHandle": "true",
                                                               "target": "after"}]}
    workflow_id, _name = new_workflow(running_app, "Rules", graph)
    open_editor(page, workflow_id)
    expect(page.locator('.react-flow__node[data-id="start"] .react-flow__handle-left')).to_have_count(0)  # no way in

    connect(page, "after", "out", "check")
    expect(page.locator("#connection-refused")).to_contain_text("cycle")
    expect(page.locator(".react-flow__edge")).to_have_count(2)
    connect(page, "start", "out", "check")
    expect(page.locator("#connection-refused")).to_contain_text("already")
    expect(page.locator(".react-flow__edge")).to_have_count(2)

    node(page, "check").click()
    page.keyboard.press("Delete")
    expect(node(page, "check")).to_have_count(0)
    expect(page.locator(".react-flow__edge")).to_have_count(0)
    expect(saved(page)).to_have_attribute("data-state", "saved")
    page.locator("#undo").click()
    expect(node(page, "check")).to_have_count(1)
    expect(page.locator(".react-flow__edge")).to_have_count(2)
    page.locator("#redo").click()
    expect(node(page, "check")).to_have_count(0)
    page.locator("#undo").click()
    expect(node(page, "check")).to_have_count(1)
    expect(saved(page)).to_have_attribute("data-state", "saved")
    headers, instance = api(running_app)
    stored = httpx.get(f"{running_app.api_url}/api/graphicalEditor/{instance}/workflows/{workflow_id}",
                       headers=headers).json()["graph"]
    assert {n["id"] for n in stored["nodes"]} == {"start", "check", "after"}


def test_bad_parameters_show_inline_and_a_second_tab_is_told_the_draft_changed(page: Page, running_app: RunningApp):
    graph = {"nodes": [{"id": "start", "type": "trigger.manual", "position": {"x": 0, "y": 0}},
                       {"id": "ask", "type": "input.approval", "parameters": {"title": "Pay?"},
                        "position": {"x": 300, "y": 0}}],
            "edges": [{"source": "start", "target": "ask"}]}
    workflow_id, _name = new_workflow(running_app, "Two tabs", graph)
    open_editor(page, workflow_id)
    select(page, "ask")
    set_field(page, "timeoutSeconds", "soon")
    expect(page.locator("#error-timeoutSeconds")).to_contain_text("'soon' is not a number")
    set_field(page, "title", "Pay {{ input.amount + }}")
    expect(node(page, "ask")).to_have_attribute("data-invalid", "true")
    expect(page.locator("#error-title")).to_be_visible()
    set_field(page, "title", "Pay {{ input.amount }} CHF")
    expect(node(page, "ask")).to_have_attribute("data-invalid", "false")

    second = page.context.new_page()
    open_editor(second, workflow_id, signed_in=True)
    select(second, "ask")
    set_field(second, "title", "Changed in the second tab")
    expect(saved(second)).to_have_attribute("data-state", "saved")

    set_field(page, "title", "Changed in the first tab")
    expect(saved(page)).to_have_attribute("data-state", "conflict")
    expect(page.locator("#conflict-message")).to_contain_text("changed elsewhere")
    page.locator("#reload-theirs").click()
    select(page, "ask")
    expect(page.locator("#param-title")).to_have_value("Changed in the second tab")
    expect(saved(page)).to_have_attribute("data-state", "saved")


def test_import_export_and_templates(page: Page, running_app: RunningApp, tmp_path):
    workflow_id, _name = new_workflow(running_app, "Imported")
    open_editor(page, workflow_id)
    broken = tmp_path / "broken.json"
    broken.write_text('{"nodes": [')
    page.locator("#import-graph input[type=file]").set_input_files(str(broken))
    expect(page.locator("#editor-error")).to_contain_text("not valid JSON")
    expect(page.locator(".poweron-node")).to_have_count(1)

    with page.expect_download() as download:
        page.locator("#export-graph").click()
    exported = json.loads(download.value.path().read_text())
    assert exported["poweronWorkflow"] == 1 and exported["graph"]["nodes"][0]["id"] == "start"
    exported["graph"]["nodes"].append({"id": "later", "type": "flow.wait", "parameters": {"seconds": 1},
                                       "position": {"x": 300, "y": 0}})
    good = tmp_path / "good.json"
    good.write_text(json.dumps(exported))
    page.locator("#import-graph input[type=file]").set_input_files(str(good))
    expect(page.locator("#editor-notice")).to_contain_text("Imported 2 nodes")
    expect(page.locator(".poweron-node")).to_have_count(2)

    page.goto("/workflows")
    page.locator("#open-templates").click()
    expect(page.locator(".template-card")).to_have_count(len(templates.templates()))
    page.locator("#use-template-expense-approval").click()
    expect(page).to_have_url(re.compile(r"/editor/\w+$"))
    expect(page.locator(".poweron-node")).to_have_count(6)
    page.locator("#tab-trace").click()
    page.locator("#run-input").fill('{"amount": 200}')
    page.locator("#test-run").click()
    expect(page.locator("#run-summary")).to_contain_text("completed")


def test_ai_chat_changes_the_canvas_and_a_failed_run_is_debugged(page: Page, running_app: RunningApp):
    graph = {"nodes": [{"id": "start", "type": "trigger.manual", "position": {"x": 0, "y": 0}},
                       {"id": "divide", "type": "script.python",
                        "parameters": {"code": "def main(input):\n    return {'r': 1 / input['input']['d']}\n"},
                        "position": {"x": 300, "y": 0}}],
            "edges": [{"source": "start", "target": "divide"}]}
    workflow_id, _name = new_workflow(running_app, "Debug me", graph)
    ai = running_app.ai
    ai.clear()
    ai.reply(None, tool_calls=[{"id": "c1", "name": "workflow_addNode", "arguments": {
        "workflowId": workflow_id, "type": "flow.merge", "id": "merged", "parameters": None, "label": None,
        "editorInstanceId": None}}])
    ai.reply("I added a merge node.")
    open_editor(page, workflow_id)

    page.locator("#tab-chat").click()
    box = page.locator("#chat-input")
    box.fill("Add a merge node")
    box.press("Enter")
    expect(node(page, "merged")).to_have_count(1)  # the agent's change appears on the canvas
    expect(page.locator(".assistant-message").last).to_contain_text("I added a merge node.")
    assert workflow_id in ai.last_chat.system_text  # the agent knows the graph it edits
    page.locator("#undo").click()
    expect(node(page, "merged")).to_have_count(0)

    page.locator("#tab-trace").click()
    page.locator("#run-input").fill('{"d": 0}')
    page.locator("#step-run").click()
    expect(page.locator("#next-step")).to_be_visible()
    expect(node(page, "start")).to_have_attribute("data-status", "completed")
    expect(node(page, "divide")).to_have_attribute("data-status", "pending")
    page.locator("#next-step").click()
    expect(node(page, "divide")).to_have_attribute("data-status", "failed")
    expect(page.locator("#run-error")).to_contain_text("division by zero")

    ai.reply("Input d is 0: guard against it.")
    page.locator("#ask-ai-error").click()
    expect(page.locator(".user-message").last).to_contain_text("failed at node 'divide'")
    expect(page.locator(".assistant-message").last).to_contain_text("guard against it")
    assert "division by zero" in ai.last_chat.user_text

    select(page, "divide")
    set_field(page, "code", "def main(input):\n    return {'r': 1 / (input['input']['d'] or 1)}\n")
    page.locator("#tab-trace").click()
    page.locator("#retry-failed").click()
    expect(node(page, "divide")).to_have_attribute("data-status", "completed")  # from the failed node on
    expect(node(page, "start")).to_have_attribute("data-status", "completed")


def test_a_change_the_server_refuses_is_taken_back(page: Page, running_app: RunningApp):
    graph = {"nodes": [{"id": "sched", "type": "trigger.schedule", "parameters": {"cron": "0 7 * * *"},
                        "position": {"x": 0, "y": 0}}], "edges": []}
    workflow_id, _name = new_workflow(running_app, "Refused", graph)
    open_editor(page, workflow_id)
    select(page, "sched")
    set_field(page, "cron", "every morning")
    expect(page.locator("#editor-error")).to_contain_text("Not saved")
    expect(page.locator("#editor-error")).to_contain_text("cron")
    expect(page.locator("#param-cron")).to_have_value("0 7 * * *")  # the refused value is taken back
    expect(saved(page)).to_have_attribute("data-state", "refused")  # never "All changes saved" beside it
    headers, instance = api(running_app)
    stored = httpx.get(f"{running_app.api_url}/api/graphicalEditor/{instance}/workflows/{workflow_id}",
                       headers=headers).json()["graph"]
    assert stored["nodes"][0]["parameters"]["cron"] == "0 7 * * *"
