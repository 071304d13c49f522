"""Starts the real app (`reflex run`, real Vite frontend, real backend) and a real Chromium.

The app gets its own ports, a temp data folder and SQLite database, and a known admin
password; it is stopped with its whole process group afterwards. Single sign-on is on: an
OpenID Connect provider (tests/oidc_provider.py) runs on 127.0.0.1 for as long as the app does,
and new SSO users join the mandate `SSO_MANDATE` (which the tests create) with role `user`.
The app's AI provider is a scripted OpenAI-compatible server (tests/ai_server.py) on 127.0.0.1,
`running_app.ai`: tests queue the model's replies on it. A real IMAP server (pymap) and an SMTP
server (aiosmtpd) of tests/mail_servers.py run as long as the app does (`running_app.imap`,
`running_app.smtp`; demouser/demopass, mail put in with `imap.deliver(raw)`): connections made in
the browser reach them on 127.0.0.1 like any mailbox, with no setting of the app. Microsoft 365 is
the identity platform + Graph stand-in of tests/msgraph_server.py (`running_app.graph`), which
POWERON_MSFT_* point the app at.
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
from playwright.sync_api import Browser, Page, expect, sync_playwright

from tests.ai_server import ScriptedAiServer
from tests.bexio_server import BexioServer
from tests.bexio_server import serve as serve_bexio
from tests.clickup_server import ClickUpServer
from tests.clickup_server import serve as serve_clickup
from tests.jira_server import JiraServer, serve_jira
from tests.mail_servers import ImapServer, SmtpServer, imap_server, smtp_server
from tests.msgraph_server import MsGraph
from tests.msgraph_server import serve as serve_graph
from tests.oidc_provider import Provider, serve

PROJECT_ROOT = Path(__file__).resolve().parents[2]
CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
]
ADMIN_PASSWORD = "e2e-admin-pass"
START_TIMEOUT = 600  # the first start installs the frontend from the npm registry
# How long an `expect(...)` waits (Playwright's default is 5 s): the dev server compiles a page's
# modules on its first visit, which takes several seconds on a loaded machine (make test runs the
# browser tests beside the backend tests). Polls end as soon as the condition holds.
EXPECT_TIMEOUT_MS = 20_000
expect.set_options(timeout=EXPECT_TIMEOUT_MS)
OIDC_CLIENT_ID = "poweron-e2e"
OIDC_CLIENT_SECRET = "e2e-sso-secret"
SSO_MANDATE = "SSO Staff"  # POWERON_OIDC_MANDATE of the app; not there at start
MSFT_CLIENT_ID = "poweron-e2e-msft"
MSFT_CLIENT_SECRET = "e2e~msft.secret"


@dataclass
class RunningApp:
    ui_url: str
    api_url: str
    log: Path
    oidc: Provider  # the app's identity provider
    ai: ScriptedAiServer  # the app's AI provider (OPENAI_BASE_URL)
    imap: ImapServer  # a mailbox the app's connections can reach (pymap)
    smtp: SmtpServer  # its SMTP server (aiosmtpd, keeps what it receives)
    graph: MsGraph  # the Microsoft 365 identity platform + Graph stand-in
    clickup: ClickUpServer  # ClickUp's API v2 and consent page
    jira: JiraServer  # a Jira Cloud site and Atlassian's identity service
    bexio: BexioServer | None = None  # Bexio's API (the Trustee's sync target; POWERON_BEXIO_URL); what it received

    def mail_settings(self, password: str | None = None) -> dict[str, object]:
        """The settings of an `imap` connection to the test mailbox (no TLS on 127.0.0.1)."""
        return {"host": self.imap.host, "port": self.imap.port, "security": "none", "username": self.imap.username,
                "password": self.imap.password if password is None else password, "smtpHost": self.smtp.host,
                "smtpPort": self.smtp.port, "smtpSecurity": "none"}


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _node_bin() -> str:
    return subprocess.run(
        [str(PROJECT_ROOT / "scripts" / "ensure_node.sh")], capture_output=True, text=True, check=True
    ).stdout.strip()


def wait_until_serving(process: subprocess.Popen, api_url: str, login_url: str, log: Path, what: str,
                       timeout: float = START_TIMEOUT) -> None:
    """Wait until `process` answers /api/health on `api_url` and the login page at `login_url`; fail with
    the end of its `log` when it exits first or takes longer than `timeout` seconds."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"{what} exited with {process.returncode}:\n{log.read_text()[-4000:]}")
        try:
            health = httpx.get(f"{api_url}/api/health", timeout=2)
            page = httpx.get(login_url, timeout=5)
            if health.status_code == 200 and page.status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(1)
    raise RuntimeError(f"{what} did not serve {api_url} in {timeout}s:\n{log.read_text()[-4000:]}")


def _msft_env(graph: MsGraph) -> dict[str, str]:
    """POWERON_MSFT_* pointing the app at the Microsoft 365 stand-in."""
    return {"POWERON_MSFT_TENANT": graph.tenant, "POWERON_MSFT_CLIENT_ID": MSFT_CLIENT_ID,
            "POWERON_MSFT_CLIENT_SECRET": MSFT_CLIENT_SECRET, "POWERON_MSFT_AUTHORITY": graph.url,
            "POWERON_MSFT_GRAPH_URL": graph.url}


def _connector_env(clickup: ClickUpServer, jira: JiraServer) -> dict[str, str]:
    """POWERON_CLICKUP_*, POWERON_JIRA_* and POWERON_ATLASSIAN_* pointing the app at the stand-ins."""
    return {"POWERON_CLICKUP_API_URL": clickup.api_url, "POWERON_CLICKUP_AUTH_URL": clickup.auth_url,
            "POWERON_CLICKUP_CLIENT_ID": clickup.client_id, "POWERON_CLICKUP_CLIENT_SECRET": clickup.client_secret,
            "POWERON_JIRA_CLIENT_ID": jira.client_id, "POWERON_JIRA_CLIENT_SECRET": jira.client_secret,
            "POWERON_ATLASSIAN_AUTH_URL": jira.url, "POWERON_ATLASSIAN_API_URL": jira.url}


def _app_env(ui_url: str, api_url: str, data: Path, no_reload: Path, provider: Provider,
             ai: ScriptedAiServer, graph: MsGraph, clickup: ClickUpServer, jira: JiraServer,
             smtp: SmtpServer) -> dict[str, str]:
    prefixes = ("POWERON_MSFT_", "POWERON_CLICKUP_", "POWERON_JIRA_", "POWERON_ATLASSIAN_")
    environment = {k: v for k, v in os.environ.items()
                   if k != "POWERON_AI_PROVIDERS" and not k.startswith(prefixes)}
    return {
        **environment,
        "PATH": f"{_node_bin()}:{os.environ['PATH']}",
        "REFLEX_USE_NPM": "1",
        "REFLEX_TELEMETRY_ENABLED": "false",
        "REFLEX_API_URL": api_url,
        "REFLEX_DEPLOY_URL": ui_url,
        "POWERON_DATA_DIR": str(data),
        "POWERON_DB_URL": f"sqlite:///{data / 'e2e.db'}",
        "POWERON_ADMIN_USER": "admin",
        "POWERON_ADMIN_PASSWORD": ADMIN_PASSWORD,
        "POWERON_OIDC_ISSUER": provider.issuer,
        "POWERON_OIDC_CLIENT_ID": provider.client_id,
        "POWERON_OIDC_CLIENT_SECRET": provider.client_secret,
        "POWERON_OIDC_MANDATE": SSO_MANDATE,
        "POWERON_OIDC_ROLES": "user",
        "POWERON_UI_URL": ui_url,
        "POWERON_API_URL": api_url,
        "OPENAI_BASE_URL": ai.base_url,
        "OPENAI_API_KEY": ai.api_key,
        "POWERON_AI_MODEL": "test-model",
        "POWERON_AI_TIMEOUT_SECONDS": "30",  # a stopped run's hung model call ends within the suite
        # Task and failure mails go to the suite's SMTP server (running_app.smtp.received).
        "POWERON_SMTP_URL": f"smtp://{smtp.username}:{smtp.password}@{smtp.host}:{smtp.port}",
        "POWERON_SMTP_FROM": "PowerOn <poweron@example.com>",
        # Editing tests or app code while the suite runs must not restart the app's backend
        # mid-test (that loses its state): it watches an empty folder only, like `make run`.
        "REFLEX_HOT_RELOAD_OVERRIDE_PATHS": str(no_reload),
        **_msft_env(graph),
        **_connector_env(clickup, jira),
    }


@pytest.fixture(scope="session")
def running_app(tmp_path_factory) -> Iterator[RunningApp]:
    ui_port, api_port = _free_port(), _free_port()
    ui_url, api_url = f"http://localhost:{ui_port}", f"http://localhost:{api_port}"
    data = tmp_path_factory.mktemp("app-data")
    no_reload = tmp_path_factory.mktemp("no-reload")
    log = data / "reflex.log"
    registered = Provider(client_id=OIDC_CLIENT_ID, client_secret=OIDC_CLIENT_SECRET,
                          redirect_uri=f"{api_url}/api/auth/oidc/callback")
    ai = ScriptedAiServer().start()
    msft_callback = f"{api_url}/api/connections/oauth/msft/callback"
    stand_in = serve_graph(MsGraph(MSFT_CLIENT_ID, MSFT_CLIENT_SECRET, msft_callback))
    clickup_stand_in = serve_clickup(ClickUpServer(redirect_uri=f"{api_url}/api/connections/oauth/clickup/callback"))
    jira_stand_in = serve_jira(JiraServer(redirect_uri=f"{api_url}/api/connections/oauth/jira/callback"))
    bexio_stand_in = serve_bexio(BexioServer())
    bexio = bexio_stand_in.__enter__()
    os.environ["POWERON_BEXIO_URL"] = bexio.url  # the app's environment is copied from this process's
    with serve(registered) as provider, imap_server() as imap, smtp_server() as smtp, stand_in as graph, \
            clickup_stand_in as clickup, jira_stand_in as jira:
        with log.open("w") as out:
            process = subprocess.Popen(
                [str(PROJECT_ROOT / ".venv" / "bin" / "reflex"), "run",
                 "--frontend-port", str(ui_port), "--backend-port", str(api_port)],
                cwd=PROJECT_ROOT,
                env=_app_env(ui_url, api_url, data, no_reload, provider, ai, graph, clickup, jira, smtp),
                stdout=out, stderr=subprocess.STDOUT, start_new_session=True,
            )
        app = RunningApp(ui_url, api_url, log, provider, ai, imap, smtp, graph, clickup, jira)
        app.bexio = bexio
        try:
            wait_until_serving(process, app.api_url, f"{app.ui_url}/login", app.log, "reflex run")
            yield app
        finally:
            os.killpg(process.pid, signal.SIGTERM)
            try:
                process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                os.killpg(process.pid, signal.SIGKILL)
            ai.stop()
            os.environ.pop("POWERON_BEXIO_URL", None)
            bexio_stand_in.__exit__(None, None, None)


@pytest.fixture
def oidc_provider(running_app: RunningApp) -> Iterator[Provider]:
    """The app's identity provider with its defaults (user Jane Doe), reset again afterwards."""
    running_app.oidc.reset()
    yield running_app.oidc
    running_app.oidc.reset()


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
