"""Empty states fit the user's rights (issue 16, item 8): a viewer is never told to use a field or
button they do not have, on the Monitor, Inbox, Workspace (chats and files), Notifications, API
tokens and Admin pages; the administrator sees the same pages with their controls.

The viewer is made over REST as an administrator would: a member of the Default mandate with role
viewer, and workspace-viewer / graphicalEditor-viewer in its default instances.
"""

from __future__ import annotations

import re
import uuid

import httpx
from playwright.sync_api import Page, expect

from tests.e2e.conftest import ADMIN_PASSWORD, RunningApp
from tests.e2e.test_editor_ui import api
from tests.e2e.test_workflows_ui import sign_in

pytestmark = __import__("pytest").mark.e2e

VIEWER_PASSWORD = "viewer-pass-16"


def create_viewer(running_app: RunningApp) -> str:
    """A new member of the Default mandate with viewer rights in its default instances; their username."""
    headers, _instance = api(running_app)
    me = httpx.get(f"{running_app.api_url}/api/me", headers=headers).json()
    mandate = next(m["id"] for m in me["mandates"] if m["name"] == "Default")
    username = f"viewer{uuid.uuid4().hex[:6]}"
    created = httpx.post(f"{running_app.api_url}/api/mandates/{mandate}/users", headers=headers,
                         json={"username": username, "password": VIEWER_PASSWORD, "roles": ["viewer"]})
    assert created.status_code == 201, created.text
    defaults = {"workspace": "Workspace", "graphicalEditor": "Graphical Editor"}
    for instance in me["instances"]:
        if instance["mandateId"] == mandate and defaults.get(instance["featureCode"]) == instance["label"]:
            granted = httpx.post(f"{running_app.api_url}/api/instances/{instance['id']}/access", headers=headers,
                                 json={"userId": created.json()["id"], "roles": [f"{instance['featureCode']}-viewer"]})
            assert granted.status_code == 200, granted.text
    return username


def open_page(page: Page, nav: str, title: str) -> None:
    page.locator(f"#nav-{nav}").click()
    expect(page.locator("#page-title")).to_have_text(title, timeout=30_000)  # once the page's modules are in


def test_a_viewer_sees_empty_states_without_controls_they_lack(page: Page, running_app: RunningApp):
    username = create_viewer(running_app)
    sign_in(page, username, VIEWER_PASSWORD)
    expect(page).to_have_url(re.compile(r"/workflows$"))

    # Workspace: the chats are there to read; no New, no prompt field, no Attach, no Upload
    open_page(page, "workspace", "Workspace")
    expect(page.locator("#chat-disabled-reason")).to_contain_text("not talk to the agent")
    expect(page.locator("#chat-empty")).to_have_text("Open a chat on the left to read it.")
    for control in ("#chat-new", "#chat-input", "#chat-send"):
        expect(page.locator(control)).to_have_count(0)
    expect(page.locator("#chat-list-empty, .chat-item").first).to_be_visible()
    if page.locator("#chat-list-empty").count():  # other tests' chats may be readable
        expect(page.locator("#chat-list-empty")).to_have_text("No chats to read yet.")
    page.locator("#udb-tab-files").click()
    expect(page.locator("#current-folder")).to_have_text("/")
    expect(page.locator("#file-upload-area")).to_have_count(0)
    expect(page.locator(".file-attach")).to_have_count(0)
    expect(page.locator("#file-search-input")).to_be_visible()  # reading and searching is theirs

    # Monitor: the runs they may read, with every filter (nothing to ask for)
    open_page(page, "monitor", "Monitor")
    expect(page.locator("#monitor-kind")).to_have_text("Production runs")
    expect(page.locator("#empty-state")).to_have_count(0)

    # Inbox and Notifications: nothing to do, and no button named that they lack
    open_page(page, "inbox", "Inbox")
    expect(page.locator("#empty-state, #task-list").first).to_be_visible()
    if page.locator("#empty-state").count():  # other tests' tasks may be readable to viewers
        expect(page.locator("#empty-state")).to_contain_text("Approvals and forms that workflows ask of you")
    page.goto("/notifications")
    expect(page.locator("#empty-state")).to_contain_text("No notifications")
    expect(page.locator("#mark-all-read")).to_be_disabled()

    # API tokens: the empty state names the field above, which a viewer has (tokens are personal)
    open_page(page, "api-tokens", "API tokens")
    expect(page.locator("#empty-state")).to_contain_text("name field above")
    expect(page.locator("#new-token-name")).to_be_visible()
    expect(page.locator("#create-token")).to_be_enabled()

    # Admin: not in the navigation; the page itself says there is no access (and offers nothing)
    expect(page.locator("#nav-admin")).to_have_count(0)
    page.goto("/admin")
    expect(page.locator("#empty-state")).to_contain_text("No access")
    expect(page.locator("#empty-state button, #mandate-select")).to_have_count(0)


def test_the_administrator_sees_the_controls_the_viewer_does_not(page: Page, running_app: RunningApp):
    sign_in(page, "admin", ADMIN_PASSWORD)
    expect(page).to_have_url(re.compile(r"/workflows$"))
    open_page(page, "workspace", "Workspace")
    expect(page.locator("#chat-new")).to_be_visible()
    expect(page.locator("#chat-input")).to_be_enabled()
    expect(page.locator("#chat-empty")).to_have_text("Ask the agent anything; its answer streams here.")
    page.locator("#udb-tab-files").click()
    expect(page.locator("#file-upload-area")).to_be_visible()
    open_page(page, "admin", "Admin")
    expect(page.locator("#mandate-select")).to_be_visible()
