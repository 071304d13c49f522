"""WorkflowRun lifecycle (spec §7.2, DESIGN §5).

    running --pause--> paused --resume--> running
    running --complete--> completed
    running --fail--> failed
    running | paused --cancel--> cancelled

Cancelling or failing also releases what the run still waits for: its step rows still
`waiting` (a human task, a mail, a flow.wait) end as `cancelled` and its pending human tasks are
cancelled, so a finished run shows no step that still seems to wait and asks nobody to decide.
"""

from __future__ import annotations

from datetime import UTC
from typing import Any

from sqlmodel import Session, select

from backend.db.models import HumanTask, RunStepLog, WorkflowRun, utcnow
from backend.engine import events
from backend.statemachines import human_task as task_lifecycle
from backend.statemachines.base import StateMachine, Transition

RUNNING, PAUSED, COMPLETED, FAILED, CANCELLED = "running", "paused", "completed", "failed", "cancelled"
PAUSE_REASONS = ("humanTask", "email", "wait", "step")
FINISHED = (COMPLETED, FAILED, CANCELLED)
# RunStepLog.status values a suspended node's row goes through: waiting, then completed when
# resumed or cancelled when its run is cancelled first.
STEP_WAITING, STEP_CANCELLED = "waiting", "cancelled"

MACHINE = StateMachine(
    "WorkflowRun",
    [
        Transition("pause", (RUNNING,), PAUSED),
        Transition("resume", (PAUSED,), RUNNING),
        Transition("complete", (RUNNING,), COMPLETED),
        Transition("fail", (RUNNING,), FAILED),
        Transition("cancel", (RUNNING, PAUSED), CANCELLED),
    ],
)


def pause(session: Session, run: WorkflowRun, reason: str) -> WorkflowRun:
    """Suspend a running run until a person, a mail, a timer or the step debugger resumes it."""
    if reason not in PAUSE_REASONS:
        raise ValueError(f"pauseReason must be one of {', '.join(PAUSE_REASONS)}, not {reason!r}")
    MACHINE.apply(session, run, "pause", pause_reason=reason)
    events.publish_on_commit(session, events.RUN_PAUSED, run.id, run.workflow_id, reason=reason)
    return run


def resume(session: Session, run: WorkflowRun) -> WorkflowRun:
    """Continue a paused run from the node it paused at."""
    MACHINE.apply(session, run, "resume", pause_reason=None)
    events.publish_on_commit(session, events.RUN_RESUMED, run.id, run.workflow_id)
    return run


def complete(session: Session, run: WorkflowRun, output: Any = None) -> WorkflowRun:
    """Finish a run successfully."""
    MACHINE.apply(session, run, "complete", output=output, finished_at=utcnow())
    events.publish_on_commit(session, events.RUN_COMPLETED, run.id, run.workflow_id)
    return run


def fail(session: Session, run: WorkflowRun, error: str) -> WorkflowRun:
    """Finish a run with an error; what it still waited for is released."""
    MACHINE.apply(session, run, "fail", error=error, finished_at=utcnow())
    release_waiting(session, run, "the run failed")
    events.publish_on_commit(session, events.RUN_FAILED, run.id, run.workflow_id, error=error)
    return run


def cancel(session: Session, run: WorkflowRun, reason: str | None = None, by: str | None = None) -> WorkflowRun:
    """Stop a running or paused run for good (`by`: the user who did); what it waited for is released."""
    MACHINE.apply(session, run, "cancel", pause_reason=None, error=reason, finished_at=utcnow())
    release_waiting(session, run, reason, by)
    events.publish_on_commit(session, events.RUN_CANCELLED, run.id, run.workflow_id, reason=reason)
    return run


def release_waiting(session: Session, run: WorkflowRun, reason: str | None = None,
                    by: str | None = None) -> None:
    """Close the run's waiting step rows as cancelled and cancel its pending human tasks.

    Also called by the engine when it finds its run finished by someone else while a step of it
    was being suspended (a cancel racing the step's commit).
    """
    close_waiting_steps(session, run, reason)
    pending = session.exec(select(HumanTask).where(HumanTask.run_id == run.id,
                                                   HumanTask.status == task_lifecycle.PENDING)).all()
    for task in pending:
        task_lifecycle.cancel(session, task, by)


def close_waiting_steps(session: Session, run: WorkflowRun, reason: str | None = None) -> list[RunStepLog]:
    """Close the run's `waiting` step rows as `cancelled`, their duration covering the wait.

    Each closed row publishes node.finished (status cancelled) when the session commits.
    """
    waiting = session.exec(select(RunStepLog).where(RunStepLog.run_id == run.id,
                                                    RunStepLog.status == STEP_WAITING)).all()
    now = utcnow()
    for step in waiting:
        started = step.started_at if step.started_at.tzinfo else step.started_at.replace(tzinfo=UTC)
        step.status = STEP_CANCELLED
        step.error = step.error or reason
        step.finished_at = now
        step.duration_ms = max(0, int((now - started).total_seconds() * 1000))
        session.add(step)
        events.publish_on_commit(session, events.NODE_FINISHED, run.id, run.workflow_id, nodeId=step.node_id,
                                 nodeType=step.node_type, attempt=step.attempt, status=step.status,
                                 durationMs=step.duration_ms, error=reason)
    return list(waiting)
