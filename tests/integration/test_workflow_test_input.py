"""A workflow's test input (issue 16): kept with the workflow, started from a template's sample
input, set and cleared over REST; runs of a draft are test runs; a workflow that received webhook
calls can be deleted; a failed run's error names its node once."""

from __future__ import annotations

import json
import uuid

from tests.integration.trigger_support import create_published, echo_graph, new_secret, sign, wait_for_run


def _workflow(api, workflow_id: str) -> dict:
    response = api.client.get(f"{api.base()}/workflows/{workflow_id}", headers=api.auth)
    assert response.status_code == 200, response.text
    return response.json()


def test_a_workflow_keeps_its_test_input_and_a_template_gives_the_first(api):
    from backend.workflows import templates

    approval = templates.template("expense-approval")
    created = api.client.post(f"{api.base()}/workflows", json={"name": f"t-{uuid.uuid4().hex[:6]}"},
                              headers=api.auth).json()
    assert created["testInput"] is None
    patched = api.client.patch(f"{api.base()}/workflows/{created['id']}", json={"testInput": {"amount": 5}},
                               headers=api.auth)
    assert patched.status_code == 200, patched.text
    assert _workflow(api, created["id"])["testInput"] == {"amount": 5}
    # A patch of the name leaves it; null clears it.
    api.client.patch(f"{api.base()}/workflows/{created['id']}", json={"name": created["name"] + " b"},
                     headers=api.auth)
    assert _workflow(api, created["id"])["testInput"] == {"amount": 5}
    api.client.patch(f"{api.base()}/workflows/{created['id']}", json={"testInput": None}, headers=api.auth)
    assert _workflow(api, created["id"])["testInput"] is None
    # Input nobody could read back later is refused, naming the field.
    bad = api.client.patch(f"{api.base()}/workflows/{created['id']}",
                           content=json.dumps({"testInput": {"note": "\ud800"}}),
                           headers={**api.auth, "content-type": "application/json"})
    assert bad.status_code == 422 and "testInput" in bad.text
    from_template = api.client.post(f"{api.base()}/workflows",
                                    json={"name": f"t-{uuid.uuid4().hex[:6]}", "templateId": approval.id},
                                    headers=api.auth).json()
    assert from_template["testInput"] == approval.sample_input == {
        "amount": 2500, "description": "Team offsite in Lucerne", "submittedBy": "Anna Muster"}


def test_runs_of_a_draft_are_test_runs_and_runs_of_the_published_version_are_not(api):
    from backend.db import session_scope
    from backend.db.models import WorkflowRun

    workflow_id = create_published(api, echo_graph({"type": "trigger.manual"}), active=False)
    published = api.client.post(f"{api.base()}/workflows/{workflow_id}/runs", json={"version": "published"},
                                headers=api.auth).json()
    api.client.put(f"{api.base()}/workflows/{workflow_id}/draft",
                   json={"graph": echo_graph({"type": "trigger.manual", "label": "edited"})}, headers=api.auth)
    draft = api.client.post(f"{api.base()}/workflows/{workflow_id}/runs", json={"version": "draft"},
                            headers=api.auth).json()
    with session_scope() as session:
        assert session.get(WorkflowRun, published["id"]).test is False
        assert session.get(WorkflowRun, draft["id"]).test is True


def test_a_workflow_that_received_webhook_calls_can_be_deleted(api):
    secret = new_secret()
    workflow_id = create_published(api, echo_graph({"type": "trigger.webhook",
                                                    "parameters": {"path": "in", "secret": secret}}))
    body = b'{"a": 1}'
    answer = api.client.post(f"/api/hooks/{workflow_id}/in", content=body, headers=sign(secret, body))
    assert answer.status_code == 202, answer.text
    wait_for_run(api, answer.json()["runId"])
    deleted = api.client.delete(f"{api.base()}/workflows/{workflow_id}", headers=api.auth)
    assert deleted.status_code == 204, deleted.text
    assert api.client.get(f"{api.base()}/workflows/{workflow_id}", headers=api.auth).status_code == 404


def test_a_failed_run_names_its_node_once(api):
    graph = {"nodes": [{"id": "start", "type": "trigger.manual"},
                       {"id": "gate", "type": "flow.ifElse", "parameters": {"condition": "{{ 1 / 0 }}"}}],
             "edges": [{"source": "start", "target": "gate"}]}
    workflow_id = api.client.post(f"{api.base()}/workflows", json={"name": f"t-{uuid.uuid4().hex[:6]}",
                                                                    "graph": graph}, headers=api.auth).json()["id"]
    run = api.client.post(f"{api.base()}/workflows/{workflow_id}/runs", json={}, headers=api.auth).json()
    run = wait_for_run(api, run["id"])
    assert run["status"] == "failed"
    assert run["error"].startswith("node 'gate' failed: parameter 'condition'"), run["error"]
    assert run["error"].count("'gate'") == 1
