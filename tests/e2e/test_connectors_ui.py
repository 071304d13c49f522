# ruff: noqa: F811 - the tag fixture of test_connections_ui is imported by name
"""ClickUp and Jira in the browser (issue 20): a Jira Cloud connection made with the generated form
(Jira's refusal of a wrong token shown, nothing stored), a ClickUp connection made by consent at
ClickUp's stand-in consent page, the Workspace agent requesting `jira`, searching by JQL and answering,
and the editor's Choose button listing ClickUp lists through the connection.
"""

from __future__ import annotations

import re
from urllib.parse import parse_qs, urlsplit

import httpx
import pytest
from playwright.sync_api import Page, expect

from tests.clickup_server import BACKLOG_ID, SPRINT_ID
from tests.e2e.conftest import RunningApp
from tests.e2e.test_connections_ui import open_connections, row, tag  # noqa: F401 - tag is a fixture
from tests.e2e.test_editor_params_ui import workflow_url
from tests.e2e.test_editor_ui import api, new_workflow, open_editor, saved, select
from tests.e2e.test_workspace_mail_agent_ui import ask_in_new_chat
from tests.e2e.test_workspace_ui import call

pytestmark = pytest.mark.e2e


def connect_jira(page: Page, running_app: RunningApp, label: str) -> str:
    """The Jira Cloud form on the Connections page (a wrong token first): the new connection's id."""
    jira = running_app.jira
    open_connections(page)
    page.locator("#add-jira").click()
    expect(page.locator("#connection-form")).to_contain_text("New Jira connection")
    expect(page.locator("#setting-deployment")).to_have_value("cloud")
    expect(page.locator("#setting-apiToken")).to_have_attribute("type", "password")
    page.locator("#connection-label").fill(label)
    page.locator("#setting-siteUrl").fill(jira.url)
    page.locator("#setting-email").fill(jira.email)
    page.locator("#setting-apiToken").fill("not-the-token")
    page.locator("#connection-save").click()
    error = page.locator("#connection-form-error")
    expect(error).to_contain_text("Client must be authenticated")  # Jira's own words
    expect(row(page, label)).to_have_count(0)

    page.locator("#setting-apiToken").fill(jira.api_token)
    page.locator("#connection-save").click()
    expect(page.locator("#connections-notice")).to_contain_text(f"Connected '{label}'")
    listed = row(page, label)
    expect(listed.locator(".connection-status")).to_have_attribute("data-status", "active")
    expect(listed.locator(".connection-tested")).to_contain_text("as Anna")
    expect(page.locator("body")).not_to_contain_text(jira.api_token)
    headers, _instance = api(running_app)
    found = httpx.get(f"{running_app.api_url}/api/connections", headers=headers).json()
    return next(c["id"] for c in found if c["label"] == label)


def test_jira_by_token_clickup_by_consent_and_the_agent_searches_jira(page: Page, running_app: RunningApp,
                                                                      tag: str):
    jira, clickup, ai = running_app.jira, running_app.clickup, running_app.ai
    jira.reset()
    jira.add_project("OPS", "Operations")
    jira.add_issue("OPS", f"Printer {tag} on floor 3 is jammed")
    clickup.reset()
    jira_id = connect_jira(page, running_app, f"Jira {tag}")

    # ClickUp offers both ways; the consent at ClickUp's page connects it.
    card = page.locator(".connection-type[data-type='clickup']")
    expect(card.locator("#add-clickup")).to_be_visible()
    page.locator("#oauth-label-clickup").fill(f"ClickUp {tag}")
    page.locator("#connect-clickup").click()
    expect(page.get_by_role("heading", name="Connect Workspaces")).to_be_visible()
    page.get_by_role("button", name="Connect Workspace").click()
    expect(page).to_have_url(re.compile(r"/connections\?connected="))
    expect(row(page, f"ClickUp {tag}").locator(".connection-status")).to_have_attribute("data-status", "active")
    assert parse_qs(urlsplit(page.url).query)["connected"][0]

    # The Workspace agent requests jira, searches by JQL and answers from what Jira returned.
    ai.clear()
    ai.reply(None, tool_calls=[call("requestToolbox", {"toolboxId": "jira", "reason": "look up tickets"}, "j1")])
    ai.reply(None, tool_calls=[call("jira_searchIssues", {"connectionId": jira_id, "jql": "project = OPS"}, "j2")])
    answer = f"One OPS ticket is open: the printer {tag} on floor 3 is jammed."
    ai.reply(answer)
    ask_in_new_chat(page, f"Anything new in OPS? ({tag})")  # names no toolbox: none is preselected
    expect(page.locator(".assistant-message").last).to_have_text(answer)
    expect(page.locator(".escalation-card").last).to_contain_text("look up tickets")
    tool = page.locator(".tool-card", has_text="jira_searchIssues")
    expect(tool).to_have_count(1)
    tool.click()
    expect(tool).to_contain_text(f"Printer {tag} on floor 3 is jammed")


def test_the_editor_lists_clickup_lists_through_the_connection(page: Page, running_app: RunningApp, tag: str):
    clickup = running_app.clickup
    clickup.reset()
    headers, _instance = api(running_app)
    made = httpx.post(f"{running_app.api_url}/api/connections", headers=headers, timeout=60, json={
        "type": "clickup", "label": f"ClickUp token {tag}", "settings": {"apiToken": clickup.personal_token}})
    assert made.status_code == 201, made.text
    connection_id = made.json()["id"]
    graph = {"nodes": [{"id": "start", "type": "trigger.manual", "position": {"x": 0, "y": 0}},
                       {"id": "task", "type": "clickup.createTask", "position": {"x": 320, "y": 0},
                        "parameters": {"connectionId": connection_id, "name": "Follow up"}},
                       {"id": "other", "type": "clickup.createTask", "position": {"x": 640, "y": 0},
                        "parameters": {"name": "No connection yet"}}],
             "edges": [{"source": "start", "target": "task"}, {"source": "task", "target": "other"}]}
    workflow_id, _name = new_workflow(running_app, "ClickUp lists", graph)
    open_editor(page, workflow_id)
    select(page, "task")
    page.locator("#choose-listId").click()
    page.locator("#choices-listId").click()
    options = page.locator(".choice-option")
    expect(options.first).to_be_visible()
    labels = options.all_inner_texts()
    assert any(str(BACKLOG_ID) in text for text in labels) and any(str(SPRINT_ID) in text for text in labels), labels
    options.filter(has_text=str(SPRINT_ID)).click()
    expect(saved(page)).to_have_attribute("data-state", "saved")
    expect(page.locator("#param-listId")).to_have_value(str(SPRINT_ID))

    def stored() -> object:
        nodes = httpx.get(workflow_url(running_app, workflow_id), headers=headers).json()["graph"]["nodes"]
        return next(n for n in nodes if n["id"] == "task")["parameters"].get("listId")

    assert stored() == str(SPRINT_ID)

    # Without a connection, Choose says what to choose first.
    select(page, "other")
    page.locator("#choose-listId").click()
    expect(page.locator("#choice-problem-listId")).to_contain_text("connection id first")


def test_a_jira_triggers_events_are_ticked(page: Page, running_app: RunningApp):
    graph = {"nodes": [{"id": "start", "type": "trigger.jira", "position": {"x": 0, "y": 0},
                        "parameters": {"connectionId": "", "events": ["jira:issue_created"]}}], "edges": []}
    workflow_id, _name = new_workflow(running_app, "Jira events", graph)
    headers, _instance = api(running_app)

    def stored() -> object:
        nodes = httpx.get(workflow_url(running_app, workflow_id), headers=headers).json()["graph"]["nodes"]
        return nodes[0]["parameters"].get("events")

    open_editor(page, workflow_id)
    select(page, "start")
    boxes = page.locator("#param-events .choice-box")
    expect(boxes).to_have_count(4)
    expect(page.locator('#param-events [data-option="jira:issue_created"]')).to_have_attribute("data-state", "checked")
    page.locator('#param-events [data-option="comment_created"]').click()
    expect(saved(page)).to_have_attribute("data-state", "saved")
    expect(page.locator('#param-events [data-option="comment_created"]')).to_have_attribute("data-state", "checked")
    assert stored() == ["jira:issue_created", "comment_created"]
    page.locator('#param-events [data-option="jira:issue_created"]').click()
    expect(page.locator('#param-events [data-option="jira:issue_created"]')).to_have_attribute("data-state",
                                                                                               "unchecked")
    expect(saved(page)).to_have_attribute("data-state", "saved")
    assert stored() == ["comment_created"]
