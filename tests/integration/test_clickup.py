"""ClickUp connections and the toolbox clickup (issue 20) against the ClickUp API v2 stand-in
(tests/clickup_server.py) on 127.0.0.1: connections made by personal token (REST, tested live) and by
ClickUp's OAuth app flow (consent end to end), every action through execute_action (and one through
the agent's tool-call path), paging, ClickUp's rate limit, unknown ids and foreign connections.
The production client is the code under test; nothing is monkeypatched but the configuration."""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from urllib.parse import parse_qs, urlsplit

import pytest
from sqlmodel import select

from backend.actions import ActionContext, execute_action
from backend.actions.openai_tools import execute_tool_call
from backend.config import reset_settings_cache
from backend.connectors.store import unseal_secret
from backend.db import session_scope
from backend.db.models import Connection, FeatureInstance, User
from backend.files import service as files
from tests.clickup_server import (
    ANNA,
    BACKLOG_ID,
    BERT,
    FOLDER_ID,
    SPACE_ID,
    SPRINT_ID,
    TEAM_ID,
    ClickUpServer,
    accept_consent,
    serve,
)
from tests.integration.action_calls import failed, ok, run
from tests.integration.test_admin_api import make_mandate, signed_in
from tests.integration.test_msft_oauth import Browser, browser

SQLITE = pytest.mark.parametrize("db_url", ["sqlite"], indirect=True)  # the database plays no part here

CLIENT_ID = "clickup-poweron-test-app"
CLIENT_SECRET = "cu-Secret/with+chars&="
API_URL = "http://testserver"
UI_URL = "http://ui.test"
CALLBACK = f"{API_URL}/api/connections/oauth/clickup/callback"
OAUTH = "/api/connections/oauth/clickup"
URL = "/api/connections"
DAY_MS = 86_400_000


# --- the stand-in, the configuration and helpers -----------------------------------------------------


@pytest.fixture(scope="module")
def _clickup_stand_in() -> Iterator[ClickUpServer]:
    with serve(ClickUpServer(CLIENT_ID, CLIENT_SECRET, CALLBACK)) as clickup:
        yield clickup


def configure(monkeypatch: pytest.MonkeyPatch, clickup: ClickUpServer, **extra: str) -> None:
    """Point POWERON_CLICKUP_* at the stand-in (and the API/UI URLs at the test client)."""
    for name, value in {"POWERON_CLICKUP_API_URL": clickup.api_url, "POWERON_CLICKUP_AUTH_URL": clickup.auth_url,
                        "POWERON_CLICKUP_CLIENT_ID": CLIENT_ID, "POWERON_CLICKUP_CLIENT_SECRET": CLIENT_SECRET,
                        "POWERON_API_URL": API_URL, "POWERON_UI_URL": UI_URL,
                        "POWERON_CONNECTOR_MAX_WAIT_SECONDS": "20", **extra}.items():
        monkeypatch.setenv(name, value)
    reset_settings_cache()


@pytest.fixture
def clickup(_clickup_stand_in: ClickUpServer, app_config: str, monkeypatch: pytest.MonkeyPatch) -> ClickUpServer:
    """The stand-in with its default workspace, the application configured for it."""
    _clickup_stand_in.reset()
    configure(monkeypatch, _clickup_stand_in)
    return _clickup_stand_in


def create(api, token: str, label: str = "ClickUp", headers: dict | None = None):
    return api.client.post(URL, json={"type": "clickup", "label": label, "settings": {"apiToken": token}},
                           headers=headers or api.auth)


@pytest.fixture
def connection(clickup: ClickUpServer, api) -> str:
    """The admin's connection by Anna's personal token."""
    created = create(api, clickup.personal_token)
    assert created.status_code == 201, created.text
    return created.json()["id"]








def start(admin: Browser, **body) -> str:
    """A ticket for a ClickUp consent, opened by the browser: ClickUp's authorization URL."""
    ticket = admin.client.post(f"{OAUTH}/tickets", json=body, headers=admin.headers)
    assert ticket.status_code == 201, ticket.text
    started = admin.client.get(ticket.json()["url"])
    assert started.status_code == 302, started.text
    return started.headers["location"]


def ms(moment: datetime) -> int:
    return int(moment.timestamp() * 1000)


# --- connections by personal token ---------------------------------------------------------------------


def test_a_personal_token_is_tested_stored_sealed_and_never_shown(clickup, api, caplog):
    caplog.set_level(logging.DEBUG)
    created = create(api, clickup.personal_token, "Team ClickUp")
    assert created.status_code == 201, created.text
    body = created.json()
    assert (body["type"], body["typeLabel"], body["status"]) == ("clickup", "ClickUp", "active")
    assert body["settings"] == {"tested": "signed in as anna.meier@acme.example: 1 workspace"}
    with session_scope() as session:
        row = session.get(Connection, body["id"])
        assert row.secret.startswith("sealed:v1:") and unseal_secret(row) == {"apiToken": clickup.personal_token}
    # ClickUp saw the personal token as it is, without "Bearer".
    assert clickup.calls("GET", "/user") and clickup.calls("GET", "/team")
    tested = api.client.post(f"{URL}/{body['id']}/test", headers=api.auth).json()
    assert tested == {"ok": True, "message": "signed in as anna.meier@acme.example: 1 workspace", "status": "active"}
    for text in (created.text, api.client.get(URL, headers=api.auth).text, caplog.text):
        assert clickup.personal_token not in text


@SQLITE
def test_a_wrong_token_stores_nothing_and_names_the_settings(clickup, api):
    wrong = create(api, "pk_81726354_NOTTHETOKEN")
    assert wrong.status_code == 422
    assert wrong.json()["errors"][0]["field"] == "settings"
    assert "Token invalid (OAUTH_025)" in wrong.json()["detail"]
    assert "pk_81726354_NOTTHETOKEN" not in wrong.text
    not_personal = create(api, "Bearer something")
    assert not_personal.status_code == 422
    assert not_personal.json()["errors"][0]["field"] == "settings.apiToken"
    assert "starts with pk_" in not_personal.json()["detail"]
    assert create(api, "").status_code == 422
    assert api.client.get(URL, headers=api.auth).json() == []


@SQLITE
def test_a_revoked_token_makes_the_connection_expired_on_test(clickup, api, connection):
    del clickup.tokens[clickup.personal_token]
    tested = api.client.post(f"{URL}/{connection}/test", headers=api.auth).json()
    assert tested["ok"] is False and tested["status"] == "expired"
    assert "Token invalid" in tested["message"] and "reconnect" in tested["message"]


# --- connections by consent (ClickUp's OAuth app flow) ------------------------------------------------


@SQLITE
def test_the_types_offer_clickup_by_token_and_by_consent_when_set_up(clickup, api, monkeypatch):
    types = {t["id"]: t for t in api.client.get(f"{URL}/types", headers=api.auth).json()}
    assert (types["clickup"]["label"], types["clickup"]["auth"], types["clickup"]["unavailable"]) == \
        ("ClickUp", "password", None)
    assert set(types["clickup"]["settingsSchema"]["properties"]) == {"apiToken"}
    monkeypatch.delenv("POWERON_CLICKUP_CLIENT_SECRET")
    reset_settings_cache()
    types = {t["id"]: t for t in api.client.get(f"{URL}/types", headers=api.auth).json()}
    assert types["clickup"]["unavailable"] is None  # a personal token still works
    refused = api.client.post(f"{OAUTH}/tickets", json={}, headers=api.auth)
    assert refused.status_code == 422 and refused.json()["errors"][0]["field"] == "type"
    assert "POWERON_CLICKUP_CLIENT_SECRET" in refused.json()["detail"]
    assert create(api, clickup.personal_token).status_code == 201


@SQLITE
def test_a_consent_connects_the_chosen_workspaces_with_a_lasting_token(clickup, api, caplog):
    caplog.set_level(logging.DEBUG)
    other = clickup.add_team("Side project", [ANNA["id"]])
    admin = browser(signed_in("admin"))
    ticket = admin.client.post(f"{OAUTH}/tickets", json={"label": "Anna's ClickUp"}, headers=admin.headers)
    assert ticket.status_code == 201, ticket.text
    started = admin.client.get(ticket.json()["url"])
    assert started.status_code == 302
    authorize = urlsplit(started.headers["location"])
    assert f"{authorize.scheme}://{authorize.netloc}{authorize.path}" == clickup.auth_url
    asked = {k: v[0] for k, v in parse_qs(authorize.query).items()}
    assert (asked["client_id"], asked["redirect_uri"]) == (CLIENT_ID, CALLBACK) and asked["state"]
    landed = admin.land(accept_consent(started.headers["location"], teams=[TEAM_ID]))
    assert "connected" in landed, landed
    connection_id = landed["connected"]
    shown = api.client.get(f"{URL}/{connection_id}", headers=api.auth).json()
    assert (shown["type"], shown["label"], shown["status"]) == ("clickup", "Anna's ClickUp", "active")
    assert shown["settings"]["account"] == "anna.meier@acme.example"
    with session_scope() as session:
        secret = unseal_secret(session.get(Connection, connection_id))
    assert secret["accessToken"] in clickup.tokens and secret["refreshToken"] == ""
    assert secret["expiresAt"] > (datetime.now(UTC) + timedelta(days=3650)).timestamp()  # never expires
    # The token is sent as "Bearer …" and sees only the workspace chosen at ClickUp.
    workspaces = ok("clickup.listWorkspaces", {"connectionId": connection_id})["workspaces"]
    assert [w["id"] for w in workspaces] == [TEAM_ID]
    assert "cannot see it" in failed("clickup.listSpaces", {"connectionId": connection_id, "teamId": other})
    tested = api.client.post(f"{URL}/{connection_id}/test", headers=api.auth).json()
    assert tested == {"ok": True, "message": "signed in as anna.meier@acme.example: 1 workspace", "status": "active"}
    assert [r["client_id"] for r in clickup.token_requests] == [CLIENT_ID]
    listed = api.client.get(URL, headers=api.auth).text
    for secret_text in (*clickup.issued, CLIENT_SECRET):
        assert secret_text not in listed and secret_text not in caplog.text


@SQLITE
def test_a_cancelled_or_refused_consent_connects_nothing(clickup, api, monkeypatch):
    admin = browser(signed_in("admin"))
    landed = admin.land(accept_consent(start(admin), decision="cancel"))
    assert landed == {"error": "the consent at ClickUp was declined; nothing was connected"}
    configure(monkeypatch, clickup, POWERON_CLICKUP_CLIENT_SECRET="not-the-secret")
    landed = admin.land(accept_consent(start(admin)))
    assert "nothing was connected" in landed["error"]
    assert api.client.get(URL, headers=api.auth).json() == []


# --- listing: workspaces, spaces, lists -------------------------------------------------------------


@SQLITE
def test_workspaces_spaces_and_lists_in_and_outside_folders(clickup, connection):
    clickup.add_list(SPACE_ID, "Old", archived=True)
    design = clickup.add_space(TEAM_ID, "Design")
    clickup.add_list(design, "Ideas")
    workspaces = ok("clickup.listWorkspaces", {"connectionId": connection})["workspaces"]
    assert workspaces == [{"id": TEAM_ID, "name": "Acme", "members": 2}]
    spaces = ok("clickup.listSpaces", {"connectionId": connection, "teamId": TEAM_ID})["spaces"]
    assert [(s["id"], s["name"], s["teamId"]) for s in spaces] == [(SPACE_ID, "Engineering", TEAM_ID),
                                                                   (design, "Design", TEAM_ID)]
    assert ok("clickup.listSpaces", {"connectionId": connection, "teamId": ""})["spaces"] == spaces  # picker: empty
    lists = ok("clickup.listLists", {"connectionId": connection, "spaceId": SPACE_ID})["lists"]
    assert [(x["id"], x["path"], x["folder"]) for x in lists] == [
        (BACKLOG_ID, "Engineering / Backlog", None),
        (SPRINT_ID, "Engineering / Sprints / Sprint 12", {"id": FOLDER_ID, "name": "Sprints"})]
    everything = ok("clickup.listLists", {"connectionId": connection})["lists"]
    assert [x["path"] for x in everything] == ["Engineering / Backlog", "Engineering / Sprints / Sprint 12",
                                               "Design / Ideas"]


# --- tasks: create, read, update, comment, attach ----------------------------------------------------


@SQLITE
def test_create_read_update_and_comment_on_a_task(clickup, connection):
    field = clickup.add_custom_field(BACKLOG_ID, "Jira key")
    created = ok("clickup.createTask", {
        "connectionId": connection, "listId": BACKLOG_ID, "name": "Fix the login", "description": "**Steps** to do",
        "markdown": True, "assignees": ["bert.keller@acme.example", ANNA["id"]], "tags": ["Bug"],
        "status": "in progress", "priority": "high", "dueDate": "2030-05-17",
        "customFields": [{"id": field, "value": "OPS-12"}]})
    stored = clickup.tasks[created["id"]]
    assert (stored["name"], stored["markdown"], stored["assignees"], stored["tags"], stored["status"],
            stored["priority"], stored["due"], stored["fields"]) == (
        "Fix the login", "**Steps** to do", [BERT["id"], ANNA["id"]], ["bug"], "in progress", 2,
        ms(datetime(2030, 5, 17, tzinfo=UTC)), {field: "OPS-12"})
    assert created["url"] == f"https://app.clickup.com/t/{created['id']}"
    assert (created["status"], created["priority"], created["dueDate"], created["tags"]) == \
        ("in progress", "high", "2030-05-17T00:00:00Z", ["bug"])
    assert created["list"] == {"id": BACKLOG_ID, "name": "Backlog"} and created["teamId"] == TEAM_ID
    read = ok("clickup.getTask", {"connectionId": connection, "taskId": created["id"]})
    assert read["markdownDescription"] == "**Steps** to do" and read["description"] == "Steps to do"
    assert [f["value"] for f in read["customFields"]] == ["OPS-12"]
    assert [a["email"] for a in read["assignees"]] == ["bert.keller@acme.example", "anna.meier@acme.example"]

    updated = ok("clickup.updateTask", {
        "connectionId": connection, "taskId": created["id"], "name": "Fix the login page", "status": "complete",
        "priority": "none", "clearDueDate": True, "removeAssignees": ["Bert Keller"], "addTags": ["frontend"],
        "removeTags": ["bug"], "customFields": [{"id": field, "value": "OPS-13"}]})
    assert (updated["name"], updated["status"], updated["statusType"], updated["priority"], updated["dueDate"]) == \
        ("Fix the login page", "complete", "closed", None, None)
    assert updated["tags"] == ["frontend"] and [a["id"] for a in updated["assignees"]] == [ANNA["id"]]
    assert updated["dateClosed"] is not None and clickup.tasks[created["id"]]["fields"] == {field: "OPS-13"}
    assert "nothing to change" in failed("clickup.updateTask", {"connectionId": connection, "taskId": created["id"]})

    comment = ok("clickup.addComment", {"connectionId": connection, "taskId": created["id"], "text": "Done in 1.4"})
    assert comment["taskId"] == created["id"] and comment["id"] and comment["date"].endswith("Z")
    assert [c["comment_text"] for c in clickup.tasks[created["id"]]["comments"]] == ["Done in 1.4"]


@SQLITE
def test_clickup_refusals_are_named(clickup, connection):
    refused = failed("clickup.createTask", {"connectionId": connection, "listId": BACKLOG_ID, "name": "X",
                                            "status": "someday"})
    assert "ClickUp answered 400 while creating a task in list" in refused and "Status does not exist" in refused
    stranger = failed("clickup.createTask", {"connectionId": connection, "listId": BACKLOG_ID, "name": "X",
                                             "assignees": ["eve@elsewhere.example"]})
    assert stranger.startswith("assignees: 'eve@elsewhere.example' is no member")
    bad_date = failed("clickup.createTask", {"connectionId": connection, "listId": BACKLOG_ID, "name": "X",
                                             "dueDate": "next friday"})
    assert "dueDate" in bad_date and "ISO 8601" in bad_date
    bad_id = failed("clickup.getTask", {"connectionId": connection, "taskId": "../team"})
    assert "taskId" in bad_id
    for hostile in ({"dueDateTo": "9999-12-31"}, {"listId": "../../user"}, {"spaceId": "x" * 65},
                    {"customFields": [{"fieldId": "f", "operator": "LIKE"}]}, {"page": -1}, {"limit": 0}):
        refused = run("clickup.searchTasks", {"connectionId": connection, "teamId": TEAM_ID, **hostile})
        assert refused.error_kind == "invalid" and next(iter(hostile)) in refused.error, refused.error
    assert not clickup.tasks


@SQLITE
def test_unknown_or_hidden_ids_say_so(clickup, connection):
    for action_id, params, thing in (
            ("clickup.createTask", {"listId": "901599999", "name": "X"}, "list 901599999"),
            ("clickup.searchTasks", {"listId": "123"}, "list 123"),
            ("clickup.listSpaces", {"teamId": "777"}, "workspace 777"),
            ("clickup.listLists", {"spaceId": "888"}, "space 888"),
            ("clickup.getTask", {"taskId": "86nothere"}, "task 86nothere")):
        error = failed(action_id, {"connectionId": connection, **params})
        assert error.startswith(f"{thing} was not found or the connection's account cannot see it"), error
        assert "reconnect" not in error
    task_id = clickup.add_task(BACKLOG_ID, "Gone")
    clickup.auto_deliver = False
    clickup.delete_task(task_id)
    error = failed("clickup.getTask", {"connectionId": connection, "taskId": task_id})
    assert error == f"task {task_id} was not found or the connection's account cannot see it (ClickUp: Task not " \
                    "found, deleted)"
    # The connection is still fine.
    assert ok("clickup.listWorkspaces", {"connectionId": connection})["workspaces"]


@SQLITE
def test_attach_a_file_of_the_file_store(clickup, connection):
    task_id = clickup.add_task(BACKLOG_ID, "Needs the report")
    with session_scope() as session:
        user = session.exec(select(User).where(User.username == "admin")).one()
        instance = session.exec(select(FeatureInstance).where(FeatureInstance.feature_code == "workspace")
                                .order_by(FeatureInstance.sys_created_at)).first()
        scope = files.FileScope(session, user, instance.mandate_id, instance.id)
        files.store_file(scope, "/reports/q1.pdf", b"%PDF-1.4 quarterly figures", "application/pdf")
    attached = ok("clickup.attachFile", {"connectionId": connection, "taskId": task_id, "file": "/reports/q1.pdf"})
    assert (attached["title"], attached["size"], attached["taskId"]) == ("q1.pdf", 26, task_id)
    assert attached["url"].endswith("/q1.pdf")
    stored = clickup.tasks[task_id]["attachments"]
    assert [(a["title"], a["data"], a["mimetype"]) for a in stored] == \
        [("q1.pdf", b"%PDF-1.4 quarterly figures", "application/pdf")]
    renamed = ok("clickup.attachFile", {"connectionId": connection, "taskId": task_id, "file": "/reports/q1.pdf",
                                        "name": "figures.pdf"})
    assert renamed["title"] == "figures.pdf"
    missing = failed("clickup.attachFile", {"connectionId": connection, "taskId": task_id, "file": "/nothing.pdf"})
    assert "nothing.pdf" in missing


# --- searching ----------------------------------------------------------------------------------------


@SQLITE
def test_search_filters_by_status_tags_assignees_due_dates_and_custom_fields(clickup, connection):
    points = clickup.add_custom_field(BACKLOG_ID, "Points", "number")
    now = datetime.now(UTC)
    clickup.add_task(BACKLOG_ID, "Overdue bug", tags=["bug"], assignees=[BERT["id"]], due=ms(now - timedelta(days=2)),
                     fields={points: 5})
    clickup.add_task(SPRINT_ID, "Feature", tags=["feature"], assignees=[ANNA["id"]], due=ms(now + timedelta(days=5)),
                     status="in progress", fields={})
    clickup.add_task(BACKLOG_ID, "Done bug", tags=["bug"], status="complete", due=ms(now - timedelta(days=1)))
    clickup.add_task(BACKLOG_ID, "Big one", fields={points: 13})

    def names(**filters) -> list[str]:
        output = ok("clickup.searchTasks", {"connectionId": connection, "teamId": TEAM_ID, **filters})
        assert output["count"] == len(output["tasks"]) and output["more"] is False
        return [t["name"] for t in output["tasks"]]

    assert names() == ["Overdue bug", "Feature", "Big one"]
    assert names(includeClosed=True) == ["Overdue bug", "Feature", "Done bug", "Big one"]
    assert names(tags=["bug"], includeClosed=True) == ["Overdue bug", "Done bug"]
    assert names(statuses=["in progress"]) == ["Feature"]
    assert names(assignees=["bert.keller@acme.example"]) == ["Overdue bug"]
    assert names(assignees=[ANNA["id"]]) == ["Feature"]
    assert names(overdueOnly=True) == ["Overdue bug"]
    today = now.date()
    assert names(dueDateFrom=(today - timedelta(days=2)).isoformat(), dueDateTo=today.isoformat(),
                 includeClosed=True) == ["Overdue bug", "Done bug"]
    assert names(dueDateFrom=(now + timedelta(days=1)).isoformat()) == ["Feature"]
    assert names(customFields=[{"fieldId": points, "operator": ">", "value": 8}]) == ["Big one"]
    assert names(customFields=[{"fieldId": points, "operator": "IS NULL"}]) == ["Feature"]
    assert names(spaceId=SPACE_ID, listId=None) == ["Overdue bug", "Feature", "Big one"]
    in_list = ok("clickup.searchTasks", {"connectionId": connection, "listId": SPRINT_ID})["tasks"]
    assert [t["name"] for t in in_list] == ["Feature"] and in_list[0]["list"]["name"] == "Sprint 12"
    assert in_list[0]["folder"] == {"id": FOLDER_ID, "name": "Sprints"}
    searched = clickup.calls("GET", f"/team/{TEAM_ID}/task")[-1][2]
    assert ("space_ids[]", SPACE_ID) in searched
    nowhere = run("clickup.searchTasks", {"connectionId": connection})
    assert not nowhere.ok and "teamId" in nowhere.error and "listId" in nowhere.error


@SQLITE
def test_search_follows_pages_up_to_the_limit(clickup, connection):
    clickup.page_size = 3
    for number in range(8):
        clickup.add_task(BACKLOG_ID, f"Task {number}")
    everything = ok("clickup.searchTasks", {"connectionId": connection, "teamId": TEAM_ID})
    assert [t["name"] for t in everything["tasks"]] == [f"Task {n}" for n in range(8)]
    assert (everything["more"], everything["nextPage"]) == (False, None)
    pages = [dict(q)["page"] for _m, _p, q in clickup.calls("GET", f"/team/{TEAM_ID}/task")]
    assert pages == ["0", "1", "2"]
    first = ok("clickup.searchTasks", {"connectionId": connection, "teamId": TEAM_ID, "limit": 6})
    assert [t["name"] for t in first["tasks"]] == [f"Task {n}" for n in range(6)]
    assert (first["more"], first["nextPage"]) == (True, 2)
    rest = ok("clickup.searchTasks", {"connectionId": connection, "teamId": TEAM_ID, "page": first["nextPage"]})
    assert [t["name"] for t in rest["tasks"]] == ["Task 6", "Task 7"] and rest["more"] is False
    cut = ok("clickup.searchTasks", {"connectionId": connection, "listId": BACKLOG_ID, "limit": 4})
    assert len(cut["tasks"]) == 4 and (cut["more"], cut["nextPage"]) == (True, 1)


@SQLITE
def test_the_rate_limit_is_waited_out_or_named(clickup, connection, monkeypatch):
    clickup.add_task(BACKLOG_ID, "Only one")
    clickup.fail_next(1, reset_in=1)
    found = ok("clickup.searchTasks", {"connectionId": connection, "listId": BACKLOG_ID})
    assert [t["name"] for t in found["tasks"]] == ["Only one"]
    assert len(clickup.calls("GET", f"/list/{BACKLOG_ID}/task")) == 2  # refused once, then answered
    clickup.fail_next(1, reset_in=-60)  # a reset already past: a short pause, then the answer
    assert ok("clickup.searchTasks", {"connectionId": connection, "listId": BACKLOG_ID})["count"] == 1
    clickup.fail_next(1, reset_in=3600)
    error = failed("clickup.searchTasks", {"connectionId": connection, "listId": BACKLOG_ID})
    assert "ClickUp is rate-limiting these requests (HTTP 429)" in error
    assert "POWERON_CONNECTOR_MAX_WAIT_SECONDS" in error and "try again later" in error


# --- who may use a connection -------------------------------------------------------------------------


@SQLITE
def test_a_foreign_connection_is_not_found(clickup, api, connection):
    acme = make_mandate(api, "Acme", "acme-admin")
    theirs = create(api, clickup.personal_token, "Acme's", headers=acme.admin)
    assert theirs.status_code == 201, theirs.text
    for connection_id in (theirs.json()["id"], "does-not-exist"):
        error = failed("clickup.listWorkspaces", {"connectionId": connection_id})
        assert error == f"connection {connection_id} not found"
    # Acme's administrator cannot use the admin's connection either (nor see that it exists).
    with session_scope() as session:
        other = session.exec(select(User).where(User.username == "acme-admin")).one()
        context = ActionContext(session, other, acme.id, acme.workspace_id)
        mine = execute_action("clickup.listWorkspaces", {"connectionId": theirs.json()["id"]}, context)
        result = execute_action("clickup.listWorkspaces", {"connectionId": connection}, context)
    assert mine.ok, mine.error
    assert not result.ok and result.error == f"connection {connection} not found"


@SQLITE
def test_an_agent_calls_the_tools_with_strict_nulls(clickup, connection, action_context):
    clickup.add_task(BACKLOG_ID, "Write the release notes", tags=["docs"])
    arguments = {"connectionId": connection, "teamId": TEAM_ID, "spaceId": None, "listId": None, "assignees": None,
                 "statuses": None, "tags": ["docs"], "dueDateFrom": None, "dueDateTo": None, "overdueOnly": None,
                 "customFields": None, "includeClosed": None, "page": None, "limit": None}
    result = execute_tool_call("clickup_searchTasks", json.dumps(arguments), action_context)
    assert result.ok, result.error
    assert [t["name"] for t in result.output["tasks"]] == ["Write the release notes"]
