"""The Graphical Editor page's backend over REST and the service: draft conflicts between tabs,
templates (listed, created from, and run as they are), and the last run's outputs for autocomplete."""

from __future__ import annotations

import uuid

import pytest
from sqlmodel import select

from backend.db import session_scope
from backend.db.models import User, Workflow
from backend.errors import Conflict
from backend.workflows import service, templates
from backend.workflows.suggestions import expression_suggestions, last_step_outputs

SQLITE = pytest.mark.parametrize("db_url", ["sqlite"], indirect=True)

GRAPH = {"nodes": [{"id": "start", "type": "trigger.manual", "parameters": {}, "position": {"x": 0, "y": 0}}],
         "edges": []}


def _graph(label: str) -> dict:
    return {"nodes": [{**GRAPH["nodes"][0], "label": label}], "edges": []}


def _create(api, **body) -> dict:
    response = api.client.post(f"{api.base()}/workflows", json={"name": f"wf-{uuid.uuid4().hex[:8]}", **body},
                               headers=api.auth)
    assert response.status_code == 201, response.text
    return response.json()


def _put(api, workflow_id: str, graph: dict, **base) -> object:
    return api.client.put(f"{api.base()}/workflows/{workflow_id}/draft", json={"graph": graph, **base},
                          headers=api.auth)


def test_the_second_of_two_tabs_saving_the_same_draft_is_told_it_changed(api):
    created = _create(api, graph=GRAPH)
    assert created["editedVersionId"] and created["editedLockVersion"] == 1
    base = {"baseVersionId": created["editedVersionId"], "baseLockVersion": created["editedLockVersion"]}
    first = _put(api, created["id"], _graph("tab 1"), **base)
    assert first.status_code == 200, first.text
    assert first.json()["lockVersion"] == 2
    second = _put(api, created["id"], _graph("tab 2"), **base)
    assert second.status_code == 409, second.text
    detail = second.json()["detail"]
    assert f"the draft of '{created['name']}' was changed elsewhere (version 1, saved" in detail
    assert "UTC by admin) since you opened it; reload to see the changes" in detail
    # Nothing of tab 2 was written; reloading gives the new base, with which tab 2 saves.
    reloaded = api.client.get(f"{api.base()}/workflows/{created['id']}", headers=api.auth).json()
    assert reloaded["graph"]["nodes"][0]["label"] == "tab 1" and reloaded["editedLockVersion"] == 2
    again = _put(api, created["id"], _graph("tab 2"), baseVersionId=reloaded["editedVersionId"],
                 baseLockVersion=reloaded["editedLockVersion"])
    assert again.status_code == 200 and again.json()["lockVersion"] == 3
    # Clients without a base (agent tools, scripts) keep saving over the draft.
    assert _put(api, created["id"], _graph("script")).status_code == 200


def test_a_draft_published_meanwhile_is_a_conflict_and_the_base_fields_go_together(api):
    created = _create(api, graph=GRAPH)
    base = {"baseVersionId": created["editedVersionId"], "baseLockVersion": created["editedLockVersion"]}
    published = api.client.post(f"{api.base()}/workflows/{created['id']}/publish", headers=api.auth)
    assert published.status_code == 200, published.text
    stale = _put(api, created["id"], _graph("late"), **base)
    assert stale.status_code == 409, stale.text
    assert "the draft of" in stale.json()["detail"] and "was published (version 1) since you opened it" in stale.text
    # Opening the published version and saving starts the next draft.
    detail = api.client.get(f"{api.base()}/workflows/{created['id']}", headers=api.auth).json()
    assert detail["editedVersionId"] == published.json()["id"] and detail["publishedVersion"] == 1
    saved = _put(api, created["id"], _graph("v2"), baseVersionId=detail["editedVersionId"],
                 baseLockVersion=detail["editedLockVersion"])
    assert saved.status_code == 200 and saved.json()["versionNumber"] == 2
    # A second tab still on the published version now finds a draft.
    late = _put(api, created["id"], _graph("v2 again"), baseVersionId=detail["editedVersionId"],
                baseLockVersion=detail["editedLockVersion"])
    assert late.status_code == 409 and "version 2" in late.json()["detail"]
    for body, field in (({"baseVersionId": "x"}, "baseLockVersion"), ({"baseLockVersion": 1}, "baseVersionId")):
        response = _put(api, created["id"], GRAPH, **body)
        assert response.status_code == 422 and response.json()["errors"][0]["field"] == field, response.text


@SQLITE
def test_service_save_draft_refuses_a_stale_base(app_config):
    with session_scope() as session:
        admin = session.exec(select(User).where(User.username == "admin")).one()
        from backend.db.models import FeatureInstance

        instance = session.exec(
            select(FeatureInstance).where(FeatureInstance.feature_code == "graphicalEditor")).first()
        workflow = service.create_workflow(session, admin, instance, "concurrent", graph=GRAPH)
        draft = service.draft_version(session, workflow)
        base = service.DraftBase(draft.id, draft.lock_version)
        assert service.save_draft(session, admin, workflow, _graph("one"), base).lock_version == 2
        with pytest.raises(Conflict, match="was changed elsewhere .* by admin"):
            service.save_draft(session, admin, workflow, _graph("two"), base)
        assert service.draft_version(session, workflow).graph["nodes"][0]["label"] == "one"
        with pytest.raises(Conflict, match="no longer exists"):
            service.publish(session, admin, workflow)
            service.save_draft(session, admin, workflow, _graph("three"), service.DraftBase("nope", 1))


@SQLITE
def test_templates_are_listed_and_a_workflow_starts_from_one(api):
    listed = api.client.get(f"{api.base()}/templates", headers=api.auth)
    assert listed.status_code == 200, listed.text
    by_id = {t["id"]: t for t in listed.json()}
    assert len(by_id) >= 6
    approval = by_id["expense-approval"]
    assert approval["connections"] == [] and approval["nodeCount"] == 6 and approval["name"]
    assert approval["sampleInput"] == templates.template("expense-approval").sample_input
    assert by_id["email-attachment-analysis"]["connections"] == ["mail", "ai", "msft"]
    created = _create(api, templateId="expense-approval")
    assert created["graph"] == templates.template("expense-approval").graph
    assert created["testInput"] == approval["sampleInput"]
    both = api.client.post(f"{api.base()}/workflows",
                           json={"name": "x", "graph": GRAPH, "templateId": "jira-to-clickup-sync"}, headers=api.auth)
    assert both.status_code == 422 and both.json()["errors"][0]["field"] == "templateId"
    unknown = api.client.post(f"{api.base()}/workflows", json={"name": "y", "templateId": "nope"}, headers=api.auth)
    assert unknown.status_code == 422 and "expense-approval" in unknown.json()["errors"][0]["message"]


RUN_INPUTS = {
    "expense-approval": [({"amount": 500}, "completed", None), ({"amount": 5000}, "paused", "humanTask")],
    "webhook-notification": [({"body": {"title": "Disk", "message": "full", "severity": "low"}}, "completed", None),
                             ({"body": {"title": "Disk", "message": "full", "severity": "critical"}}, "failed",
                              None)],
}


@SQLITE
def test_every_template_that_needs_no_connection_runs_as_it_is(api):
    runnable = [t for t in templates.templates() if not t.connections]
    assert {t.id for t in runnable} == set(RUN_INPUTS)
    for template in runnable:
        workflow = _create(api, templateId=template.id)
        for run_input, status, reason in RUN_INPUTS[template.id]:
            response = api.client.post(f"{api.base()}/workflows/{workflow['id']}/runs", json={"input": run_input},
                                       headers=api.auth)
            assert response.status_code == 201, response.text
            run = response.json()
            assert (run["status"], run["pauseReason"]) == (status, reason), (template.id, run)


# What each runnable template's sample input does on its first Test run: its main path.
SAMPLE_RUNS = {"expense-approval": ("paused", "humanTask", "approve"),
               "webhook-notification": ("completed", None, "done")}


@SQLITE
def test_the_sample_input_of_every_runnable_template_takes_its_main_path(api):
    runnable = {t.id: t for t in templates.templates() if not t.connections}
    assert set(runnable) == set(SAMPLE_RUNS)
    for template_id, (status, reason, last) in SAMPLE_RUNS.items():
        workflow = _create(api, templateId=template_id)
        assert workflow["testInput"] == runnable[template_id].sample_input
        response = api.client.post(f"{api.base()}/workflows/{workflow['id']}/runs",
                                   json={"input": workflow["testInput"]}, headers=api.auth)
        run = response.json()
        assert (run["status"], run["pauseReason"]) == (status, reason), (template_id, run)
        assert run["steps"][-1]["nodeId"] == last, (template_id, run["steps"])


@SQLITE
def test_last_step_outputs_feed_the_suggestions(api):
    graph = {"nodes": [GRAPH["nodes"][0],
                       {"id": "shape", "type": "context.transform",
                        "parameters": {"data": "{{ input }}", "mapping": {"title": "order.title"}}},
                       {"id": "end", "type": "context.transform",
                        "parameters": {"data": "{{ nodes.shape.output }}", "template": "{{ result.title }}"}}],
             "edges": [{"source": "start", "target": "shape"}, {"source": "shape", "target": "end"}]}
    workflow = _create(api, graph=graph)
    with session_scope() as session:
        assert last_step_outputs(session, workflow["id"]) == {}
    run = api.client.post(f"{api.base()}/workflows/{workflow['id']}/runs",
                          json={"input": {"order": {"title": "Lamp"}}}, headers=api.auth).json()
    assert run["status"] == "completed", run
    with session_scope() as session:
        outputs = last_step_outputs(session, workflow["id"])
        stored = session.get(Workflow, workflow["id"])
        assert stored is not None
    assert outputs["shape"]["result"] == {"title": "Lamp"}
    found = expression_suggestions(graph, "end", outputs)
    assert "{{ nodes.shape.output.result.title }}" in found and "{{ input.order.title }}" in found
