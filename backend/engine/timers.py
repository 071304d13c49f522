"""Due work of paused runs (DESIGN §4): flow.wait timers, human task timeouts and the e-mail poller.

Nothing here sleeps. A waiting node keeps what it waits for in the run's persisted context
(``context.suspended[<node>].output``: ``wakeAt`` for flow.wait; ``connectionId``/``folder``/
``filter``/``since`` for email.checkEmail) or in its HumanTask (``due_at``/``on_timeout``), so the
work below is found again after a restart. :func:`run_due_work` is what the scheduler calls
periodically; each function may also be called on its own, with `now` for tests.

In the running application :func:`start_timer_thread` (started by
:func:`backend.runtime.start_background_services`, from the Reflex lifespan) calls
:func:`run_due_work` every POWERON_TIMER_INTERVAL_SECONDS in the process that leads the scheduler.
A resumed run is handed to the run queue in the transaction that resumes it (it executes on a run
thread or a worker, not on the timer thread).
Every resume, expiry and cancel here is a guarded state transition (optimistic locking), so two
processes ticking against one database do not both resume a node: the loser of a race gets
``ConcurrentTransition`` and leaves that item to the winner.
"""

from __future__ import annotations

import logging
import threading
from datetime import UTC, datetime, timedelta
from typing import Any

from sqlalchemy import event, update
from sqlmodel import Session, select

from backend.config import get_settings
from backend.db import session_scope
from backend.db.models import HumanTask, WorkflowRun, utcnow
from backend.engine import crashpoints
from backend.engine import queue as run_queue
from backend.engine.executor import RunEngine
from backend.statemachines import human_task as task_lifecycle
from backend.statemachines import workflow_run as run_lifecycle
from backend.statemachines.base import ConcurrentTransition
from backend.workflows.node_types import DEFAULT_HANDLE

log = logging.getLogger(__name__)


def _aware(moment: datetime) -> datetime:
    """SQLite hands back naive datetimes; they are UTC."""
    return moment if moment.tzinfo else moment.replace(tzinfo=UTC)


def waiting_nodes(run: WorkflowRun, reason: str) -> dict[str, dict[str, Any]]:
    """The run's suspended nodes that wait for `reason` ("wait", "email", "humanTask"), by node id."""
    suspended = (run.context or {}).get("suspended") or {}
    return {node_id: entry for node_id, entry in suspended.items()
            if isinstance(entry, dict) and entry.get("reason") == reason}


def paused_runs(session: Session) -> list[WorkflowRun]:
    """Runs paused for something outside the run (not by the step debugger)."""
    query = select(WorkflowRun).where(WorkflowRun.status == run_lifecycle.PAUSED)
    return [run for run in session.exec(query).all() if run.pause_reason != "step"]


def claim_waiting(session: Session, run: WorkflowRun, node_id: str) -> RunEngine | None:
    """The run's engine, the run running again, when it still waits at `node_id`; None when it no
    longer does (resumed or finished elsewhere), so a waiting node is taken exactly once."""
    session.refresh(run)
    if run.status not in (run_lifecycle.RUNNING, run_lifecycle.PAUSED):
        return None
    engine = RunEngine(session, run)
    if not engine.is_waiting_at(node_id):
        return None
    if run.status == run_lifecycle.PAUSED:
        try:
            run_lifecycle.resume(session, run)
        except ConcurrentTransition:
            return None  # another process (or thread) resumed or cancelled it just now
    return engine


def resume_suspended(session: Session, run: WorkflowRun, node_id: str, output: Any,
                     handles: tuple[str, ...] = (DEFAULT_HANDLE,)) -> WorkflowRun | None:
    """Finish the suspended node `node_id` with `output`, follow `handles` and hand the run on to
    the run queue in the same transaction (it runs on in a run thread or on a worker).

    Returns the run, running again, or None when the run no longer waits at that node (it was
    resumed elsewhere or finished), so a node is resumed exactly once.
    """
    engine = claim_waiting(session, run, node_id)
    if engine is None:
        return None
    engine.resume_node(node_id, output, handles)
    run_queue.enqueue(session, run.id)
    crashpoints.reach(engine.crash_at, "resume_before_commit", node_id)
    engine.persist()
    crashpoints.reach(engine.crash_at, "resume_after_commit", node_id)
    return engine.run


def wake_due_runs(now: datetime | None = None) -> int:
    """Resume every flow.wait whose wake-up time has come (continuing at its `out`); returns how many."""
    moment = _aware(now or utcnow())
    woken = 0
    with session_scope() as session:
        due = [(run.id, node_id, entry["output"]) for run in paused_runs(session)
               for node_id, entry in waiting_nodes(run, "wait").items()
               if _aware(datetime.fromisoformat(entry["output"]["wakeAt"])) <= moment]
    for run_id, node_id, output in due:
        with session_scope() as session:
            run = session.get(WorkflowRun, run_id)
            if run is not None and resume_suspended(session, run, node_id, output) is not None:
                woken += 1
    return woken


def timeout_answer(task: HumanTask) -> tuple[Any, tuple[str, ...]]:
    """The default answer of a timed-out task: approval → rejected; form → the fields' defaults."""
    if task.kind == "approval":
        return {"approved": False, "comment": None, "timedOut": True}, ("rejected",)
    fields = [f for f in task.fields or [] if isinstance(f, dict) and f.get("name")]
    return {f["name"]: f.get("default") for f in fields}, (DEFAULT_HANDLE,)


def expire_due_tasks(now: datetime | None = None) -> int:
    """Expire pending human tasks past their due time, then apply onTimeout: `cancel` cancels the
    run; `default` completes the node with :func:`timeout_answer` and resumes. Returns how many."""
    moment = _aware(now or utcnow())
    with session_scope() as session:
        query = select(HumanTask).where(HumanTask.status == task_lifecycle.PENDING, HumanTask.due_at.is_not(None))
        due = [task.id for task in session.exec(query).all() if _aware(task.due_at) <= moment]
    expired = 0
    for task_id in due:
        try:
            expired += _expire_task(task_id)
        except ConcurrentTransition as exc:  # completed, cancelled or expired elsewhere meanwhile
            log.info("task %s not expired: %s", task_id, exc)
    return expired


def _expire_agent_task(session: Session, task: HumanTask) -> None:
    """An agent's approval expired: its run goes on once this commits (the agent is told)."""
    from backend.agent import approvals

    run_id = task.agent_run_id
    event.listen(session, "after_commit", lambda _session: approvals.resume_in_background(run_id), once=True)


def _expire_task(task_id: str) -> int:
    """Expire one due task and apply its onTimeout, in one transaction; 1 if it was expired."""
    with session_scope() as session:
        task = session.get(HumanTask, task_id)
        if task is None or task.status != task_lifecycle.PENDING:
            return 0
        task_lifecycle.expire(session, task)
        if task.agent_run_id:
            _expire_agent_task(session, task)
            return 1
        run = session.get(WorkflowRun, task.run_id)
        if run is None or run.status not in (run_lifecycle.RUNNING, run_lifecycle.PAUSED):
            return 1
        if task.on_timeout == "default":
            output, handles = timeout_answer(task)
            task.data = output
            session.add(task)
            resume_suspended(session, run, task.node_id, output, handles)
        else:
            run_lifecycle.cancel(session, run, f"task '{task.title}' timed out")
        return 1


def _remind_now(task: HumanTask, moment: datetime, lead: timedelta) -> bool:
    """Whether `task` expires within `lead` of `moment` and lived longer than `lead` in all."""
    due = _aware(task.due_at)
    return moment < due <= moment + lead and due - lead > _aware(task.sys_created_at)


def remind_expiring_tasks(now: datetime | None = None) -> int:
    """Remind once the people who may complete a pending task that expires within
    POWERON_TASK_REMINDER_MINUTES (in the app, by mail: backend/notifications/service.py). A task
    whose whole life is shorter than that lead is not reminded. Returns how many tasks."""
    from backend.notifications.service import notify_task_expiring

    lead = timedelta(minutes=get_settings().task_reminder_minutes)
    if not lead:
        return 0
    moment = _aware(now or utcnow())
    with session_scope() as session:
        query = select(HumanTask).where(HumanTask.status == task_lifecycle.PENDING, HumanTask.due_at.is_not(None),
                                        HumanTask.reminded_at.is_(None))
        due = [task.id for task in session.exec(query).all() if _remind_now(task, moment, lead)]
    reminded = 0
    for task_id in due:
        with session_scope() as session:
            claimed = session.execute(update(HumanTask).where(HumanTask.id == task_id, HumanTask.reminded_at.is_(None),
                                                              HumanTask.status == task_lifecycle.PENDING)
                                      .values(reminded_at=moment).execution_options(synchronize_session=False))
            if claimed.rowcount == 1:  # another process reminded it, or it was answered meanwhile
                notify_task_expiring(session, session.get(HumanTask, task_id))
                reminded += 1
    return reminded


def run_due_work(now: datetime | None = None) -> dict[str, int]:
    """Everything due now: flow.wait timers, task reminders and timeouts and the mailbox poll (for the scheduler)."""
    from backend.engine.mailbox import poll_mailboxes

    return {"woken": wake_due_runs(now), "reminded": remind_expiring_tasks(now), "expired": expire_due_tasks(now),
            "mails": poll_mailboxes(now)}


# --- the ticker ---------------------------------------------------------------------------------

_ticker_lock = threading.Lock()
_ticker: TimerThread | None = None


class TimerThread:
    """The daemon thread that calls :func:`run_due_work` every `interval_seconds`; :meth:`stop` ends it."""

    def __init__(self, interval_seconds: float):
        self.interval_seconds = interval_seconds
        self.stopping = threading.Event()
        self.thread = threading.Thread(target=self._loop, name="poweron-timers", daemon=True)

    def _loop(self) -> None:
        # The first tick comes one interval after the start, so the recovery of runs left
        # `running` (started at the same time) has selected its runs before any is resumed here.
        while not self.stopping.wait(self.interval_seconds):
            tick()

    def is_alive(self) -> bool:
        return self.thread.is_alive()

    def stop(self, timeout: float | None = 10) -> None:
        """Ask the thread to end and wait for it (at most `timeout` seconds; a tick is not cut short)."""
        self.stopping.set()
        if self.thread is not threading.current_thread():
            self.thread.join(timeout)


def leads() -> bool:
    """Whether this process does the timers' work: the one that leads the scheduler (its lease), so
    several API processes on one database wake, expire and poll once; every process when the
    scheduler is off here (POWERON_SCHEDULER=off: one process is assumed)."""
    from backend.scheduler.scheduler import get_scheduler

    scheduler = get_scheduler()
    return scheduler is None or scheduler.leading


def tick(now: datetime | None = None) -> dict[str, int] | None:
    """One round of :func:`run_due_work` if this process :func:`leads`; errors are logged, never
    raised (the ticker goes on)."""
    if not leads():
        return None
    try:
        return run_due_work(now)
    except Exception:  # noqa: BLE001 - one bad round must not end the ticker
        log.exception("due work of paused runs failed")
        return None


def start_timer_thread(interval_seconds: float | None = None) -> TimerThread:
    """Start the process's timer thread (once: while it runs, later calls return it).

    `interval_seconds` defaults to the setting POWERON_TIMER_INTERVAL_SECONDS (5). Several
    processes may tick against one database: see the module documentation.
    """
    global _ticker  # noqa: PLW0603 - one ticker per process
    with _ticker_lock:
        if _ticker is not None and _ticker.is_alive() and not _ticker.stopping.is_set():
            return _ticker
        interval = interval_seconds if interval_seconds is not None else get_settings().timer_interval_seconds
        if interval <= 0:
            raise ValueError(f"the timer interval must be positive, not {interval}")
        _ticker = TimerThread(interval)
        _ticker.thread.start()
        log.info("timer thread started (every %s s)", interval)
        return _ticker


def stop_timer_thread(timeout: float | None = 10) -> None:
    """Stop the process's timer thread, if it runs (a clean process exit); a later start begins anew."""
    global _ticker  # noqa: PLW0603 - one ticker per process
    with _ticker_lock:
        ticker, _ticker = _ticker, None
    if ticker is not None:
        ticker.stop(timeout)
