"""trigger.form (issue 7, item 4): the public form of a workflow: GET the definition, POST the
fields; required fields and types checked (422 naming the field); the run gets the fields."""

from __future__ import annotations

import pytest

from tests.integration.trigger_support import create_published, runs_of, wait_for_run

SQLITE = pytest.mark.parametrize("db_url", ["sqlite"], indirect=True)

FIELDS = [
    {"name": "name", "label": "Your name", "type": "text", "required": True},
    {"name": "amount", "type": "number", "required": True},
    {"name": "urgent", "type": "boolean"},
    {"name": "kind", "type": "select", "options": ["order", "refund"], "default": "order"},
    {"name": "due", "type": "date"},
]


def form_graph(fields=FIELDS) -> dict:
    return {"nodes": [{"id": "start", "type": "trigger.form", "parameters": {"fields": fields}},
                      {"id": "echo", "type": "context.transform",
                       "parameters": {"data": "{{ input }}", "template": "{{ name }} asks {{ amount }}"}}],
            "edges": [{"source": "start", "target": "echo"}]}


def test_the_public_form_shows_its_fields_and_starts_a_run(api):
    workflow_id = create_published(api, form_graph())
    form = api.client.get(f"/api/forms/{workflow_id}")  # no token: the form is public
    assert form.status_code == 200, form.text
    assert form.json()["workflowId"] == workflow_id
    assert [f["name"] for f in form.json()["fields"]] == ["name", "amount", "urgent", "kind", "due"]
    assert form.json()["fields"][0]["label"] == "Your name" and form.json()["fields"][0]["required"] is True

    response = api.client.post(f"/api/forms/{workflow_id}",
                               json={"name": "Ada", "amount": "12.5", "urgent": "on", "due": "2030-01-31"})
    assert response.status_code == 202, response.text
    run = wait_for_run(api, response.json()["runId"])
    assert run["status"] == "completed" and run["trigger"] == "form"
    assert run["input"] == {"name": "Ada", "amount": 12.5, "urgent": True, "kind": "order", "due": "2030-01-31"}
    assert run["output"]["echo"]["result"] == "Ada asks 12.5"


@SQLITE
def test_missing_and_invalid_fields_are_named_with_422_and_start_nothing(api):
    workflow_id = create_published(api, form_graph())
    url = f"/api/forms/{workflow_id}"

    def fields_of(response) -> set[str]:
        assert response.status_code == 422, response.text
        return {e["field"] for e in response.json()["errors"]}

    assert fields_of(api.client.post(url, json={"amount": 3})) == {"name"}
    assert fields_of(api.client.post(url, json={"name": "  ", "amount": None})) == {"name", "amount"}
    assert fields_of(api.client.post(url, json={"name": "A", "amount": "many"})) == {"amount"}
    assert fields_of(api.client.post(url, json={"name": "A", "amount": 1, "kind": "gift"})) == {"kind"}
    assert fields_of(api.client.post(url, json={"name": "A", "amount": 1, "due": "31.01.2030"})) == {"due"}
    assert fields_of(api.client.post(url, json={"name": "A", "amount": 1, "urgent": "perhaps"})) == {"urgent"}
    assert fields_of(api.client.post(url, json={"name": "A", "amount": 1, "admin": True})) == {"admin"}
    assert fields_of(api.client.post(url, json=["A"])) == {"body"}
    assert fields_of(api.client.post(url, content=b"not json", headers={"content-type": "application/json"})) \
        == {"body"}
    assert "Your name is required" in api.client.post(url, json={"amount": 1}).json()["detail"]
    assert runs_of(workflow_id) == []


@SQLITE
def test_forms_of_unknown_inactive_unpublished_or_formless_workflows_are_404(api):
    inactive = create_published(api, form_graph(), active=False)
    unpublished = create_published(api, form_graph(), publish=False)
    manual = create_published(api, {"nodes": [{"id": "start", "type": "trigger.manual", "parameters": {}}],
                                     "edges": []})
    for workflow_id in ("0" * 32, inactive, unpublished, manual):
        assert api.client.get(f"/api/forms/{workflow_id}").status_code == 404
        assert api.client.post(f"/api/forms/{workflow_id}", json={"name": "A", "amount": 1}).status_code == 404
        assert runs_of(workflow_id) == []
