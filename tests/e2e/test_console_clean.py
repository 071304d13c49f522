"""A clean browser console on every page (issue 16, item 9).

Every route the app registers (read from poweron_app/poweron_app.py, so a new page is walked
without editing this test; a dynamic route gets a real workflow: the admin's for the editor, an
active published form for /forms/…) is opened in real Chromium, signed out and then signed in as
the administrator. Every console message and uncaught page error is collected; the test fails on
errors, on warnings (React's hydration mismatches, "Warning: …", missing list keys, …) and on any
message that reads like a React warning whatever its level, naming page and message.
"""

from __future__ import annotations

import ast
import re
import uuid
from dataclasses import dataclass, field

from playwright.sync_api import Page, expect

from tests.e2e.conftest import ADMIN_PASSWORD, PROJECT_ROOT, RunningApp
from tests.e2e.test_editor_ui import new_workflow
from tests.e2e.test_forms_ui import publish_a_form
from tests.e2e.test_workflows_ui import sign_in

pytestmark = __import__("pytest").mark.e2e

APP_MODULE = PROJECT_ROOT / "poweron_app" / "poweron_app.py"
# What every page shows once it has loaded (signed in: the shell's title; else sign-in, form or SSO),
# with no spinner left and the editor's canvas (a client-only component) drawn where there is one.
LOADED = ("() => document.querySelector("
          "'#page-title, #login-username, #form-title, #form-unavailable, #sso-error, #link-state')"
          " && !document.querySelector('.rt-Spinner')"
          " && (!document.querySelector('#canvas') || document.querySelector('#canvas .react-flow__pane'))")
QUIET_MS = 1_500  # a page has settled when its console stayed silent this long (some warn from a timer)
SETTLE_MS = 15_000
# Messages that read like React warnings whatever console level they come with.
REACT_WARNING = re.compile(r"^Warning: |hydration|unique \"key\" prop|Each child in a list|did not match|"
                           r"Cannot update a component|findDOMNode|is deprecated", re.IGNORECASE)
FAILING_TYPES = {"error", "warning", "assert"}


@dataclass
class Console:
    """The console messages and page errors of one page, by the path they appeared on."""

    messages: list[tuple[str, str, str]] = field(default_factory=list)  # (path, type, text)
    path: str = ""

    def watch(self, page: Page) -> None:
        page.on("console", lambda message: self.messages.append((self.path, message.type, message.text)))
        page.on("pageerror", lambda error: self.messages.append((self.path, "pageerror", str(error))))

    def settle(self, page: Page) -> None:
        """Wait until no message came for QUIET_MS (at most SETTLE_MS): warnings a component logs from
        a timer after mounting (React Flow's, one second later) belong to the page too."""
        quiet, waited, seen = 0, 0, len(self.messages)
        while quiet < QUIET_MS and waited < SETTLE_MS:
            page.wait_for_timeout(250)
            waited += 250
            quiet = 0 if len(self.messages) != seen else quiet + 250
            seen = len(self.messages)

    def problems(self) -> list[str]:
        found = []
        for path, kind, text in self.messages:
            failing = kind in FAILING_TYPES or kind == "pageerror" or REACT_WARNING.search(text)
            if failing:
                found.append(f"{path} [{kind}] {text[:500]}")
        return found


def app_routes() -> list[str]:
    """Every route the app registers: `app.add_page(..., route=…)` and `@rx.page(route=…)` in the app module."""
    routes = []
    for node in ast.walk(ast.parse(APP_MODULE.read_text())):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in ("add_page",
                                                                                                      "page"):
            routes += [ast.literal_eval(kw.value) for kw in node.keywords if kw.arg == "route"]
    assert len(routes) >= 10, f"found only {routes} in {APP_MODULE}"
    return routes


def page_paths(running_app: RunningApp) -> list[str]:
    """The app's routes as paths to open: a real workflow for each dynamic part."""
    editor_workflow, _name = new_workflow(running_app, "Console walk")
    form_workflow = publish_a_form(running_app, f"Page walk form {uuid.uuid4().hex[:6]}", "A form for the page walk.")
    values = {"/editor/[workflow_id]": editor_workflow, "/forms/[workflow_id]": form_workflow}
    values["/embed/chatbot/[embed_token]"] = "a-link-token-no-chatbot-has-for-the-page-walk"  # "not valid" page
    values["/act/[link_token]"] = "a-link-token-no-task-mail-has-for-the-page-walk"  # "not valid" page
    paths = []
    for route in app_routes():
        if "[" in route:
            assert route in values, f"no real value for the dynamic route {route}: add one to page_paths"
            route = re.sub(r"\[[^\]]+\]", values[route], route)
        paths.append(route)
    return paths


def open_page(page: Page, path: str) -> None:
    """Open `path` and wait until it has loaded (LOADED) and the network is quiet (lazy modules and
    the state's answers are in)."""
    page.goto(path)
    page.wait_for_function(LOADED, timeout=90_000)  # the first visit of a page compiles it
    page.wait_for_load_state("networkidle")


def walk(page: Page, console: Console, paths: list[str]) -> None:
    for path in paths:
        console.path = path
        open_page(page, path)
        console.settle(page)


def test_every_page_has_a_clean_console(page: Page, running_app: RunningApp):
    paths = page_paths(running_app)
    console = Console()
    console.watch(page)
    page.set_viewport_size({"width": 1366, "height": 768})

    walk(page, console, paths)  # signed out: the public pages, and the sign-in the others send to
    console.path = "/login (signing in)"
    sign_in(page, "admin", ADMIN_PASSWORD)
    expect(page).to_have_url(re.compile(r"/workflows$"))
    walk(page, console, paths)  # signed in as the administrator

    console.path = "canary"
    with page.expect_console_message(lambda message: message.text == "page walk canary"):
        page.evaluate("() => console.info('page walk canary')")  # the listener hears the pages
    assert ("canary", "info", "page walk canary") in console.messages
    problems = console.problems()
    assert not problems, "console errors or warnings:\n" + "\n".join(problems)


def test_the_check_names_errors_warnings_and_react_warnings_only(page: Page):
    """The checker itself: errors, warnings, page errors and React warnings logged at any level are
    problems; ordinary logs are not."""
    console = Console()
    console.watch(page)
    console.path = "/editor/abc"
    with page.expect_event("pageerror"):
        page.set_content("""<script>
            console.log('Disconnect websocket on page navigation');
            console.log('Hey developer. Check out https://reactrouter.com/start/framework/route-module#hydratefallback');
            console.error('Boom');
            console.warn('Careful');
            console.log('Warning: Each child in a list should have a unique "key" prop.');
            console.warn('React Flow: It seems like you are hiding the attribution. Please only do this …');
            setTimeout(() => { throw new Error('uncaught'); });
        </script>""")
    problems = console.problems()
    assert problems == ["/editor/abc [error] Boom", "/editor/abc [warning] Careful",
                        '/editor/abc [log] Warning: Each child in a list should have a unique "key" prop.',
                        "/editor/abc [warning] React Flow: It seems like you are hiding the attribution. "
                        "Please only do this …",
                        "/editor/abc [pageerror] uncaught"], problems
