"""Runs execute on run threads, not on the thread that asked for them (SQLite, one process).

A request that starts, continues, resumes or retries a run hands it to the run queue in its
transaction (backend/engine/queue.py); on SQLite the queue submits it here once that commits, and
the request waits at most POWERON_RUN_WAIT_SECONDS for it to come to rest (completed, failed,
cancelled or paused). Short runs therefore answer with their final state, as a manual test run in
n8n does; long ones answer `running` and go on in the background, where the event stream and
``GET …/runs/{id}`` follow them. (On PostgreSQL the runs go through the shared procrastinate
queue instead, executed by any process of role `all` or `worker`.)

One execution per run at a time: a per-run lock makes a second submission (a task completed
while the last node's bookkeeping is still finishing, a recovery racing a resume) wait and then
continue from the committed context, which finds nothing left to do or the next resting state.
"""

from __future__ import annotations

import logging
import threading
from concurrent.futures import Future, ThreadPoolExecutor

from backend.config import get_settings
from backend.engine.executor import execute_run

log = logging.getLogger(__name__)


class RunWorker:
    """A bounded pool of threads that execute runs by id."""

    def __init__(self, threads: int):
        self._pool = ThreadPoolExecutor(threads, thread_name_prefix="poweron-run")
        self._locks: dict[str, tuple[threading.Lock, int]] = {}  # run id -> (lock, executions holding or awaiting it)
        self._guard = threading.Lock()
        self._queued = 0  # submitted, not yet started

    def submit(self, run_id: str) -> Future[str]:
        """Execute `run_id` to its next resting state on a run thread; the future holds its status."""
        with self._guard:
            self._queued += 1
        try:
            return self._pool.submit(self._execute, run_id)
        except BaseException:
            with self._guard:
                self._queued -= 1
            raise

    def queued(self) -> int:
        """Runs submitted and not yet started on a run thread (for back-pressure)."""
        return self._queued

    def _execute(self, run_id: str) -> str:
        with self._guard:
            self._queued -= 1
            lock, users = self._locks.get(run_id, (threading.Lock(), 0))
            self._locks[run_id] = (lock, users + 1)
        try:
            with lock:
                return execute_run(run_id).status
        except Exception:
            log.exception("run %s could not be executed", run_id)
            raise
        finally:
            with self._guard:
                lock, users = self._locks[run_id]
                if users == 1:
                    del self._locks[run_id]
                else:
                    self._locks[run_id] = (lock, users - 1)

    def shutdown(self, wait: bool = True) -> None:
        self._pool.shutdown(wait=wait)


_worker: RunWorker | None = None
_worker_lock = threading.Lock()


def get_worker() -> RunWorker:
    """The process's run worker (POWERON_RUN_THREADS threads), created on first use."""
    global _worker
    with _worker_lock:
        if _worker is None:
            _worker = RunWorker(get_settings().run_threads)
        return _worker


def shutdown_worker(wait: bool = True) -> None:
    """Stop the run worker (tests, process exit); a later submit starts a new one."""
    global _worker
    with _worker_lock:
        worker, _worker = _worker, None
    if worker is not None:
        worker.shutdown(wait=wait)


def submit(run_id: str) -> Future[str]:
    """Execute `run_id` in the background."""
    return get_worker().submit(run_id)


def queued() -> int:
    """Runs of this process waiting for a run thread (0 when the worker has not started)."""
    worker = _worker
    return worker.queued() if worker is not None else 0
