"""Scheduler job lifecycle of a workflow (spec §7.4, DESIGN §5).

The state is derived from `Workflow.event_id`, which holds the job handle:

    unregistered --register--> registered
    registered --replace--> registered   (schedule changed: job replaced)
    registered --unregister--> unregistered   (deactivated or deleted)
"""

from __future__ import annotations

from sqlmodel import Session

from backend.db.models import Workflow, utcnow
from backend.statemachines.base import StateMachine, Transition

UNREGISTERED, REGISTERED = "unregistered", "registered"


def _state_of(workflow: Workflow) -> str:
    return REGISTERED if workflow.event_id else UNREGISTERED


MACHINE = StateMachine(
    "Scheduler job of workflow",
    [
        Transition("register", (UNREGISTERED,), REGISTERED),
        Transition("replace", (REGISTERED,), REGISTERED),
        Transition("unregister", (REGISTERED,), UNREGISTERED),
    ],
    state_attr=None,
    state_of=_state_of,
)


def _require_handle(event_id: str) -> None:
    if not event_id:
        raise ValueError("a registered scheduler job needs a non-empty job handle (eventId)")


def register(session: Session, workflow: Workflow, event_id: str) -> Workflow:
    """Record that a job now fires this workflow."""
    _require_handle(event_id)
    return MACHINE.apply(session, workflow, "register", event_id=event_id, sys_modified_at=utcnow())


def replace(session: Session, workflow: Workflow, event_id: str) -> Workflow:
    """Record that the job was replaced after a schedule change."""
    _require_handle(event_id)
    return MACHINE.apply(session, workflow, "replace", event_id=event_id, sys_modified_at=utcnow())


def unregister(session: Session, workflow: Workflow) -> Workflow:
    """Record that the job was removed."""
    return MACHINE.apply(session, workflow, "unregister", event_id=None, sys_modified_at=utcnow())
