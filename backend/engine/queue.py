"""The run queue: the one door through which a run is handed on for execution.

Starting, continuing, resuming and retrying a run, and every timer wake-up, call :func:`enqueue`
in the transaction that puts the run into `running`; the run executes once that transaction
commits, and never if it rolls back. Two implementations, chosen by the database:

- **SQLite** (the embedded default, one process): :class:`ThreadQueue` hands the run to this
  process's run threads (backend/engine/worker.py) when the transaction commits. A process that
  stops leaves its runs `running`; the next start continues them (backend/engine/recovery.py).
- **PostgreSQL**: :class:`SharedQueue`, a procrastinate queue (tables ``procrastinate_*``,
  migration 0014). The job is inserted on the caller's own database connection, so the run row
  and its job commit together — there is no moment where one exists without the other. Any
  process of role `worker` or `all` executes any run (:func:`start_consumer`); a job's `lock`
  (the run id) lets one execution per run happen at a time across all machines, and its
  `queueing_lock` keeps at most one job per run waiting. A worker heartbeats every
  POWERON_WORKER_HEARTBEAT_SECONDS; the jobs of a worker silent for POWERON_WORKER_TIMEOUT_SECONDS
  are put back in the queue by the other workers and continue from the run's persisted frontier
  (a completed step is never executed again: it is in the run's context). A worker asked to stop
  (SIGTERM) finishes the step it is in and hands the run back (:func:`draining`).
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from abc import ABC, abstractmethod
from concurrent.futures import Future
from concurrent.futures import TimeoutError as FutureTimeout
from typing import Any

from sqlalchemy import event
from sqlalchemy.engine import make_url
from sqlalchemy.orm import Session as OrmSession
from sqlmodel import Session, select

from backend.config import get_settings

log = logging.getLogger(__name__)

TASK_NAME = "poweron.execute_run"
QUEUE_NAME = "runs"
_PENDING = "poweron_runs_to_hand_on"
WAITING_CACHE_SECONDS = 0.5


class RunQueue(ABC):
    """Where runs wait for an execution."""

    @abstractmethod
    def enqueue(self, session: Session, run_id: str, new: bool = False) -> None:
        """Hand `run_id` on for execution when `session`'s transaction commits.

        `new`: the run was created in this transaction (it cannot be queued already)."""

    @abstractmethod
    def waiting(self) -> int:
        """Runs handed on and not started yet (what back-pressure counts)."""

    def wait_for_rest(self, run_id: str, seconds: float) -> None:
        """Wait at most `seconds` for the run to leave `running` (it completed, failed, was
        cancelled or paused); the caller then reads the run's state from the database."""
        _poll_until_at_rest(run_id, seconds)

    def start_consumer(self) -> None:  # noqa: B027 - optional: only a queue with consumers has one
        """Start executing queued runs in this process."""

    def stop(self, wait: bool = True) -> None:  # noqa: B027
        """Stop executing (a clean process exit, tests)."""

    def draining(self) -> bool:
        """True once this process was asked to stop: a run hands itself back between steps."""
        return False


# --- SQLite: this process's run threads ------------------------------------------------------------


class ThreadQueue(RunQueue):
    """Runs execute on this process's run threads once the enqueuing transaction commits."""

    def __init__(self) -> None:
        self._futures: dict[str, Future[str]] = {}
        self._lock = threading.Lock()

    def enqueue(self, session: Session, run_id: str, new: bool = False) -> None:
        pending = session.info.setdefault(_PENDING, [])
        if run_id not in pending:
            pending.append(run_id)

    def hand_on(self, run_ids: list[str]) -> None:
        """Submit committed runs to the run threads."""
        from backend.engine import crashpoints, worker

        wanted = crashpoints.configured()
        for run_id in run_ids:
            crashpoints.reach(wanted, "before_handoff", run_id)
            future = worker.submit(run_id)
            with self._lock:
                self._futures[run_id] = future
            future.add_done_callback(lambda done, run_id=run_id: self._forget(run_id, done))

    def _forget(self, run_id: str, done: Future[str]) -> None:
        with self._lock:
            if self._futures.get(run_id) is done:
                del self._futures[run_id]

    def waiting(self) -> int:
        from backend.engine import worker

        return worker.queued()

    def wait_for_rest(self, run_id: str, seconds: float) -> None:
        with self._lock:
            future = self._futures.get(run_id)
        if future is None:
            _poll_until_at_rest(run_id, seconds)
            return
        try:
            future.result(timeout=seconds)
        except FutureTimeout:
            pass
        except Exception:  # noqa: BLE001 - logged by the worker; the run's state says what happened
            pass

    def stop(self, wait: bool = True) -> None:
        from backend.engine import worker

        worker.shutdown_worker(wait=wait)


@event.listens_for(OrmSession, "after_commit")
def _hand_on_committed(session: OrmSession) -> None:
    run_ids = session.info.pop(_PENDING, None)
    if run_ids:
        queue = get_queue()
        if isinstance(queue, ThreadQueue):
            queue.hand_on(run_ids)


@event.listens_for(OrmSession, "after_rollback")
def _forget_rolled_back(session: OrmSession) -> None:
    session.info.pop(_PENDING, None)


# --- PostgreSQL: procrastinate -----------------------------------------------------------------------


def _conninfo(db_url: str) -> str:
    """The libpq connection string of a SQLAlchemy PostgreSQL URL."""
    return make_url(db_url).set(drivername="postgresql").render_as_string(hide_password=False)


def _driver_connection(session: Session) -> Any:
    """The psycopg connection under `session`'s current transaction."""
    return session.connection().connection.driver_connection


class SharedQueue(RunQueue):
    """A procrastinate queue on the PostgreSQL database, shared by every process."""

    def __init__(self, db_url: str):
        import procrastinate

        self.db_url = db_url
        # Deferring runs on the caller's connection (inside its transaction): this connector's own
        # pool is never opened.
        self._defer_app = procrastinate.App(connector=procrastinate.SyncPsycopgConnector())
        self._consumer: _Consumer | None = None
        self._stopping = threading.Event()
        self._lock = threading.Lock()
        self._waiting_cache: tuple[float, int] = (float("-inf"), 0)

    def enqueue(self, session: Session, run_id: str, new: bool = False) -> None:
        from procrastinate import exceptions

        connection = _driver_connection(session)
        deferrer = self._defer_app.configure_task(TASK_NAME, queue=QUEUE_NAME, lock=run_id, queueing_lock=run_id,
                                                  connection=connection)
        if new:  # nothing can be queued for a run this transaction created
            deferrer.defer(run_id=run_id)
            return
        try:
            with session.begin_nested():  # a refused insert must not abort the caller's transaction
                deferrer.defer(run_id=run_id)
        except exceptions.AlreadyEnqueued:
            pass  # a job of this run waits already: it executes from the committed state

    def waiting(self) -> int:
        checked_at, count = self._waiting_cache
        now = time.monotonic()
        if now - checked_at < WAITING_CACHE_SECONDS:
            return count
        from backend.db import session_scope

        with session_scope() as session:
            connection = _driver_connection(session)
            row = connection.execute(
                "SELECT count(*) FROM procrastinate_jobs WHERE queue_name = %s AND status = 'todo'",
                (QUEUE_NAME,)).fetchone()
        count = int(row[0])
        self._waiting_cache = (now, count)
        return count

    def start_consumer(self) -> None:
        with self._lock:
            if self._consumer is None or not self._consumer.is_alive():
                self._stopping.clear()
                self._consumer = _Consumer(self)
                self._consumer.start()

    def draining(self) -> bool:
        return self._stopping.is_set()

    def stop(self, wait: bool = True) -> None:
        with self._lock:
            consumer, self._consumer = self._consumer, None
        self._stopping.set()
        if consumer is not None:
            consumer.stop(wait)


def requeue_orphans() -> list[str]:
    """Hand on every `running` run without a waiting or executing job; returns their ids."""
    from sqlalchemy import text

    from backend.db import session_scope

    with session_scope() as session:
        orphans = list(session.execute(text(
            "SELECT r.id FROM workflow_run r WHERE r.status = 'running' AND NOT EXISTS ("
            " SELECT 1 FROM procrastinate_jobs j WHERE j.lock = r.id AND j.status IN ('todo', 'doing'))")).scalars())
        for run_id in orphans:
            get_queue().enqueue(session, run_id)
    for run_id in orphans:
        log.warning("run %s was running without a job: queued again", run_id)
    return orphans


def execute_job(run_id: str) -> None:
    """What a queued job does: execute the run to its next resting state (or until this process
    drains: then the run is handed back with a new job, see RunEngine.execute)."""
    from backend.engine.executor import execute_run

    execute_run(run_id)


class _Consumer:
    """A procrastinate worker on its own thread and event loop, plus the takeover of stalled jobs."""

    def __init__(self, queue: SharedQueue):
        import procrastinate

        settings = get_settings()
        self.queue = queue
        self.heartbeat = settings.worker_heartbeat_seconds
        self.timeout = settings.worker_timeout_seconds
        self.app = procrastinate.App(connector=procrastinate.PsycopgConnector(
            conninfo=_conninfo(queue.db_url), min_size=1, max_size=max(4, settings.run_threads + 2)))
        self.app.task(name=TASK_NAME, queue=QUEUE_NAME)(execute_job)
        self.concurrency = settings.run_threads
        self.loop: asyncio.AbstractEventLoop | None = None
        self.worker_task: asyncio.Task[Any] | None = None
        self.ready = threading.Event()
        self.thread = threading.Thread(target=self._main, name="poweron-run-queue", daemon=True)

    def start(self) -> None:
        self.thread.start()
        if not self.ready.wait(30):
            log.warning("the run queue consumer did not start within 30 s")

    def is_alive(self) -> bool:
        return self.thread.is_alive()

    def _main(self) -> None:
        try:
            asyncio.run(self._serve())
        except Exception:  # noqa: BLE001 - logged; the process goes on serving its API
            log.exception("the run queue consumer stopped with an error")
        finally:
            self.ready.set()

    async def _serve(self) -> None:
        self.loop = asyncio.get_running_loop()
        async with self.app.open_async():
            self.worker_task = asyncio.create_task(self.app.run_worker_async(
                queues=[QUEUE_NAME], concurrency=self.concurrency, name=f"poweron-{id(self):x}",
                install_signal_handlers=False, listen_notify=True, delete_jobs="successful",
                update_heartbeat_interval=self.heartbeat, stalled_worker_timeout=self.timeout,
                fetch_job_polling_interval=max(1.0, self.heartbeat)))
            takeover = asyncio.create_task(self._take_over_stalled())
            self.ready.set()
            try:
                await self.worker_task
            except asyncio.CancelledError:
                pass  # stopped: procrastinate let the jobs in progress finish first
            finally:
                takeover.cancel()

    async def _take_over_stalled(self) -> None:
        """Every heartbeat: jobs of workers silent for longer than the timeout go back to the queue,
        and so does a `running` run that has no job at all (its execution ended with an error the
        engine could not record, e.g. the database went away mid-step)."""
        while True:
            await asyncio.sleep(self.heartbeat)
            try:
                await asyncio.to_thread(requeue_orphans)
                stalled = await self.app.job_manager.get_stalled_jobs(
                    queue=QUEUE_NAME, seconds_since_heartbeat=self.timeout)
                for job in stalled:
                    try:
                        await self.app.job_manager.retry_job(job)
                        log.warning("run %s: its worker went silent; the run is queued again",
                                    job.task_kwargs.get("run_id"))
                    except Exception:  # noqa: BLE001 - another worker took it over first
                        log.info("stalled job %s was taken over elsewhere", job.id)
            except Exception:  # noqa: BLE001 - a database hiccup: try again next heartbeat
                log.exception("looking for stalled runs failed")

    def stop(self, wait: bool) -> None:
        """Stop fetching jobs; with `wait`, let running ones finish (they hand their run back)."""
        loop, task = self.loop, self.worker_task
        if loop is not None and task is not None and not loop.is_closed():
            loop.call_soon_threadsafe(task.cancel)
        if wait:
            self.thread.join(timeout=120)


# --- the process's queue ---------------------------------------------------------------------------

_queue: RunQueue | None = None
_queue_url: str | None = None
_queue_lock = threading.Lock()


def get_queue() -> RunQueue:
    """The queue of the configured database (created on first use)."""
    global _queue, _queue_url  # noqa: PLW0603 - one queue per process and database
    settings = get_settings()
    with _queue_lock:
        if _queue is None or _queue_url != settings.db_url:
            _queue = SharedQueue(settings.db_url) if settings.shared_queue else ThreadQueue()
            _queue_url = settings.db_url
        return _queue


def enqueue(session: Session, run_id: str, new: bool = False) -> None:
    """Hand `run_id` on for execution in `session`'s transaction (see the module documentation).

    In a process that executes runs (role `all`), the shared queue's consumer starts with the
    first run handed on."""
    queue = get_queue()
    queue.enqueue(session, run_id, new)
    if get_settings().role == "all":
        queue.start_consumer()


def waiting() -> int:
    """Runs handed on and not started yet, across every process that shares the queue."""
    return get_queue().waiting()


def wait_for_rest(run_id: str, seconds: float | None = None) -> None:
    """Wait up to `seconds` (POWERON_RUN_WAIT_SECONDS by default) for the run to come to rest."""
    get_queue().wait_for_rest(run_id, get_settings().run_wait_seconds if seconds is None else seconds)


def draining() -> bool:
    """True once this process stops taking runs: a run hands itself back between steps."""
    queue = _queue
    return queue is not None and queue.draining()


def start_consumer() -> None:
    """Execute queued runs in this process (roles `all` and `worker`)."""
    get_queue().start_consumer()


def stop_queue(wait: bool = True) -> None:
    """Stop this process's part of the queue (tests switch databases with this; a clean exit)."""
    global _queue, _queue_url  # noqa: PLW0603
    with _queue_lock:
        queue, _queue, _queue_url = _queue, None, None
    if queue is not None:
        queue.stop(wait)


def _poll_until_at_rest(run_id: str, seconds: float) -> None:
    """Read the run's status until it is no longer `running` or `seconds` have passed."""
    from backend.db import session_scope
    from backend.db.models import WorkflowRun
    from backend.statemachines import workflow_run as lifecycle

    deadline = time.monotonic() + seconds
    pause = 0.01
    while True:
        with session_scope() as session:
            status = session.exec(select(WorkflowRun.status).where(WorkflowRun.id == run_id)).first()
        if status != lifecycle.RUNNING or time.monotonic() >= deadline:
            return
        time.sleep(min(pause, max(0.0, deadline - time.monotonic())))
        pause = min(pause * 2, 0.2)
