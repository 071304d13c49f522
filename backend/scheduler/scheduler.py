"""The scheduler of trigger.schedule nodes (spec §3.4 and §7.4, issue 7).

One APScheduler ``BackgroundScheduler`` per process, driven by our tables:

- **Jobs** come from a :class:`~backend.scheduler.jobs.JobSource` (by default the published
  versions' trigger.schedule nodes of active workflows). APScheduler's in-memory job store holds
  only the job id ``wf:{workflowId}:{nodeId}`` and its trigger; everything else is reloaded from
  the database when a job fires.
- **Incremental sync.** :meth:`Scheduler.on_workflow_changed` re-reads one workflow and adds,
  replaces (``replace_existing=True``) or removes only that workflow's jobs; nothing else is
  touched, there is never a full wipe. The workflow service announces changes through the
  "automation.changed" registry (backend/workflows/changes.py: publish, unpublish, archive,
  restore, delete, `active` toggled) after they commit; the scheduler queues the id and its own
  thread applies it, so a caller is never slowed down nor made to wait on the scheduler's locks.
  A change committed by *another* process is picked up by the leader within one renewal
  interval (it re-reads workflows whose sys_modified_at moved), and a full diff-based
  reconciliation runs every RECONCILE_SECONDS as a safety net.
- **Job handle.** Workflow.eventId holds the job handle (the job id; several joined by spaces)
  through backend/statemachines/scheduler_job.py: register when a workflow gets jobs, replace
  when its schedule changed, unregister (eventId cleared) when it has none left.
- **Delayed start-up sync.** POWERON_SCHEDULER_STARTUP_DELAY_SECONDS (5 s) after start the
  thread takes part in the leader election and syncs every active published scheduled workflow
  (eventIds; jobs when it leads).
- **Leader election** (backend/scheduler/lease.py): only the process holding the database lease
  has jobs in its APScheduler; the others keep theirs empty. The leader renews the lease every
  third of POWERON_SCHEDULER_LEASE_SECONDS; when it stops renewing (killed), another process
  takes over once the lease has expired, syncs all jobs and catches up (misfire policy below).
  A process that finds it lost the lease drops all its jobs.
- **A fire** (:meth:`Scheduler.fire`, on an executor thread) reloads the workflow and, in ONE
  transaction: checks that this process still holds the lease (fencing), that the workflow
  exists, is `active` and its published version still has that schedule node with that
  schedule, that this fire time has not run yet (the run input records it), and that the
  creator (sysCreatedBy) still may execute workflows there (enabled, may open the instance,
  execute right, may create runs); then it creates the run of the published version as the
  creator (trigger "schedule", input ``{"scheduledAt", "triggerNodeId"}``) and appends an
  execution log entry (the newest 50 are kept), and commits — before the run executes, so a
  crash after the fire loses nothing (recovery continues runs left `running`). Only then is the
  run handed to the run worker. A refused fire (creator lost the right, graph no longer valid)
  is logged in the execution log and starts nothing.
- **Misfire policy.** Every job has ``coalesce=True`` and
  ``misfire_grace_time=POWERON_SCHEDULER_MISFIRE_GRACE_SECONDS`` (60 s): fires missed while no
  process led (a killed leader before the takeover, or all processes down) are coalesced into
  ONE run, for the latest missed fire time, if that is at most the grace time late; older ones
  are dropped (logged by APScheduler as missed). A new leader (also a restarted single process)
  starts each job at its first fire time within the grace window before now (not before the
  version was published); the due ones are coalesced into one run of the latest, which the fire
  handler skips when the old leader had already run it (the fire time is recorded on the run).
- **Main-loop bridging.** The fire handler is synchronous and needs no event loop; run events
  reach asyncio subscribers through backend/engine/events.py, which already hands them over with
  ``loop.call_soon_threadsafe``. Anything async a scheduler thread must start goes through
  :meth:`Scheduler.call_in_loop`, which schedules it on the loop registered with
  :meth:`Scheduler.register_loop` (the Reflex lifespan registers the app's loop), never by
  touching the loop from the scheduler thread directly.
"""

from __future__ import annotations

import asyncio
import logging
import queue
import threading
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

from apscheduler.events import EVENT_JOB_MISSED, JobExecutionEvent
from apscheduler.executors.pool import ThreadPoolExecutor as ApsThreadPoolExecutor
from apscheduler.jobstores.base import JobLookupError
from apscheduler.schedulers.background import BackgroundScheduler
from sqlmodel import Session, select

from backend.config import get_settings
from backend.db import session_scope
from backend.db.engine import write_gate
from backend.db.models import Workflow, WorkflowRun, utcnow
from backend.errors import InvalidInput
from backend.scheduler.cron import ScheduleError, parse_schedule
from backend.scheduler.jobs import SCHEDULE_TYPE, JobSource, JobSpec, PublishedSchedules, event_id_for, job_id_for
from backend.scheduler.lease import Lease
from backend.statemachines import scheduler_job
from backend.statemachines.base import ConcurrentTransition
from backend.workflows import changes
from backend.workflows.service import published_version

log = logging.getLogger(__name__)

RECONCILE_SECONDS = 300.0
FIRE_THREADS = 4
DUPLICATE_WINDOW = timedelta(minutes=10)  # how far back a fire time is looked for in the runs


def _aware(moment: datetime) -> datetime:
    return moment if moment.tzinfo else moment.replace(tzinfo=UTC)


class FireExecutor(ApsThreadPoolExecutor):
    """APScheduler's thread pool executor, except that the job function is told the scheduled fire
    time (``fire_time=``): the handler records it on the run, which makes each fire idempotent."""

    def _do_submit_job(self, job: Any, run_times: list[datetime]) -> None:
        def callback(future: Any) -> None:
            exc = future.exception()
            if exc:
                self._run_job_error(job.id, exc, exc.__traceback__)
            else:
                self._run_job_success(job.id, future.result())

        self._pool.submit(_run_fire_job, job, job._jobstore_alias, run_times, self._logger.name).add_done_callback(
            callback)


def _run_fire_job(job: Any, jobstore_alias: str, run_times: list[datetime], logger_name: str) -> list[Any]:
    """apscheduler.executors.base.run_job with the fire time passed on (same misfire check)."""
    from apscheduler.events import EVENT_JOB_ERROR, EVENT_JOB_EXECUTED

    events = []
    logger = logging.getLogger(logger_name)
    for run_time in run_times:
        if job.misfire_grace_time is not None:
            late = datetime.now(UTC) - run_time
            if late > timedelta(seconds=job.misfire_grace_time):
                events.append(JobExecutionEvent(EVENT_JOB_MISSED, job.id, jobstore_alias, run_time))
                logger.warning('Run time of job "%s" was missed by %s', job, late)
                continue
        try:
            result = job.func(*job.args, fire_time=run_time, **job.kwargs)
        except Exception as exc:  # noqa: BLE001 - reported as a job error event
            events.append(JobExecutionEvent(EVENT_JOB_ERROR, job.id, jobstore_alias, run_time, exception=exc))
            logger.exception('Job "%s" raised an exception', job)
        else:
            events.append(JobExecutionEvent(EVENT_JOB_EXECUTED, job.id, jobstore_alias, run_time, retval=result))
    return events


class Scheduler:
    """The process's scheduler: APScheduler jobs derived from our tables, led by one process.

    Args:
        source: Where jobs come from (default: published schedules of active workflows).
        lease_seconds: Lease lifetime (POWERON_SCHEDULER_LEASE_SECONDS); renewed every third.
        startup_delay_seconds: Wait before the first sync (POWERON_SCHEDULER_STARTUP_DELAY_SECONDS).
        misfire_grace_seconds: How late a fire may run (POWERON_SCHEDULER_MISFIRE_GRACE_SECONDS).
        use_lease: False runs without leader election (this process always leads; benchmarks).
    """

    def __init__(self, source: JobSource | None = None, *, lease_seconds: float | None = None,
                 startup_delay_seconds: float | None = None, misfire_grace_seconds: float | None = None,
                 use_lease: bool = True):
        settings = get_settings()
        self.source = source or PublishedSchedules()
        self.lease_seconds = lease_seconds if lease_seconds is not None else settings.scheduler_lease_seconds
        self.renew_seconds = self.lease_seconds / 3
        self.startup_delay_seconds = (startup_delay_seconds if startup_delay_seconds is not None
                                      else settings.scheduler_startup_delay_seconds)
        self.misfire_grace_seconds = (misfire_grace_seconds if misfire_grace_seconds is not None
                                      else settings.scheduler_misfire_grace_seconds)
        self.lease = Lease(self.lease_seconds) if use_lease else None
        self.aps = BackgroundScheduler(
            timezone=UTC,
            executors={"default": FireExecutor(FIRE_THREADS)},
            # Overlapping fires of one job may run (a slow fire must not make APScheduler skip the
            # next one); each fire time still runs once (see fire()).
            job_defaults={"coalesce": True, "misfire_grace_time": self.misfire_grace_seconds,
                          "max_instances": FIRE_THREADS},
        )
        self.leading = False
        self._specs: dict[str, dict[str, JobSpec]] = {}  # workflow id -> job id -> spec (jobs in self.aps)
        self._lock = threading.RLock()
        self._changes: queue.Queue[str] = queue.Queue()
        self._stopping = threading.Event()
        self._thread: threading.Thread | None = None
        self._unsubscribe: Callable[[], None] | None = None
        self._held_until = 0.0  # monotonic time until which the last renewal is surely valid
        self._watermark: datetime | None = None
        self._seen: dict[str, tuple[datetime, int]] = {}
        self._loop: asyncio.AbstractEventLoop | None = None
        self.synced = threading.Event()  # set after the first full sync (tests, diagnostics)

    # --- lifecycle -------------------------------------------------------------------------------

    def start(self) -> Scheduler:
        """Listen for workflow changes, start APScheduler (empty) and the scheduler thread."""
        # Imported now rather than by the first fire, which would be late by the import time.
        import backend.engine.executor  # noqa: F401
        import backend.features.graphical_editor.interface  # noqa: F401

        self._unsubscribe = changes.subscribe(self.enqueue_change)
        self.aps.start()
        self._thread = threading.Thread(target=self._run, name="poweron-scheduler", daemon=True)
        self._thread.start()
        log.info("scheduler started (lease %s s, start-up delay %s s, misfire grace %s s)",
                 self.lease_seconds, self.startup_delay_seconds, self.misfire_grace_seconds)
        return self

    def stop(self, timeout: float = 10) -> None:
        """Stop: no more changes or fires; the lease is released so another process takes over."""
        self._stopping.set()
        self._changes.put("")  # wake the thread
        if self._unsubscribe is not None:
            self._unsubscribe()
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join(timeout)
        if self.aps.running:
            self.aps.shutdown(wait=True)
        if self.leading and self.lease is not None:
            try:
                self.lease.release()
            except Exception:  # noqa: BLE001 - the lease then simply expires
                log.exception("scheduler lease could not be released")
        self.leading = False

    def is_alive(self) -> bool:
        return self._thread is not None and self._thread.is_alive() and not self._stopping.is_set()

    def _run(self) -> None:
        if self._stopping.wait(self.startup_delay_seconds):
            return
        next_renew = next_reconcile = 0.0
        while not self._stopping.is_set():
            now = time.monotonic()
            try:
                if now >= next_renew:
                    next_renew = now + self.renew_seconds
                    became_leader = self._renew()
                    if not self.synced.is_set() or became_leader:
                        self.sync_all(catch_up=became_leader)
                        self.synced.set()
                        next_reconcile = now + RECONCILE_SECONDS
                    elif self.leading:
                        self._poll_changes()
                if self.leading and now >= next_reconcile:
                    next_reconcile = now + RECONCILE_SECONDS
                    self.sync_all()
                self._drain_changes(timeout=max(0.0, next_renew - time.monotonic()))
            except Exception:  # noqa: BLE001 - the scheduler thread must go on
                log.exception("scheduler round failed")
                self._stopping.wait(1.0)

    def _drain_changes(self, timeout: float) -> None:
        try:
            first = self._changes.get(timeout=timeout)
        except queue.Empty:
            return
        ids = [first]
        while True:
            try:
                ids.append(self._changes.get_nowait())
            except queue.Empty:
                break
        for workflow_id in dict.fromkeys(i for i in ids if i):
            if self._stopping.is_set():
                return
            try:
                self.on_workflow_changed(workflow_id)
            except Exception:  # noqa: BLE001 - one workflow's trouble must not stop the others
                log.exception("scheduler sync of workflow %s failed", workflow_id)

    def enqueue_change(self, workflow_id: str) -> None:
        """The "automation.changed" listener: apply the change on the scheduler thread."""
        self._changes.put(workflow_id)

    # --- leadership ------------------------------------------------------------------------------

    def _renew(self) -> bool:
        """Acquire or renew the lease; returns True when this process has just become the leader."""
        if self.lease is None:
            held = True
        else:
            try:
                held = self.lease.acquire()
            except Exception:  # noqa: BLE001 - the database may be away for a moment
                log.exception("scheduler lease renewal failed")
                held = self.leading and time.monotonic() < self._held_until
        if held:
            self._held_until = time.monotonic() + self.lease_seconds * 0.9
        if held and not self.leading:
            with self._lock:
                self.leading = True
                self._watermark = utcnow()
            log.info("scheduler: this process leads now (%s)", self.lease.holder if self.lease else "no lease")
            return True
        if not held and self.leading:
            self._step_down()
        return False

    def _step_down(self) -> None:
        with self._lock:
            self.leading = False
            for workflow_id in list(self._specs):
                self._apply(workflow_id, [])
        log.warning("scheduler: lease lost; this process dropped its jobs")

    def _poll_changes(self) -> None:
        """Workflows changed since the last look (by any process): sync each (no-op when unchanged).

        The look-back covers transactions that committed a little after the time they wrote."""
        started = utcnow()
        since = (self._watermark or started) - timedelta(seconds=max(30.0, 2 * self.lease_seconds))
        with session_scope() as session:
            rows = session.exec(select(Workflow.id, Workflow.sys_modified_at, Workflow.lock_version)
                                .where(Workflow.sys_modified_at >= since)).all()
        for workflow_id, modified, lock_version in rows:
            key = (_aware(modified), lock_version)
            if self._seen.get(workflow_id) != key:
                self._seen[workflow_id] = key
                self.on_workflow_changed(workflow_id)
        self._seen = {k: v for k, v in self._seen.items() if v[0] >= since}
        self._watermark = started

    # --- sync ------------------------------------------------------------------------------------

    def on_workflow_changed(self, workflow_id: str) -> None:
        """Re-read one workflow: record its job handle and add, replace or remove only its jobs."""
        with self._lock:
            with session_scope() as session:
                workflow, specs = self.source.jobs_of(session, workflow_id)
            known = self._specs.get(workflow_id, {})
            replaced = self.leading and bool(known) and known != {s.job_id: s for s in specs}
            if workflow is not None:
                self._record(workflow_id, specs, replaced)
            if self.leading:
                self._apply(workflow_id, specs)

    def sync_all(self, catch_up: bool = False) -> None:
        """Bring every workflow's eventId and (when leading) jobs in line with the tables, by a diff.

        With `catch_up` (a new leader) each job starts after its last recorded fire, so missed
        fires are coalesced into one run within the misfire grace time.
        """
        with self._lock:
            with session_scope() as session:
                desired = self.source.all_jobs(session)
                stale = [w for w in self.source.registered(session) if w.id not in desired]
            writes = [(w, specs) for w, specs in desired.values() if w.event_id != event_id_for(specs)]
            writes += [(w, []) for w in stale]
            retry: list[str] = []
            if writes:
                with write_gate(), session_scope() as session:
                    for workflow, specs in writes:
                        try:  # a lost race wrote nothing (its guarded UPDATE matched no row)
                            self._transition(session, workflow, specs, replaced=False)
                        except ConcurrentTransition:
                            retry.append(workflow.id)
            for workflow_id in retry:
                self.enqueue_change(workflow_id)
            if not self.leading:
                return
            for workflow_id, (_workflow, specs) in desired.items():
                self._apply(workflow_id, specs, catch_up)
            for workflow_id in [w for w in self._specs if w not in desired]:
                self._apply(workflow_id, [])
        log.info("scheduler sync: %d scheduled workflow(s), %d eventId change(s), leading=%s",
                 len(desired), len(writes), self.leading)

    def _transition(self, session: Session, workflow: Workflow, specs: list[JobSpec], replaced: bool) -> bool:
        """The scheduler_job transition that makes eventId match `specs`; False when none is due."""
        handle = event_id_for(specs)
        if handle is None:
            if workflow.event_id is None:
                return False
            scheduler_job.unregister(session, workflow)
        elif workflow.event_id is None:
            scheduler_job.register(session, workflow, handle)
        elif workflow.event_id != handle or replaced:
            scheduler_job.replace(session, workflow, handle)
        else:
            return False
        return True

    def _record(self, workflow_id: str, specs: list[JobSpec], replaced: bool) -> None:
        """Write the job handle of one workflow (a guarded transition; re-read and retried on a race)."""
        for _attempt in range(5):
            with write_gate(), session_scope() as session:
                workflow = session.get(Workflow, workflow_id, populate_existing=True)
                if workflow is None:
                    return
                try:
                    self._transition(session, workflow, specs, replaced)
                    return
                except ConcurrentTransition:
                    session.rollback()
        log.warning("eventId of workflow %s not written: it kept changing", workflow_id)

    def _apply(self, workflow_id: str, specs: list[JobSpec], catch_up: bool = False) -> None:
        """Make APScheduler's jobs of one workflow match `specs` (only those jobs are touched).

        With `catch_up` a job starts at its first fire time within the misfire grace window before
        now (not before its version was published): APScheduler coalesces those already due into
        one run of the latest, which :meth:`fire` skips if it already ran."""
        old = self._specs.get(workflow_id, {})
        new = {spec.job_id: spec for spec in specs}
        for job_id in old.keys() - new.keys():
            try:
                self.aps.remove_job(job_id)
            except JobLookupError:
                pass
        now = datetime.now(UTC)
        for job_id, spec in new.items():
            if old.get(job_id) == spec:
                continue
            trigger = spec.schedule.trigger(anchor=spec.anchor)
            options: dict[str, Any] = {}
            if catch_up:
                since = now - timedelta(seconds=self.misfire_grace_seconds)
                if spec.anchor is not None:
                    since = max(since, _aware(spec.anchor))
                first = trigger.get_next_fire_time(None, since)
                if first is not None and first <= now:
                    options["next_run_time"] = first
            self.aps.add_job(self._fire_job, trigger, args=(spec.workflow_id, spec.node_id), id=job_id,
                             name=f"{spec.workflow_id}/{spec.node_id} {spec.schedule.describe()}",
                             replace_existing=True, **options)
        if new:
            self._specs[workflow_id] = new
        else:
            self._specs.pop(workflow_id, None)

    def jobs(self) -> dict[str, JobSpec]:
        """The jobs this process runs now, by job id (empty unless it leads)."""
        with self._lock:
            return {job_id: spec for specs in self._specs.values() for job_id, spec in specs.items()}

    # --- firing ----------------------------------------------------------------------------------

    def _fire_job(self, workflow_id: str, node_id: str, fire_time: datetime | None = None) -> str:
        # fire_time is given by FireExecutor (optional only for APScheduler's signature check)
        return self.fire(workflow_id, node_id, fire_time or datetime.now(UTC))

    def fire(self, workflow_id: str, node_id: str, fire_time: datetime) -> str:
        """Handle one fire (see the module docstring); returns what happened, for logs and tests."""
        stamp = fire_time.astimezone(UTC).isoformat()
        resync = False
        run_id: str | None = None
        with write_gate(), session_scope() as session:
            if self.lease is not None and not self.lease.fence(session):
                outcome = "skipped: this process no longer holds the scheduler lease"
            else:
                outcome, resync, run_id = self._start(session, workflow_id, node_id, fire_time, stamp)
        if resync:
            self.enqueue_change(workflow_id)
        log.info("schedule %s fired at %s: %s", job_id_for(workflow_id, node_id), stamp, outcome)
        return outcome

    def _start(self, session: Session, workflow_id: str, node_id: str, fire_time: datetime,
               stamp: str) -> tuple[str, bool, str | None]:
        """(outcome, whether the job needs a re-sync, the run id) of one fire, in the caller's transaction."""
        workflow = session.get(Workflow, workflow_id)
        if workflow is None:
            return "skipped: the workflow was deleted", True, None
        if not workflow.active:
            return "skipped: the workflow is not active", True, None
        version = published_version(session, workflow)
        node = next((n for n in (version.graph.get("nodes", []) if version else [])
                     if isinstance(n, dict) and n.get("id") == node_id and n.get("type") == SCHEDULE_TYPE
                     and n.get("disabled") is not True), None)
        if version is None or node is None:
            return "skipped: the published version has no such schedule node", True, None
        spec = self._specs.get(workflow_id, {}).get(job_id_for(workflow_id, node_id))
        try:
            schedule = parse_schedule(node.get("parameters") or {})
        except ScheduleError:
            schedule = None
        if spec is not None and schedule != spec.schedule:
            return "skipped: the schedule changed (the job is being replaced)", True, None
        if self._already_fired(session, workflow_id, node_id, fire_time, stamp):
            return "skipped: this fire time already ran", False, None
        entry = {"at": utcnow().isoformat(), "by": workflow.sys_created_by, "nodeId": node_id, "scheduledAt": stamp}
        from backend.triggers.launch import run_as_creator  # the triggers import the engine

        creator, refusal = run_as_creator(session, workflow)
        if creator is None:
            workflow.append_execution_log({**entry, "action": "scheduleRefused", "reason": refusal})
            session.add(workflow)
            log.warning("scheduled run of workflow %s refused: %s", workflow_id, refusal)
            return f"refused: {refusal}", False, None
        from backend.engine import executor  # the engine imports the workflow modules

        try:
            run = executor.start_run(session, creator, workflow, version,
                                     {"scheduledAt": stamp, "triggerNodeId": node_id}, "full", trigger="schedule",
                                     start_node=node_id)
        except InvalidInput as exc:
            message = "; ".join(f"{e.node_id or ''} {e.field}: {e.message}".strip() for e in exc.errors)
            workflow.append_execution_log({**entry, "action": "scheduleFailed", "reason": message})
            session.add(workflow)
            return f"failed: {message}", False, None
        workflow.append_execution_log({**entry, "action": "scheduledRun", "runId": run.id})
        session.add(workflow)
        return f"started run {run.id}", False, run.id

    @staticmethod
    def _already_fired(session: Session, workflow_id: str, node_id: str, fire_time: datetime, stamp: str) -> bool:
        rows = session.exec(select(WorkflowRun.input).where(
            WorkflowRun.workflow_id == workflow_id, WorkflowRun.trigger == "schedule",
            WorkflowRun.started_at >= fire_time - DUPLICATE_WINDOW)).all()
        return any(isinstance(data, dict) and data.get("scheduledAt") == stamp and data.get("triggerNodeId") == node_id
                   for data in rows)

    # --- main-loop bridging ----------------------------------------------------------------------

    def register_loop(self, loop: asyncio.AbstractEventLoop | None) -> None:
        """The application's event loop, for :meth:`call_in_loop`."""
        self._loop = loop

    def call_in_loop(self, callback: Callable[..., Any], *args: Any) -> bool:
        """Run `callback(*args)` on the registered loop (thread-safe); False when there is none."""
        loop = self._loop
        if loop is None or loop.is_closed():
            return False
        loop.call_soon_threadsafe(callback, *args)
        return True


# --- the process's scheduler ---------------------------------------------------------------------

_instance: Scheduler | None = None
_instance_lock = threading.Lock()


def start_scheduler(**options: Any) -> Scheduler | None:
    """Start the process's scheduler once (None when POWERON_SCHEDULER is off); `options` go to
    :class:`Scheduler`. Registers the running event loop, if any, for main-loop bridging."""
    global _instance  # noqa: PLW0603 - one scheduler per process
    if not get_settings().scheduler_enabled:
        log.info("scheduler off (POWERON_SCHEDULER)")
        return None
    with _instance_lock:
        if _instance is not None and _instance.is_alive():
            return _instance
        _instance = Scheduler(**options)
        try:
            _instance.register_loop(asyncio.get_running_loop())
        except RuntimeError:
            pass
        return _instance.start()


def get_scheduler() -> Scheduler | None:
    return _instance


def stop_scheduler() -> None:
    """Stop the process's scheduler (tests, shutdown)."""
    global _instance  # noqa: PLW0603
    with _instance_lock:
        scheduler, _instance = _instance, None
    if scheduler is not None:
        scheduler.stop()
