"""The editor in a new user's first hour (issue 16, items 1, 3, 7, 8, 9): every palette entry
drops onto the canvas and into the stored draft, Test run works right after Publish, undo and
redo from the keyboard, panels fold away for the canvas, the minimap never covers nodes after a
fit, the trace names nodes by label with labelled input and output, an error names its node
once, "Inactive" explains itself, the save badge agrees with the banner, the toolbar fits the
screen, and the browser console stays clean (no React errors or warnings) throughout.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

import httpx
import pytest
from playwright.sync_api import Browser, ConsoleMessage, Page, expect

from tests.e2e.conftest import RunningApp
from tests.e2e.test_editor_ui import api, fit_view, new_workflow, node, open_editor, saved, select, set_field

pytestmark = pytest.mark.e2e

LAPTOP = {"width": 1366, "height": 768}
DESKTOP = {"width": 1920, "height": 1080}
TIME_ZONE = "Europe/Zurich"


# --- helpers -------------------------------------------------------------------------------------


class ConsoleWatch:
    """The browser console's errors and warnings (React's among them) while a test runs."""

    def __init__(self, page: Page):
        self.problems: list[str] = []
        page.on("console", self._seen)
        page.on("pageerror", lambda error: self.problems.append(f"pageerror: {error}"))

    def _seen(self, message: ConsoleMessage) -> None:
        if message.type in ("error", "warning"):
            self.problems.append(f"{message.type}: {message.text[:500]}")

    def assert_clean(self) -> None:
        assert self.problems == [], "the browser console reported:\n" + "\n".join(self.problems)


@pytest.fixture
def zurich_page(browser: Browser, running_app: RunningApp) -> Iterator[Page]:
    """A page whose browser lives in Europe/Zurich (new schedules start in the user's time zone)."""
    context = browser.new_context(base_url=running_app.ui_url, timezone_id=TIME_ZONE)
    context.set_default_timeout(30_000)
    page = context.new_page()
    yield page
    context.close()


def stored_graph(running_app: RunningApp, workflow_id: str) -> dict:
    headers, instance = api(running_app)
    answer = httpx.get(f"{running_app.api_url}/api/graphicalEditor/{instance}/workflows/{workflow_id}",
                       headers=headers)
    assert answer.status_code == 200, answer.text
    return answer.json()["graph"]


def node_types(running_app: RunningApp) -> list[str]:
    """The palette as the API publishes it (GET /api/node-types)."""
    headers, _instance = api(running_app)
    answer = httpx.get(f"{running_app.api_url}/api/node-types", headers=headers)
    assert answer.status_code == 200, answer.text
    return [entry["type"] for entry in answer.json()]


def drop_at(page: Page, type_id: str, x: float, y: float) -> None:
    """Drag the palette entry of `type_id` onto the canvas at (x, y), fractions of the canvas."""
    pane = page.locator("#canvas .react-flow__pane")
    box = pane.bounding_box()
    entry = page.locator(f"#palette-{type_id.replace('.', '-')}")
    entry.scroll_into_view_if_needed()
    entry.drag_to(pane, target_position={"x": box["width"] * x, "y": box["height"] * y})


def overlapping(first: dict, second: dict) -> bool:
    return (first["x"] < second["x"] + second["width"] and second["x"] < first["x"] + first["width"]
            and first["y"] < second["y"] + second["height"] and second["y"] < first["y"] + first["height"])


def nodes_under_the_minimap(page: Page) -> list[str]:
    minimap = page.locator(".react-flow__minimap").bounding_box()
    nodes = page.locator(".react-flow__node")
    return [nodes.nth(i).get_attribute("data-id") for i in range(nodes.count())
            if overlapping(nodes.nth(i).bounding_box(), minimap)]


def nodes_outside_the_canvas(page: Page) -> list[str]:
    canvas = page.locator("#canvas").bounding_box()
    nodes = page.locator(".react-flow__node")
    outside = []
    for i in range(nodes.count()):
        box = nodes.nth(i).bounding_box()
        if box["x"] < canvas["x"] or box["y"] < canvas["y"] or box["x"] + box["width"] > canvas["x"] + canvas[
                "width"] or box["y"] + box["height"] > canvas["y"] + canvas["height"]:
            outside.append(nodes.nth(i).get_attribute("data-id"))
    return outside


def unreachable_buttons(page: Page) -> list[str]:
    """The toolbar's buttons that are not wholly inside the viewport or not the topmost element
    at their centre (covered, so a click would not reach them)."""
    return page.evaluate("""() => {
        const bad = [];
        for (const button of document.querySelectorAll('#editor-toolbar button')) {
            const box = button.getBoundingClientRect();
            if (box.width === 0 && box.height === 0) continue;  // not shown (e.g. Next step)
            const name = button.id || button.title || button.textContent.trim();
            const inside = box.left >= 0 && box.top >= 0 && box.right <= window.innerWidth
                && box.bottom <= window.innerHeight;
            const hit = document.elementFromPoint(box.left + box.width / 2, box.top + box.height / 2);
            if (!inside || !hit || !button.contains(hit)) bad.push(name);
        }
        return bad;
    }""")


def fit_and_settle(page: Page) -> None:
    """Fit view, then let the browser draw the new viewport."""
    fit_view(page)
    page.evaluate("() => new Promise(done => requestAnimationFrame(() => requestAnimationFrame(done)))")


def grid_graph(columns: int = 4, rows: int = 3) -> dict:
    """A manual start and merges laid out over a wide and tall area."""
    nodes = [{"id": "start", "type": "trigger.manual", "position": {"x": 0, "y": 0}}]
    for index in range(1, columns * rows):
        nodes.append({"id": f"m{index}", "type": "flow.merge",
                      "position": {"x": (index % columns) * 280, "y": (index // columns) * 180}})
    return {"nodes": nodes, "edges": [{"source": "start", "target": "m1"}]}


# --- item 1: every node type drops ---------------------------------------------------------------


def test_every_palette_entry_drops_onto_the_canvas_and_into_the_stored_draft(zurich_page: Page,
                                                                             running_app: RunningApp):
    page = zurich_page
    console = ConsoleWatch(page)
    types = node_types(running_app)
    assert len(types) >= 34 and "trigger.schedule" in types
    workflow_id, _name = new_workflow(running_app, "Every node")
    open_editor(page, workflow_id)

    columns = 8
    row_height = 0.86 / -(-len(types) // columns)  # every drop lands inside the canvas, however many types
    for index, type_id in enumerate(types):
        drop_at(page, type_id, 0.06 + (index % columns) * 0.11, 0.06 + (index // columns) * row_height)
        expect(page.locator(".poweron-node")).to_have_count(index + 2)
        # The new node is selected: its panel is open, for the node that is there.
        expect(page.locator("#parameters-panel")).to_contain_text(type_id)
        expect(page.locator("#editor-error")).to_have_count(0)
        expect(saved(page)).to_have_attribute("data-state", "saved")
        if type_id == "trigger.schedule":  # every day at 08:00 in the browser's time zone
            expect(page.locator("#param-cron")).to_have_value("0 8 * * *")
            expect(page.locator("#param-timezone")).to_have_value(TIME_ZONE)

    graph = stored_graph(running_app, workflow_id)
    assert sorted(n["type"] for n in graph["nodes"]) == sorted(["trigger.manual", *types])
    by_type = {n["type"]: n for n in graph["nodes"] if n["id"] != "start"}
    assert by_type["trigger.schedule"]["parameters"] == {"cron": "0 8 * * *", "timezone": TIME_ZONE}
    assert by_type["flow.wait"]["parameters"] == {"seconds": 60}
    # A node with sensible defaults is valid at once; one that needs input is an incomplete draft, red with why.
    expect(node(page, by_type["trigger.schedule"]["id"])).to_have_attribute("data-invalid", "false")
    condition = node(page, by_type["flow.ifElse"]["id"])
    expect(condition).to_have_attribute("data-invalid", "true")
    expect(condition).to_have_attribute("title", re.compile("condition"))
    console.assert_clean()


# --- item 3: Test run right after Publish --------------------------------------------------------


DOUBLE = "def main(input):\n    return {'doubled': 2 * input['input']['n']}\n"


def test_test_run_right_after_publish_runs_the_graph_on_the_canvas(page: Page, running_app: RunningApp):
    console = ConsoleWatch(page)
    graph = {"nodes": [{"id": "start", "type": "trigger.manual", "label": "Start", "position": {"x": 0, "y": 0}},
                       {"id": "double", "type": "script.python", "label": "Double it",
                        "parameters": {"code": DOUBLE}, "position": {"x": 300, "y": 0}}],
             "edges": [{"source": "start", "target": "double"}]}
    workflow_id, _name = new_workflow(running_app, "Publish then test", graph)
    open_editor(page, workflow_id)
    page.locator("#tab-trace").click()
    page.locator("#run-input").fill('{"n": 4}')

    page.locator("#tab-versions").click()
    page.locator("#publish-draft").click()
    expect(page.locator("#editor-notice")).to_contain_text("Published version 1")
    page.locator("#tab-trace").click()
    page.locator("#test-run").click()  # at once, no edit in between
    expect(page.locator("#run-summary")).to_contain_text("completed")
    expect(page.locator("#editor-error")).to_have_count(0)
    expect(node(page, "double")).to_have_attribute("data-status", "completed")

    # The trace names nodes by their labels, and a step's input and output are labelled.
    rows = page.locator(".trace-row")
    expect(rows).to_have_count(2)
    expect(rows.nth(1).locator(".trace-label")).to_have_text("Double it")
    rows.nth(1).get_by_text("Input and output").click()
    expect(rows.nth(1).locator(".trace-input")).to_contain_text("Input")
    expect(rows.nth(1).locator(".trace-output")).to_contain_text("Output")
    expect(rows.nth(1).locator(".trace-output")).to_contain_text('"doubled": 8')

    # After the next edit the Test run runs the new draft.
    select(page, "double")
    set_field(page, "code", DOUBLE.replace("2 *", "3 *"))
    expect(saved(page)).to_have_attribute("data-state", "saved")
    page.locator("#tab-trace").click()
    first_run = page.locator("#run-summary").inner_text()
    page.locator("#test-run").click()
    expect(page.locator("#run-summary")).not_to_have_text(first_run)  # the new run, not the last one's summary
    expect(page.locator("#run-summary")).to_contain_text("completed")
    page.locator(".trace-row").nth(1).get_by_text("Input and output").click()
    expect(page.locator(".trace-row").nth(1).locator(".trace-output")).to_contain_text('"doubled": 12')
    console.assert_clean()


# --- item 7: errors, keyboard, room, minimap, toolbar ----------------------------------------------


def test_a_failed_step_names_its_node_once_and_the_ai_is_offered(page: Page, running_app: RunningApp):
    console = ConsoleWatch(page)
    graph = {"nodes": [{"id": "start", "type": "trigger.manual", "position": {"x": 0, "y": 0}},
                       {"id": "gate", "type": "flow.ifElse", "label": "Amount test",
                        "parameters": {"condition": "{{ input.amount > 5 }}"}, "position": {"x": 300, "y": 0}}],
             "edges": [{"source": "start", "target": "gate"}]}
    workflow_id, _name = new_workflow(running_app, "Names once", graph)
    open_editor(page, workflow_id)
    page.locator("#tab-trace").click()
    page.locator("#run-input").fill('{"amount": "many"}')
    page.locator("#test-run").click()
    expect(page.locator("#run-summary")).to_contain_text("failed")

    callout = page.locator("#run-error")
    expect(callout).to_contain_text("Amount test (gate) failed")
    expect(callout).to_contain_text("parameter 'condition'")
    assert callout.inner_text().count("gate") == 1
    failed = page.locator('.trace-row[data-status="failed"]')
    expect(failed.locator(".trace-label")).to_have_text("Amount test")
    expect(failed.locator(".trace-error")).to_contain_text("parameter 'condition'")
    expect(failed.locator(".trace-error")).not_to_contain_text("gate")
    # This app has an AI provider: the help is offered (without one it says what is missing instead).
    expect(page.locator("#ask-ai-error")).to_be_visible()
    expect(page.locator("#ask-ai-unavailable")).to_have_count(0)
    page.locator("#tab-chat").click()
    expect(page.locator("#chat-input")).to_be_enabled()
    expect(page.locator("#editor-chat-no-provider")).to_have_count(0)
    console.assert_clean()


def test_undo_and_redo_from_the_keyboard_but_not_while_typing(page: Page, running_app: RunningApp):
    console = ConsoleWatch(page)
    workflow_id, _name = new_workflow(running_app, "Keys", grid_graph(3, 1))
    open_editor(page, workflow_id)
    pane = page.locator("#canvas .react-flow__pane")

    node(page, "m2").click()
    page.keyboard.press("Delete")
    expect(node(page, "m2")).to_have_count(0)
    page.locator("#tab-trace").click()
    typed = page.locator("#run-input")
    typed.click()
    typed.press_sequentially('{"a": 1}')
    typed.press("Control+z")  # the text field's own undo: the canvas keeps its change
    expect(node(page, "m2")).to_have_count(0)

    pane.click(position={"x": 5, "y": 5})
    page.keyboard.press("Control+z")
    expect(node(page, "m2")).to_have_count(1)
    page.keyboard.press("Control+Shift+z")
    expect(node(page, "m2")).to_have_count(0)
    page.keyboard.press("Control+z")
    expect(node(page, "m2")).to_have_count(1)
    page.keyboard.press("Control+y")
    expect(node(page, "m2")).to_have_count(0)
    expect(saved(page)).to_have_attribute("data-state", "saved")
    assert "m2" not in {n["id"] for n in stored_graph(running_app, workflow_id)["nodes"]}

    # A node taken away again leaves no panel behind for it.
    drop_at(page, "flow.wait", 0.3, 0.7)
    expect(page.locator("#parameters-panel")).to_contain_text("flow.wait")
    page.locator("#undo").click()  # the node is still selected when it goes
    expect(node(page, "wait")).to_have_count(0)
    expect(page.locator("#parameters-panel")).to_have_count(0)
    expect(page.locator("#parameters-empty")).to_be_visible()
    console.assert_clean()


def test_panels_fold_away_and_the_minimap_never_covers_nodes_after_a_fit(page: Page, running_app: RunningApp):
    console = ConsoleWatch(page)
    workflow_id, _name = new_workflow(running_app, "Room", grid_graph())
    open_editor(page, workflow_id)
    page.set_viewport_size(LAPTOP)
    canvas = page.locator("#canvas")
    expect(page.locator(".react-flow__minimap")).to_be_visible()
    fit_and_settle(page)
    assert nodes_under_the_minimap(page) == [] and nodes_outside_the_canvas(page) == []
    narrow = canvas.bounding_box()["width"]

    page.locator("#toggle-palette").click()
    expect(page.locator("#palette-panel")).to_be_hidden()
    page.locator("#toggle-side-panel").click()
    expect(page.locator("#side-panel")).to_be_hidden()
    assert canvas.bounding_box()["width"] > narrow + 500  # the canvas took both panels' room
    fit_and_settle(page)
    assert nodes_under_the_minimap(page) == [] and nodes_outside_the_canvas(page) == []

    # The minimap can be hidden and shown again.
    page.locator(".poweron-minimap-toggle").click()
    expect(page.locator(".react-flow__minimap")).to_have_count(0)
    page.locator(".poweron-minimap-toggle").click()
    expect(page.locator(".react-flow__minimap")).to_be_visible()

    page.locator("#toggle-palette").click()
    page.locator("#toggle-side-panel").click()
    expect(page.locator("#palette-panel")).to_be_visible()
    expect(page.locator("#side-panel")).to_be_visible()
    fit_and_settle(page)
    assert nodes_under_the_minimap(page) == []
    console.assert_clean()


@pytest.mark.parametrize("viewport", [LAPTOP, DESKTOP], ids=["1366x768", "1920x1080"])
def test_every_toolbar_button_is_on_screen_and_clickable(page: Page, running_app: RunningApp, viewport):
    console = ConsoleWatch(page)
    workflow_id, _name = new_workflow(running_app, "A workflow with a rather long name for the toolbar")
    open_editor(page, workflow_id)
    page.set_viewport_size(viewport)
    expect(page.locator("#test-run")).to_be_visible()
    assert unreachable_buttons(page) == []
    page.locator("#toggle-palette").click()
    page.locator("#toggle-side-panel").click()
    expect(page.locator("#side-panel")).to_be_hidden()
    assert unreachable_buttons(page) == []
    for button in ("#undo", "#redo", "#test-run", "#step-run", "#export-graph", "#toggle-palette",
                   "#toggle-side-panel"):
        expect(page.locator(button)).to_be_in_viewport()
    console.assert_clean()


# --- item 8: no false states; "Inactive" explains itself -----------------------------------------


def test_a_refused_change_is_never_called_saved_and_inactive_explains_itself(page: Page, running_app: RunningApp):
    console = ConsoleWatch(page)
    graph = {"nodes": [{"id": "sched", "type": "trigger.schedule", "parameters": {"cron": "0 7 * * *"},
                        "position": {"x": 0, "y": 0}}], "edges": []}
    workflow_id, _name = new_workflow(running_app, "No false states", graph)
    open_editor(page, workflow_id)
    select(page, "sched")
    set_field(page, "cron", "every morning")
    expect(page.locator("#editor-error")).to_contain_text("Not saved")
    expect(saved(page)).to_have_attribute("data-state", "refused")
    expect(saved(page)).not_to_contain_text("All changes saved")
    expect(page.locator("#param-cron")).to_have_value("0 7 * * *")
    set_field(page, "cron", "0 9 * * *")
    expect(saved(page)).to_have_attribute("data-state", "saved")
    expect(page.locator("#editor-error")).to_have_count(0)

    page.locator("#tab-versions").click()
    expect(page.locator("#workflow-active-label")).to_have_text("Inactive")
    expect(page.locator("#active-explained")).to_contain_text("schedules, webhooks, events and forms do not start")
    page.locator("#activate-workflow").click()
    expect(page.locator("#workflow-active-label")).to_have_text("Active")
    expect(page.locator("#activate-workflow")).to_have_count(0)
    headers, instance = api(running_app)
    detail = httpx.get(f"{running_app.api_url}/api/graphicalEditor/{instance}/workflows/{workflow_id}",
                       headers=headers).json()
    assert detail["active"] is True
    console.assert_clean()


# --- item 9: the backend log ---------------------------------------------------------------------


def test_the_editor_uses_no_deprecated_router_data(page: Page, running_app: RunningApp):
    workflow_id, _name = new_workflow(running_app, "Routed")
    open_editor(page, workflow_id)
    page.goto(f"/editor/{workflow_id}?run=unknown-run")  # the address's run parameter is read too
    expect(page.locator("#editor-error")).to_contain_text("not found")
    text = " ".join(running_app.log.read_text().split())
    deprecated = re.findall(r"RouterData\.page has been deprecated.*?\(([^)]*)\)", text)
    assert [where for where in deprecated if "state/editor" in where] == []
