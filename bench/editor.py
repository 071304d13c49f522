"""Graphical Editor benchmark (issue 9, item 9): a 200-node graph in the real editor.

Starts the real app (`reflex run`, the Vite frontend, a temporary SQLite database) and a real
headless Chromium, creates a workflow of 200 nodes (a chain in a 20 × 10 grid) through the REST
API and measures, in the browser:

- open: from navigating to /editor/<id> until all 200 nodes are drawn and the page says saved
  (median of OPENS loads);
- move, UI latency: from a pointer move during a node drag until the node's position on screen
  changed (measured in the page: pointermove timestamp → the node's transform mutation);
- move, saved: from releasing the dragged node until the draft in the database holds the new
  position (polled over the REST API), i.e. the settled event's round trip and the draft write.

Targets: open under 2 s; under 100 ms of UI latency for a move.
Usage: .venv/bin/python bench/editor.py
"""

from __future__ import annotations

import os
import signal
import statistics
import subprocess
import sys
import time

from support import PROJECT_ROOT, temporary_app

ROOT = temporary_app("editor")
sys.path.insert(0, str(PROJECT_ROOT))

import httpx  # noqa: E402
from playwright.sync_api import sync_playwright  # noqa: E402

from tests.e2e.conftest import CHROMIUM, CHROMIUM_ARGS, RunningApp, _free_port, _node_bin, _wait_until_up  # noqa: E402

NODES = 200
OPENS = 5
MOVES = 5
PASSWORD = os.environ["POWERON_ADMIN_PASSWORD"]


def big_graph() -> dict:
    nodes = [{"id": "start", "type": "trigger.manual", "label": "Start", "position": {"x": 0, "y": 0}}]
    for index in range(1, NODES):
        nodes.append({"id": f"n{index}", "type": "flow.merge", "label": f"Step {index}",
                      "position": {"x": (index % 20) * 260, "y": (index // 20) * 160}})
    edges = [{"source": nodes[i]["id"], "target": nodes[i + 1]["id"]} for i in range(NODES - 1)]
    return {"nodes": nodes, "edges": edges}


def start_app() -> tuple[RunningApp, subprocess.Popen]:
    ui_port, api_port = _free_port(), _free_port()
    app = RunningApp(f"http://localhost:{ui_port}", f"http://localhost:{api_port}", ROOT / "reflex.log", None, None)
    no_reload = ROOT / "no-reload"
    no_reload.mkdir()
    env = {**os.environ, "PATH": f"{_node_bin()}:{os.environ['PATH']}", "REFLEX_USE_NPM": "1",
           "REFLEX_TELEMETRY_ENABLED": "false", "REFLEX_API_URL": app.api_url, "REFLEX_DEPLOY_URL": app.ui_url,
           "POWERON_UI_URL": app.ui_url, "POWERON_API_URL": app.api_url,
           "REFLEX_HOT_RELOAD_OVERRIDE_PATHS": str(no_reload)}
    with app.log.open("w") as out:
        process = subprocess.Popen(
            [str(PROJECT_ROOT / ".venv" / "bin" / "reflex"), "run", "--frontend-port", str(ui_port),
             "--backend-port", str(api_port)],
            cwd=PROJECT_ROOT, env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
    _wait_until_up(app, process)
    return app, process


WATCH_MOVE = """(nodeId) => {
  const element = document.querySelector(`.react-flow__node[data-id="${nodeId}"]`);
  window.__moves = [];
  let lastMove = 0;
  document.addEventListener("pointermove", () => { lastMove = performance.now(); }, true);
  new MutationObserver(() => { if (lastMove) window.__moves.push(performance.now() - lastMove); lastMove = 0; })
    .observe(element, { attributes: true, attributeFilter: ["style"] });
}"""


def main() -> None:
    app, process = start_app()
    try:
        token = httpx.post(f"{app.api_url}/api/auth/login", json={"username": "admin", "password": PASSWORD}).json()
        headers = {"Authorization": f"Bearer {token['token']}"}
        me = httpx.get(f"{app.api_url}/api/me", headers=headers).json()
        instance = next(i["id"] for i in me["instances"] if i["featureCode"] == "graphicalEditor")
        base = f"{app.api_url}/api/graphicalEditor/{instance}"
        workflow = httpx.post(f"{base}/workflows", headers=headers,
                              json={"name": "Bench 200 nodes", "graph": big_graph()}, timeout=30).json()
        with sync_playwright() as playwright:
            browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
            page = browser.new_page(viewport={"width": 1700, "height": 1000}, base_url=app.ui_url)
            page.set_default_timeout(60_000)
            page.goto("/login")
            page.locator("#login-username").fill("admin")
            page.locator("#login-password").fill(PASSWORD)
            page.locator("#login-submit").click()
            page.wait_for_url("**/workflows")
            page.goto(f"/editor/{workflow['id']}")  # warm-up: Vite compiles the page on first use
            page.locator(".poweron-node").nth(NODES - 1).wait_for()

            opens = []
            for _ in range(OPENS):
                page.goto("/workflows")
                page.locator("#page-title").wait_for()
                started = time.perf_counter()
                page.goto(f"/editor/{workflow['id']}")
                page.locator(".poweron-node").nth(NODES - 1).wait_for()
                page.locator('#save-status[data-state="saved"]').wait_for()
                opens.append((time.perf_counter() - started) * 1000)

            ui_latency, saved_after = [], []
            target = "n45"
            page.evaluate(WATCH_MOVE, target)
            for attempt in range(MOVES):
                box = page.locator(f'.react-flow__node[data-id="{target}"]').bounding_box()
                x, y = box["x"] + box["width"] / 2, box["y"] + box["height"] / 2
                page.mouse.move(x, y)
                page.mouse.down()
                for step in range(1, 11):
                    page.mouse.move(x + step * 3, y + step * 2)
                before = httpx.get(f"{base}/workflows/{workflow['id']}", headers=headers).json()["graph"]
                old = next(n["position"] for n in before["nodes"] if n["id"] == target)
                released = time.perf_counter()
                page.mouse.up()
                while True:
                    graph = httpx.get(f"{base}/workflows/{workflow['id']}", headers=headers).json()["graph"]
                    if next(n["position"] for n in graph["nodes"] if n["id"] == target) != old:
                        break
                    if time.perf_counter() - released > 30:
                        raise RuntimeError(f"move {attempt + 1} was not saved within 30 s")
                saved_after.append((time.perf_counter() - released) * 1000)
            ui_latency = page.evaluate("window.__moves")
            browser.close()
    finally:
        os.killpg(process.pid, signal.SIGTERM)
        try:
            process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)

    def figures(values: list[float]) -> str:
        return (f"median {statistics.median(values):.0f} ms, min {min(values):.0f} ms, max {max(values):.0f} ms "
                f"({len(values)} samples)")

    print(f"editor with {NODES} nodes")
    print(f"  open (navigation → all nodes drawn, saved): {figures(opens)}   target < 2000 ms")
    print(f"  move, UI latency (pointer move → node moved on screen): {figures(ui_latency)}   target < 100 ms")
    print(f"  move, saved (drag stop → draft stored in the database): {figures(saved_after)}")


if __name__ == "__main__":
    main()
