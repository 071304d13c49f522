"""Workflows started by ClickUp's and Jira's webhooks (issue 20, item 5): the trigger nodes
trigger.clickup / trigger.jira register a webhook at the service when the workflow is published and
remove it when it is unpublished or deleted; deliveries arrive over real HTTP at
/api/hooks/remote/{token}, are verified with the registration's secret and start runs.

The API is served by uvicorn on a free port (the stand-ins post to it); the stand-ins
(tests/clickup_server.py, tests/jira_server.py) sign their deliveries as the real services do.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import httpx
import pytest
from sqlmodel import select

from backend.api.app import create_api
from backend.config import reset_settings_cache
from backend.db import session_scope
from backend.db.models import RemoteWebhook
from tests.clickup_server import BACKLOG_ID, TEAM_ID, ClickUpServer, serve
from tests.integration.conftest import ADMIN_PASSWORD
from tests.integration.test_scheduler import wait_for
from tests.jira_server import JiraServer, serve_jira
from tests.mcp_test_servers import free_port, serve_in_thread

SQLITE = pytest.mark.parametrize("db_url", ["sqlite"], indirect=True)  # the database plays no part here

WAIT = 30.0


@dataclass
class Served:
    url: str
    rest: httpx.Client
    headers: dict[str, str]
    editor: str

    @property
    def base(self) -> str:
        return f"/api/graphicalEditor/{self.editor}"


@pytest.fixture(scope="module")
def _clickup() -> Iterator[ClickUpServer]:
    with serve(ClickUpServer("cu-app", "cu-secret", "http://unused/callback")) as clickup:
        yield clickup


@pytest.fixture
def clickup(_clickup: ClickUpServer) -> ClickUpServer:
    _clickup.reset()
    _clickup.auto_deliver = False  # deliveries only when a test asks
    return _clickup


@pytest.fixture(scope="module")
def _jira() -> Iterator[JiraServer]:
    with serve_jira(JiraServer()) as jira:
        yield jira


@pytest.fixture
def jira(_jira: JiraServer) -> JiraServer:
    _jira.reset()
    _jira.add_project("OPS", "Operations")
    _jira.add_project("WEB", "Website")
    return _jira


@pytest.fixture
def served(app_config: str, clickup: ClickUpServer, monkeypatch: pytest.MonkeyPatch) -> Iterator[Served]:
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    monkeypatch.setenv("POWERON_API_URL", url)
    monkeypatch.setenv("POWERON_CLICKUP_API_URL", clickup.api_url)
    reset_settings_cache()
    with serve_in_thread(create_api(), port), httpx.Client(base_url=url, timeout=WAIT) as rest:
        token = rest.post("/api/auth/login", json={"username": "admin", "password": ADMIN_PASSWORD}).json()["token"]
        headers = {"Authorization": f"Bearer {token}"}
        me = rest.get("/api/me", headers=headers).json()
        editor = next(i["id"] for i in me["instances"] if i["featureCode"] == "graphicalEditor")
        yield Served(url, rest, headers, editor)


def clickup_connection(served: Served, clickup: ClickUpServer) -> str:
    created = served.rest.post("/api/connections", headers=served.headers, json={
        "type": "clickup", "label": "ClickUp", "settings": {"apiToken": clickup.personal_token}})
    assert created.status_code == 201, created.text
    return created.json()["id"]


def graph(trigger_type: str, parameters: dict) -> dict:
    return {"nodes": [{"id": "start", "type": trigger_type, "parameters": parameters},
                      {"id": "echo", "type": "context.transform",
                       "parameters": {"data": "{{ input }}", "template": "{{ event }}"}}],
            "edges": [{"source": "start", "target": "echo"}]}


def create_workflow(served: Served, name: str, body: dict) -> str:
    created = served.rest.post(f"{served.base}/workflows", json={"name": name, "graph": body}, headers=served.headers)
    assert created.status_code == 201, created.text
    return created.json()["id"]


def publish(served: Served, workflow_id: str) -> httpx.Response:
    return served.rest.post(f"{served.base}/workflows/{workflow_id}/publish", headers=served.headers)


def switch(served: Served, workflow_id: str, active: bool) -> None:
    patched = served.rest.patch(f"{served.base}/workflows/{workflow_id}", json={"active": active},
                                headers=served.headers)
    assert patched.status_code == 200, patched.text


def runs(served: Served, workflow_id: str) -> list[dict]:
    answer = served.rest.get(f"{served.base}/runs", params={"workflowId": workflow_id}, headers=served.headers)
    assert answer.status_code == 200, answer.text
    return answer.json()


def finished_runs(served: Served, workflow_id: str) -> list[dict]:
    """The workflow's runs once one has finished (polled)."""
    return wait_for(lambda: [r for r in runs(served, workflow_id) if r["status"] not in ("queued", "running")],
                    timeout=WAIT, what="the run to finish")


def registrations(workflow_id: str) -> list[RemoteWebhook]:
    with session_scope() as session:
        return list(session.exec(select(RemoteWebhook).where(RemoteWebhook.workflow_id == workflow_id)).all())


def test_a_published_clickup_trigger_registers_its_webhook_and_a_signed_delivery_starts_a_run(served, clickup):
    connection = clickup_connection(served, clickup)
    workflow_id = create_workflow(served, "New ClickUp tasks", graph("trigger.clickup", {
        "connectionId": connection, "events": ["taskCreated"], "teamId": str(TEAM_ID), "listId": str(BACKLOG_ID)}))
    assert clickup.webhooks == {}  # a draft registers nothing

    assert publish(served, workflow_id).status_code == 200
    [hook] = clickup.webhooks.values()
    [row] = registrations(workflow_id)
    assert hook["endpoint"] == f"{served.url}/api/hooks/remote/{row.token}"
    assert hook["events"] == ["taskCreated"]
    assert str(hook["list_id"]) == str(BACKLOG_ID)
    assert hook["secret"] not in row.secret  # sealed at rest

    task_id = clickup.add_task(BACKLOG_ID, "Call the customer back")
    assert clickup.deliver("taskCreated", task_id) == [202]  # switched off: acknowledged, nothing started
    assert runs(served, workflow_id) == []
    switch(served, workflow_id, True)
    assert clickup.deliver("taskCreated", task_id) == [202]
    [run] = finished_runs(served, workflow_id)
    assert run["status"] == "completed", run
    assert run["trigger"] == "webhook"
    assert run["input"]["event"] == "taskCreated"
    assert run["input"]["payload"]["task_id"] == task_id
    assert run["output"] is not None

    # A tampered body is refused and starts nothing; an event the trigger does not listen to neither.
    assert clickup.deliver("taskCreated", task_id, tamper=True) == [401]
    assert clickup.deliver("taskDeleted", task_id) == []  # not subscribed: ClickUp does not even send it
    answer = served.rest.post(hook["endpoint"].removeprefix(served.url), content=b'{"event": "taskCreated"}',
                              headers={"X-Signature": "0" * 64})
    assert answer.status_code == 401 and "did not verify" in answer.json()["detail"]
    assert len(runs(served, workflow_id)) == 1

    # Unpublishing removes the webhook at ClickUp and here; the old address is unknown from then on.
    assert served.rest.post(f"{served.base}/workflows/{workflow_id}/unpublish",
                            headers=served.headers).status_code == 200
    assert clickup.webhooks == {} and registrations(workflow_id) == []
    gone = served.rest.post(hook["endpoint"].removeprefix(served.url), content=b"{}", headers={"X-Signature": "x"})
    assert gone.status_code == 404


@SQLITE
def test_a_refused_registration_refuses_the_publication_and_names_the_node(served, clickup):
    connection = clickup_connection(served, clickup)
    unknown_team = create_workflow(served, "Unknown workspace", graph("trigger.clickup", {
        "connectionId": connection, "events": ["taskCreated"], "teamId": "999999"}))
    refused = publish(served, unknown_team)
    assert refused.status_code == 422, refused.text
    problem = refused.json()["errors"][0]
    assert problem["field"] == "nodes.start"
    assert "ClickUp refused to register the webhook" in problem["message"]
    assert clickup.webhooks == {} and registrations(unknown_team) == []
    versions = served.rest.get(f"{served.base}/workflows/{unknown_team}/versions", headers=served.headers).json()
    assert [v["status"] for v in versions] == ["draft"]

    foreign = create_workflow(served, "Foreign connection", graph("trigger.clickup", {
        "connectionId": "0" * 32, "events": ["taskCreated"], "teamId": str(TEAM_ID)}))
    refused = publish(served, foreign)
    assert refused.status_code == 422
    assert "not found" in refused.json()["errors"][0]["message"]
    assert clickup.webhooks == {}


@SQLITE
def test_deleting_a_published_workflow_removes_its_webhook(served, clickup):
    connection = clickup_connection(served, clickup)
    workflow_id = create_workflow(served, "To delete", graph("trigger.clickup", {
        "connectionId": connection, "events": ["taskCreated", "taskUpdated"], "teamId": str(TEAM_ID)}))
    assert publish(served, workflow_id).status_code == 200
    assert len(clickup.webhooks) == 1
    deleted = served.rest.delete(f"{served.base}/workflows/{workflow_id}", headers=served.headers)
    assert deleted.status_code in (200, 204), deleted.text
    assert clickup.webhooks == {}
    assert registrations(workflow_id) == []


def jira_connection(served: Served, jira: JiraServer) -> str:
    created = served.rest.post("/api/connections", headers=served.headers, json={
        "type": "jira", "label": "Jira Cloud", "settings": {"deployment": "cloud", "siteUrl": jira.url,
                                                             "email": jira.email, "apiToken": jira.api_token}})
    assert created.status_code == 201, created.text
    return created.json()["id"]


def test_a_jira_webhook_starts_a_published_workflow_for_new_issues_of_its_filter(served, jira):
    connection = jira_connection(served, jira)
    workflow_id = create_workflow(served, "New OPS issues", graph("trigger.jira", {
        "connectionId": connection, "events": ["jira:issue_created"], "jql": "project = OPS"}))
    assert publish(served, workflow_id).status_code == 200
    switch(served, workflow_id, True)
    [hook] = jira.webhooks.values()
    [row] = registrations(workflow_id)
    assert hook.url == f"{served.url}/api/hooks/remote/{row.token}"
    assert hook.jql == "project = OPS" and hook.events == ["jira:issue_created"]
    assert hook.secret and hook.secret not in row.secret

    # An issue created in Jira (through its REST API, as a person would) is delivered, signed.
    created = httpx.post(f"{jira.url}/rest/api/3/issue", auth=(jira.email, jira.api_token), json={
        "fields": {"project": {"key": "OPS"}, "summary": "Printer on floor 3 is jammed",
                   "issuetype": {"name": "Task"}}})
    assert created.status_code == 201, created.text
    key = created.json()["key"]
    [delivery] = jira.wait_for_deliveries(1)
    assert delivery["status"] == 202
    [run] = finished_runs(served, workflow_id)
    assert run["status"] == "completed", run
    assert run["input"]["event"] == "jira:issue_created"
    assert run["input"]["payload"]["issue"]["key"] == key

    # Another project's issue does not match the registration's filter: Jira sends nothing.
    other = httpx.post(f"{jira.url}/rest/api/3/issue", auth=(jira.email, jira.api_token), json={
        "fields": {"project": {"key": "WEB"}, "summary": "New banner", "issuetype": {"name": "Task"}}})
    assert other.status_code == 201
    assert len(jira.deliveries) == 1 and len(runs(served, workflow_id)) == 1

    # Jira delivering the same event again (a retry: the same X-Atlassian-Webhook-Identifier) starts
    # nothing new; the repeat is answered with the first one's run.
    body, headers = jira.signed_delivery("jira:issue_created", key, hook.secret)
    first = served.rest.post(hook.url.removeprefix(served.url), content=body, headers=headers)
    again = served.rest.post(hook.url.removeprefix(served.url), content=body, headers=headers)
    assert first.status_code == again.status_code == 202, (first.text, again.text)
    assert first.json()["runId"] and again.json()["runId"] == first.json()["runId"]
    assert "repeated" in again.json()["ignored"]
    assert len(runs(served, workflow_id)) == 2

    # A delivery signed with another secret is refused.
    body, headers = jira.signed_delivery("jira:issue_created", key, "not-the-secret")
    refused = served.rest.post(hook.url.removeprefix(served.url), content=body, headers=headers)
    assert refused.status_code == 401
    assert len(runs(served, workflow_id)) == 2

    assert served.rest.post(f"{served.base}/workflows/{workflow_id}/unpublish",
                            headers=served.headers).status_code == 200
    assert jira.webhooks == {} and registrations(workflow_id) == []


@SQLITE
def test_a_jira_user_who_is_no_administrator_cannot_publish_a_jira_trigger(served, jira):
    connection = jira_connection(served, jira)
    jira.admin = False
    workflow_id = create_workflow(served, "Not allowed", graph("trigger.jira", {
        "connectionId": connection, "events": ["jira:issue_created"]}))
    refused = publish(served, workflow_id)
    assert refused.status_code == 422
    assert "Jira refused to register the webhook" in refused.json()["errors"][0]["message"]
    assert jira.webhooks == {} and registrations(workflow_id) == []


@SQLITE
def test_a_trigger_filter_jira_refuses_refuses_the_publication_in_jiras_words(served, jira):
    connection = jira_connection(served, jira)
    workflow_id = create_workflow(served, "Unknown project", graph("trigger.jira", {
        "connectionId": connection, "events": ["jira:issue_created"], "jql": "project = NOPE"}))
    refused = publish(served, workflow_id)
    assert refused.status_code == 422
    [problem] = refused.json()["errors"]
    assert problem["field"] == "nodes.start"
    assert "The value 'NOPE' does not exist for the field 'project'" in problem["message"]
    assert jira.webhooks == {} and registrations(workflow_id) == []
