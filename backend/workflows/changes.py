"""The "automation.changed" callback registry (spec §3.4): who wants to hear that a workflow changed.

The workflow service calls :func:`notify_on_commit` where something that decides whether and how a
workflow runs by itself changes (publish, unpublish, archive, restore, delete, `active` toggled).
Listeners — the scheduler, and whatever else derives state from published triggers — are called
with the workflow id once the session that made the change has committed (nothing is announced
for a rollback), on the committing thread. The service therefore knows nothing about the
scheduler; a listener reloads what it needs from the database, the source of truth.

A listener must be quick and must not raise (errors are logged and do not reach the caller).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import Any

from sqlalchemy import event as sa_event
from sqlalchemy.orm import Session as OrmSession

log = logging.getLogger(__name__)

AUTOMATION_CHANGED = "automation.changed"
_PENDING = "poweron_automation_changed"

Listener = Callable[[str], None]
_listeners: list[Listener] = []
_lock = threading.Lock()


def subscribe(listener: Listener) -> Callable[[], None]:
    """Call `listener(workflow_id)` after every committed change; returns the unsubscribe function."""
    with _lock:
        _listeners.append(listener)

    def unsubscribe() -> None:
        with _lock:
            if listener in _listeners:
                _listeners.remove(listener)

    return unsubscribe


def notify(workflow_id: str) -> None:
    """Tell every listener now that `workflow_id` changed (already committed)."""
    with _lock:
        listeners = list(_listeners)
    for listener in listeners:
        try:
            listener(workflow_id)
        except Exception:  # noqa: BLE001 - a listener's trouble must not fail the change
            log.exception("%s listener %r failed for workflow %s", AUTOMATION_CHANGED, listener, workflow_id)


def notify_on_commit(session: OrmSession, workflow_id: str) -> None:
    """Announce `workflow_id` when `session` commits; forget it if the session rolls back."""
    if not session.in_transaction():
        session.begin()
    pending: list[str] = session.info.setdefault(_PENDING, [])
    if workflow_id not in pending:
        pending.append(workflow_id)


def _flush(session: OrmSession) -> None:
    for workflow_id in session.info.pop(_PENDING, []):
        notify(workflow_id)


def _discard(session: OrmSession, previous_transaction: Any) -> None:
    if not getattr(previous_transaction, "nested", False):
        session.info.pop(_PENDING, None)


sa_event.listen(OrmSession, "after_commit", _flush)
sa_event.listen(OrmSession, "after_soft_rollback", _discard)
