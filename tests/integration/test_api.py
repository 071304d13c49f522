"""The REST routes of the foundation: health, login, identity and workflow CRUD with versions."""

from __future__ import annotations

import pytest
from sqlmodel import select

from backend.auth import THROTTLE_FREE_FAILURES, hash_password
from backend.db import session_scope
from backend.db.models import User, WorkflowVersion
from backend.tenancy import create_feature_instance, create_mandate, grant_instance_roles

GRAPH = {
    "nodes": [
        {"id": "start", "type": "trigger.manual", "parameters": {}, "position": {"x": 0, "y": 0}},
        {"id": "big", "type": "flow.ifElse", "parameters": {"condition": "{{ input.amount > 1000 }}"}},
    ],
    "edges": [{"source": "start", "target": "big"}],
}


def _make_user(username: str, password: str = "pw-123456") -> None:
    with session_scope() as session:
        session.add(User(username=username, password_hash=hash_password(password)))


def _grant(username: str, instance_id: str, role: str) -> None:
    from backend.db.models import FeatureInstance

    with session_scope() as session:
        user = session.exec(select(User).where(User.username == username)).one()
        grant_instance_roles(session, user, session.get(FeatureInstance, instance_id), [role])


def test_health_needs_no_token_and_reports_the_database(api):
    response = api.client.get("/api/health")
    assert response.status_code == 200
    body = response.json()
    assert body["status"] == "ok" and body["db"] == "ok"
    assert {"workspace", "graphicalEditor"} <= set(body["features"])


def test_openapi_document_lists_the_workflow_routes(api):
    paths = api.client.get("/api/openapi.json").json()["paths"]
    base = "/api/graphicalEditor/{instanceId}/workflows"
    for path in ("/api/health", "/api/auth/login", "/api/me", base, base + "/{workflowId}",
                 base + "/{workflowId}/draft", base + "/{workflowId}/versions"):
        assert path in paths


def test_every_route_but_health_and_login_needs_a_bearer_token(api):
    paths = api.client.get("/api/openapi.json").json()["paths"]
    public = {"/api/health", "/api/auth/login", "/api/auth/oidc", "/api/auth/oidc/login",
              "/api/auth/oidc/callback", "/api/auth/oidc/exchange", "/api/connections/oauth/{type}/callback"}
    public |= {"/api/chatbot/embed/{token}/messages"}  # a Chatbot's embed: its link token, wrong ones 404
    # A task mail's link: the token is the credential (a bearer, when sent, says who decides).
    public |= {"/api/task-links/{token}", "/api/task-links/{token}/decision"}
    # DESIGN §6: webhooks authenticate by their signature; a workflow's public form by being public.
    public_prefixes = ("/api/hooks/", "/api/forms/")
    checked = 0
    for path, methods in paths.items():
        if path in public or path.startswith(public_prefixes):
            continue
        url = path.replace("{instanceId}", api.instance_id).replace("{workflowId}", "x").replace("{type}", "msft")
        for method in methods:
            response = api.client.request(method.upper(), url, headers={"Authorization": "Bearer pon_bogus"})
            assert response.status_code == 401, (method, path, response.text)
            checked += 1
    assert checked >= 10


def test_login_answers_the_same_for_unknown_user_and_wrong_password(api):
    wrong = api.client.post("/api/auth/login", json={"username": "admin", "password": "nope"})
    unknown = api.client.post("/api/auth/login", json={"username": "ghost", "password": "nope"})
    assert wrong.status_code == unknown.status_code == 401
    assert wrong.json() == unknown.json()
    assert "token" not in wrong.json()


def test_repeated_failures_are_throttled_even_for_the_right_password(api):
    _make_user("carla", "right-password")
    for _ in range(THROTTLE_FREE_FAILURES):
        assert api.client.post("/api/auth/login", json={"username": "carla", "password": "x"}).status_code == 401
    throttled = api.client.post("/api/auth/login", json={"username": "carla", "password": "right-password"})
    assert throttled.status_code == 429
    assert int(throttled.headers["Retry-After"]) > 0
    assert "Too many failed sign-in attempts" in throttled.json()["detail"]


def test_login_rejects_missing_fields_naming_them(api):
    response = api.client.post("/api/auth/login", json={"username": "admin"})
    assert response.status_code == 422
    assert any(e["field"] == "password" for e in response.json()["errors"])


def test_me_and_logout(api):
    me = api.client.get("/api/me", headers=api.auth).json()
    assert me["username"] == "admin" and me["isSysadmin"] is True
    assert [m["name"] for m in me["mandates"]] == ["Default"]
    roles = {i["featureCode"]: i["roles"] for i in me["instances"]}
    assert roles == {"workspace": ["workspace-admin"], "graphicalEditor": ["graphicalEditor-admin"]}
    assert api.client.post("/api/auth/logout", headers=api.auth).status_code == 204
    assert api.client.get("/api/me", headers=api.auth).status_code == 401


def test_workflow_crud_round_trip(api):
    base = api.base()
    created = api.client.post(f"{base}/workflows", json={"name": "Invoice approval"}, headers=api.auth)
    assert created.status_code == 201, created.text
    workflow = created.json()
    assert workflow["name"] == "Invoice approval"
    assert workflow["featureInstanceId"] == api.instance_id
    assert workflow["draftVersion"] == 1 and workflow["publishedVersion"] is None
    assert [n["type"] for n in workflow["graph"]["nodes"]] == ["trigger.manual"]
    assert workflow["executionLogs"][0]["action"] == "created"
    wid = workflow["id"]

    listed = api.client.get(f"{base}/workflows", headers=api.auth).json()
    assert [w["name"] for w in listed] == ["Invoice approval"]

    renamed = api.client.patch(f"{base}/workflows/{wid}", json={"name": "Invoices", "active": True},
                               headers=api.auth)
    assert renamed.status_code == 200
    assert renamed.json()["name"] == "Invoices" and renamed.json()["active"] is True
    assert api.client.get(f"{base}/workflows/{wid}", headers=api.auth).json()["name"] == "Invoices"

    assert api.client.delete(f"{base}/workflows/{wid}", headers=api.auth).status_code == 204
    assert api.client.get(f"{base}/workflows/{wid}", headers=api.auth).status_code == 404
    assert api.client.get(f"{base}/workflows", headers=api.auth).json() == []


def test_duplicate_and_empty_names_are_refused_without_writing(api):
    base = api.base()
    first = api.client.post(f"{base}/workflows", json={"name": "Same"}, headers=api.auth).json()
    duplicate = api.client.post(f"{base}/workflows", json={"name": "Same"}, headers=api.auth)
    assert duplicate.status_code == 409
    assert "Same" in duplicate.json()["detail"] and "name" in duplicate.json()["detail"]
    empty = api.client.post(f"{base}/workflows", json={"name": "  "}, headers=api.auth)
    assert empty.status_code == 422 and empty.json()["errors"][0]["field"] == "name"
    other = api.client.post(f"{base}/workflows", json={"name": "Other"}, headers=api.auth).json()
    clash = api.client.patch(f"{base}/workflows/{other['id']}", json={"name": "Same"}, headers=api.auth)
    assert clash.status_code == 409
    names = sorted(w["name"] for w in api.client.get(f"{base}/workflows", headers=api.auth).json())
    assert names == ["Other", "Same"]
    assert first["id"] != other["id"]


def test_unknown_body_fields_are_refused_by_name(api):
    base = api.base()
    response = api.client.post(f"{base}/workflows", json={"name": "X", "colour": "red"}, headers=api.auth)
    assert response.status_code == 422
    assert response.json()["errors"][0]["field"] == "colour"


def test_malformed_graph_is_refused_naming_each_path_and_nothing_is_written(api):
    base = api.base()
    wid = api.client.post(f"{base}/workflows", json={"name": "Graphs"}, headers=api.auth).json()["id"]
    bad = {"nodes": [{"id": "a", "type": "trigger.manual"}, {"id": "a", "type": ""},
                     {"type": "flow.stop", "position": {"x": "left"}}],
           "edges": [{"source": "a", "target": "nowhere"}]}
    response = api.client.put(f"{base}/workflows/{wid}/draft", json={"graph": bad}, headers=api.auth)
    assert response.status_code == 422
    fields = {(e["field"], e["nodeId"]) for e in response.json()["errors"]}
    assert ("nodes[1].id", "a") in fields
    assert ("nodes[1].type", "a") in fields
    assert ("nodes[2].id", None) in fields
    assert ("nodes[2].position", None) in fields
    assert ("edges[0].target", "nowhere") in fields
    graph = api.client.get(f"{base}/workflows/{wid}", headers=api.auth).json()["graph"]
    assert [n["id"] for n in graph["nodes"]] == ["start"]
    not_a_graph = api.client.put(f"{base}/workflows/{wid}/draft", json={"graph": [1, 2]}, headers=api.auth)
    assert not_a_graph.status_code == 422 and not_a_graph.json()["errors"][0]["field"] == "graph"


def test_version_lifecycle_publish_edit_archive_restore(api):
    base = api.base()
    wid = api.client.post(f"{base}/workflows", json={"name": "Lifecycle", "graph": GRAPH},
                          headers=api.auth).json()["id"]
    url = f"{base}/workflows/{wid}"

    published = api.client.post(f"{url}/publish", headers=api.auth)
    assert published.status_code == 200 and published.json()["status"] == "published"
    again = api.client.post(f"{url}/publish", headers=api.auth)
    assert again.status_code == 409 and "no draft" in again.json()["detail"]

    # Editing after publishing starts a new draft; the published graph stays as it was.
    edited = {**GRAPH, "nodes": GRAPH["nodes"][:1], "edges": []}
    draft = api.client.put(f"{url}/draft", json={"graph": edited}, headers=api.auth).json()
    assert draft["versionNumber"] == 2 and draft["status"] == "draft"
    versions = api.client.get(f"{url}/versions", headers=api.auth).json()
    assert [(v["versionNumber"], v["status"]) for v in versions] == [(2, "draft"), (1, "published")]
    assert len(versions[1]["graph"]["nodes"]) == 2

    # The draft cannot be unpublished over; publishing v2 archives v1.
    assert api.client.post(f"{url}/unpublish", headers=api.auth).status_code == 409
    assert api.client.post(f"{url}/publish", headers=api.auth).json()["versionNumber"] == 2
    versions = api.client.get(f"{url}/versions", headers=api.auth).json()
    assert [(v["versionNumber"], v["status"]) for v in versions] == [(2, "published"), (1, "archived")]

    # Restoring v1 archives v2; archive leaves no published version.
    v1 = versions[1]["id"]
    restored = api.client.post(f"{url}/restore", json={"versionId": v1}, headers=api.auth)
    assert restored.status_code == 200 and restored.json()["versionNumber"] == 1
    assert api.client.get(url, headers=api.auth).json()["publishedVersion"] == 1
    assert api.client.post(f"{url}/archive", headers=api.auth).json()["status"] == "archived"
    assert api.client.get(url, headers=api.auth).json()["publishedVersion"] is None
    assert api.client.post(f"{url}/archive", headers=api.auth).status_code == 409

    # Unpublish returns the published version to draft when there is no other draft.
    api.client.post(f"{url}/restore", json={"versionId": v1}, headers=api.auth)
    unpublished = api.client.post(f"{url}/unpublish", headers=api.auth)
    assert unpublished.status_code == 200 and unpublished.json()["status"] == "draft"
    actions = [e["action"] for e in api.client.get(url, headers=api.auth).json()["executionLogs"]]
    assert actions == ["created", "published", "published", "restored", "archived", "restored", "unpublished"]


def test_published_graph_cannot_be_changed_even_by_code(api):
    base = api.base()
    wid = api.client.post(f"{base}/workflows", json={"name": "Frozen", "graph": GRAPH}, headers=api.auth).json()["id"]
    api.client.post(f"{base}/workflows/{wid}/publish", headers=api.auth)
    from backend.db.models import ImmutableVersionError

    with pytest.raises(ImmutableVersionError, match="published"):
        with session_scope() as session:
            version = session.exec(select(WorkflowVersion).where(WorkflowVersion.workflow_id == wid)).one()
            version.graph = {"nodes": [], "edges": []}
            session.add(version)
    versions = api.client.get(f"{base}/workflows/{wid}/versions", headers=api.auth).json()
    assert len(versions[0]["graph"]["nodes"]) == 2


def test_foreign_instances_and_workflows_answer_404(api):
    base = api.base()
    wid = api.client.post(f"{base}/workflows", json={"name": "Mine"}, headers=api.auth).json()["id"]
    with session_scope() as session:
        other = create_mandate(session, "Other Corp")
        other_instance = create_feature_instance(session, other, "graphicalEditor", "Their editor").id
    _make_user("mallory")
    _grant("mallory", other_instance, "graphicalEditor-admin")
    mallory = {"Authorization": f"Bearer {api.login('mallory', 'pw-123456')}"}

    # Mallory's own instance works, ours does not exist for her: 404 like a missing id.
    assert api.client.get(f"{api.base(other_instance)}/workflows", headers=mallory).status_code == 200
    assert api.client.get(f"{base}/workflows", headers=mallory).status_code == 404
    assert api.client.get(f"{base}/workflows/{wid}", headers=mallory).status_code == 404
    assert api.client.delete(f"{base}/workflows/{wid}", headers=mallory).status_code == 404
    # Our workflow id under her instance is not found either.
    missing = api.client.get(f"{api.base(other_instance)}/workflows/{wid}", headers=mallory)
    assert missing.status_code == api.client.get(
        f"{api.base(other_instance)}/workflows/doesnotexist", headers=mallory).status_code == 404
    assert api.client.get(f"{base}/workflows/{wid}", headers=api.auth).json()["name"] == "Mine"


def test_viewers_read_but_cannot_change(api):
    base = api.base()
    wid = api.client.post(f"{base}/workflows", json={"name": "Shared"}, headers=api.auth).json()["id"]
    _make_user("vera")
    _grant("vera", api.instance_id, "graphicalEditor-viewer")
    vera = {"Authorization": f"Bearer {api.login('vera', 'pw-123456')}"}
    assert [w["name"] for w in api.client.get(f"{base}/workflows", headers=vera).json()] == ["Shared"]
    assert api.client.post(f"{base}/workflows", json={"name": "New"}, headers=vera).status_code == 403
    assert api.client.patch(f"{base}/workflows/{wid}", json={"name": "Hijacked"}, headers=vera).status_code == 403
    assert api.client.delete(f"{base}/workflows/{wid}", headers=vera).status_code == 403
    assert api.client.get(f"{base}/workflows/{wid}", headers=api.auth).json()["name"] == "Shared"
