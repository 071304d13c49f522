"""The subscriber that turns ``run.failed`` events into notifications, mails and Web Pushes.

The event bus (backend/engine/events.py) is in-process: a run's events are published by the
process whose session committed the failure (a run thread, a request, the timer or recovery
thread), so each failed run is handled by exactly one notifier. :func:`start_notifier` is
called from the Reflex lifespan (poweron_app/poweron_app.py), where the app's other
background threads start; a process that only serves the bare API (tests) starts it itself.

The subscription receives ``run.failed`` only, into a queue the notifier thread empties; each
event is handled in a session of its own (the publisher's has committed already). A failing
event is logged and the thread goes on. Each channel follows the owner's notification settings
(backend/notifications/preferences.py): the in-app row, the mail and the push (sent by the push
thread, backend/notifications/push.py) each only when ``run.failed`` is on for it.
"""

from __future__ import annotations

import logging
import queue
import threading
import time

from backend.config import get_settings
from backend.db import session_scope
from backend.engine import events
from backend.notifications import mailer, push, service
from backend.notifications.preferences import RUN_FAILED

log = logging.getLogger(__name__)


def failure_mail(failure: service.RunFailure) -> tuple[str, str]:
    """(subject, body) of the mail telling the owner about a failed run."""
    notification = failure.notification
    ui_url = get_settings().ui_url.rstrip("/")
    subject = f"PowerOn: {notification.title}"
    body = (
        f"Hello {failure.recipient_name},\n\n"
        f"a {failure.trigger} run of your workflow '{failure.workflow_name}' failed.\n\n"
        f"Error: {notification.message}\n\n"
        f"Workflow: {failure.workflow_name} ({notification.workflow_id})\n"
        f"Run: {notification.run_id}\n"
        f"Time: {notification.created_at:%Y-%m-%d %H:%M:%S} UTC\n\n"
        f"Your notifications: {ui_url}/notifications\n\n"
        "You receive this mail because you own the workflow.\n"
    )
    return subject, body


def handle_run_failed(run_id: str) -> service.RunFailure | None:
    """Notify the owner of the failed run `run_id` (committed), and mail them when SMTP is set."""
    with session_scope() as session:
        failure = service.notify_run_failed(session, run_id)
    if failure is None:
        return None
    log.info("notified user %s of failed run %s", failure.notification.user_id, run_id)
    if failure.email:
        subject, body = failure_mail(failure)
        mailer.send_in_background(failure.email, subject, body)
    notification = failure.notification
    push.notify_in_background([notification.user_id], RUN_FAILED, notification.title, notification.message,
                              f"/notifications?run={notification.run_id}")
    return failure


class Notifier:
    """The daemon thread handling ``run.failed`` events; :meth:`stop` ends it."""

    def __init__(self) -> None:
        self.subscription = events.subscribe(types=(events.RUN_FAILED,))
        self.stopping = threading.Event()
        self.thread = threading.Thread(target=self._loop, name="poweron-notifier", daemon=True)

    def _loop(self) -> None:
        while not self.stopping.is_set():
            try:
                event = self.subscription.get(timeout=0.5)
            except queue.Empty:
                continue
            try:
                handle_run_failed(event.run_id)
            except Exception:  # noqa: BLE001 - one bad event must not end the notifier
                log.exception("notifying the failure of run %s failed", event.run_id)
            finally:
                self.subscription.queue.task_done()

    def is_alive(self) -> bool:
        return self.thread.is_alive()

    def wait_idle(self, timeout: float = 10.0) -> bool:
        """Wait until every event received so far was handled (tests); whether it was in time."""
        deadline = time.monotonic() + timeout
        while self.subscription.queue.unfinished_tasks:
            if time.monotonic() > deadline:
                return False
            time.sleep(0.01)
        return True

    def stop(self, timeout: float | None = 10) -> None:
        """Stop receiving events and end the thread (an event being handled is finished first)."""
        self.subscription.close()
        self.stopping.set()
        if self.thread is not threading.current_thread():
            self.thread.join(timeout)


_notifier: Notifier | None = None
_notifier_lock = threading.Lock()


def start_notifier() -> Notifier:
    """Start the process's notifier (once: while it runs, later calls return it).

    Raises ValueError when POWERON_SMTP_URL is set but malformed (the message hides the password).
    """
    global _notifier  # noqa: PLW0603 - one notifier per process
    with _notifier_lock:
        if _notifier is not None and _notifier.is_alive() and not _notifier.stopping.is_set():
            return _notifier
        target = mailer.configured_target()
        _notifier = Notifier()
        _notifier.thread.start()
        log.info("notifier started (failure mails: %s)", target.redacted if target else "off, no POWERON_SMTP_URL")
        return _notifier


def stop_notifier() -> None:
    """Stop the process's notifier, if one runs (tests)."""
    global _notifier  # noqa: PLW0603
    with _notifier_lock:
        if _notifier is not None:
            _notifier.stop()
            _notifier = None
