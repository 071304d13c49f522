"""Monitoring dashboard benchmark (issue 10): the monitor's queries over 100,000 runs.

A temporary SQLite database gets RUNS runs (bulk Core inserts) spread over 45 days, six workflows
in three Graphical Editor instances, mixed statuses (a few running and paused), one step row per
run and an AI step with a cost for about a third of them; TEST_SHARE of them are test runs (of a
draft), which the Monitor's default (production runs) must skip. Then, as a user with the editor-user
role in the three instances (a fresh AccessContext per call, as a request builds one), the
median of REPEAT calls of each of: the first page of runs, page 50 through the keyset cursor,
live runs, runs per day over 30 days, costs over 30 days, recent failures, upcoming schedules,
the first page of test runs and of all runs, and GET /api/monitor/runs and
GET /api/monitor/overview?days=30 (production, and kind=all) through FastAPI's TestClient.

Target: every call well under 300 ms, so the dashboard stays fast.
Usage: .venv/bin/python bench/monitor.py [RUNS]
"""

from __future__ import annotations

import random
import statistics
import sys
import time
from collections.abc import Callable
from datetime import timedelta

from support import temporary_app

temporary_app("monitor")

from fastapi.testclient import TestClient  # noqa: E402
from sqlalchemy import insert  # noqa: E402
from sqlmodel import select  # noqa: E402

from backend.api.app import create_api  # noqa: E402
from backend.auth import issue_token  # noqa: E402
from backend.bootstrap import prepare  # noqa: E402
from backend.db import session_scope  # noqa: E402
from backend.db.models import (  # noqa: E402
    FeatureInstance,
    Mandate,
    RunStepLog,
    User,
    Workflow,
    WorkflowRun,
    WorkflowVersion,
    new_id,
    utcnow,
)
from backend.monitoring import service  # noqa: E402
from backend.rbac.access import AccessContext  # noqa: E402
from backend.tenancy import create_feature_instance, grant_instance_roles, grant_mandate_roles  # noqa: E402

RUNS = int(sys.argv[1]) if len(sys.argv) > 1 else 100_000
DAYS = 45
REPEAT = 7
TARGET_MS = 300
BATCH = 5_000
STATUSES = ["completed"] * 85 + ["failed"] * 10 + ["cancelled"] * 5
TEST_SHARE = 0.2  # runs of a draft (the editor's Test run, step mode, REST runs of a draft)
TRIGGERS = ("manual", "schedule", "webhook", "event")


def populate() -> str:
    """The instances, workflows and RUNS runs with their steps; returns the bench user's id."""
    rng = random.Random(10)
    with session_scope() as session:
        admin = session.exec(select(User).where(User.username == "admin")).one()
        first = session.exec(select(FeatureInstance).where(FeatureInstance.feature_code == "graphicalEditor")).one()
        mandate = session.get(Mandate, first.mandate_id)
        instances = [first, *(create_feature_instance(session, mandate, "graphicalEditor", f"Editor {n}")
                              for n in (2, 3))]
        user = User(username="ops", display_name="Ops")
        session.add(user)
        session.flush()
        grant_mandate_roles(session, user, mandate, ["user"])
        for instance in instances:
            grant_instance_roles(session, user, instance, ["graphicalEditor-user"])
        workflows: list[tuple[str, str, FeatureInstance]] = []
        for n in range(6):
            instance = instances[n % len(instances)]
            graph = ({"nodes": [{"id": "clock", "type": "trigger.schedule",
                                 "parameters": {"cron": f"0 {6 + n} * * *", "timezone": "Europe/Zurich"}}],
                      "edges": []} if n % 2 == 0 else {"nodes": [], "edges": []})
            workflow = Workflow(mandate_id=mandate.id, feature_instance_id=instance.id, name=f"Workflow {n + 1}",
                                active=True, sys_created_by=admin.id)
            session.add(workflow)
            session.flush()
            version = WorkflowVersion(workflow_id=workflow.id, version_number=1, status="published", graph=graph,
                                      sys_created_by=admin.id, published_at=utcnow() - timedelta(days=DAYS))
            session.add(version)
            session.flush()
            workflows.append((workflow.id, version.id, instance))
        user_id, admin_id, mandate_id = user.id, admin.id, mandate.id

    now = utcnow()
    runs_table, steps_table = WorkflowRun.__table__, RunStepLog.__table__
    inserted = 0
    started_clock = time.perf_counter()
    while inserted < RUNS:
        runs, steps = [], []
        for _ in range(min(BATCH, RUNS - inserted)):
            workflow_id, version_id, instance = workflows[rng.randrange(len(workflows))]
            started = now - timedelta(seconds=rng.uniform(60, DAYS * 86400))
            status = rng.choice(STATUSES)
            finished = started + timedelta(milliseconds=rng.randint(50, 20_000))
            run_id = new_id()
            cost = round(rng.uniform(0.0001, 0.02), 6) if rng.random() < 0.33 else None
            runs.append({"id": run_id, "workflow_id": workflow_id, "version_id": version_id, "mandate_id": mandate_id,
                         "feature_instance_id": instance.id, "status": status, "pause_reason": None, "mode": "full",
                         "trigger": rng.choice(TRIGGERS), "input": None, "output": None,
                         "error": "node 'x' failed: boom\n--- stack ---\nTraceback" if status == "failed" else None,
                         "context": None, "sys_created_by": admin_id, "started_at": started,
                         "finished_at": finished, "lock_version": 1, "cost_chf": cost,
                         "test": rng.random() < TEST_SHARE})
            steps.append({"id": new_id(), "run_id": run_id, "node_id": "start", "node_type": "trigger.manual",
                          "status": "completed", "attempt": 1, "input": None, "output": None, "error": None,
                          "duration_ms": 1, "started_at": started, "finished_at": started, "cost_chf": None})
            if cost is not None:  # the run's cost_chf is the sum of its steps' (engine.steps.write_steps)
                steps.append({"id": new_id(), "run_id": run_id, "node_id": "ask", "node_type": "ai.prompt",
                              "status": "completed", "attempt": 1, "input": None, "output": None, "error": None,
                              "duration_ms": 900, "started_at": started, "finished_at": finished,
                              "cost_chf": cost})
        with session_scope() as session:
            session.execute(insert(runs_table), runs)
            session.execute(insert(steps_table), steps)
        inserted += len(runs)
    # a few live runs
    with session_scope() as session:
        live = []
        for n in range(40):
            workflow_id, version_id, instance = workflows[n % len(workflows)]
            live.append({"id": new_id(), "workflow_id": workflow_id, "version_id": version_id,
                         "mandate_id": mandate_id, "feature_instance_id": instance.id,
                         "status": "running" if n % 2 else "paused", "pause_reason": None if n % 2 else "humanTask",
                         "mode": "full", "trigger": "manual", "input": None, "output": None, "error": None,
                         "context": None, "sys_created_by": admin_id,
                         "started_at": now - timedelta(minutes=n), "finished_at": None, "lock_version": 1,
                         "cost_chf": None, "test": n % 4 == 0})
        session.execute(insert(runs_table), live)
    print(f"inserted {RUNS:,} runs (+40 live) with their steps in {time.perf_counter() - started_clock:.1f} s")
    return user_id


def timed(label: str, call: Callable[[], object]) -> float:
    call()  # warm-up (statement caches)
    times = []
    for _ in range(REPEAT):
        begin = time.perf_counter()
        call()
        times.append((time.perf_counter() - begin) * 1000)
    median = statistics.median(times)
    verdict = "ok" if median < TARGET_MS else "SLOW"
    print(f"  {label:<38} median {median:7.1f} ms   (min {min(times):6.1f}, max {max(times):6.1f})  {verdict}")
    return median


def as_user(user_id: str, work: Callable[[AccessContext], object]) -> Callable[[], object]:
    """A call of `work` in its own session and AccessContext, as one request makes it."""
    def call() -> object:
        with session_scope() as session:
            return work(AccessContext(session, session.get(User, user_id)))
    return call


def main() -> None:
    prepare()
    user_id = populate()
    everything = service.MonitorFilter()  # the Monitor's default: production runs
    tests, both = service.MonitorFilter(kind=service.TEST), service.MonitorFilter(kind=service.ALL_RUNS)

    cursor = None
    with session_scope() as session:
        access = AccessContext(session, session.get(User, user_id))
        for _page in range(49):
            cursor = service.list_runs(access, everything, 50, cursor).next_before
        first_rows = service.list_runs(access, everything, 50).rows
        costs = service.costs(access, everything, 30)
        print(f"sanity: first page {len(first_rows)} rows, newest {first_rows[0].started_at:%Y-%m-%d %H:%M}; "
              f"30-day cost CHF {costs.total_chf:.2f} over {sum(r.runs for r in costs.by_day):,} runs")

    print(f"median of {REPEAT} calls, {RUNS:,} runs, target < {TARGET_MS} ms each:")
    results = {
        "list_runs first page (50)": timed("list_runs first page (50)", as_user(
            user_id, lambda a: service.list_runs(a, everything, 50))),
        "list_runs page 50 via cursor": timed("list_runs page 50 via cursor", as_user(
            user_id, lambda a: service.list_runs(a, everything, 50, cursor))),
        "list_runs one workflow, failed": timed("list_runs one workflow, status failed", as_user(
            user_id, lambda a: service.list_runs(a, service.MonitorFilter(
                workflow_id=first_rows[0].workflow_id, status="failed"), 50))),
        "live_runs": timed("live_runs", as_user(user_id, lambda a: service.live_runs(a, everything))),
        "daily 30 days": timed("daily, 30 days", as_user(user_id, lambda a: service.daily(a, everything, 30))),
        "costs 30 days": timed("costs, 30 days", as_user(user_id, lambda a: service.costs(a, everything, 30))),
        "recent_failures": timed("recent_failures (10)", as_user(
            user_id, lambda a: service.recent_failures(a, everything))),
        "upcoming": timed("upcoming", as_user(user_id, lambda a: service.upcoming(a, everything))),
        "list_runs test runs": timed("list_runs first page, test runs", as_user(
            user_id, lambda a: service.list_runs(a, tests, 50))),
        "list_runs all runs": timed("list_runs first page, all runs", as_user(
            user_id, lambda a: service.list_runs(a, both, 50))),
        "daily 30 days test runs": timed("daily, 30 days, test runs", as_user(
            user_id, lambda a: service.daily(a, tests, 30))),
    }
    with session_scope() as session:
        token = issue_token(session, session.get(User, user_id)).token
    with TestClient(create_api()) as client:
        headers = {"Authorization": f"Bearer {token}"}

        def overview() -> None:
            response = client.get("/api/monitor/overview", params={"days": 30}, headers=headers)
            assert response.status_code == 200, response.text

        def runs_page() -> None:
            response = client.get("/api/monitor/runs", params={"limit": 50}, headers=headers)
            assert response.status_code == 200, response.text

        def overview_all() -> None:
            response = client.get("/api/monitor/overview", params={"days": 30, "kind": "all"}, headers=headers)
            assert response.status_code == 200, response.text

        results["REST runs"] = timed("GET /api/monitor/runs (50)", runs_page)
        results["REST overview"] = timed("GET /api/monitor/overview?days=30", overview)
        results["REST overview all"] = timed("GET /api/monitor/overview?days=30&kind=all", overview_all)
    slow = [label for label, ms in results.items() if ms >= TARGET_MS]
    print("all calls under target" if not slow else f"over target: {', '.join(slow)}")


if __name__ == "__main__":
    main()
