"""Starts the real app (`reflex run`, real Vite frontend, real backend) and a real Chromium.

The app gets its own ports, a temp data folder and SQLite database, and a known admin
password; it is stopped with its whole process group afterwards.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest
from playwright.sync_api import Browser, Page, sync_playwright

PROJECT_ROOT = Path(__file__).resolve().parents[2]
CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
]
ADMIN_PASSWORD = "e2e-admin-pass"
START_TIMEOUT = 600  # the first start installs the frontend from the npm registry


@dataclass
class RunningApp:
    ui_url: str
    api_url: str
    log: Path


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _node_bin() -> str:
    return subprocess.run(
        [str(PROJECT_ROOT / "scripts" / "ensure_node.sh")], capture_output=True, text=True, check=True
    ).stdout.strip()


def _wait_until_up(app: RunningApp, process: subprocess.Popen) -> None:
    deadline = time.monotonic() + START_TIMEOUT
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"reflex run exited with {process.returncode}:\n{app.log.read_text()[-4000:]}")
        try:
            health = httpx.get(f"{app.api_url}/api/health", timeout=2)
            page = httpx.get(f"{app.ui_url}/login", timeout=5)
            if health.status_code == 200 and page.status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(1)
    raise RuntimeError(f"app did not come up in {START_TIMEOUT}s:\n{app.log.read_text()[-4000:]}")


@pytest.fixture(scope="session")
def running_app(tmp_path_factory) -> Iterator[RunningApp]:
    ui_port, api_port = _free_port(), _free_port()
    data = tmp_path_factory.mktemp("app-data")
    log = data / "reflex.log"
    env = {
        **os.environ,
        "PATH": f"{_node_bin()}:{os.environ['PATH']}",
        "REFLEX_USE_NPM": "1",
        "REFLEX_TELEMETRY_ENABLED": "false",
        "REFLEX_API_URL": f"http://localhost:{api_port}",
        "REFLEX_DEPLOY_URL": f"http://localhost:{ui_port}",
        "POWERON_DATA_DIR": str(data),
        "POWERON_DB_URL": f"sqlite:///{data / 'e2e.db'}",
        "POWERON_ADMIN_USER": "admin",
        "POWERON_ADMIN_PASSWORD": ADMIN_PASSWORD,
        # Editing tests while the suite runs must not restart the app's backend mid-test.
        "REFLEX_HOT_RELOAD_EXCLUDE_PATHS": str(PROJECT_ROOT / "tests"),
    }
    with log.open("w") as out:
        process = subprocess.Popen(
            [str(PROJECT_ROOT / ".venv" / "bin" / "reflex"), "run",
             "--frontend-port", str(ui_port), "--backend-port", str(api_port)],
            cwd=PROJECT_ROOT, env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True,
        )
    app = RunningApp(f"http://localhost:{ui_port}", f"http://localhost:{api_port}", log)
    try:
        _wait_until_up(app, process)
        yield app
    finally:
        os.killpg(process.pid, signal.SIGTERM)
        try:
            process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)


@pytest.fixture(scope="session")
def browser() -> Iterator[Browser]:
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        yield browser
        browser.close()


@pytest.fixture
def page(browser: Browser, running_app: RunningApp) -> Iterator[Page]:
    context = browser.new_context(base_url=running_app.ui_url)
    context.set_default_timeout(30_000)
    page = context.new_page()
    yield page
    context.close()
