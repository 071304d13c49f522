"""WorkflowRun lifecycle (spec §7.2, DESIGN §5).

    running --pause--> paused --resume--> running
    running --complete--> completed
    running --fail--> failed
    running | paused --cancel--> cancelled
"""

from __future__ import annotations

from typing import Any

from sqlmodel import Session

from backend.db.models import WorkflowRun, utcnow
from backend.engine import events
from backend.statemachines.base import StateMachine, Transition

RUNNING, PAUSED, COMPLETED, FAILED, CANCELLED = "running", "paused", "completed", "failed", "cancelled"
PAUSE_REASONS = ("humanTask", "email", "wait", "step")
FINISHED = (COMPLETED, FAILED, CANCELLED)

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
    """Finish a run with an error."""
    MACHINE.apply(session, run, "fail", error=error, finished_at=utcnow())
    events.publish_on_commit(session, events.RUN_FAILED, run.id, run.workflow_id, error=error)
    return run


def cancel(session: Session, run: WorkflowRun, reason: str | None = None) -> WorkflowRun:
    """Stop a running or paused run for good."""
    MACHINE.apply(session, run, "cancel", pause_reason=None, error=reason, finished_at=utcnow())
    events.publish_on_commit(session, events.RUN_CANCELLED, run.id, run.workflow_id, reason=reason)
    return run
