"""HumanTask lifecycle (spec §7.3, DESIGN §5).

    pending --complete--> completed   (the run resumes)
    pending --cancel--> cancelled     (the run is cancelled)
    pending --expire--> expired       (timeout: cancel or default, per onTimeout)
"""

from __future__ import annotations

from typing import Any

from sqlmodel import Session

from backend.db.models import HumanTask, utcnow
from backend.statemachines.base import StateMachine, Transition

PENDING, COMPLETED, CANCELLED, EXPIRED = "pending", "completed", "cancelled", "expired"

MACHINE = StateMachine(
    "HumanTask",
    [
        Transition("complete", (PENDING,), COMPLETED),
        Transition("cancel", (PENDING,), CANCELLED),
        Transition("expire", (PENDING,), EXPIRED),
    ],
)


def complete(session: Session, task: HumanTask, data: Any, user_id: str | None, via: str = "app") -> HumanTask:
    """Record a person's answer and how it came ("app": the Inbox or REST; "mail": a mail's link)."""
    return MACHINE.apply(
        session, task, "complete", data=data, completed_by=user_id, finished_at=utcnow(), decided_via=via
    )


def cancel(session: Session, task: HumanTask, user_id: str | None, reason: str | None = None) -> HumanTask:
    """Withdraw the task; a given reason is kept in its data as {"cancelReason": …}."""
    changes: dict[str, Any] = {"completed_by": user_id, "finished_at": utcnow()}
    if reason:
        changes["data"] = {"cancelReason": reason}
    return MACHINE.apply(session, task, "cancel", **changes)


def expire(session: Session, task: HumanTask) -> HumanTask:
    """Mark the task as timed out."""
    return MACHINE.apply(session, task, "expire", finished_at=utcnow())
