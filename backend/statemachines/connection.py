"""Connection lifecycle (spec §3.1, DESIGN §8).

    active  --expire-->   expired   (a token refresh failed: the owner must consent again)
    active  --fail-->     error     (a test or a call failed for another reason: last_error says why)
    error   --fail-->     error     (failed again, with the newer reason)
    expired|error|active --restore--> active   (a test passed, or the owner consented again)
    active|expired|error --revoke--> revoked   (the owner withdrew it; it is never used again)
"""

from __future__ import annotations

from sqlmodel import Session

from backend.db.models import Connection, utcnow
from backend.statemachines.base import StateMachine, Transition

ACTIVE, EXPIRED, ERROR, REVOKED = "active", "expired", "error", "revoked"

MACHINE = StateMachine(
    "Connection",
    [
        Transition("expire", (ACTIVE,), EXPIRED),
        Transition("fail", (ACTIVE, ERROR), ERROR),
        Transition("restore", (ACTIVE, EXPIRED, ERROR), ACTIVE),
        Transition("revoke", (ACTIVE, EXPIRED, ERROR), REVOKED),
    ],
)


def expire(session: Session, connection: Connection, reason: str) -> Connection:
    """The stored credentials stopped working and cannot be renewed without the owner."""
    return MACHINE.apply(session, connection, "expire", last_error=reason, sys_modified_at=utcnow())


def fail(session: Session, connection: Connection, reason: str) -> Connection:
    """A test or a call failed for a reason other than expiry (wrong password, server gone …)."""
    return MACHINE.apply(session, connection, "fail", last_error=reason, sys_modified_at=utcnow())


def restore(session: Session, connection: Connection, **changes) -> Connection:
    """It works again (a passed test, a new consent); `changes` may carry new settings or secret."""
    return MACHINE.apply(session, connection, "restore", last_error=None, sys_modified_at=utcnow(), **changes)


def revoke(session: Session, connection: Connection) -> Connection:
    """The owner withdrew it: its credentials are wiped, it is never used again."""
    return MACHINE.apply(session, connection, "revoke", secret="", sys_modified_at=utcnow())
