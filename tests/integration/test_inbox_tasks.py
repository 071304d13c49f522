"""The Inbox's backend (issue 10, part 2; spec §7.3): cancelling with a reason, a second completion
told who was first, form answers checked per field type, the pending count across instances,
read-only tasks for viewers — on SQLite and PostgreSQL."""

from __future__ import annotations

import threading
import uuid
from contextlib import contextmanager
from typing import Any

import pytest
from sqlmodel import select

from backend.db import session_scope
from backend.db.models import FeatureInstance, HumanTask, Mandate, User, WorkflowRun
from backend.engine import tasks
from backend.errors import Conflict, Forbidden, InvalidInput
from backend.rbac.access import AccessContext
from backend.tenancy import grant_instance_roles, grant_mandate_roles

START = {"id": "start", "type": "trigger.manual", "parameters": {}}
DONE = {"id": "done", "type": "context.transform", "parameters": {"data": {}, "template": "done"}}


def approval(assignee: dict[str, Any] | None, title: str = "Approve it") -> dict[str, Any]:
    parameters: dict[str, Any] = {"title": title, **({"assignee": assignee} if assignee else {})}
    return {"nodes": [START, {"id": "ask", "type": "input.approval", "parameters": parameters}, DONE],
            "edges": [{"source": "start", "target": "ask"},
                      {"source": "ask", "target": "done", "sourceHandle": "approved"}]}


FORM_FIELDS = [
    {"name": "amount", "type": "number", "required": True},
    {"name": "day", "type": "date"},
    {"name": "size", "type": "select", "options": ["small", "large"]},
    {"name": "urgent", "type": "boolean"},
    {"name": "note", "type": "textarea"},
]


def form_graph(assignee: dict[str, Any]) -> dict[str, Any]:
    return {"nodes": [START, {"id": "ask", "type": "input.form",
                              "parameters": {"title": "Fill it", "fields": FORM_FIELDS, "assignee": assignee}}, DONE],
            "edges": [{"source": "start", "target": "ask"}, {"source": "ask", "target": "done"}]}


def start(api, graph: dict[str, Any], instance_id: str | None = None) -> dict[str, Any]:
    base = api.base(instance_id)
    created = api.client.post(f"{base}/workflows", json={"name": f"wf-{uuid.uuid4().hex}", "graph": graph},
                              headers=api.auth)
    assert created.status_code == 201, created.text
    run = api.client.post(f"{base}/workflows/{created.json()['id']}/runs", json={"input": {}}, headers=api.auth)
    assert run.status_code == 201, run.text
    assert run.json()["status"] == "paused", run.json()
    return run.json()


def task_of(run_id: str) -> str:
    with session_scope() as session:
        return session.exec(select(HumanTask.id).where(HumanTask.run_id == run_id)).one()


def me(api) -> str:
    return api.client.get("/api/me", headers=api.auth).json()["id"]


@contextmanager
def access_of(username: str):
    with session_scope() as session:
        user = session.exec(select(User).where(User.username == username)).one()
        yield AccessContext(session, user)


def make_user(username: str, mandate_roles: list[str], instances: dict[str, list[str]]) -> str:
    """A member of the admin's mandate with `instances` {instance id: role labels}; returns its id."""
    with session_scope() as session:
        user = User(username=username)
        session.add(user)
        session.flush()
        first = session.get(FeatureInstance, next(iter(instances)))
        grant_mandate_roles(session, user, session.get(Mandate, first.mandate_id), mandate_roles)
        for instance_id, labels in instances.items():
            grant_instance_roles(session, user, session.get(FeatureInstance, instance_id), labels)
        return user.id


def test_cancel_with_a_reason_keeps_it_on_the_task_and_in_the_run(api):
    run = start(api, approval({"user": me(api)}))
    task_id = task_of(run["id"])
    too_long = api.client.post(f"/api/tasks/{task_id}/cancel", json={"reason": "x" * 1001}, headers=api.auth)
    assert too_long.status_code == 422 and too_long.json()["errors"][0]["field"] == "reason", too_long.text
    answer = api.client.post(f"/api/tasks/{task_id}/cancel", json={"reason": "budget frozen"}, headers=api.auth)
    assert answer.status_code == 200, answer.text
    assert answer.json()["task"]["status"] == "cancelled"
    assert answer.json()["task"]["data"] == {"cancelReason": "budget frozen"}
    assert answer.json()["run"]["status"] == "cancelled"
    shown = api.client.get(f"{api.base()}/runs/{run['id']}", headers=api.auth).json()
    assert shown["error"] == "task 'Approve it' was cancelled by admin: budget frozen"
    history = api.client.get("/api/tasks", params={"status": "cancelled"}, headers=api.auth).json()
    assert [t["data"] for t in history if t["id"] == task_id] == [{"cancelReason": "budget frozen"}]
    again = api.client.post(f"/api/tasks/{task_id}/cancel", headers=api.auth)
    assert again.status_code == 409 and "was already cancelled by admin at" in again.json()["detail"]
    # Without a body, as before: the message names who only.
    plain = start(api, approval({"user": me(api)}))
    assert api.client.post(f"/api/tasks/{task_of(plain['id'])}/cancel", headers=api.auth).status_code == 200
    assert api.client.get(f"{api.base()}/runs/{plain['id']}", headers=api.auth).json()["error"] == \
        "task 'Approve it' was cancelled by admin"


def test_a_second_completion_is_told_who_was_first_and_changes_nothing(api):
    run = start(api, approval({"user": me(api)}))
    task_id = task_of(run["id"])
    first = api.client.post(f"/api/tasks/{task_id}/complete", json={"data": {"approved": True}}, headers=api.auth)
    assert first.status_code == 200 and first.json()["run"]["status"] == "completed", first.text
    second = api.client.post(f"/api/tasks/{task_id}/complete", json={"data": {"approved": False, "comment": "no"}},
                             headers=api.auth)
    assert second.status_code == 409, second.text
    detail = second.json()["detail"]
    assert detail.startswith("task 'Approve it' was already completed by admin at ") and \
        detail.endswith(" UTC; nothing was changed"), detail
    with session_scope() as session:
        task = session.get(HumanTask, task_id)
        assert task.data == {"approved": True, "comment": None} and task.lock_version == 2
    final = api.client.get(f"{api.base()}/runs/{run['id']}", headers=api.auth).json()
    assert [s["nodeId"] for s in final["steps"]] == ["start", "ask", "done"]


@pytest.mark.parametrize("db_url", [pytest.param("postgresql", marks=pytest.mark.postgres)], indirect=True)
def test_two_simultaneous_completions_apply_once(api):
    run = start(api, approval({"user": me(api)}))
    task_id = task_of(run["id"])
    barrier = threading.Barrier(2)
    outcomes: list[Any] = []

    def complete(approved: bool) -> None:
        try:
            with access_of("admin") as access:
                task = tasks.get_task(access, task_id)
                barrier.wait(timeout=10)
                outcomes.append(tasks.complete_task(access, task, {"approved": approved}).status)
        except Conflict as exc:
            outcomes.append(exc)

    threads = [threading.Thread(target=complete, args=(flag,)) for flag in (True, False)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    conflicts = [o for o in outcomes if isinstance(o, Conflict)]
    assert len(outcomes) == 2 and len(conflicts) == 1, outcomes
    assert "was already completed by admin" in str(conflicts[0])
    final = api.client.get(f"{api.base()}/runs/{run['id']}", headers=api.auth).json()
    assert [s["nodeId"] for s in final["steps"] if s["nodeId"] == "ask"] == ["ask"]
    assert final["status"] == "completed"


def test_form_answers_are_checked_per_field_type_and_converted(api):
    run = start(api, form_graph({"user": me(api)}))
    task_id = task_of(run["id"])
    url = f"/api/tasks/{task_id}/complete"
    missing = api.client.post(url, json={"data": {"note": "hi"}}, headers=api.auth)
    assert missing.status_code == 422
    assert [(e["field"], e["message"]) for e in missing.json()["errors"]] == [("data.amount", "required")]
    bad = api.client.post(url, json={"data": {"amount": "lots", "day": "2024-13-01", "size": "medium",
                                              "urgent": "maybe", "note": ["x"]}}, headers=api.auth)
    assert bad.status_code == 422
    errors = {e["field"]: e["message"] for e in bad.json()["errors"]}
    assert errors == {"data.amount": "must be a number, not 'lots'",
                      "data.day": "must be a date YYYY-MM-DD, not '2024-13-01'",
                      "data.size": "must be one of: small, large",
                      "data.urgent": "must be true or false",
                      "data.note": "must be text"}
    assert api.client.post(url, json={"data": {"amount": 1, "day": "1.5.2024"}}, headers=api.auth).status_code == 422
    ok = api.client.post(url, json={"data": {"amount": "42", "day": "2024-05-01", "size": "large", "urgent": "true"}},
                         headers=api.auth)
    assert ok.status_code == 200, ok.text
    assert ok.json()["task"]["data"] == {"amount": 42, "day": "2024-05-01", "size": "large", "urgent": True}
    assert ok.json()["run"]["status"] == "completed"


def test_pending_count_across_two_instances_with_role_and_user_assignments(api):
    mandate_id = api.client.get("/api/me", headers=api.auth).json()["mandates"][0]["id"]
    second = api.client.post(f"/api/mandates/{mandate_id}/instances",
                             json={"featureCode": "graphicalEditor", "label": "Second editor"}, headers=api.auth)
    assert second.status_code == 201, second.text
    other = second.json()["id"]
    rita = make_user("rita", ["user"], {api.instance_id: ["graphicalEditor-user"], other: ["graphicalEditor-user"]})
    by_role = start(api, approval({"role": "graphicalEditor-user"}, "For users"))
    by_user = start(api, approval({"user": rita}, "For Rita"), other)
    start(api, approval({"user": me(api)}, "For admin"))
    start(api, approval({"role": "graphicalEditor-owner"}, "For owners"), other)
    with access_of("rita") as access:
        assert tasks.pending_count(access) == 2
        assert {t.title for t in tasks.list_tasks(access, "pending")} == {"For users", "For Rita"}
    with access_of("admin") as access:
        assert tasks.pending_count(access) == 1  # the sysadmin holds no graphicalEditor-user role
    done = api.client.post(f"/api/tasks/{task_of(by_user['id'])}/complete", json={"data": {"approved": True}},
                           headers={"Authorization": f"Bearer {_token_of('rita')}"})
    assert done.status_code == 200, done.text
    with access_of("rita") as access:
        assert tasks.pending_count(access) == 1
        assert [t.title for t in tasks.list_tasks(access, "completed")] == ["For Rita"]
        assert tasks.list_tasks(access, "expired") == []
        with pytest.raises(InvalidInput):
            tasks.list_tasks(access, "done")
    assert task_of(by_role["id"])


def _token_of(username: str) -> str:
    from backend.auth import issue_token

    with session_scope() as session:
        return issue_token(session, session.exec(select(User).where(User.username == username)).one()).token


def test_a_viewer_sees_the_instances_tasks_read_only_and_cannot_complete_or_cancel(api):
    make_user("vera", ["viewer"], {api.instance_id: ["graphicalEditor-viewer"]})
    run = start(api, approval({"user": me(api)}, "Admin's task"))
    task_id = task_of(run["id"])
    with access_of("vera") as access:
        assert tasks.list_tasks(access, "pending") == [] and tasks.pending_count(access) == 0
        visible = [(t.id, may) for t, may in tasks.list_visible_tasks(access, "pending")]
        assert visible == [(task_id, False)]
        task = tasks.get_task(access, task_id)
        with pytest.raises(Forbidden):
            tasks.complete_task(access, task, {"approved": True})
        with pytest.raises(Forbidden):
            tasks.cancel_task(access, task, "not mine")
    vera = {"Authorization": f"Bearer {_token_of('vera')}"}
    assert api.client.get("/api/tasks", headers=vera).json() == []  # REST list: only what she may complete
    refused = api.client.post(f"/api/tasks/{task_id}/complete", json={"data": {"approved": True}}, headers=vera)
    assert refused.status_code == 403
    with session_scope() as session:
        assert session.get(WorkflowRun, run["id"]).status == "paused"
    with access_of("admin") as access:
        assert [(t.id, may) for t, may in tasks.list_visible_tasks(access, "pending")] == [(task_id, True)]


def test_the_history_lists_the_last_finished_tasks_first_up_to_the_limit(api):
    finished = []
    for _ in range(3):
        run = start(api, approval({"user": me(api)}))
        task_id = task_of(run["id"])
        assert api.client.post(f"/api/tasks/{task_id}/cancel", headers=api.auth).status_code == 200
        finished.append(task_id)
    pending = task_of(start(api, approval({"user": me(api)}))["id"])
    with access_of("admin") as access:
        shown = [task.id for task, _may in tasks.list_visible_tasks(access, finished=True, limit=2)]
        open_ones = [task.id for task, _may in tasks.list_visible_tasks(access, "pending")]
    assert shown == [finished[2], finished[1]]  # the last finished first, cut at the limit
    assert pending in open_ones and not set(finished) & set(open_ones)


def test_the_inbox_door_gives_rows_joined_with_names_and_what_the_user_may_do(api):
    from backend.errors import NotFound

    make_user("vera2", ["viewer"], {api.instance_id: ["graphicalEditor-viewer"]})
    run = start(api, approval({"user": me(api)}, "Sign it"))
    task_id = task_of(run["id"])
    with access_of("admin") as access:
        rows = [r for r in tasks.Inbox(access).pending() if r.task.id == task_id]
        assert len(rows) == 1 and rows[0].may_complete and rows[0].may_cancel
        assert rows[0].workflow.name.startswith("wf-") and rows[0].instance_label
        assert rows[0].usernames[me(api)] == "admin"
    with access_of("vera2") as access:
        inbox = tasks.Inbox(access)
        (row,) = [r for r in inbox.pending() if r.task.id == task_id]
        assert (row.may_complete, row.may_cancel) == (False, False)  # read only
        assert inbox.open(task_id).id == task_id and inbox.pending_count() == 0
        with pytest.raises(Forbidden):
            inbox.cancel(task_id, "not mine")
        with pytest.raises(Forbidden):
            inbox.complete(task_id, {"approved": True})
        with pytest.raises(NotFound):
            inbox.open(uuid.uuid4().hex)
    with access_of("admin") as access:
        task, cancelled = tasks.Inbox(access).cancel(task_id, "done elsewhere")
        assert task.status == "cancelled" and cancelled.status == "cancelled"
        assert [r.task.id for r in tasks.Inbox(access).history()][:1] == [task_id]


def _notifications(username: str) -> list[dict[str, Any]]:
    from backend.notifications import service

    with session_scope() as session:
        user = session.exec(select(User).where(User.username == username)).one()
        return [{"kind": n.kind, "title": n.title, "message": n.message, "runId": n.run_id}
                for n in service.list_notifications(session, user)]


def test_a_new_task_is_told_to_its_assignee_or_the_role_holders_and_no_one_else(api):
    """Issue 23, part 1 (in-app): the assignee user, or each holder of the assignee role in the
    task's instance, finds a notification of the new task; a member without it does not."""
    rita = make_user("rita", ["user"], {api.instance_id: ["graphicalEditor-user"]})
    make_user("vera", ["user"], {api.instance_id: ["graphicalEditor-viewer"]})
    by_role = start(api, approval({"role": "graphicalEditor-user"}, "Approve the offer"))
    start(api, approval({"user": rita}, "Rita's own"))
    told = _notifications("rita")
    assert [(n["kind"], n["title"]) for n in told] == [
        ("task.assigned", "Approval waiting for you: Rita's own"),
        ("task.assigned", "Approval waiting for you: Approve the offer")]
    assert told[1]["runId"] == by_role["id"] and "Open the Inbox" in told[1]["message"]
    assert _notifications("vera") == []  # a viewer can complete neither
    assert not [n for n in _notifications("admin") if n["kind"] == "task.assigned"]  # holds no -user role
