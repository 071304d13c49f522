"""POST …/workflows/{id}/validate and publish refusing an invalid graph (DESIGN §4, §6)."""

from __future__ import annotations

import pytest

from backend.auth import hash_password
from backend.db import session_scope
from backend.db.models import FeatureInstance, User
from backend.tenancy import grant_instance_roles

pytestmark = pytest.mark.parametrize("db_url", ["sqlite"], indirect=True)

VALID = {
    "nodes": [
        {"id": "start", "type": "trigger.manual", "parameters": {}},
        {"id": "rows", "type": "flow.loop", "parameters": {"items": "{{ input.rows }}"}},
        {"id": "ask", "type": "input.approval",
         "parameters": {"title": "Approve {{ item.amount }} CHF", "assignee": {"role": "graphicalEditor-admin"}}},
        {"id": "end", "type": "flow.stop", "parameters": {"status": "completed"}},
    ],
    "edges": [
        {"source": "start", "target": "rows"},
        {"source": "rows", "sourceHandle": "each", "target": "ask"},
        {"source": "ask", "sourceHandle": "approved", "target": "rows"},
        {"source": "ask", "sourceHandle": "rejected", "target": "rows"},
        {"source": "rows", "sourceHandle": "done", "target": "end"},
    ],
}

# Well formed (a draft may hold it) but not publishable: no trigger, a bad parameter, a handle
# the node does not have and a cycle that is no loop body.
INVALID = {
    "nodes": [
        {"id": "a", "type": "flow.ifElse", "parameters": {"condition": "{{ input.ok }}"}},
        {"id": "b", "type": "script.python", "parameters": {"code": "output = 1", "timeoutSeconds": 0}},
        {"id": "c", "type": "flow.merge", "parameters": {}},
    ],
    "edges": [
        {"source": "a", "sourceHandle": "maybe", "target": "b"},
        {"source": "b", "target": "c"},
        {"source": "c", "target": "b"},
    ],
}
EXPECTED = {(None, "nodes"), ("b", "parameters.timeoutSeconds"), ("a", "edges[0].sourceHandle"),
            ("b", "edges[2]")}


def _new_workflow(api, name: str, graph: dict | None = None) -> str:
    body = {"name": name, **({"graph": graph} if graph is not None else {})}
    response = api.client.post(f"{api.base()}/workflows", json=body, headers=api.auth)
    assert response.status_code == 201, response.text
    return response.json()["id"]


def _pairs(errors: list[dict]) -> set[tuple]:
    return {(e["nodeId"], e["field"]) for e in errors}


def test_validate_reports_a_valid_graph(api):
    wid = _new_workflow(api, "Loop", VALID)
    response = api.client.post(f"{api.base()}/workflows/{wid}/validate", headers=api.auth)
    assert response.status_code == 200, response.text
    assert response.json() == {"valid": True, "errors": []}


def test_an_invalid_draft_is_saved_validated_and_refused_at_publish(api):
    wid = _new_workflow(api, "Broken")
    url = f"{api.base()}/workflows/{wid}"
    saved = api.client.put(f"{url}/draft", json={"graph": INVALID}, headers=api.auth)
    assert saved.status_code == 200, saved.text  # drafts are only checked for structure

    report = api.client.post(f"{url}/validate", headers=api.auth).json()
    assert report["valid"] is False
    assert EXPECTED <= _pairs(report["errors"])
    assert all(set(e) == {"nodeId", "field", "message"} and e["message"] for e in report["errors"])

    refused = api.client.post(f"{url}/publish", headers=api.auth)
    assert refused.status_code == 422
    assert _pairs(refused.json()["errors"]) == _pairs(report["errors"])
    assert "timeoutSeconds" in refused.json()["detail"]
    versions = api.client.get(f"{url}/versions", headers=api.auth).json()
    assert [(v["versionNumber"], v["status"]) for v in versions] == [(1, "draft")]
    assert api.client.get(url, headers=api.auth).json()["executionLogs"][-1]["action"] == "created"

    fixed = api.client.put(f"{url}/draft", json={"graph": VALID}, headers=api.auth)
    assert fixed.status_code == 200
    assert api.client.post(f"{url}/validate", headers=api.auth).json()["valid"] is True
    published = api.client.post(f"{url}/publish", headers=api.auth)
    assert published.status_code == 200 and published.json()["status"] == "published"


def test_validate_checks_the_draft_else_the_published_version(api):
    wid = _new_workflow(api, "Versions", VALID)
    url = f"{api.base()}/workflows/{wid}"
    assert api.client.post(f"{url}/publish", headers=api.auth).status_code == 200
    # No draft: the published graph is checked.
    assert api.client.post(f"{url}/validate", headers=api.auth).json() == {"valid": True, "errors": []}
    # A new draft next to it is what validate looks at.
    api.client.put(f"{url}/draft", json={"graph": INVALID}, headers=api.auth)
    assert api.client.post(f"{url}/validate", headers=api.auth).json()["valid"] is False
    assert api.client.post(f"{url}/publish", headers=api.auth).status_code == 422
    versions = api.client.get(f"{url}/versions", headers=api.auth).json()
    assert [(v["versionNumber"], v["status"]) for v in versions] == [(2, "draft"), (1, "published")]


def test_a_viewer_may_validate_and_a_missing_workflow_answers_404(api):
    wid = _new_workflow(api, "Shared", INVALID)
    with session_scope() as session:
        vera = User(username="vera", password_hash=hash_password("pw-123456"))
        session.add(vera)
        session.flush()
        grant_instance_roles(session, vera, session.get(FeatureInstance, api.instance_id), ["graphicalEditor-viewer"])
    vera = {"Authorization": f"Bearer {api.login('vera', 'pw-123456')}"}
    report = api.client.post(f"{api.base()}/workflows/{wid}/validate", headers=vera)
    assert report.status_code == 200 and report.json()["valid"] is False
    assert api.client.post(f"{api.base()}/workflows/{wid}/publish", headers=vera).status_code == 403
    missing = api.client.post(f"{api.base()}/workflows/nope/validate", headers=api.auth)
    assert missing.status_code == 404


def test_the_route_declares_read_permission(api):
    paths = api.client.get("/api/openapi.json").json()["paths"]
    operation = paths["/api/graphicalEditor/{instanceId}/workflows/{workflowId}/validate"]["post"]
    assert operation["x-permission"] == {"kind": "DATA", "item": "data.feature.graphicalEditor.workflow",
                                         "operation": "read"}


def test_restore_refuses_an_archived_graph_that_is_not_valid(api):
    # Versions archived before these rules existed may not be valid; restoring one is publishing it.
    from backend.db.models import WorkflowVersion

    wid = _new_workflow(api, "Old", VALID)
    url = f"{api.base()}/workflows/{wid}"
    assert api.client.post(f"{url}/publish", headers=api.auth).status_code == 200
    with session_scope() as session:
        old = WorkflowVersion(workflow_id=wid, version_number=2, graph=INVALID, status="archived")
        session.add(old)
        session.flush()
        old_id = old.id
    refused = api.client.post(f"{url}/restore", json={"versionId": old_id}, headers=api.auth)
    assert refused.status_code == 422 and EXPECTED <= _pairs(refused.json()["errors"])
    assert api.client.get(url, headers=api.auth).json()["publishedVersion"] == 1
