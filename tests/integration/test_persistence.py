"""The workflow tables on SQLite and PostgreSQL: round trips, constraints and real concurrency."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta, timezone
from typing import Any

import pytest
from sqlalchemy import func
from sqlalchemy.exc import IntegrityError, StatementError
from sqlmodel import Session, select

from backend.db.models import (
    EXECUTION_LOG_LIMIT,
    FeatureInstance,
    HumanTask,
    RunStepLog,
    Workflow,
    WorkflowRun,
    WorkflowVersion,
)
from backend.statemachines import (
    ConcurrentTransition,
    IllegalTransition,
    human_task,
    workflow_run,
    workflow_version,
)

NESTED: dict[str, Any] = {
    "ünïcödé": "日本語 — Grüße 🚀",
    "nested": {
        "list": [1, 2.5, "drei", None, True, False, {"deep": [[], [{}], {"x": ["ÿ"]}]}],
        "empty": {},
        "emptyList": [],
    },
    "quotes": "it's \"quoted\"\n\ttabbed \\ backslash",
    "big": 2**53,
    "negative": -17,
}
ZURICH_SUMMER = timezone(timedelta(hours=2))
INDIA = timezone(timedelta(hours=5, minutes=30))
PACIFIC = timezone(timedelta(hours=-8))


def _assert_utc(value: datetime | None, expected: datetime | None = None) -> None:
    assert value is not None
    assert value.tzinfo is not None and value.utcoffset() == timedelta(0), value
    if expected is not None:
        assert value == expected  # same instant
        assert value.replace(tzinfo=None) == expected.astimezone(UTC).replace(tzinfo=None)


def _round_trip(engine, obj: Any) -> Any:
    """Store `obj`, load it in a fresh session and check every column came back equal."""
    model = type(obj)
    with Session(engine) as session:
        session.add(obj)
        session.commit()
        session.refresh(obj)
        expected = {column.key: getattr(obj, column.key) for column in model.__table__.columns}
    with Session(engine) as session:
        loaded = session.get(model, expected["id"])
        assert loaded is not None
        for name, value in expected.items():
            got = getattr(loaded, name)
            assert got == value, f"{model.__name__}.{name}: {got!r} != {value!r}"
            if isinstance(value, datetime):
                _assert_utc(got, value)
        return loaded


# --- round trips -----------------------------------------------------------------------------


def test_workflow_round_trip(engine, make_parents) -> None:
    parents = make_parents()
    created = datetime(2026, 3, 29, 2, 30, 15, 123456, tzinfo=ZURICH_SUMMER)
    workflow = Workflow(
        mandate_id=parents.mandate_id, feature_instance_id=parents.feature_instance_id,
        name="Rechnungsfreigabe ✓ 請求書", description="Mehrzeilig\nmit Ümlauten — und Emoji 📄",
        active=True, event_id="job-ü-1", execution_logs=[NESTED, {"at": "2026-01-01", "n": 1}],
        sys_created_by=parents.user_id, sys_created_at=created,
        sys_modified_at=datetime(2026, 12, 31, 23, 59, 59, 999999, tzinfo=PACIFIC), lock_version=7,
    )
    loaded = _round_trip(engine, workflow)
    assert loaded.execution_logs[0]["nested"]["list"][6]["deep"][2]["x"] == ["ÿ"]
    _assert_utc(loaded.sys_created_at, created)
    assert loaded.sys_created_at.hour == 0  # 02:30 at +02:00 is 00:30 UTC
    assert loaded.sys_modified_at.year == 2027  # 23:59 at -08:00 is already next year in UTC


def test_workflow_version_round_trip(engine, make_parents) -> None:
    parents = make_parents()
    graph = {"nodes": [{"id": "n1", "type": "trigger.manual", "label": "Start ▶", "config": NESTED}],
             "edges": [{"source": "n1", "target": "n2", "sourceHandle": 0}]}
    published = datetime(2026, 6, 1, 12, 0, tzinfo=INDIA)
    version = WorkflowVersion(workflow_id=parents.workflow_id, version_number=2, status="archived",
                              graph=graph, sys_created_by=parents.user_id, published_at=published)
    loaded = _round_trip(engine, version)
    assert loaded.graph == graph
    _assert_utc(loaded.published_at, published)


def test_workflow_run_round_trip(engine, make_parents) -> None:
    parents = make_parents()
    run = WorkflowRun(
        workflow_id=parents.workflow_id, version_id=parents.version_id, mandate_id=parents.mandate_id,
        feature_instance_id=parents.feature_instance_id, status="paused", pause_reason="humanTask",
        mode="step", trigger="schedule", input=[NESTED, "zwei", 3], output="nur ein Text ✓",
        error="Fehler: ß≠ss", context={"nodeOutputs": {"n1": NESTED}, "cursor": ["n2"]},
        sys_created_by=parents.user_id, started_at=datetime(2026, 1, 1, tzinfo=INDIA),
        finished_at=datetime(2026, 1, 2, 3, 4, 5, 6, tzinfo=PACIFIC),
    )
    loaded = _round_trip(engine, run)
    assert loaded.input == [NESTED, "zwei", 3]
    assert loaded.context["nodeOutputs"]["n1"]["ünïcödé"] == NESTED["ünïcödé"]


def test_run_with_empty_json_round_trip(engine, make_parents) -> None:
    parents = make_parents()
    run = WorkflowRun(workflow_id=parents.workflow_id, version_id=parents.version_id,
                      mandate_id=parents.mandate_id, feature_instance_id=parents.feature_instance_id)
    loaded = _round_trip(engine, run)
    assert (loaded.input, loaded.output, loaded.context, loaded.finished_at) == (None, None, None, None)
    _assert_utc(loaded.started_at)


def test_run_step_log_round_trip(engine, make_parents) -> None:
    parents = make_parents()
    step = RunStepLog(run_id=parents.run_id, node_id="n1-ä", node_type="ai.prompt", status="failed",
                      attempt=3, input={"prompt": "Fasse zusammen: 日本語"}, output=NESTED,
                      error="Timeout nach 30 s", duration_ms=30_001,
                      started_at=datetime(2026, 2, 28, 23, 0, tzinfo=PACIFIC),
                      finished_at=datetime(2026, 3, 1, 7, 0, 30, tzinfo=UTC))
    loaded = _round_trip(engine, step)
    assert loaded.started_at == loaded.finished_at - timedelta(seconds=30)


def test_human_task_round_trip(engine, make_parents) -> None:
    parents = make_parents()
    task = HumanTask(
        run_id=parents.run_id, node_id="approve", mandate_id=parents.mandate_id,
        feature_instance_id=parents.feature_instance_id, kind="form", title="Bitte prüfen: 請求書",
        message="Ist der Betrag **korrekt**?",
        fields=[{"name": "betrag", "type": "number", "required": True},
                {"name": "kommentar", "type": "text", "options": ["ja", "nein", "vielleicht 🤔"]}],
        assignee={"users": [parents.user_id], "roles": ["Prüfer"]},
        data={"betrag": 12.5, "kommentar": "Passt ✓"},
        due_at=datetime(2026, 7, 1, 9, 0, tzinfo=ZURICH_SUMMER), on_timeout="cancel",
        completed_by=parents.user_id, finished_at=datetime(2026, 6, 30, tzinfo=UTC),
    )
    loaded = _round_trip(engine, task)
    assert loaded.fields[1]["options"][2] == "vielleicht 🤔"
    _assert_utc(loaded.due_at, datetime(2026, 7, 1, 7, 0, tzinfo=UTC))


def test_naive_datetime_is_refused(engine, make_parents) -> None:
    """Times are timezone-aware UTC; a naive one is a programming error, not a guess."""
    parents = make_parents()
    with Session(engine) as session:
        run = session.get(WorkflowRun, parents.run_id)
        run.finished_at = datetime(2026, 1, 1, 12, 0)
        with pytest.raises(StatementError, match="timezone"):
            session.commit()


def test_json_changes_need_reassignment_to_persist(engine, make_parents) -> None:
    """Document the JSON column behaviour the code relies on: reassigning persists."""
    parents = make_parents(version_status="draft")
    with Session(engine) as session:
        version = session.get(WorkflowVersion, parents.version_id)
        version.graph = {**version.graph, "nodes": [{"id": "neu", "label": "Neü"}]}
        session.commit()
    with Session(engine) as session:
        assert session.get(WorkflowVersion, parents.version_id).graph["nodes"] == [
            {"id": "neu", "label": "Neü"}
        ]


# --- execution log cap -----------------------------------------------------------------------


def test_append_execution_log_keeps_newest_50(engine, make_parents) -> None:
    assert EXECUTION_LOG_LIMIT == 50
    parents = make_parents()
    with Session(engine) as session:
        workflow = session.get(Workflow, parents.workflow_id)
        assert workflow.execution_logs == []
        for n in range(1, 56):
            workflow.append_execution_log({"n": n, "message": f"Lauf {n} ✓", "meta": {"k": [n]}})
        assert len(workflow.execution_logs) == 50
        session.commit()
    with Session(engine) as session:
        workflow = session.get(Workflow, parents.workflow_id)
        assert [entry["n"] for entry in workflow.execution_logs] == list(range(6, 56))
        assert workflow.execution_logs[-1] == {"n": 55, "message": "Lauf 55 ✓", "meta": {"k": [55]}}
        for n in range(56, 61):
            workflow.append_execution_log({"n": n})
        session.commit()
    with Session(engine) as session:
        workflow = session.get(Workflow, parents.workflow_id)
        assert [entry["n"] for entry in workflow.execution_logs] == list(range(11, 61))


def test_append_execution_log_below_the_cap_and_from_none() -> None:
    workflow = Workflow(mandate_id="m", feature_instance_id="f", name="w")
    workflow.execution_logs = None
    workflow.append_execution_log({"n": 1})
    workflow.append_execution_log({"n": 2})
    assert workflow.execution_logs == [{"n": 1}, {"n": 2}]


# --- unique constraints ----------------------------------------------------------------------


def _expect_integrity_error(engine, make_rows: Callable[[Session], list[Any]]) -> None:
    with Session(engine) as session:
        session.add_all(make_rows(session))
        with pytest.raises(IntegrityError):
            session.commit()
        session.rollback()


def _count(engine, model, **where) -> int:
    with Session(engine) as session:
        query = select(func.count()).select_from(model)
        for name, value in where.items():
            query = query.where(getattr(model, name) == value)
        return session.exec(query).one()


def test_workflow_name_is_unique_per_instance(engine, make_parents) -> None:
    parents = make_parents()
    with Session(engine) as session:
        name = session.get(Workflow, parents.workflow_id).name
    _expect_integrity_error(engine, lambda s: [Workflow(
        mandate_id=parents.mandate_id, feature_instance_id=parents.feature_instance_id, name=name)])
    assert _count(engine, Workflow, name=name) == 1
    # The same name in another instance of the same mandate is fine.
    with Session(engine) as session:
        other = FeatureInstance(mandate_id=parents.mandate_id, feature_code="graphicalEditor",
                                label="zweiter Editor")
        session.add(other)
        session.flush()
        session.add(Workflow(mandate_id=parents.mandate_id, feature_instance_id=other.id, name=name))
        session.commit()
    assert _count(engine, Workflow, name=name) == 2


def _version(parents, number: int, status: str, workflow_id: str | None = None) -> WorkflowVersion:
    return WorkflowVersion(workflow_id=workflow_id or parents.workflow_id, version_number=number,
                           status=status, graph={"v": number})


def test_one_draft_per_workflow(engine, make_parents) -> None:
    parents = make_parents(version_status="published")
    with Session(engine) as session:
        session.add(_version(parents, 2, "draft"))
        session.commit()
    _expect_integrity_error(engine, lambda s: [_version(parents, 3, "draft")])
    assert _count(engine, WorkflowVersion, workflow_id=parents.workflow_id, status="draft") == 1
    # Any number of archived versions, and a draft of another workflow, are fine.
    other = make_parents(version_status="draft")
    with Session(engine) as session:
        session.add_all([_version(parents, 3, "archived"), _version(parents, 4, "archived"),
                         _version(other, 2, "archived", other.workflow_id)])
        session.commit()
    assert _count(engine, WorkflowVersion, status="draft") == 2


def test_one_published_per_workflow(engine, make_parents) -> None:
    parents = make_parents(version_status="published")
    _expect_integrity_error(engine, lambda s: [_version(parents, 2, "published")])
    assert _count(engine, WorkflowVersion, workflow_id=parents.workflow_id, status="published") == 1
    other = make_parents(version_status="published")  # another workflow may publish its own
    assert _count(engine, WorkflowVersion, status="published") == 2
    assert other.workflow_id != parents.workflow_id


def test_version_number_is_unique_per_workflow(engine, make_parents) -> None:
    parents = make_parents(version_status="published")
    _expect_integrity_error(engine, lambda s: [_version(parents, 1, "archived")])


def test_publishing_beside_a_published_version_needs_archiving_first(engine, make_parents) -> None:
    """The database refuses two published versions even through the state machine;
    archiving the old one and publishing the new one in one transaction works."""
    parents = make_parents(version_status="published")
    with Session(engine) as session:
        draft = _version(parents, 2, "draft")
        session.add(draft)
        session.commit()
        draft_id = draft.id

    with Session(engine) as session:
        draft = session.get(WorkflowVersion, draft_id)
        with pytest.raises(IntegrityError):
            workflow_version.publish(session, draft)
        session.rollback()

    with Session(engine) as session:
        old = session.get(WorkflowVersion, parents.version_id)
        new = session.get(WorkflowVersion, draft_id)
        assert (old.status, new.status) == ("published", "draft")
        workflow_version.archive(session, old)
        workflow_version.publish(session, new)
        session.commit()

    with Session(engine) as session:
        statuses = {v.id: (v.status, v.lock_version)
                    for v in session.exec(select(WorkflowVersion)).all()}
    assert statuses == {parents.version_id: ("archived", 2), draft_id: ("published", 2)}


# --- real concurrency: two sessions, one row, one winner ------------------------------------


Action = Callable[[Session, Any], Any]


def _contend(engine, model, obj_id: str, actions: dict[str, Action], hold: float) -> dict[str, Any]:
    """Run each action in its own thread and session on the same row.

    Every thread reads the row, waits at a barrier until all have read, then applies its
    transition and commits. With `hold` the successful writer keeps its transaction (and row
    lock) open a little, so the others' UPDATEs really block on it.
    """
    barrier = threading.Barrier(len(actions))
    outcomes: dict[str, Any] = {}

    def contender(name: str, action: Action) -> None:
        with Session(engine) as session:
            try:
                obj = session.get(model, obj_id)
                assert obj.lock_version == 1
                barrier.wait(timeout=30)
                action(session, obj)
                if hold:
                    time.sleep(hold)
                session.commit()
                outcomes[name] = "won"
            except BaseException as error:  # noqa: BLE001 (reported to the main thread)
                session.rollback()
                outcomes[name] = error

    threads = [threading.Thread(target=contender, args=item, daemon=True) for item in actions.items()]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    assert not any(thread.is_alive() for thread in threads), "a contender hung"
    return outcomes


def _new_run(engine, parents, status: str) -> str:
    with Session(engine) as session:
        run = WorkflowRun(workflow_id=parents.workflow_id, version_id=parents.version_id,
                          mandate_id=parents.mandate_id, feature_instance_id=parents.feature_instance_id,
                          status=status, pause_reason="wait" if status == "paused" else None)
        session.add(run)
        session.commit()
        return run.id


def _new_task(engine, parents, status: str) -> str:
    with Session(engine) as session:
        task = HumanTask(run_id=parents.run_id, node_id="approve", mandate_id=parents.mandate_id,
                         feature_instance_id=parents.feature_instance_id, status=status)
        session.add(task)
        session.commit()
        return task.id


RUN_ACTIONS: dict[str, tuple[Action, str]] = {
    "complete": (lambda s, o: workflow_run.complete(s, o, {"by": "complete"}), "completed"),
    "cancel": (lambda s, o: workflow_run.cancel(s, o, "by cancel"), "cancelled"),
    "fail": (lambda s, o: workflow_run.fail(s, o, "by fail"), "failed"),
    "pause": (lambda s, o: workflow_run.pause(s, o, "humanTask"), "paused"),
    "resume": (lambda s, o: workflow_run.resume(s, o), "running"),
}
TASK_ACTIONS: dict[str, tuple[Action, str]] = {
    "complete": (lambda s, o: human_task.complete(s, o, {"ok": True}, None), "completed"),
    "cancel": (lambda s, o: human_task.cancel(s, o, None), "cancelled"),
    "expire": (lambda s, o: human_task.expire(s, o), "expired"),
}
SCENARIOS = [
    pytest.param(WorkflowRun, "running", ("complete", "cancel"), id="run:complete-vs-cancel"),
    pytest.param(WorkflowRun, "running", ("pause", "fail"), id="run:pause-vs-fail"),
    pytest.param(WorkflowRun, "paused", ("resume", "cancel"), id="run:resume-vs-cancel"),
    pytest.param(WorkflowRun, "running", ("cancel", "cancel"), id="run:cancel-vs-cancel"),
    pytest.param(WorkflowRun, "running", ("complete", "cancel", "fail", "pause"), id="run:four-way"),
    pytest.param(HumanTask, "pending", ("complete", "expire"), id="task:complete-vs-expire"),
]
REPEATS = 4


@pytest.mark.parametrize(("model", "start", "events"), SCENARIOS)
def test_concurrent_transitions_have_one_winner(engine, make_parents, model, start, events) -> None:
    parents = make_parents()
    table = RUN_ACTIONS if model is WorkflowRun else TASK_ACTIONS
    new_object = _new_run if model is WorkflowRun else _new_task
    for attempt in range(REPEATS):
        obj_id = new_object(engine, parents, start)
        names = [f"{event}#{i}" for i, event in enumerate(events)]
        actions = {name: table[event][0] for name, event in zip(names, events, strict=True)}
        outcomes = _contend(engine, model, obj_id, actions, hold=0.05 if attempt % 2 else 0.0)

        winners = [name for name, outcome in outcomes.items() if outcome == "won"]
        losers = {name: outcome for name, outcome in outcomes.items() if outcome != "won"}
        assert len(outcomes) == len(events)
        assert len(winners) == 1, f"attempt {attempt}: {outcomes}"
        for name, outcome in losers.items():
            assert isinstance(outcome, ConcurrentTransition), f"attempt {attempt}: {name}: {outcome!r}"
            assert obj_id in str(outcome)

        winner_event = winners[0].split("#")[0]
        expected_state = table[winner_event][1]
        with Session(engine) as session:
            final = session.get(model, obj_id)
            assert final.status == expected_state
            assert final.lock_version == 2  # exactly one transition was written
            if model is WorkflowRun and winner_event == "complete":
                assert final.output == {"by": "complete"}
            if model is WorkflowRun and winner_event in ("cancel", "fail"):
                assert final.error == f"by {winner_event}"
            # A loser that reloads finds its transition illegal now (unless the winner's
            # state still allows it, e.g. cancel after a winning resume).
            for name in losers:
                event = name.split("#")[0]
                if expected_state not in _sources(model, event):
                    with pytest.raises(IllegalTransition):
                        table[event][0](session, final)
            session.rollback()
        with Session(engine) as session:
            final = session.get(model, obj_id)
            assert (final.status, final.lock_version) == (expected_state, 2)


def _sources(model, event: str) -> tuple[str, ...]:
    machine = workflow_run.MACHINE if model is WorkflowRun else human_task.MACHINE
    return machine.transitions[event].sources
