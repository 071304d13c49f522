"""Scheduler figures (issue 7, item 7): start-up sync, one incremental change, memory.

A temporary SQLite database gets N active workflows, each with a published version holding one
trigger.schedule node (daily crons spread over the day). The scheduler runs without a lease
(this process leads) and with APScheduler paused, so nothing fires; runs are not submitted.

- start-up sync, cold: every workflow gets its job and its eventId written (register);
- start-up sync, warm: a restarted process whose eventIds are already right (jobs only);
- one incremental change: ``on_workflow_changed`` after a workflow was deactivated / activated
  (job removed / added, eventId unregistered / registered) and after its schedule changed (job
  replaced), measured at N = 1,000 and N = 10,000 to show it does not grow with N;
- memory: Python heap held by the scheduler's jobs (tracemalloc) and the process's peak RSS.

Targets: one change under 5 ms and flat in N; start-up for 10,000 under 10 s.
Usage: .venv/bin/python bench/scheduler.py [N]   (default 10000; the change is also measured at 1000)
"""

from __future__ import annotations

import os
import resource
import statistics
import sys
import tempfile
import time
import tracemalloc
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
TMP = Path(tempfile.mkdtemp(prefix="poweron-bench-scheduler-"))
os.environ["POWERON_DB_URL"] = f"sqlite:///{TMP / 'bench.db'}"
os.environ["POWERON_DATA_DIR"] = str(TMP)

from sqlalchemy import insert, update  # noqa: E402

from backend.db import get_engine, migrate, session_scope  # noqa: E402
from backend.db.models import FeatureInstance, Mandate, User, Workflow, WorkflowVersion, new_id, utcnow  # noqa: E402
from backend.scheduler.scheduler import Scheduler  # noqa: E402

CHANGES = 200


def graph(i: int, minute_shift: int = 0) -> dict:
    return {"nodes": [{"id": "tick", "type": "trigger.schedule",
                       "parameters": {"cron": f"{(i + minute_shift) % 60} {i % 24} * * *", "timezone": "UTC"}}],
            "edges": []}


def parents() -> tuple[str, str, str]:
    with session_scope() as session:
        user = User(username="bench", email="bench@example.com")
        mandate = Mandate(name="bench")
        session.add_all([user, mandate])
        session.flush()
        instance = FeatureInstance(mandate_id=mandate.id, feature_code="graphicalEditor", label="bench")
        session.add(instance)
        session.flush()
        return user.id, mandate.id, instance.id


def add_workflows(first: int, count: int, ids: tuple[str, str, str]) -> list[str]:
    user_id, mandate_id, instance_id = ids
    now = utcnow()
    workflows, versions = [], []
    for i in range(first, first + count):
        workflow_id = new_id()
        workflows.append({"id": workflow_id, "mandate_id": mandate_id, "feature_instance_id": instance_id,
                          "name": f"wf-{i}", "description": "", "active": True, "event_id": None,
                          "execution_logs": [], "sys_created_by": user_id, "sys_created_at": now,
                          "sys_modified_at": now, "lock_version": 1})
        versions.append({"id": new_id(), "workflow_id": workflow_id, "version_number": 1, "status": "published",
                         "graph": graph(i), "sys_created_by": user_id, "sys_created_at": now,
                         "sys_modified_at": now, "published_at": now, "lock_version": 1})
    with session_scope() as session:
        session.execute(insert(Workflow), workflows)
        session.execute(insert(WorkflowVersion), versions)
    return [w["id"] for w in workflows]


def new_scheduler() -> Scheduler:
    scheduler = Scheduler(use_lease=False, startup_delay_seconds=0, submit=lambda _run_id: None)
    scheduler.aps.start(paused=True)  # jobs are added and ordered as usual; nothing fires
    scheduler.leading = True
    return scheduler


def timed(action) -> float:
    started = time.perf_counter()
    action()
    return (time.perf_counter() - started) * 1000


def set_active(workflow_id: str, active: bool) -> None:
    with session_scope() as session:
        session.execute(update(Workflow).where(Workflow.id == workflow_id).values(active=active))


def set_graph(workflow_id: str, value: dict) -> None:
    with session_scope() as session:  # a Core UPDATE: the published graph is immutable to the ORM
        session.execute(update(WorkflowVersion).where(WorkflowVersion.workflow_id == workflow_id).values(graph=value))


def measure_changes(scheduler: Scheduler, workflow_ids: list[str], label: str) -> None:
    sample = workflow_ids[:: max(1, len(workflow_ids) // CHANGES)][:CHANGES]
    off, on, replaced = [], [], []
    for index, workflow_id in enumerate(sample):
        set_active(workflow_id, False)
        off.append(timed(lambda w=workflow_id: scheduler.on_workflow_changed(w)))
        set_active(workflow_id, True)
        on.append(timed(lambda w=workflow_id: scheduler.on_workflow_changed(w)))
        set_graph(workflow_id, graph(index, minute_shift=7))
        replaced.append(timed(lambda w=workflow_id: scheduler.on_workflow_changed(w)))
    total = len(scheduler.aps.get_jobs())
    for name, values in (("deactivate (remove + unregister)", off), ("activate (add + register)", on),
                         ("schedule changed (replace)", replaced)):
        print(f"  N={label:>6} one change, {name:34s}: median {statistics.median(values):5.2f} ms, "
              f"p95 {sorted(values)[int(len(values) * 0.95) - 1]:5.2f} ms  ({len(values)} changes, {total} jobs)")


def main() -> None:
    total = int(sys.argv[1]) if len(sys.argv) > 1 else 10_000
    migrate()
    ids = parents()
    print(f"scheduler bench on SQLite ({TMP}), APScheduler paused, no lease")

    small = add_workflows(0, 1_000, ids)
    scheduler = new_scheduler()
    print(f"  start-up sync of 1,000 (cold): {timed(scheduler.sync_all) / 1000:.2f} s")
    measure_changes(scheduler, small, "1,000")
    scheduler.aps.shutdown(wait=False)

    rest = add_workflows(1_000, total - 1_000, ids)
    scheduler = new_scheduler()
    cold = timed(lambda: scheduler.sync_all(catch_up=True))
    jobs = len(scheduler.aps.get_jobs())
    print(f"  start-up sync of {total:,} (cold: {total - 1_000:,} eventIds written): {cold / 1000:.2f} s, "
          f"{jobs:,} jobs")
    scheduler.aps.shutdown(wait=False)

    scheduler = new_scheduler()
    warm = timed(lambda: scheduler.sync_all(catch_up=True))
    print(f"  start-up sync of {total:,} (warm restart, eventIds already right): {warm / 1000:.2f} s")
    measure_changes(scheduler, small + rest, f"{total:,}")
    scheduler.aps.shutdown(wait=False)

    tracemalloc.start()
    before = tracemalloc.take_snapshot()
    scheduler = new_scheduler()
    scheduler.sync_all(catch_up=True)
    after = tracemalloc.take_snapshot()
    held = sum(stat.size_diff for stat in after.compare_to(before, "filename"))
    _current, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    jobs = len(scheduler.aps.get_jobs())
    print(f"  memory of {jobs:,} jobs: {held / 1e6:.1f} MB held after the sync ({held / max(jobs, 1) / 1024:.2f} KiB "
          f"per job), {peak / 1e6:.1f} MB peak during it (tracemalloc)")
    scheduler.aps.shutdown(wait=False)
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"  process peak RSS: {rss:.0f} MB")
    get_engine().dispose()


if __name__ == "__main__":
    main()
