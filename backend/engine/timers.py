"""Due work of paused runs (DESIGN §4): flow.wait timers, human task timeouts and the e-mail poller.

Nothing here sleeps. A waiting node keeps what it waits for in the run's persisted context
(``context.suspended[<node>].output``: ``wakeAt`` for flow.wait; ``connectionId``/``folder``/
``filter``/``since`` for email.checkEmail) or in its HumanTask (``due_at``/``on_timeout``), so the
work below is found again after a restart. :func:`run_due_work` is what the scheduler calls
periodically; each function may also be called on its own, with `now` for tests.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from sqlmodel import Session, select

from backend.db import session_scope
from backend.db.models import HumanTask, WorkflowRun, utcnow
from backend.engine.executor import RunEngine
from backend.statemachines import human_task as task_lifecycle
from backend.statemachines import workflow_run as run_lifecycle
from backend.workflows.node_types import DEFAULT_HANDLE


def _aware(moment: datetime) -> datetime:
    """SQLite hands back naive datetimes; they are UTC."""
    return moment if moment.tzinfo else moment.replace(tzinfo=UTC)


def waiting_nodes(run: WorkflowRun, reason: str) -> dict[str, dict[str, Any]]:
    """The run's suspended nodes that wait for `reason` ("wait", "email", "humanTask"), by node id."""
    suspended = (run.context or {}).get("suspended") or {}
    return {node_id: entry for node_id, entry in suspended.items()
            if isinstance(entry, dict) and entry.get("reason") == reason}


def paused_runs(session: Session) -> list[WorkflowRun]:
    """Runs paused for something outside the run (not by the step debugger)."""
    query = select(WorkflowRun).where(WorkflowRun.status == run_lifecycle.PAUSED)
    return [run for run in session.exec(query).all() if run.pause_reason != "step"]


def resume_suspended(session: Session, run: WorkflowRun, node_id: str, output: Any,
                     handles: tuple[str, ...] = (DEFAULT_HANDLE,)) -> WorkflowRun | None:
    """Finish the suspended node `node_id` with `output`, follow `handles` and run on.

    Returns the run after it ran on, or None when the run no longer waits at that node (it was
    resumed elsewhere or finished), so a node is resumed exactly once.
    """
    session.refresh(run)
    if run.status not in (run_lifecycle.RUNNING, run_lifecycle.PAUSED):
        return None
    engine = RunEngine(session, run)
    if not engine.is_waiting_at(node_id):
        return None
    if run.status == run_lifecycle.PAUSED:
        run_lifecycle.resume(session, run)
    engine.resume_node(node_id, output, handles)
    engine.persist()
    return engine.execute()


def wake_due_runs(now: datetime | None = None) -> int:
    """Resume every flow.wait whose wake-up time has come (continuing at its `out`); returns how many."""
    moment = _aware(now or utcnow())
    woken = 0
    with session_scope() as session:
        due = [(run.id, node_id, entry["output"]) for run in paused_runs(session)
               for node_id, entry in waiting_nodes(run, "wait").items()
               if _aware(datetime.fromisoformat(entry["output"]["wakeAt"])) <= moment]
    for run_id, node_id, output in due:
        with session_scope() as session:
            run = session.get(WorkflowRun, run_id)
            if run is not None and resume_suspended(session, run, node_id, output) is not None:
                woken += 1
    return woken


def timeout_answer(task: HumanTask) -> tuple[Any, tuple[str, ...]]:
    """The default answer of a timed-out task: approval → rejected; form → the fields' defaults."""
    if task.kind == "approval":
        return {"approved": False, "comment": None, "timedOut": True}, ("rejected",)
    fields = [f for f in task.fields or [] if isinstance(f, dict) and f.get("name")]
    return {f["name"]: f.get("default") for f in fields}, (DEFAULT_HANDLE,)


def expire_due_tasks(now: datetime | None = None) -> int:
    """Expire pending human tasks past their due time, then apply onTimeout: `cancel` cancels the
    run; `default` completes the node with :func:`timeout_answer` and resumes. Returns how many."""
    moment = _aware(now or utcnow())
    with session_scope() as session:
        query = select(HumanTask).where(HumanTask.status == task_lifecycle.PENDING, HumanTask.due_at.is_not(None))
        due = [task.id for task in session.exec(query).all() if _aware(task.due_at) <= moment]
    for task_id in due:
        with session_scope() as session:
            task = session.get(HumanTask, task_id)
            if task is None or task.status != task_lifecycle.PENDING:
                continue
            task_lifecycle.expire(session, task)
            run = session.get(WorkflowRun, task.run_id)
            if run is None or run.status not in (run_lifecycle.RUNNING, run_lifecycle.PAUSED):
                continue
            if task.on_timeout == "default":
                output, handles = timeout_answer(task)
                task.data = output
                session.add(task)
                resume_suspended(session, run, task.node_id, output, handles)
            else:
                run_lifecycle.cancel(session, run, f"task '{task.title}' timed out")
    return len(due)


def run_due_work(now: datetime | None = None) -> dict[str, int]:
    """Everything due now: flow.wait timers, task timeouts and the mailbox poll (for the scheduler)."""
    from backend.engine.mailbox import poll_mailboxes

    return {"woken": wake_due_runs(now), "expired": expire_due_tasks(now), "mails": poll_mailboxes(now)}
