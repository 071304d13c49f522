"""`make run` in the browser (issue 18, items 3 and 4): Reflex's production build serves the UI and the
API together on one port, and with PostgreSQL and Redis several backend worker processes serve it.

Each test starts the app with `make run PORT=<free port>` itself, from a copy of this checkout's files
(`checkout`): the copy has its own `.web/` (the dev app the other browser tests run keeps this
checkout's `.web/`; two Reflex apps must never share one) and its own temp data folder and database,
and shares `.venv`, `.tools` and the set-up stamps. The first start installs the frontend into the
copy's `.web/` (npm, from its cache); every start builds the production bundle (Vite, 10 s or more).
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest
from playwright.sync_api import Browser, Page, expect

from tests.clickup_server import ClickUpServer
from tests.clickup_server import serve as serve_clickup
from tests.e2e.conftest import ADMIN_PASSWORD, PROJECT_ROOT, _free_port, wait_until_serving
from tests.e2e.test_editor_ui import new_workflow, select
from tests.e2e.test_workflows_ui import sign_in

pytestmark = pytest.mark.e2e

PASSWORD = ADMIN_PASSWORD  # the e2e helpers (new_workflow) sign in with it
START_TIMEOUT = 600  # the copy's first start installs the frontend (npm) and builds it
# Not copied: the repository, the shared tools (linked instead), what a start makes or the tests leave.
NOT_COPIED = {".git", ".venv", ".tools", ".web", ".states", ".stamps", "data", "node_modules", "__pycache__",
              ".pytest_cache", ".ruff_cache", "test-results", "reflex.lock", "external", ".env"}


@dataclass
class ProdApp:
    """An app started by `make run`: UI and API on `url`."""

    url: str
    log: Path
    process: subprocess.Popen

    @property
    def api_url(self) -> str:
        """The API is on the same port (the e2e helpers ask for `api_url`)."""
        return self.url

    def health(self) -> dict:
        """/api/health over a new connection (so any backend worker may answer)."""
        with httpx.Client(timeout=10) as client:
            answer = client.get(f"{self.url}/api/health")
        assert answer.status_code == 200, answer.text
        return answer.json()


@pytest.fixture(scope="module")
def checkout(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """This checkout's files in a temp folder, with .venv and .tools linked and the set-up stamps copied
    (newer than the files, so `make run` skips the finished set-up steps as it does here)."""
    copy = tmp_path_factory.mktemp("prod") / "checkout"
    shutil.copytree(PROJECT_ROOT, copy, symlinks=True, ignore=lambda _dir, names: NOT_COPIED & set(names))
    for shared in (".venv", ".tools"):
        if (PROJECT_ROOT / shared).exists():
            (copy / shared).symlink_to((PROJECT_ROOT / shared).resolve())
    if (PROJECT_ROOT / ".stamps").is_dir():
        shutil.copytree(PROJECT_ROOT / ".stamps", copy / ".stamps")
        for stamp in (copy / ".stamps").iterdir():
            stamp.touch()
    return copy


def _app_env(data: Path, extra: dict[str, str]) -> dict[str, str]:
    """The environment of a user typing `make run`: no POWERON_/REFLEX_ settings but the test's own
    (so the Makefile's URL defaults apply), and not inside this test run's make."""
    kept = {name: value for name, value in os.environ.items()
            if not name.startswith(("POWERON_", "REFLEX_", "GRANIAN_", "MAKE", "MFLAGS"))}
    return {**kept, "POWERON_DATA_DIR": str(data), "POWERON_DB_URL": f"sqlite:///{data / 'prod.db'}",
            "POWERON_ADMIN_USER": "admin", "POWERON_ADMIN_PASSWORD": PASSWORD, **extra}


def _wait_until_up(app: ProdApp) -> None:
    wait_until_serving(app.process, app.url, f"{app.url}/login/", app.log, "make run", START_TIMEOUT)


@pytest.fixture
def make_run(checkout: Path, tmp_path: Path) -> Iterator:
    """Start `make run PORT=<free port>` in the copy with extra settings; stopped (SIGTERM to make, as
    Ctrl-C would) afterwards."""
    started: list[ProdApp] = []

    def start(**extra: str) -> ProdApp:
        port = _free_port()
        log = tmp_path / "make-run.log"
        with log.open("w") as out:
            process = subprocess.Popen(["make", "run", f"PORT={port}"], cwd=checkout,
                                       env=_app_env(tmp_path, extra), stdout=out, stderr=subprocess.STDOUT,
                                       start_new_session=True)
        app = ProdApp(f"http://localhost:{port}", log, process)
        started.append(app)
        _wait_until_up(app)
        return app

    yield start
    for app in started:
        os.killpg(app.process.pid, signal.SIGTERM)
        try:
            app.process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(app.process.pid, signal.SIGKILL)


@pytest.fixture
def open_page(browser: Browser) -> Iterator:
    """A new Chromium page on an app (its URL as base URL), closed afterwards."""
    contexts = []

    def open_on(app: ProdApp) -> Page:
        context = browser.new_context(base_url=app.url, viewport={"width": 1366, "height": 768})
        context.set_default_timeout(30_000)
        contexts.append(context)
        return context.new_page()

    yield open_on
    for context in contexts:
        context.close()


def _hook_graph() -> dict:
    return {"nodes": [{"id": "hook", "type": "trigger.webhook", "parameters": {"path": "orders", "method": "POST"},
                       "position": {"x": 0, "y": 0}}], "edges": []}


def test_make_run_serves_the_production_build_and_the_api_on_one_port(make_run, open_page):
    with serve_clickup(ClickUpServer()) as clickup:
        app = make_run(POWERON_CLICKUP_API_URL=clickup.api_url, POWERON_CLICKUP_AUTH_URL=clickup.auth_url,
                       POWERON_CLICKUP_CLIENT_ID=clickup.client_id,
                       POWERON_CLICKUP_CLIENT_SECRET=clickup.client_secret)
        clickup.redirect_uri = f"{app.url}/api/connections/oauth/clickup/callback"
        page = open_page(app)
        _serves_ui_and_api(app, page)
        # A consent leaves the app for the provider and comes back, though its start is on the UI's host.
        page.locator("#nav-connections").click()
        page.locator("#connect-clickup").click()
        page.get_by_role("button", name="Connect Workspace").click()
        expect(page).to_have_url(re.compile(r"/connections/?\?connected="))
        expect(page.locator(".connection-row .connection-status")).to_have_attribute("data-status", "active")


def _serves_ui_and_api(app: ProdApp, page: Page) -> None:
    assert f"serving UI and API on {app.url}" in app.log.read_text()  # what make run prints
    assert app.health()["status"] == "ok"
    login_html = httpx.get(f"{app.url}/login/").text
    assert "/@vite/client" not in login_html and re.search(r"/assets/[^\"']+\.js", login_html)  # the built bundle

    sign_in(page, "admin", PASSWORD)
    expect(page).to_have_url(re.compile(r"/workflows$"))
    workflow_id, _name = new_workflow(app, "Prod", _hook_graph())  # through the API on the same port

    page.locator("#nav-workspace").click()
    expect(page).to_have_url(re.compile(r"/workspace$"))
    expect(page.locator("#page-title")).to_have_text("Workspace")
    page.locator("#nav-editor").click()  # the workflow changed last
    expect(page).to_have_url(re.compile(rf"/editor/{workflow_id}$"))
    select(page, "hook")  # the webhook address the editor shows is on the one port, and answers there
    expect(page.locator("#webhook-url")).to_have_text(f"{app.url}/api/hooks/{workflow_id}/orders")
    unpublished = httpx.post(f"{app.url}/api/hooks/{workflow_id}/orders", json={})
    assert unpublished.status_code == 404 and "published" in unpublished.json()["detail"]
    page.locator("#nav-monitor").click()
    expect(page).to_have_url(re.compile(r"/monitor$"))
    expect(page.locator("#page-title")).to_have_text("Monitor")
    page.reload()  # a page loaded directly, not by navigation, comes from the build too
    expect(page.locator("#page-title")).to_have_text("Monitor")


def _lease(db_url: str) -> tuple[str, object] | None:
    """(holder, renewed_at) of the scheduler lease, or None before anybody took it."""
    import psycopg

    with psycopg.connect(db_url.replace("postgresql+psycopg://", "postgresql://")) as connection:
        rows = connection.execute("SELECT holder, renewed_at FROM scheduler_lease").fetchall()
    assert len(rows) <= 1
    return (rows[0][0], rows[0][1]) if rows else None


def _pids_answering(app: ProdApp, wanted: int, tries: int = 200) -> set[int]:
    """The pids /api/health names over fresh connections, until `wanted` different ones answered."""
    pids: set[int] = set()
    for _ in range(tries):
        pids.add(app.health()["pid"])
        if len(pids) >= wanted:
            break
    return pids


def test_two_backend_workers_share_ui_state_through_redis_and_one_scheduler_leads(
        make_run, open_page, postgres_server, redis_url: str):
    postgres_server.execute('CREATE DATABASE "poweron_prod_mode"')
    db_url = postgres_server.url("poweron_prod_mode")
    app = make_run(POWERON_DB_URL=db_url, REFLEX_REDIS_URL=redis_url, GRANIAN_WORKERS="2",
                   POWERON_SCHEDULER_LEASE_SECONDS="3", POWERON_SCHEDULER_STARTUP_DELAY_SECONDS="0")
    workers = _pids_answering(app, wanted=2)
    assert len(workers) == 2, f"only {workers} answered"
    assert "serving with one backend worker" not in app.log.read_text()

    page = open_page(app)
    sign_in(page, "admin", PASSWORD)
    expect(page).to_have_url(re.compile(r"/workflows$"))
    for route, title in (("/workspace", "Workspace"), ("/monitor", "Monitor"), ("/workflows", "Workflows"),
                         ("/connections", "Connections"), ("/monitor", "Monitor")):
        page.goto(route)  # a new page load: a new websocket, to whichever worker takes it
        expect(page.locator("#page-title")).to_have_text(title)
        expect(page).to_have_url(re.compile(rf"{route}/?$"))  # still signed in (a page loaded directly ends in /)
    import redis

    assert redis.Redis.from_url(redis_url).dbsize() > 0  # the UI state lives in Redis, not in a worker

    deadline = time.monotonic() + 30
    seen: list[tuple[str, object]] = []
    while time.monotonic() < deadline and len({renewed for _holder, renewed in seen}) < 3:
        if (lease := _lease(db_url)) is not None:
            seen.append(lease)
        time.sleep(0.5)
    holders = {holder for holder, _renewed in seen}
    assert len({renewed for _holder, renewed in seen}) >= 3, "the scheduler lease was not renewed"
    assert len(holders) == 1, f"the lease changed hands: {holders}"
    assert int(holders.pop().split(":")[1]) in workers  # held by one of the backend workers
