"""Engine benchmark (issue 5, item 12), on a temporary SQLite file with every step persisted.

(a) one run of a 1,000-node linear chain of context.transform nodes: total seconds, ms per node;
(b) 200 runs of a 10-node chain, sequentially and all at once through the run worker: runs per second.

Targets on the 2-core reference machine: under 2 ms per node, at least 100 short runs per second.
Usage: .venv/bin/python bench/engine.py [--profile]
"""

from __future__ import annotations

import os
import sys
import time

from support import temporary_app

temporary_app("engine")

from sqlmodel import select  # noqa: E402

from backend.bootstrap import prepare  # noqa: E402
from backend.db import session_scope  # noqa: E402
from backend.db.models import FeatureInstance, RunStepLog, User, Workflow, WorkflowRun  # noqa: E402
from backend.engine import executor  # noqa: E402
from backend.engine import queue as run_queue  # noqa: E402
from backend.workflows import service  # noqa: E402

CHAIN_NODES = 1000
SHORT_NODES = 10
SHORT_RUNS = 200
THREADS = int(os.environ.get("BENCH_THREADS", "4"))
os.environ["POWERON_RUN_THREADS"] = str(THREADS)  # the run threads the started runs go to


def chain(length: int) -> dict:
    """A manual trigger followed by `length` context.transform nodes, each a trivial mapping."""
    nodes = [{"id": "start", "type": "trigger.manual", "parameters": {}}]
    edges = []
    previous = "start"
    for index in range(length):
        node_id = f"t{index}"
        nodes.append({"id": node_id, "type": "context.transform",
                      "parameters": {"data": {"n": index}, "template": "{{ n }}"}})
        edges.append({"source": previous, "target": node_id})
        previous = node_id
    return {"nodes": nodes, "edges": edges}


def make_workflow(name: str, graph: dict) -> str:
    with session_scope() as session:
        admin = session.exec(select(User).where(User.username == "admin")).one()
        instance = session.exec(select(FeatureInstance)
                                .where(FeatureInstance.feature_code == "graphicalEditor")).first()
        workflow = service.create_workflow(session, admin, instance, name, graph=graph)
        session.commit()
        return workflow.id


def start(workflow_id: str) -> str:
    """Start one run of the workflow's draft (committed and so handed to the run threads, as a
    request does); returns its id."""
    with session_scope() as session:
        workflow = session.get(Workflow, workflow_id)
        user = session.get(User, workflow.sys_created_by)
        run = executor.start_run(session, user, workflow, service.draft_version(session, workflow))
        session.commit()
        return run.id


def run_once(workflow_id: str) -> str:
    """Start one run of the workflow's draft and wait until it comes to rest; returns its final status."""
    return finished(start(workflow_id))


def finished(run_id: str) -> str:
    """The status of `run_id` once it came to rest on the run threads."""
    run_queue.wait_for_rest(run_id, 600)
    with session_scope() as session:
        return session.get(WorkflowRun, run_id).status


def steps_of_all_runs() -> int:
    with session_scope() as session:
        return len(session.exec(select(RunStepLog.id)).all())


def bench_chain() -> float:
    workflow_id = make_workflow("bench-chain", chain(CHAIN_NODES))
    started = time.perf_counter()
    status = run_once(workflow_id)
    elapsed = time.perf_counter() - started
    assert status == "completed", status
    per_node = elapsed / CHAIN_NODES * 1000
    print(f"engine: {CHAIN_NODES}-node chain: {elapsed:.2f} s, {per_node:.2f} ms/node (target < 2 ms)")
    return per_node


def bench_short_runs(threads: int) -> float:
    workflow_id = make_workflow(f"bench-short-{threads}", chain(SHORT_NODES - 1))
    started = time.perf_counter()
    if threads <= 1:
        statuses = [run_once(workflow_id) for _ in range(SHORT_RUNS)]
    else:
        # 200 runs started at once as requests start them (each handed to the run threads of
        # POWERON_RUN_THREADS as its start commits), then waited for; the time counts from the first start.
        run_ids = [start(workflow_id) for _ in range(SHORT_RUNS)]
        created = time.perf_counter() - started
        statuses = [finished(run_id) for run_id in run_ids]
        executed = time.perf_counter() - started - created
        print(f"engine: ({SHORT_RUNS} runs created in {created:.2f} s while the first executed, all done "
              f"{executed:.2f} s later)")
    elapsed = time.perf_counter() - started
    assert statuses == ["completed"] * SHORT_RUNS, {s: statuses.count(s) for s in set(statuses)}
    rate = SHORT_RUNS / elapsed
    how = "sequential" if threads <= 1 else f"{SHORT_RUNS} started at once, run threads: {threads}"
    print(f"engine: {SHORT_RUNS} runs of a {SHORT_NODES}-node chain ({how}): {elapsed:.2f} s, "
          f"{rate:.0f} runs/s (target >= 100)")
    return rate


def warm_up() -> None:
    """One tiny run first, so one-time costs (importing the action library) are not counted."""
    assert run_once(make_workflow("bench-warm-up", chain(2))) == "completed"


def main() -> None:
    prepare()
    warm_up()
    if "--profile" in sys.argv:
        import cProfile
        import pstats

        profiler = cProfile.Profile()
        profiler.enable()
        bench_chain()
        profiler.disable()
        pstats.Stats(profiler).sort_stats("tottime").print_stats(25)
        return
    bench_chain()
    bench_short_runs(1)
    bench_short_runs(THREADS)
    print(f"engine: {steps_of_all_runs()} step rows persisted")


if __name__ == "__main__":
    main()
