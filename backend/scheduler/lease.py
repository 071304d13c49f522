"""Leader election: one row of `scheduler_lease` says which process runs the scheduler.

The row (name "scheduler") holds `holder` and `expires_at`. Every write is a guarded UPDATE:

- acquire / renew: ``UPDATE … SET holder = me, expires_at = now + lease WHERE name = ? AND
  (holder = me OR expires_at < now)``: the holder renews, anybody takes over an expired lease,
  nobody takes a live one. The first process inserts the row (a second insert loses on the
  primary key and simply is not the leader);
- fence: every fire re-checks in its own transaction ``… WHERE holder = me AND expires_at > now``
  (touching `renewed_at`), so a process that lost the lease without noticing yet (a long pause)
  fires nothing. On PostgreSQL that UPDATE also locks the row until the fire commits, and on
  SQLite the write lock does, so fires of all processes are serialised against each other and
  against a takeover;
- release (a clean stop): ``expires_at = now`` so another process takes over at its next renewal
  instead of waiting for the expiry.

Clocks: `now` is each process's UTC clock; processes sharing a database are assumed to have
clocks within a small fraction of the lease (NTP).
"""

from __future__ import annotations

import os
import socket
import uuid
from datetime import timedelta

from sqlalchemy import or_, update
from sqlalchemy.exc import IntegrityError
from sqlmodel import Session

from backend.db import session_scope
from backend.db.engine import write_gate
from backend.db.models import SchedulerLease, utcnow

LEASE_NAME = "scheduler"


def new_holder_id() -> str:
    """host:pid:random — unique per process start (a restarted pid is another holder)."""
    return f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"


class Lease:
    """The scheduler lease as seen by one process."""

    def __init__(self, seconds: float, holder: str | None = None, name: str = LEASE_NAME):
        if seconds <= 0:
            raise ValueError(f"a lease must last more than 0 seconds, not {seconds}")
        self.seconds = seconds
        self.holder = holder or new_holder_id()
        self.name = name

    def acquire(self) -> bool:
        """Take or renew the lease; True when this process holds it now (for `seconds`)."""
        now = utcnow()
        table = SchedulerLease
        with write_gate(), session_scope() as session:
            result = session.execute(
                update(table)
                .where(table.name == self.name, or_(table.holder == self.holder, table.expires_at < now))
                .values(holder=self.holder, expires_at=now + timedelta(seconds=self.seconds), renewed_at=now)
                .execution_options(synchronize_session=False)
            )
            if result.rowcount == 1:
                return True
            if session.get(SchedulerLease, self.name) is not None:
                return False
        try:
            with write_gate(), session_scope() as session:
                session.add(SchedulerLease(name=self.name, holder=self.holder,
                                           expires_at=now + timedelta(seconds=self.seconds), renewed_at=now))
            return True
        except IntegrityError:
            return False  # another process inserted it first

    def fence(self, session: Session) -> bool:
        """In the caller's transaction: True while this process still holds an unexpired lease
        (the row stays locked until that transaction ends)."""
        now = utcnow()
        table = SchedulerLease
        result = session.execute(
            update(table)
            .where(table.name == self.name, table.holder == self.holder, table.expires_at > now)
            .values(renewed_at=now)
            .execution_options(synchronize_session=False)
        )
        return result.rowcount == 1

    def release(self) -> None:
        """Give the lease up (it expires now) if this process holds it."""
        table = SchedulerLease
        with write_gate(), session_scope() as session:
            session.execute(
                update(table)
                .where(table.name == self.name, table.holder == self.holder)
                .values(expires_at=utcnow())
                .execution_options(synchronize_session=False)
            )

    def current(self) -> SchedulerLease | None:
        """The lease row as stored (for tests and diagnostics)."""
        with session_scope() as session:
            return session.get(SchedulerLease, self.name)
