"""The lifecycles of DESIGN §5: every legal transition persists, every illegal one is refused.

Legal transitions run against both databases (the `db_url` fixture); the exhaustive table of
illegal (state, event) pairs is checked on in-memory objects, and on SQLite only for the
"nothing was written" half, so the suite stays fast.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from types import ModuleType, SimpleNamespace
from typing import Any

import pytest
from sqlmodel import Session

from backend.db.models import HumanTask, Workflow, WorkflowRun, WorkflowVersion
from backend.statemachines import (
    ConcurrentTransition,
    IllegalTransition,
    agent_run,
    human_task,
    scheduler_job,
    workflow_run,
    workflow_version,
)
from backend.statemachines.base import StateMachine

# --- how to put a persisted object into a state and drive each event -----------------------


def _version_in(state: str, parents) -> WorkflowVersion:
    return WorkflowVersion(workflow_id=parents.workflow_id, version_number=2, status=state,
                           graph={"nodes": [{"id": "n1"}]})


def _run_in(state: str, parents) -> WorkflowRun:
    return WorkflowRun(workflow_id=parents.workflow_id, version_id=parents.version_id,
                       mandate_id=parents.mandate_id, feature_instance_id=parents.feature_instance_id,
                       status=state, pause_reason="wait" if state == "paused" else None)


def _task_in(state: str, parents) -> HumanTask:
    return HumanTask(run_id=parents.run_id, node_id="approve", mandate_id=parents.mandate_id,
                     feature_instance_id=parents.feature_instance_id, status=state,
                     title="Approve?")


def _workflow_in(state: str, parents) -> Workflow:
    return Workflow(mandate_id=parents.mandate_id, feature_instance_id=parents.feature_instance_id,
                    name=f"scheduled-{state}", event_id="job-1" if state == "registered" else None)


@dataclass(frozen=True)
class Persisted:
    """A lifecycle whose objects live in the database."""

    name: str
    module: ModuleType
    model: type
    make: Callable[[str, Any], Any]
    drive: dict[str, Callable[[Session, Any], Any]]

    @property
    def machine(self) -> StateMachine:
        return self.module.MACHINE

    def state_of(self, obj: Any) -> str:
        return self.machine.state(obj)


PERSISTED = [
    Persisted("WorkflowVersion", workflow_version, WorkflowVersion, _version_in, {
        "publish": workflow_version.publish,
        "unpublish": workflow_version.unpublish,
        "archive": workflow_version.archive,
        "restore": workflow_version.restore,
    }),
    Persisted("WorkflowRun", workflow_run, WorkflowRun, _run_in, {
        "pause": lambda s, o: workflow_run.pause(s, o, "humanTask"),
        "resume": workflow_run.resume,
        "complete": lambda s, o: workflow_run.complete(s, o, {"result": "ok ✓"}),
        "fail": lambda s, o: workflow_run.fail(s, o, "boom"),
        "cancel": lambda s, o: workflow_run.cancel(s, o, "stopped by user"),
    }),
    Persisted("HumanTask", human_task, HumanTask, _task_in, {
        "complete": lambda s, o: human_task.complete(s, o, {"approved": True}, None),
        "cancel": lambda s, o: human_task.cancel(s, o, None),
        "expire": human_task.expire,
    }),
    Persisted("Scheduler job", scheduler_job, Workflow, _workflow_in, {
        "register": lambda s, o: scheduler_job.register(s, o, "job-new"),
        "replace": lambda s, o: scheduler_job.replace(s, o, "job-replaced"),
        "unregister": scheduler_job.unregister,
    }),
]
BY_NAME = {lifecycle.name: lifecycle for lifecycle in PERSISTED}


def legal_pairs(machine: StateMachine) -> list[tuple[str, str, str]]:
    """(state, event, target) for every legal transition of `machine`."""
    return [(source, t.event, t.target) for t in machine.transitions.values() for source in t.sources]


def illegal_pairs(machine: StateMachine) -> list[tuple[str, str]]:
    """Every (state, event) of `machine` that the table does not allow."""
    legal = {(state, event) for state, event, _ in legal_pairs(machine)}
    return [pair for pair in itertools.product(sorted(machine.states), sorted(machine.transitions))
            if pair not in legal]


def _params(pairs_of: Callable[[StateMachine], list], lifecycles) -> list:
    return [
        pytest.param(lifecycle.name, *pair, id=f"{lifecycle.name}:{'-'.join(pair)}")
        for lifecycle in lifecycles for pair in pairs_of(lifecycle.machine)
    ]


AGENT = SimpleNamespace(name="AgentRun", machine=agent_run.MACHINE)
ALL_MACHINES = [*PERSISTED, AGENT]


# --- the tables are what DESIGN §5 says ------------------------------------------------------


def test_tables_match_design() -> None:
    assert workflow_version.MACHINE.states == {"draft", "published", "archived"}
    assert workflow_run.MACHINE.states == {"running", "paused", "completed", "failed", "cancelled"}
    assert human_task.MACHINE.states == {"pending", "completed", "cancelled", "expired"}
    assert scheduler_job.MACHINE.states == {"unregistered", "registered"}
    assert agent_run.MACHINE.states == {
        "idle", "thinking", "executing_tools", "toolbox_escalation", "sub_agent_call", "waiting_approval",
        "completed", "failed", "cancelled",
    }
    assert set(legal_pairs(workflow_run.MACHINE)) == {
        ("running", "pause", "paused"), ("paused", "resume", "running"),
        ("running", "complete", "completed"), ("running", "fail", "failed"),
        ("running", "cancel", "cancelled"), ("paused", "cancel", "cancelled"),
    }
    assert workflow_run.PAUSE_REASONS == ("humanTask", "email", "wait", "step")


@pytest.mark.parametrize("lifecycle", PERSISTED, ids=lambda lc: lc.name)
def test_every_event_has_a_function(lifecycle: Persisted) -> None:
    assert set(lifecycle.drive) == set(lifecycle.machine.transitions)
    for event in lifecycle.machine.transitions:
        assert callable(getattr(lifecycle.module, event)), event


# --- legal transitions persist (both databases) ---------------------------------------------


@pytest.mark.parametrize(("lifecycle_name", "state", "event", "target"), _params(legal_pairs, PERSISTED))
def test_legal_transition_persists(engine, make_parents, lifecycle_name, state, event, target) -> None:
    lifecycle = BY_NAME[lifecycle_name]
    # The parent version is archived so the version under test may become draft or published.
    parents = make_parents(version_status="archived")
    with Session(engine) as session:
        obj = lifecycle.make(state, parents)
        obj.lock_version = 3
        session.add(obj)
        session.commit()
        obj_id = obj.id

    with Session(engine) as session:
        obj = session.get(lifecycle.model, obj_id)
        assert lifecycle.state_of(obj) == state
        returned = lifecycle.drive[event](session, obj)
        assert returned is obj
        # The object in hand reflects the write without a reload.
        assert lifecycle.state_of(obj) == target
        assert obj.lock_version == 4
        session.commit()

    with Session(engine) as session:
        reloaded = session.get(lifecycle.model, obj_id)
        assert lifecycle.state_of(reloaded) == target
        assert reloaded.lock_version == 4
        _check_side_effects(lifecycle_name, event, reloaded)


def _check_side_effects(lifecycle_name: str, event: str, obj: Any) -> None:
    """The extra columns each transition writes."""
    def aware(value: datetime | None) -> bool:
        return value is not None and value.utcoffset() is not None and value.utcoffset().total_seconds() == 0

    if lifecycle_name == "WorkflowRun":
        if event == "pause":
            assert obj.pause_reason == "humanTask"
        else:
            assert obj.pause_reason is None
        if event in ("complete", "fail", "cancel"):
            assert aware(obj.finished_at)
        else:
            assert obj.finished_at is None
        if event == "complete":
            assert obj.output == {"result": "ok ✓"}
        if event == "fail":
            assert obj.error == "boom"
        if event == "cancel":
            assert obj.error == "stopped by user"
    elif lifecycle_name == "HumanTask":
        assert aware(obj.finished_at)
        if event == "complete":
            assert obj.data == {"approved": True}
    elif lifecycle_name == "WorkflowVersion":
        assert aware(obj.sys_modified_at)
        if event in ("publish", "restore"):
            assert aware(obj.published_at)
    elif lifecycle_name == "Scheduler job":
        expected = {"register": "job-new", "replace": "job-replaced", "unregister": None}[event]
        assert obj.event_id == expected


@pytest.mark.parametrize("db_url", ["sqlite"], indirect=True)
def test_run_goes_round_the_pause_loop(engine, make_parents) -> None:
    """running → paused → running → paused → cancelled, one lock_version step per transition."""
    parents = make_parents()
    with Session(engine) as session:
        run = session.get(WorkflowRun, parents.run_id)
        workflow_run.pause(session, run, "step")
        workflow_run.resume(session, run)
        workflow_run.pause(session, run, "email")
        session.commit()
    with Session(engine) as session:
        run = session.get(WorkflowRun, parents.run_id)
        assert (run.status, run.pause_reason, run.lock_version) == ("paused", "email", 4)
        workflow_run.cancel(session, run)
        session.commit()
    with Session(engine) as session:
        run = session.get(WorkflowRun, parents.run_id)
        assert (run.status, run.pause_reason, run.lock_version) == ("cancelled", None, 5)


# --- illegal transitions are refused (in memory: every pair of every machine) ---------------


def _stand_in(lifecycle_name: str, state: str, obj_id: str) -> Any:
    """A plain object in `state` for MACHINE.check (no database needed)."""
    if lifecycle_name == "Scheduler job":
        return SimpleNamespace(id=obj_id, event_id="job-1" if state == "registered" else None)
    return SimpleNamespace(id=obj_id, status=state)


def _assert_names_everything(
    error: IllegalTransition, name: str, obj_id: str, state: str, event: str
) -> None:
    message = str(error)
    for part in (name, obj_id, state, event):
        assert part in message, f"{part!r} missing from {message!r}"
    assert (error.object_name, error.object_id, error.current, error.event) == (name, obj_id, state, event)


@pytest.mark.parametrize(("lifecycle_name", "state", "event"), _params(illegal_pairs, ALL_MACHINES))
def test_illegal_transition_is_refused(lifecycle_name: str, state: str, event: str) -> None:
    machine = next(m.machine for m in ALL_MACHINES if m.name == lifecycle_name)
    obj = _stand_in(lifecycle_name, state, "obj-42")
    with pytest.raises(IllegalTransition) as caught:
        machine.check(obj, event)
    _assert_names_everything(caught.value, machine.object_name, "obj-42", state, event)
    # apply without a session (the in-memory path) must leave the object alone too.
    before = dict(vars(obj))
    with pytest.raises(IllegalTransition):
        machine.apply(None, obj, event)
    assert vars(obj) == before


def test_illegal_table_is_complete() -> None:
    """Sanity check of the table generator: legal + illegal = states x events."""
    for lifecycle in ALL_MACHINES:
        machine = lifecycle.machine
        total = len(machine.states) * len(machine.transitions)
        legal = {(s, e) for s, e, _ in legal_pairs(machine)}
        assert len(legal) + len(illegal_pairs(machine)) == total
    assert len(illegal_pairs(workflow_run.MACHINE)) == 19
    assert len(illegal_pairs(workflow_version.MACHINE)) == 8


@pytest.mark.parametrize("lifecycle", ALL_MACHINES, ids=lambda lc: lc.name)
def test_unknown_event_is_refused(lifecycle) -> None:
    state = sorted(lifecycle.machine.states)[0]
    with pytest.raises(IllegalTransition, match="explode") as caught:
        lifecycle.machine.check(_stand_in(lifecycle.name, state, "x1"), "explode")
    assert "no state" in str(caught.value)


# --- illegal transitions write nothing (SQLite only: the write path is the same) -----------


@pytest.mark.parametrize("db_url", ["sqlite"], indirect=True)
@pytest.mark.parametrize(("lifecycle_name", "state", "event"), _params(illegal_pairs, PERSISTED))
def test_illegal_transition_writes_nothing(engine, make_parents, lifecycle_name, state, event) -> None:
    lifecycle = BY_NAME[lifecycle_name]
    # The parent version is archived so the version under test may become draft or published.
    parents = make_parents(version_status="archived")
    with Session(engine) as session:
        obj = lifecycle.make(state, parents)
        session.add(obj)
        session.commit()
        obj_id = obj.id
        snapshot = obj.model_dump()

    with Session(engine) as session:
        obj = session.get(lifecycle.model, obj_id)
        with pytest.raises(IllegalTransition) as caught:
            lifecycle.drive[event](session, obj)
        _assert_names_everything(caught.value, lifecycle.machine.object_name, obj_id, state, event)
        assert obj.model_dump() == snapshot
        assert not session.dirty
        session.commit()

    with Session(engine) as session:
        assert session.get(lifecycle.model, obj_id).model_dump() == snapshot


# --- argument checks -------------------------------------------------------------------------


@pytest.mark.parametrize("db_url", ["sqlite"], indirect=True)
@pytest.mark.parametrize("reason", ["sleep", "", None, "HUMANTASK"])
def test_pause_with_unknown_reason_is_refused(engine, make_parents, reason) -> None:
    parents = make_parents()
    with Session(engine) as session:
        run = session.get(WorkflowRun, parents.run_id)
        with pytest.raises(ValueError, match="pauseReason"):
            workflow_run.pause(session, run, reason)
        session.commit()
    with Session(engine) as session:
        run = session.get(WorkflowRun, parents.run_id)
        assert (run.status, run.pause_reason, run.lock_version) == ("running", None, 1)


@pytest.mark.parametrize("reason", workflow_run.PAUSE_REASONS)
def test_every_pause_reason_is_accepted(reason: str) -> None:
    run = SimpleNamespace(id="r1", status="running", pause_reason=None)
    workflow_run.MACHINE.apply(None, run, "pause", pause_reason=reason)
    assert (run.status, run.pause_reason) == ("paused", reason)


@pytest.mark.parametrize("db_url", ["sqlite"], indirect=True)
@pytest.mark.parametrize("event", ["register", "replace"])
def test_scheduler_job_needs_a_handle(engine, make_parents, event) -> None:
    parents = make_parents()
    with Session(engine) as session:
        workflow = session.get(Workflow, parents.workflow_id)
        if event == "replace":
            workflow.event_id = "job-1"
            session.commit()
        with pytest.raises(ValueError, match="job handle"):
            getattr(scheduler_job, event)(session, workflow, "")


# --- a stale object loses (single thread; the threaded race is in integration) -------------


@pytest.mark.parametrize("db_url", ["sqlite"], indirect=True)
def test_stale_object_gets_concurrent_transition(engine, make_parents) -> None:
    parents = make_parents()
    with Session(engine) as first, Session(engine) as second:
        run_a = first.get(WorkflowRun, parents.run_id)
        run_b = second.get(WorkflowRun, parents.run_id)
        workflow_run.complete(first, run_a)
        first.commit()
        with pytest.raises(ConcurrentTransition) as caught:
            workflow_run.cancel(second, run_b)
        assert parents.run_id in str(caught.value) and "cancel" in str(caught.value)
        second.rollback()
    with Session(engine) as session:
        run = session.get(WorkflowRun, parents.run_id)
        assert (run.status, run.lock_version) == ("completed", 2)


# --- agent run (in memory only) --------------------------------------------------------------


@pytest.mark.parametrize(("state", "event", "target"), legal_pairs(agent_run.MACHINE),
                         ids=lambda v: str(v))
def test_agent_run_legal_transition(state: str, event: str, target: str) -> None:
    run = agent_run.AgentRunState(id="agent-1", status=state)
    assert run.fire(event) == target
    assert run.status == target
    assert run.history == [event]


@pytest.mark.parametrize(("state", "event"), illegal_pairs(agent_run.MACHINE), ids=lambda v: str(v))
def test_agent_run_illegal_transition_changes_nothing(state: str, event: str) -> None:
    run = agent_run.AgentRunState(id="agent-1", status=state, history=["earlier"])
    with pytest.raises(IllegalTransition) as caught:
        run.fire(event)
    _assert_names_everything(caught.value, "AgentRun", "agent-1", state, event)
    assert run.status == state
    assert run.history == ["earlier"]


def test_agent_run_full_loop() -> None:
    run = agent_run.AgentRunState(id="agent-2")
    path = ["start", "call_tools", "escalate_toolbox", "call_sub_agent", "tools_done",
            "call_tools", "await_approval", "approval_answered", "tools_done", "complete"]
    states = [run.fire(event) for event in path]
    assert states == ["thinking", "executing_tools", "toolbox_escalation", "sub_agent_call",
                      "thinking", "executing_tools", "waiting_approval", "executing_tools", "thinking", "completed"]
    assert run.history == path
    for event in agent_run.MACHINE.transitions:
        with pytest.raises(IllegalTransition):
            run.fire(event)
