"""trigger.event (issue 7, item 4): POST /api/events {type, payload} starts the listening
workflows of the caller's own mandate(s) only, with the optional filter; back-pressure 429."""

from __future__ import annotations

import uuid

import pytest
from sqlmodel import select

from backend.auth import issue_token
from backend.config import reset_settings_cache
from backend.db import session_scope
from backend.db.models import User, Workflow
from backend.engine import worker
from backend.tenancy import create_feature_instance, create_mandate, grant_instance_roles, grant_mandate_roles
from backend.triggers.events import matches
from backend.workflows import service
from tests.integration.trigger_support import create_published, runs_of, wait_for_run

SQLITE = pytest.mark.parametrize("db_url", ["sqlite"], indirect=True)


def event_trigger(event_type: str, filter_value=None) -> dict:
    parameters = {"eventType": event_type}
    if filter_value is not None:
        parameters["filter"] = filter_value
    return {"type": "trigger.event", "parameters": parameters}


def event_graph(event_type: str, filter_value=None) -> dict:
    return {"nodes": [{"id": "start", **event_trigger(event_type, filter_value)},
                      {"id": "echo", "type": "context.transform",
                       "parameters": {"data": "{{ input }}", "template": "{{ amount }}"}}],
            "edges": [{"source": "start", "target": "echo"}]}


def other_mandate(roles: list[str]) -> tuple[dict[str, str], str]:
    """A second mandate with a user holding `roles` in its editor instance and a workflow of that user
    listening for order.paid; (bearer headers, workflow id)."""
    name = uuid.uuid4().hex[:6]
    with session_scope() as session:
        mandate = create_mandate(session, f"Other-{name}")
        user = User(username=f"other-{name}", display_name="Other")
        session.add(user)
        session.flush()
        grant_mandate_roles(session, user, mandate, ["user"])
        instance = create_feature_instance(session, mandate, "graphicalEditor", "Editor")
        grant_instance_roles(session, user, instance, roles)
        workflow = service.create_workflow(session, user, instance, "Listens too", "", event_graph("order.paid"))
        service.publish(session, user, workflow)
        workflow.active = True
        session.add(workflow)
        token = issue_token(session, user).token
        return {"Authorization": f"Bearer {token}"}, workflow.id


def fire(api, headers, event_type: str, payload=None):
    return api.client.post("/api/events", json={"type": event_type, "payload": payload}, headers=headers)


def test_an_event_starts_the_listening_workflows_of_the_callers_mandate_only(api):
    listening = create_published(api, event_graph("order.paid"))
    also = create_published(api, event_graph("order.paid"))
    other_type = create_published(api, event_graph("order.cancelled"))
    inactive = create_published(api, event_graph("order.paid"), active=False)
    b_headers, b_workflow = other_mandate(["graphicalEditor-admin"])

    response = fire(api, api.auth, "order.paid", {"amount": 1200})
    assert response.status_code == 202, response.text
    run_ids = response.json()["runIds"]
    assert len(run_ids) == 2
    for run_id in run_ids:
        run = wait_for_run(api, run_id)
        assert run["status"] == "completed" and run["trigger"] == "event"
        assert run["input"] == {"amount": 1200} and run["output"]["echo"]["result"] == "1200"
    assert {r.workflow_id for r in runs_of(listening) + runs_of(also)} == {listening, also}
    assert runs_of(other_type) == runs_of(inactive) == runs_of(b_workflow) == []

    # B's event reaches B's workflow only.
    from_b = fire(api, b_headers, "order.paid", {"amount": 5})
    assert from_b.status_code == 202 and len(from_b.json()["runIds"]) == 1
    assert [r.id for r in runs_of(b_workflow)] == from_b.json()["runIds"]
    assert len(runs_of(listening)) == 1
    # Nobody listening: accepted, nothing started.
    assert fire(api, api.auth, "nobody.listens").json() == {"runIds": []}


@SQLITE
def test_filters_object_subset_and_expression(api):
    subset = create_published(api, event_graph("order.paid", {"currency": "CHF", "customer": {"country": "CH"}}))
    expression = create_published(api, event_graph("order.paid", "{{ payload.amount > 1000 }}"))
    bare = create_published(api, event_graph("order.paid", "payload.amount < 10"))
    broken = create_published(api, event_graph("order.paid", "{{ payload.missing.deeper > 1 }}"))

    def started(payload) -> set[str]:
        response = fire(api, api.auth, "order.paid", payload)
        assert response.status_code == 202, response.text
        with session_scope() as session:
            from backend.db.models import WorkflowRun

            return {session.get(WorkflowRun, r).workflow_id for r in response.json()["runIds"]}

    assert started({"amount": 5000, "currency": "CHF", "customer": {"country": "CH", "id": 1}}) == {subset, expression}
    assert started({"amount": 5, "currency": "EUR"}) == {bare}
    assert started({"amount": 500, "currency": "CHF", "customer": {"country": "DE"}}) == set()
    assert started(None) == set()
    assert runs_of(broken) == []


def test_filter_semantics_unit():
    assert matches(None, "t", {"a": 1}) and matches({}, "t", None) and matches("", "t", 3)
    assert matches({"a": 1}, "t", {"a": 1, "b": 2})
    assert not matches({"a": 1}, "t", {"a": 2}) and not matches({"a": 1}, "t", [1])
    assert matches({"a": {"b": [1, 2]}}, "t", {"a": {"b": [1, 2], "c": 0}})
    assert not matches({"a": {"b": [1]}}, "t", {"a": {"b": [1, 2]}})
    assert matches("{{ event.type == 't' and input.x }}", "t", {"x": True})
    assert not matches("{{ payload.x", "t", {"x": True})  # syntax error: no match


@SQLITE
def test_a_caller_without_the_execute_right_is_refused(api):
    viewer_headers, b_workflow = other_mandate(["graphicalEditor-viewer"])
    response = fire(api, viewer_headers, "order.paid", {})
    assert response.status_code == 403
    assert runs_of(b_workflow) == []
    assert api.client.post("/api/events", json={"type": "order.paid"}).status_code == 401
    assert fire(api, api.auth, "").status_code == 422


@SQLITE
def test_a_workflow_whose_creator_lost_the_right_is_skipped(api):
    kept = create_published(api, event_graph("order.paid"))
    orphan = create_published(api, event_graph("order.paid"))
    with session_scope() as session:
        creator = session.exec(select(User).where(User.username == "someone")).first()
        if creator is None:
            creator = User(username="someone", display_name="Someone")
            session.add(creator)
            session.flush()
        workflow = session.get(Workflow, orphan)
        workflow.sys_created_by = creator.id  # not a member of the mandate at all
        session.add(workflow)
    response = fire(api, api.auth, "order.paid", {"amount": 1})
    assert response.status_code == 202 and len(response.json()["runIds"]) == 1
    assert runs_of(orphan) == [] and len(runs_of(kept)) == 1


@SQLITE
def test_events_get_429_when_too_many_runs_wait(api, monkeypatch):
    create_published(api, event_graph("order.paid"))
    monkeypatch.setenv("POWERON_MAX_QUEUED_RUNS", "3")
    reset_settings_cache()
    monkeypatch.setattr(worker, "queued", lambda: 3)
    response = fire(api, api.auth, "order.paid", {"amount": 1})
    assert response.status_code == 429 and response.headers["retry-after"] == "5"
    monkeypatch.setattr(worker, "queued", lambda: 2)
    assert fire(api, api.auth, "order.paid", {"amount": 1}).status_code == 202

