"""Jira connections and the jira toolbox (issue 20), against the Jira Cloud / Data Center / Atlassian
identity stand-in (tests/jira_server.py) on 127.0.0.1: connections made over REST (Cloud API token,
Data Center personal access token, Atlassian OAuth 2.0 (3LO) by consent), every action through
execute_action as a user, paging both ways, Jira's own error texts, rate limits, export and import
through the file store, and the webhooks a trigger registers."""

from __future__ import annotations

import csv
import io
import json
import logging
import threading
from collections.abc import Iterator
from typing import Any
from urllib.parse import parse_qs, urlsplit

import pytest
from sqlmodel import select
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from backend.config import reset_settings_cache
from backend.connectors.store import credentials_of, unseal_secret
from backend.connectors.types import ConnectionFailed, connection_type
from backend.db import session_scope
from backend.db.models import Connection, FeatureInstance, User
from backend.files import service as files
from tests.integration.action_calls import failed, ok, run
from tests.integration.test_admin_api import make_mandate, signed_in
from tests.integration.test_msft_oauth import Browser
from tests.integration.test_msft_oauth import browser as msft_browser
from tests.jira_server import BERT, JiraServer, accept_consent, serve_jira
from tests.mcp_test_servers import free_port, serve_in_thread

SQLITE = pytest.mark.parametrize("db_url", ["sqlite"], indirect=True)  # the database plays no part here

API_URL = "http://testserver"
UI_URL = "http://ui.test"
CALLBACK = f"{API_URL}/api/connections/oauth/jira/callback"
OAUTH = "/api/connections/oauth/jira"
URL = "/api/connections"


def browser(headers: dict[str, str]) -> Browser:
    """A browser consenting at Atlassian (tests/integration/test_msft_oauth.Browser)."""
    return msft_browser(headers, "jira")


# --- the stand-in, the configuration, helpers -----------------------------------------------------------


@pytest.fixture(scope="module")
def _stand_in() -> Iterator[JiraServer]:
    with serve_jira(JiraServer(redirect_uri=CALLBACK)) as server:
        yield server


@pytest.fixture
def jira(_stand_in: JiraServer, app_config: str, monkeypatch: pytest.MonkeyPatch) -> JiraServer:
    """The stand-in with projects OPS and WEB, and the application configured for it."""
    _stand_in.reset()
    for name, value in {"POWERON_JIRA_CLIENT_ID": _stand_in.client_id,
                        "POWERON_JIRA_CLIENT_SECRET": _stand_in.client_secret,
                        "POWERON_ATLASSIAN_AUTH_URL": _stand_in.url, "POWERON_ATLASSIAN_API_URL": _stand_in.url,
                        "POWERON_API_URL": API_URL, "POWERON_UI_URL": UI_URL,
                        "POWERON_CONNECTOR_MAX_WAIT_SECONDS": "10"}.items():
        monkeypatch.setenv(name, value)
    reset_settings_cache()
    _stand_in.add_project("OPS", "Operations")
    _stand_in.add_project("WEB", "Website")
    return _stand_in


def cloud_settings(jira: JiraServer, **changes: Any) -> dict[str, Any]:
    return {"deployment": "cloud", "siteUrl": jira.url, "email": jira.email, "apiToken": jira.api_token, **changes}


def dc_settings(jira: JiraServer, **changes: Any) -> dict[str, Any]:
    return {"deployment": "datacenter", "siteUrl": jira.url, "apiToken": jira.pat, **changes}


def create(api, settings: dict[str, Any], label: str = "Jira", headers: dict | None = None):
    return api.client.post(URL, json={"type": "jira", "label": label, "settings": settings},
                           headers=headers or api.auth)


def connection(api, settings: dict[str, Any], label: str = "Jira", headers: dict | None = None) -> str:
    made = create(api, settings, label, headers)
    assert made.status_code == 201, made.text
    return made.json()["id"]


@pytest.fixture
def cloud(api, jira) -> str:
    return connection(api, cloud_settings(jira), "Jira Cloud")


@pytest.fixture
def datacenter(api, jira) -> str:
    return connection(api, dc_settings(jira), "Jira DC")








def _workspace_scope(session):
    user = session.exec(select(User).where(User.username == "admin")).one()
    instance = session.exec(select(FeatureInstance).where(FeatureInstance.feature_code == "workspace")
                            .order_by(FeatureInstance.sys_created_at)).first()
    return files.FileScope(session, user, instance.mandate_id, instance.id)


def put_file(path: str, data: bytes) -> None:
    with session_scope() as session:
        files.store_file(_workspace_scope(session), path, data, overwrite=True)


def read_file(path: str) -> bytes:
    with session_scope() as session:
        return files.read_bytes(_workspace_scope(session), path)[1]


def credentials(connection_id: str):
    with session_scope() as session:
        return credentials_of(session.get(Connection, connection_id))


# --- connections made with a token -------------------------------------------------------------------


@SQLITE
def test_a_cloud_token_connection_is_tested_stored_sealed_and_never_shown(api, jira, caplog):
    caplog.set_level(logging.DEBUG)
    made = create(api, cloud_settings(jira), "Acme Jira")
    assert made.status_code == 201, made.text
    body = made.json()
    assert (body["type"], body["typeLabel"], body["status"]) == ("jira", "Jira", "active")
    assert body["settings"]["tested"] == "signed in to 127.0.0.1 as Anna Meier: 2 projects"
    assert body["settings"]["email"] == jira.email and "apiToken" not in body["settings"]
    # Jira Cloud: REST v3 with Basic e-mail:token.
    assert ("GET", "/rest/api/3/myself", "Basic") in jira.requests
    with session_scope() as session:
        row = session.get(Connection, body["id"])
        assert row.secret.startswith("sealed:v1:") and jira.api_token not in row.secret
        assert unseal_secret(row) == {"apiToken": jira.api_token}
    for text in (made.text, api.client.get(URL, headers=api.auth).text, caplog.text):
        assert jira.api_token not in text
    tested = api.client.post(f"{URL}/{body['id']}/test", headers=api.auth).json()
    assert tested == {"ok": True, "message": "signed in to 127.0.0.1 as Anna Meier: 2 projects", "status": "active"}


@SQLITE
def test_a_data_center_connection_signs_in_with_its_personal_access_token(api, jira):
    made = create(api, {**dc_settings(jira), "email": "ignored@example.com"}, "On-prem Jira")
    assert made.status_code == 201, made.text
    assert made.json()["settings"]["deployment"] == "datacenter" and made.json()["settings"]["email"] is None
    assert ("GET", "/rest/api/2/myself", "Bearer") in jira.requests
    assert ("GET", "/rest/api/2/project", "Bearer") in jira.requests  # Data Center lists every project at once
    assert not any(path.startswith("/rest/api/3") for _m, path, _s in jira.requests)


@SQLITE
def test_bad_settings_and_refused_tokens_store_nothing_and_name_what_is_wrong(api, jira):
    refused = create(api, cloud_settings(jira, apiToken="not-the-token"))
    assert refused.status_code == 422
    assert refused.json()["errors"][0]["field"] == "settings"
    assert "Client must be authenticated to access this resource." in refused.json()["detail"]
    assert "not-the-token" not in refused.text
    wrong_pat = create(api, dc_settings(jira, apiToken="expired-pat"))
    assert wrong_pat.status_code == 422 and "Jira answered 401" in wrong_pat.json()["detail"]
    cases = {"settings.email": cloud_settings(jira, email=None),
             "settings.siteUrl": cloud_settings(jira, siteUrl="jira.example.com"),
             "settings.apiToken": {k: v for k, v in cloud_settings(jira).items() if k != "apiToken"},
             "settings.deployment": cloud_settings(jira, deployment="server")}
    for field, settings in cases.items():
        answer = create(api, settings)
        assert answer.status_code == 422, answer.text
        assert field in {e["field"] for e in answer.json()["errors"]}, (field, answer.json())
    assert "e-mail address of your Atlassian account" in create(api, cloud_settings(jira, email="")).text
    unreachable = create(api, cloud_settings(jira, siteUrl=f"http://127.0.0.1:{free_port()}"))
    assert unreachable.status_code == 422 and "cannot reach Jira" in unreachable.json()["detail"]
    with session_scope() as session:
        assert session.exec(select(Connection)).all() == []


# --- Atlassian OAuth 2.0 (3LO) -----------------------------------------------------------------------


def test_a_consent_at_atlassian_connects_the_jira_site_and_its_tokens_rotate(api, jira):
    admin = browser(signed_in("admin"))
    jira.extra_sites = [{"id": "c0nf1uence", "url": "https://wiki.example.net", "name": "wiki",
                         "scopes": ["read:confluence-content.all"]}]
    ticket = admin.ticket(label="Atlassian Jira")
    assert ticket.status_code == 201, ticket.text
    started = admin.client.get(ticket.json()["url"])
    authorize = urlsplit(started.headers["location"])
    assert f"{authorize.scheme}://{authorize.netloc}{authorize.path}" == f"{jira.url}/authorize"
    asked = {k: v[0] for k, v in parse_qs(authorize.query).items()}
    assert (asked["audience"], asked["prompt"], asked["client_id"], asked["redirect_uri"]) == \
        ("api.atlassian.com", "consent", jira.client_id, CALLBACK)
    assert set(asked["scope"].split()) == {"read:jira-work", "write:jira-work", "read:jira-user",
                                           "manage:jira-webhook", "read:me", "offline_access"}
    landed = admin.land(accept_consent(started.headers["location"]))
    assert "connected" in landed, landed
    made = api.client.get(f"{URL}/{landed['connected']}", headers=api.auth).json()
    assert (made["type"], made["label"], made["status"]) == ("jira", "Atlassian Jira", "active")
    settings = made["settings"]
    # The Jira site of accessible-resources (not the Confluence one listed first) and the account of /me.
    assert (settings["cloudId"], settings["siteUrl"], settings["account"], settings["auth"]) == \
        (jira.cloud_id, jira.url, "anna@example.com", "oauth")
    assert all(token not in json.dumps(made) for token in jira.issued)

    # Calls go through the gateway with the Bearer token.
    connected = ok("jira.connect", {"connectionId": landed["connected"]})
    assert [p["key"] for p in connected["projects"]] == ["OPS", "WEB"]
    assert "Atlassian sign-in" in connected["message"]
    assert ("GET", f"/ex/jira/{jira.cloud_id}/rest/api/3/myself", "Bearer") in jira.requests
    tested = api.client.post(f"{URL}/{landed['connected']}/test", headers=api.auth).json()
    assert tested["ok"] is True and tested["message"] == "signed in to 127.0.0.1 as Anna Meier: 2 projects"

    # An expired access token is refreshed; Atlassian rotates the refresh token, the new one is kept.
    before = unseal_secret(_row(landed["connected"]))
    jira.expire_access_tokens()
    found = ok("jira.searchIssues", {"connectionId": landed["connected"], "jql": "project = OPS"})
    assert found["issues"] == []
    after = unseal_secret(_row(landed["connected"]))
    assert after["refreshToken"] != before["refreshToken"]
    assert jira.refresh_tokens[before["refreshToken"]] == "used" and jira.refresh_tokens[after["refreshToken"]] == \
        "valid"
    assert [r["grant_type"] for r in jira.token_requests] == ["authorization_code", "refresh_token"]

    # A trigger's webhook is registered through the gateway too (see the report's caveat on real Atlassian).
    support = connection_type("jira").webhooks
    hook = support.register(credentials(landed["connected"]), "https://poweron.example/api/hooks/w/jira",
                            ("jira:issue_created",), {"jql": "project = OPS"}, "s3cr3t")
    assert ("POST", f"/ex/jira/{jira.cloud_id}/rest/webhooks/1.0/webhook", "Bearer") in jira.requests
    support.unregister(credentials(landed["connected"]), hook.remote_id)
    assert jira.webhooks == {}

    # A revoked consent makes the connection expired, saying what to do.
    jira.revoke_refresh_tokens()
    jira.expire_access_tokens()
    refused = failed("jira.connect", {"connectionId": landed["connected"]})
    assert "reconnect" in refused.lower() and "invalid_grant" in refused
    assert _row(landed["connected"]).status == "expired"


def _row(connection_id: str) -> Connection:
    with session_scope() as session:
        return session.get(Connection, connection_id)


@SQLITE
def test_a_declined_consent_connects_nothing(api, jira):
    admin = browser(signed_in("admin"))
    landed = admin.land(accept_consent(admin.start(), decision="deny"))
    assert landed == {"error": "the consent at Atlassian was declined; nothing was connected"}
    assert api.client.get(URL, headers=api.auth).json() == []


@SQLITE
def test_without_an_atlassian_app_only_the_token_way_is_offered(api, jira, monkeypatch):
    monkeypatch.delenv("POWERON_JIRA_CLIENT_SECRET")
    reset_settings_cache()
    types = {t["id"]: t for t in api.client.get(f"{URL}/types", headers=api.auth).json()}
    assert (types["jira"]["auth"], types["jira"]["unavailable"]) == ("password", None)
    assert {"deployment", "siteUrl", "email", "apiToken"} <= set(types["jira"]["settingsSchema"]["properties"])
    refused = api.client.post(f"{OAUTH}/tickets", json={}, headers=api.auth)
    assert refused.status_code == 422 and "POWERON_JIRA_CLIENT_SECRET" in refused.json()["detail"]
    assert create(api, cloud_settings(jira)).status_code == 201


# --- the actions ---------------------------------------------------------------------------------------


@SQLITE
def test_connect_checks_the_connection_and_lists_projects(jira, cloud, datacenter):
    for connection_id, deployment in ((cloud, "cloud"), (datacenter, "datacenter")):
        found = ok("jira.connect", {"connectionId": connection_id})
        assert found["deployment"] == deployment and found["account"] == "Anna Meier"
        assert [(p["key"], p["name"]) for p in found["projects"]] == [("OPS", "Operations"), ("WEB", "Website")]


@SQLITE
def test_create_read_update_move_and_comment_on_a_cloud_issue(jira, cloud):
    made = ok("jira.createIssue", {
        "connectionId": cloud, "projectKey": "OPS", "issueType": "Bug", "summary": "Printer on fire",
        "description": "It smokes.\n\nSecond paragraph.", "labels": ["hardware", "urgent"],
        "assignee": BERT["emailAddress"], "priority": "High", "fields": [{"name": "Story Points", "value": 3}]})
    assert made["key"] == "OPS-1" and made["url"] == f"{jira.url}/browse/OPS-1"
    stored = jira.issue("OPS-1")
    assert (stored.issuetype, stored.priority, stored.labels, stored.assignee, stored.custom) == \
        ("Bug", "High", ["hardware", "urgent"], BERT["accountId"], {"customfield_10016": 3})
    assert stored.description["type"] == "doc"  # Cloud got Atlassian Document Format
    assert jira.description_text("OPS-1") == "It smokes.\n\nSecond paragraph."

    issue = ok("jira.getIssue", {"connectionId": cloud, "issueKey": "OPS-1", "fields": ["Story Points"]})
    assert (issue["summary"], issue["status"], issue["assignee"], issue["priority"], issue["issueType"]) == \
        ("Printer on fire", "To Do", "Bert Keller", "High", "Bug")
    assert issue["description"] == "It smokes.\n\nSecond paragraph." and issue["fields"] == {"Story Points": 3}

    changed = ok("jira.updateIssue", {"connectionId": cloud, "issueKey": "OPS-1", "summary": "Printer fixed",
                                      "addLabels": ["done-soon"], "assignee": "none"})
    assert changed["changed"] == ["assignee", "labels", "summary"]
    assert (stored.summary, stored.assignee, stored.labels) == ("Printer fixed", None, ["hardware", "urgent",
                                                                                          "done-soon"])
    assert "name at least one field" in failed("jira.updateIssue", {"connectionId": cloud, "issueKey": "OPS-1"})

    moved = ok("jira.transitionIssue", {"connectionId": cloud, "issueKey": "OPS-1", "transition": "In Progress"})
    assert (moved["transition"], moved["fromStatus"], moved["status"]) == ("Start Progress", "To Do", "In Progress")
    moved = ok("jira.transitionIssue", {"connectionId": cloud, "issueKey": "OPS-1", "transition": "resolve"})
    assert moved["status"] == "Done" and stored.status == "Done"
    nowhere = failed("jira.transitionIssue", {"connectionId": cloud, "issueKey": "OPS-1", "transition": "Archive"})
    assert nowhere == ("issue OPS-1 (status 'Done') has no transition 'Archive' now; available: 'Reopen' → To Do, "
                       "'Start Progress' → In Progress")

    comment = ok("jira.addComment", {"connectionId": cloud, "issueKey": "OPS-1", "text": "Fixed by IT."})
    assert comment["issueKey"] == "OPS-1" and comment["id"]
    again = ok("jira.getIssue", {"connectionId": cloud, "issueKey": "OPS-1"})
    assert [(c["author"], c["text"]) for c in again["comments"]] == [("Anna Meier", "Fixed by IT.")]


@SQLITE
def test_data_center_gets_plain_text_and_users_by_name(jira, datacenter):
    made = ok("jira.createIssue", {"connectionId": datacenter, "projectKey": "WEB", "summary": "New landing page",
                                   "description": "Make it shine", "assignee": "bert"})
    assert made["key"] == "WEB-1" and jira.issue("WEB-1").assignee == BERT["accountId"]
    assert ("POST", "/rest/api/2/issue", "Bearer") in jira.requests
    ok("jira.addComment", {"connectionId": datacenter, "issueKey": "WEB-1", "text": "On it"})
    issue = ok("jira.getIssue", {"connectionId": datacenter, "issueKey": "WEB-1"})
    assert (issue["description"], issue["comments"][0]["text"], issue["assignee"]) == \
        ("Make it shine", "On it", "Bert Keller")


@SQLITE
def test_bad_input_names_what_is_wrong(jira, cloud):
    jira.add_issue("OPS", "Existing")
    unknown_project = failed("jira.createIssue", {"connectionId": cloud, "projectKey": "NOPE", "summary": "x"})
    assert "there is no Jira project 'NOPE'" in unknown_project and "jira.connect lists the projects" in \
        unknown_project
    assert "there is no Jira issue OPS-99" in failed("jira.getIssue", {"connectionId": cloud, "issueKey": "OPS-99"})
    assert "there is no Jira issue OPS-99" in failed("jira.addComment", {"connectionId": cloud, "issueKey": "OPS-99",
                                                                         "text": "hi"})
    assert "no Jira user matches 'nobody@example.com'" in failed("jira.createIssue", {
        "connectionId": cloud, "projectKey": "OPS", "summary": "x", "assignee": "nobody@example.com"})
    assert "fields: Jira has no field 'Velocity'" in failed("jira.createIssue", {
        "connectionId": cloud, "projectKey": "OPS", "summary": "x", "fields": [{"name": "Velocity", "value": 1}]})
    # Jira's own field errors pass through by field.
    refused = failed("jira.createIssue", {"connectionId": cloud, "projectKey": "OPS", "summary": "x",
                                          "issueType": "Epic", "priority": "Critical"})
    assert "issuetype: Specify a valid issue type" in refused and "priority: Priority name 'Critical' is not valid" \
        in refused
    assert "invalid parameters" in failed("jira.getIssue", {"connectionId": cloud, "issueKey": "not a key"})
    assert "holds a space" in failed("jira.createIssue", {"connectionId": cloud, "projectKey": "OPS",
                                                         "summary": "x", "labels": ["two words"]})


@SQLITE
def test_invalid_jql_shows_jiras_own_text(jira, cloud, datacenter):
    for connection_id in (cloud, datacenter):
        said = failed("jira.searchIssues", {"connectionId": connection_id, "jql": "project OPS"})
        assert "Error in the JQL Query: Expecting operator but got 'OPS'." in said, said
        said = failed("jira.searchIssues", {"connectionId": connection_id, "jql": "project = NOPE"})
        assert "The value 'NOPE' does not exist for the field 'project'." in said
        said = failed("jira.searchIssues", {"connectionId": connection_id, "jql": "sprint = 4"})
        assert "Field 'sprint' does not exist or you do not have permission to view it." in said
    assert "Unbounded JQL queries are not allowed here" in failed(
        "jira.searchIssues", {"connectionId": cloud, "jql": "ORDER BY created"})


@SQLITE
def test_search_pages_by_next_page_token_on_cloud_and_start_at_on_data_center(jira, cloud, datacenter):
    keys = [jira.add_issue("OPS", f"Ticket {n}", labels=("batch",)) for n in range(7)]
    jira.add_issue("WEB", "Elsewhere", labels=("batch",))
    jql = "project = OPS AND labels = batch ORDER BY key ASC"
    seen, token, pages = [], None, 0
    while True:
        page = ok("jira.searchIssues", {"connectionId": cloud, "jql": jql, "maxResults": 3, "pageToken": token})
        seen += [i["key"] for i in page["issues"]]
        pages += 1
        token = page["nextPageToken"]
        if token is None:
            break
    assert (seen, pages) == (keys, 3)
    first = ok("jira.searchIssues", {"connectionId": cloud, "jql": jql, "maxResults": 1})["issues"][0]
    assert (first["summary"], first["status"], first["assignee"], first["url"], first["project"]) == \
        ("Ticket 0", "To Do", None, f"{jira.url}/browse/OPS-1", "OPS")
    assert first["created"].endswith("+0000") and first["labels"] == ["batch"]

    seen, start = [], 0
    while True:
        page = ok("jira.searchIssues", {"connectionId": datacenter, "jql": jql, "maxResults": 3, "startAt": start})
        assert page["total"] == 7
        seen += [i["key"] for i in page["issues"]]
        if page["nextPageToken"] is None:
            break
        start = int(page["nextPageToken"])
    assert seen == keys
    assert "startAt: Jira Cloud pages by pageToken" in failed(
        "jira.searchIssues", {"connectionId": cloud, "jql": jql, "startAt": 3})
    expired = failed("jira.searchIssues", {"connectionId": cloud, "jql": jql, "pageToken": "made-up"})
    assert "The provided next page token is invalid or expired." in expired


@SQLITE
def test_a_rate_limit_is_waited_out_as_retry_after_asks(jira, cloud, monkeypatch):
    jira.add_issue("OPS", "One")
    jira.fail_next(1, 429, "1")
    found = ok("jira.searchIssues", {"connectionId": cloud, "jql": "project = OPS"})
    assert [i["summary"] for i in found["issues"]] == ["One"]
    assert jira.calls("POST", "/search/jql") == 2  # refused once, then answered
    monkeypatch.setenv("POWERON_CONNECTOR_MAX_WAIT_SECONDS", "5")
    reset_settings_cache()
    jira.fail_next(1, 429, "120")
    said = failed("jira.searchIssues", {"connectionId": cloud, "jql": "project = OPS"})
    assert "Jira is rate-limiting these requests (HTTP 429) while searching issues" in said
    assert "POWERON_CONNECTOR_MAX_WAIT_SECONDS" in said


@SQLITE
def test_another_users_or_an_unknown_connection_is_not_found(api, jira, cloud):
    acme = make_mandate(api, "Acme", "acme-admin")
    theirs = connection(api, cloud_settings(jira), "Acme's Jira", headers=acme.admin)
    for connection_id in (theirs, "0" * 32):
        said = failed("jira.connect", {"connectionId": connection_id})
        assert said == f"connection {connection_id} not found"
    # Acme's admin does not see the system admin's connection either, and uses their own.
    said = run("jira.searchIssues", {"connectionId": cloud, "jql": "project = OPS"}, "acme-admin", acme.workspace_id)
    assert said.error == f"connection {cloud} not found"
    assert run("jira.connect", {"connectionId": theirs}, "acme-admin", acme.workspace_id).ok
    # Over REST a connection the caller cannot see answers 404, naming it.
    workspace = next(i["id"] for i in api.client.get("/api/me", headers=api.auth).json()["instances"]
                     if i["featureCode"] == "workspace")
    answer = api.client.post(f"/api/instances/{workspace}/actions", headers=api.auth, json={
        "action": "jira.searchIssues", "parameters": {"connectionId": theirs, "jql": "project = OPS"}})
    assert answer.status_code == 404, answer.text
    assert answer.json()["detail"] == f"connection {theirs} not found"


# --- export and import -----------------------------------------------------------------------------------


@SQLITE
def test_export_writes_every_page_as_csv_or_json_with_the_chosen_fields(jira, cloud):
    for n in range(120):
        jira.add_issue("OPS", f"Ticket {n}", labels=("a", "b") if n == 0 else (), customfield_10016=n)
    jira.add_issue("WEB", "Not exported")
    exported = ok("jira.exportTickets", {"connectionId": cloud, "jql": "project = OPS ORDER BY key ASC",
                                         "fields": ["key", "summary", "status", "labels", "Story Points", "url"],
                                         "path": "/exports/ops.csv"})
    assert (exported["path"], exported["count"], exported["truncated"]) == ("/exports/ops.csv", 120, False)
    rows = list(csv.reader(io.StringIO(read_file("/exports/ops.csv").decode())))
    assert rows[0] == ["key", "summary", "status", "labels", "Story Points", "url"]
    assert rows[1] == ["OPS-1", "Ticket 0", "To Do", "a;b", "0", f"{jira.url}/browse/OPS-1"]
    assert len(rows) == 121 and rows[-1][0] == "OPS-120"
    assert jira.calls("POST", "/search/jql") == 2  # two pages of 100

    capped = ok("jira.exportTickets", {"connectionId": cloud, "jql": "project = OPS ORDER BY key ASC",
                                       "format": "json", "maxIssues": 5, "fields": ["key", "assignee", "created"]})
    assert capped["path"].startswith("/jira/export-") and capped["path"].endswith(".json")
    assert (capped["count"], capped["truncated"]) == (5, True)
    items = json.loads(read_file(capped["path"]))
    assert [i["key"] for i in items] == ["OPS-1", "OPS-2", "OPS-3", "OPS-4", "OPS-5"]
    assert items[0]["assignee"] is None and items[0]["created"].endswith("+0000")
    taken = failed("jira.exportTickets", {"connectionId": cloud, "jql": "project = OPS", "path": "/exports/ops.csv"})
    assert "overwrite" in taken
    assert "fields: Jira has no field 'Velocity'" in failed(
        "jira.exportTickets", {"connectionId": cloud, "jql": "project = OPS", "fields": ["key", "Velocity"]})


IMPORT_CSV = (
    "externalKey,summary,description,issueType,labels,priority,assignee,Story Points\r\n"
    "CRM-1,Call back Müller AG,\"Wants a quote.\nBy Friday.\",Task,customer;sales,High,bert@example.com,3\r\n"
    "CRM-2,Renew contract,,Story,,Low,,\r\n"
    "CRM-3,Fix invoice address,Wrong street,Bug,billing,,,5\r\n"
)


def test_import_dry_run_then_import_then_again_changes_nothing(jira, cloud):
    put_file("/imports/crm.csv", IMPORT_CSV.encode())
    params = {"connectionId": cloud, "file": "/imports/crm.csv", "projectKey": "OPS"}
    dry = ok("jira.importTickets", {**params, "dryRun": True})
    assert (dry["dryRun"], dry["rows"], dry["problems"], dry["updated"], dry["unchanged"]) == (True, 3, [], [], [])
    assert [(r["row"], r["externalKey"], r["key"]) for r in dry["created"]] == \
        [(2, "CRM-1", None), (4, "CRM-2", None), (5, "CRM-3", None)]  # CRM-1's quoted description spans two lines
    assert jira.issues == {}

    done = ok("jira.importTickets", params)
    assert [(r["externalKey"], r["key"]) for r in done["created"]] == [("CRM-1", "OPS-1"), ("CRM-2", "OPS-2"),
                                                                        ("CRM-3", "OPS-3")]
    first = jira.issue("OPS-1")
    assert (first.summary, first.labels, first.priority, first.assignee, first.custom["customfield_10016"]) == \
        ("Call back Müller AG", ["customer", "sales", "ext-CRM-1"], "High", BERT["accountId"], 3)
    assert jira.description_text("OPS-1") == "Wants a quote.\nBy Friday."
    assert (jira.issue("OPS-2").issuetype, jira.issue("OPS-3").issuetype) == ("Story", "Bug")

    again = ok("jira.importTickets", params)
    assert (again["created"], again["updated"]) == ([], [])
    assert [r["key"] for r in again["unchanged"]] == ["OPS-1", "OPS-2", "OPS-3"]
    assert len(jira.issues) == 3

    # A changed row updates its issue (only what differs); someone's extra label in Jira stays.
    jira.issue("OPS-3").labels.append("triaged")
    put_file("/imports/crm.csv", IMPORT_CSV.replace("Fix invoice address,Wrong street", "Fix invoice address,"
                                                    "Wrong street and zip").encode())
    changed = ok("jira.importTickets", {**params, "dryRun": True})
    assert [(r["key"], r["changes"]) for r in changed["updated"]] == [("OPS-3", ["description"])]
    applied = ok("jira.importTickets", params)
    assert [(r["key"], r["changes"]) for r in applied["updated"]] == [("OPS-3", ["description"])]
    assert jira.description_text("OPS-3") == "Wrong street and zip"
    assert jira.issue("OPS-3").labels == ["billing", "ext-CRM-3", "triaged"]


@SQLITE
def test_an_import_with_bad_rows_imports_nothing_and_names_each_row(jira, cloud):
    bad = ("externalKey,summary,issueType,priority,labels,assignee,Velocity\r\n"
           "A-1,Fine row,Task,,,,\r\n"
           ",No key,Task,,,,\r\n"
           "A-3,,Task,,,,\r\n"
           "A-4,Bad type,Epic,Critical,,,\r\n"
           "A-1,Repeated key,Task,,,,\r\n"
           "A-6,Bad label,Task,,two words,nobody@example.com,\r\n")
    put_file("/imports/bad.csv", bad.encode())
    params = {"connectionId": cloud, "file": "/imports/bad.csv", "projectKey": "OPS"}
    said = failed("jira.importTickets", params)
    assert said.startswith("nothing was imported: ")
    for expected in ("column 'Velocity': Jira has no such field", "row 3: externalKey: missing", "row 4: summary: "
                     "missing", "row 5: issueType: 'Epic' is not a type of this project (Task, Bug, Story)",
                     "row 5: priority: 'Critical' is not a Jira priority", "row 6: externalKey 'A-1' repeats row 2",
                     "row 7: labels: 'two words' holds a space", "row 7: assignee: no Jira user matches "
                     "'nobody@example.com'"):
        assert expected in said, (expected, said)
    assert jira.issues == {} and jira.calls("POST", "/rest/api/3/issue") == 0
    dry = ok("jira.importTickets", {**params, "dryRun": True})
    assert [r["externalKey"] for r in dry["created"]] == ["A-1"]
    assert dry["problems"][0].startswith("column 'Velocity': Jira has no such field")
    assert dry["problems"][1:3] == ["row 3: externalKey: missing", "row 4: summary: missing"]
    assert len(dry["problems"]) == 8 and jira.issues == {}
    assert "projectKey: there is no Jira project 'NOPE'" in failed("jira.importTickets", {**params, "projectKey":
                                                                                         "NOPE"})
    assert "file" in failed("jira.importTickets", {**params, "file": "/imports/missing.csv"})


@SQLITE
def test_a_json_file_imports_on_data_center_too(jira, datacenter):
    rows = [{"externalKey": "J-1", "summary": "From JSON", "labels": ["imported"], "description": "Plain"},
            {"externalKey": "J-2", "summary": "Second", "issueType": "Bug"}, "not an object"]
    put_file("/imports/tickets.json", json.dumps(rows).encode())
    params = {"connectionId": datacenter, "file": "/imports/tickets.json", "projectKey": "WEB"}
    dry = ok("jira.importTickets", {**params, "dryRun": True})
    assert dry["problems"] == ["row 3: not an object"] and dry["rows"] == 3
    assert "row 3: not an object" in failed("jira.importTickets", params)
    put_file("/imports/tickets.json", json.dumps(rows[:2]).encode())
    done = ok("jira.importTickets", params)
    assert [r["key"] for r in done["created"]] == ["WEB-1", "WEB-2"]
    assert jira.issue("WEB-1").labels == ["imported", "ext-J-1"] and jira.description_text("WEB-1") == "Plain"
    assert [r["key"] for r in ok("jira.importTickets", params)["unchanged"]] == ["WEB-1", "WEB-2"]


# --- webhooks ---------------------------------------------------------------------------------------------


@pytest.fixture
def receiver() -> Iterator[dict[str, Any]]:
    """An HTTP endpoint on 127.0.0.1 that keeps what is POSTed to it."""
    got: list[tuple[dict[str, str], bytes]] = []
    lock = threading.Lock()

    async def take(request: Request) -> Response:
        body = await request.body()
        with lock:
            got.append(({k.lower(): v for k, v in request.headers.items()}, body))
        return Response(status_code=204)

    port = free_port()
    with serve_in_thread(Starlette(routes=[Route("/hook", take, methods=["POST"])]), port):
        yield {"url": f"http://127.0.0.1:{port}/hook", "got": got}


@SQLITE
def test_webhooks_register_deliver_signed_events_verify_and_unregister(jira, cloud, receiver):
    support = connection_type("jira").webhooks
    assert support.events[0] == "jira:issue_created"
    params = support.params_model.model_validate(
        {"connectionId": cloud, "events": ["jira:issue_created", "comment_created"], "jql": "project = OPS"})
    hook = support.register(credentials(cloud), receiver["url"], ("jira:issue_created", "comment_created"),
                            params.model_dump(by_alias=True), "s3cr3t-from-poweron")
    registered = jira.webhooks[hook.remote_id]
    assert (registered.url, registered.events, registered.jql, registered.secret) == \
        (receiver["url"], ["jira:issue_created", "comment_created"], "project = OPS", "s3cr3t-from-poweron")
    assert hook.secret == "s3cr3t-from-poweron"

    ok("jira.createIssue", {"connectionId": cloud, "projectKey": "WEB", "summary": "Not for this hook"})
    ok("jira.createIssue", {"connectionId": cloud, "projectKey": "OPS", "summary": "Server down"})
    ok("jira.updateIssue", {"connectionId": cloud, "issueKey": "OPS-1", "summary": "Server down!"})  # not subscribed
    ok("jira.addComment", {"connectionId": cloud, "issueKey": "OPS-1", "text": "Looking"})
    jira.wait_for_deliveries(2)
    # Each on its own thread, as Jira sends them: in any order.
    assert sorted((d["event"], d["issue"], d["status"]) for d in jira.deliveries) == \
        [("comment_created", "OPS-1", 204), ("jira:issue_created", "OPS-1", 204)]
    got = {json.loads(body)["webhookEvent"]: (headers, body) for headers, body in receiver["got"]}
    headers, body = got["jira:issue_created"]
    assert headers["x-hub-signature"].startswith("sha256=")
    assert support.verify(headers, body, "s3cr3t-from-poweron") is True
    assert support.verify(headers, body + b" ", "s3cr3t-from-poweron") is False
    assert support.verify(headers, body, "another-secret") is False
    assert support.verify({}, body, "s3cr3t-from-poweron") is False
    payload = json.loads(body)
    assert support.event_of(payload) == "jira:issue_created" and payload["issue"]["key"] == "OPS-1"
    assert support.event_of(json.loads(got["comment_created"][1])) == "comment_created"
    assert json.loads(got["comment_created"][1])["comment"]["body"] == "Looking"
    assert support.event_of({"hello": "world"}) is None and support.event_of([1]) is None

    # A delivery a test asks for is signed the same way.
    body, signed = jira.signed_delivery("jira:issue_updated", "OPS-1", "s3cr3t-from-poweron")
    assert support.verify({k.lower(): v for k, v in signed.items()}, body, "s3cr3t-from-poweron")

    support.unregister(credentials(cloud), hook.remote_id)
    assert jira.webhooks == {}
    support.unregister(credentials(cloud), hook.remote_id)  # already gone: no error
    assert jira.deliver("jira:issue_created", "OPS-1") == []


@SQLITE
def test_registering_a_webhook_needs_a_jira_administrator(jira, cloud, receiver):
    support = connection_type("jira").webhooks
    jira.admin = False
    with pytest.raises(ConnectionFailed, match="Only Jira administrators can manage webhooks"):
        support.register(credentials(cloud), receiver["url"], ("jira:issue_created",), {}, "secret")
    jira.admin = True
    with pytest.raises(ConnectionFailed, match="Invalid JQL filter: Field 'nope' does not exist"):
        support.register(credentials(cloud), receiver["url"], ("jira:issue_created",), {"jql": "nope = 1"}, "secret")
