"""MCP in the UI (issue 19), in real Chromium against the running app.

- An admin adds an external MCP server on the Admin page's "MCP servers" tab: a wrong credential is
  refused with the server's words and nothing is listed; the right one lists the server with its
  tools; Test says what it answered; the editor's palette offers its tools as nodes; it is removed.
- The Workflows page's "expose as MCP tool" switch changes the workflow as the REST API sees it.
- The API tokens page creates a token narrowed to one instance and read-only, and lists it so.

The MCP server is the official SDK's (tests/mcp_test_servers.py), served on 127.0.0.1 by the test.
"""

from __future__ import annotations

import re
import uuid

import httpx
import pytest
from playwright.sync_api import Page, expect

from tests.e2e.conftest import ADMIN_PASSWORD, RunningApp
from tests.e2e.test_admin_ui import choose
from tests.e2e.test_editor_ui import api, new_workflow, open_editor
from tests.e2e.test_workflows_ui import open_instance, pick, sign_in
from tests.mcp_test_servers import STATIC_TOKEN, serve_tools_server

pytestmark = pytest.mark.e2e


def mcp_servers(running_app: RunningApp) -> list[dict]:
    headers = api(running_app)[0]
    me = httpx.get(f"{running_app.api_url}/api/me", headers=headers).json()
    mandate = next(m["id"] for m in me["mandates"] if m["name"] == "Default")
    return httpx.get(f"{running_app.api_url}/api/mandates/{mandate}/mcp-servers", headers=headers).json()


def test_an_admin_adds_an_mcp_server_whose_tools_reach_the_palette(page: Page, running_app: RunningApp):
    name = f"tools-{uuid.uuid4().hex[:6]}"
    with serve_tools_server() as server:
        sign_in(page, "admin", ADMIN_PASSWORD)
        expect(page).to_have_url(re.compile(r"/workflows$"))
        page.goto("/admin")
        choose(page, "mandate-select", "Default")
        page.locator("#tab-mcp").click()
        expect(page.locator("#mcp-empty, #mcp-server-table").first).to_be_visible()
        page.locator("#mcp-name").fill(name)
        page.locator("#mcp-url").fill(server.url)
        page.locator("#mcp-auth-headers").click()
        page.locator("#mcp-headers").fill("Authorization: Bearer not-the-token")
        page.locator("#mcp-add").click()
        expect(page.locator("#admin-error")).to_contain_text("headers")
        expect(page.locator(f'.mcp-server-row[data-name="{name}"]')).to_have_count(0)
        assert name not in [s["name"] for s in mcp_servers(running_app)]

        page.locator("#mcp-headers").fill(f"Authorization: Bearer {STATIC_TOKEN}")
        page.locator("#mcp-add").click()
        expect(page.locator("#admin-notice")).to_contain_text(f"Registered '{name}'")
        row = page.locator(f'.mcp-server-row[data-name="{name}"]')
        expect(row).to_be_visible()
        expect(row.locator(".mcp-server-status")).to_contain_text("active")
        expect(row).to_contain_text("headers: Authorization")
        expect(row).not_to_contain_text(STATIC_TOKEN)
        row.locator(".mcp-tools-button").click()
        expect(page.locator(".mcp-tools-row")).to_contain_text("shout")
        row.locator(".mcp-test").click()
        expect(page.locator("#admin-notice")).to_contain_text("answered with")

        workflow_id, _ = new_workflow(running_app, "MCP palette")
        open_editor(page, workflow_id, signed_in=True)
        page.locator("#palette-search").fill("shout")
        expect(page.locator(f'[id="palette-mcp:{name}-shout"]')).to_be_visible()

        page.goto("/admin")
        choose(page, "mandate-select", "Default")
        page.locator("#tab-mcp").click()
        page.locator(f'.mcp-server-row[data-name="{name}"] .mcp-delete').click()
        page.locator("#mcp-delete-confirm").click()
        expect(page.locator("#admin-notice")).to_contain_text(f"Removed '{name}'")
        expect(page.locator(f'.mcp-server-row[data-name="{name}"]')).to_have_count(0)
        assert name not in [s["name"] for s in mcp_servers(running_app)]


def test_the_workflows_page_exposes_a_workflow_as_mcp_tool(page: Page, running_app: RunningApp):
    headers, instance = api(running_app)
    workflow_id, name = new_workflow(running_app, "MCP exposed")
    sign_in(page, "admin", ADMIN_PASSWORD)
    expect(page).to_have_url(re.compile(r"/workflows$"))
    page.goto("/workflows")
    open_instance(page, "Graphical Editor")
    switch = page.locator(".workflow-row", has_text=name).locator(".mcp-tool-switch")
    expect(switch).to_have_attribute("aria-checked", "false")
    switch.click()
    expect(page.get_by_text(f"'{name}' will be offered to MCP clients as a tool once it is published.")).to_be_visible()
    expect(switch).to_have_attribute("aria-checked", "true")
    stored = httpx.get(f"{running_app.api_url}/api/graphicalEditor/{instance}/workflows/{workflow_id}",
                       headers=headers).json()
    assert stored["mcpTool"] is True


def test_a_token_narrowed_to_one_instance_and_read_only(page: Page, running_app: RunningApp):
    token_name = f"mcp-{uuid.uuid4().hex[:6]}"
    sign_in(page, "admin", ADMIN_PASSWORD)
    expect(page).to_have_url(re.compile(r"/workflows$"))
    page.goto("/tokens")
    page.locator("#new-token-name").fill(token_name)
    option = page.get_by_role("option", name="Graphical Editor (graphicalEditor)")
    pick(page, page.locator("#new-token-instance"), option)
    page.locator("#new-token-read-only").click()
    page.locator("#create-token").click()
    expect(page.locator("#token-usage")).to_contain_text("/mcp")
    row = page.locator(f'.token-row[data-name="{token_name}"]')
    expect(row.locator(".token-scope")).to_have_text("Graphical Editor (graphicalEditor) · read-only")
    headers = api(running_app)[0]
    listed = {t["name"]: t for t in httpx.get(f"{running_app.api_url}/api/me/tokens", headers=headers).json()}
    assert listed[token_name]["readOnly"] is True and listed[token_name]["instanceId"]
