"""The lifecycles of receipts and booking lines (DESIGN §5's state-machine kernel).

Receipt (Beleg)::

    draft --check--> checked --book--> booked --sync--> synced

Booking line (Position)::

    proposed --accept--> accepted --book--> booked --sync--> synced
    proposed --reject--> rejected

Each transition is a guarded UPDATE on `lock_version` (backend.statemachines.base): of two people
booking the same receipt at once only the first wins; the other gets ConcurrentTransition.
"""

from __future__ import annotations

from sqlmodel import Session

from backend.db.models import utcnow
from backend.features.trustee.models import TrusteePosition, TrusteeReceipt
from backend.statemachines.base import StateMachine, Transition

DRAFT, CHECKED, BOOKED, SYNCED = "draft", "checked", "booked", "synced"
PROPOSED, ACCEPTED, REJECTED = "proposed", "accepted", "rejected"
RECEIPT_STATES = (DRAFT, CHECKED, BOOKED, SYNCED)
POSITION_STATES = (PROPOSED, ACCEPTED, REJECTED, BOOKED, SYNCED)

RECEIPT = StateMachine("Receipt", [
    Transition("check", (DRAFT,), CHECKED),
    Transition("book", (CHECKED,), BOOKED),
    Transition("sync", (BOOKED,), SYNCED),
])

POSITION = StateMachine("Booking line", [
    Transition("accept", (PROPOSED,), ACCEPTED),
    Transition("reject", (PROPOSED,), REJECTED),
    Transition("book", (ACCEPTED,), BOOKED),
    Transition("sync", (BOOKED,), SYNCED),
])


def check(session: Session, receipt: TrusteeReceipt, user_id: str) -> TrusteeReceipt:
    """A person confirmed the receipt's fields."""
    now = utcnow()
    return RECEIPT.apply(session, receipt, "check", checked_by=user_id, checked_at=now, sys_modified_at=now)


def book(session: Session, receipt: TrusteeReceipt) -> TrusteeReceipt:
    """The receipt's accepted lines are in the journal."""
    now = utcnow()
    return RECEIPT.apply(session, receipt, "book", booked_at=now, sys_modified_at=now)


def mark_synced(session: Session, receipt: TrusteeReceipt, external_id: str) -> TrusteeReceipt:
    """The receipt was sent to the accounting system, where it has `external_id`."""
    now = utcnow()
    return RECEIPT.apply(session, receipt, "sync", synced_at=now, external_id=external_id, sys_modified_at=now)


def accept(session: Session, position: TrusteePosition) -> TrusteePosition:
    """A person accepted a proposed line."""
    return POSITION.apply(session, position, "accept", sys_modified_at=utcnow())


def reject(session: Session, position: TrusteePosition) -> TrusteePosition:
    """A person rejected a proposed line."""
    return POSITION.apply(session, position, "reject", sys_modified_at=utcnow())


def book_line(session: Session, position: TrusteePosition) -> TrusteePosition:
    """An accepted line goes into the journal with its receipt."""
    return POSITION.apply(session, position, "book", sys_modified_at=utcnow())


def sync_line(session: Session, position: TrusteePosition) -> TrusteePosition:
    """A booked line was sent to the accounting system with its receipt."""
    return POSITION.apply(session, position, "sync", sys_modified_at=utcnow())
