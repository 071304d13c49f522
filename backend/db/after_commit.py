"""Work that must happen only once a transaction is committed (a mail about a new task, a push):
queued on the session, run after its commit, forgotten when it rolls back."""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from sqlalchemy import event
from sqlalchemy.orm import Session as OrmSession

log = logging.getLogger(__name__)
_PENDING = "poweron_after_commit"


def call_after_commit(session: OrmSession, callback: Callable[[], Any]) -> None:
    """Call `callback` (no arguments) after `session` commits; never when it rolls back.

    A failing callback is logged: the commit has happened, the caller is not to fail for it.
    """
    if not session.in_transaction():
        session.begin()  # what the next statement would do anyway; a rollback must see the callback
    session.info.setdefault(_PENDING, []).append(callback)


def _run(session: OrmSession) -> None:
    for callback in session.info.pop(_PENDING, []):
        try:
            callback()
        except Exception:  # noqa: BLE001 - committed already; say what failed and go on
            log.exception("work after a commit failed")


def _discard(session: OrmSession, previous_transaction: Any) -> None:
    if not getattr(previous_transaction, "nested", False):
        session.info.pop(_PENDING, None)


event.listen(OrmSession, "after_commit", _run)
event.listen(OrmSession, "after_soft_rollback", _discard)
