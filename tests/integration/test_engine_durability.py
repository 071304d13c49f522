"""Durability of the run engine (issue 5, items 7 and 9): kill-and-restart and retry-from-failed.

A subprocess configured through the environment (POWERON_DB_URL of the test's database:
a SQLite file in tmp or a database on the private PostgreSQL server)
starts runs and is killed with SIGKILL at a named crash point (POWERON_ENGINE_CRASH_AT, see
backend/engine/crashpoints.py); this process then calls ``recover_runs()`` as a restarted
application does, and checks that the run completed without running a completed step again.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Any

import pytest

from backend.config import get_settings
from backend.engine import queue as run_queue
from backend.engine.recovery import recover_runs
from tests.integration.test_engine import LOOP, START, approval_graph, edge, ran, transform

PROJECT_ROOT = Path(__file__).resolve().parents[2]

# Starts one run per (workflowId, input) argument pair, in order, as the admin; prints each
# run id as soon as the run exists, commits it (which hands it to the run queue), then waits for it
# to come to rest. The crash point, if set, kills the process.
START_RUNS = """
import json, sys
from sqlmodel import select
from backend.db import session_scope
from backend.db.models import User, Workflow
from backend.engine import executor, queue
from backend.workflows import service

for workflow_id, data in zip(sys.argv[1::2], sys.argv[2::2]):
    with session_scope() as session:
        workflow = session.get(Workflow, workflow_id)
        admin = session.exec(select(User).where(User.username == "admin")).one()
        run = executor.start_run(session, admin, workflow, service.draft_version(session, workflow), json.loads(data))
        print(run.id, flush=True)  # before the commit hands it to a run thread, which may reach the crash point first
        session.commit()
    queue.wait_for_rest(run.id, 120)  # it executes on a run thread (SQLite) or the queue's worker (PostgreSQL)
"""

# start -> a -> b -> each(loop over input.rows: double) -> after
CHAIN_AND_LOOP = {
    "nodes": [START,
              transform("a", "a{{ n }}"),
              transform("b", "{{ result }}b", data="{{ nodes.a.output }}"),
              *[node for node in LOOP["nodes"] if node["id"] != "start"]],
    "edges": [edge("start", "a"), edge("a", "b"), edge("b", "each"),
              *[e for e in LOOP["edges"] if e["source"] != "start"]],
}
CHAIN_INPUT = {"n": 1, "rows": [1, 2, 3]}


def create(api, graph: dict[str, Any]) -> str:
    created = api.client.post(f"{api.base()}/workflows", json={"name": f"wf-{uuid.uuid4().hex}", "graph": graph},
                              headers=api.auth)
    assert created.status_code == 201, created.text
    return created.json()["id"]


def run_in_subprocess(runs: list[tuple[str, Any]], crash_at: str | None) -> tuple[int, list[str]]:
    """Start `runs` in a fresh interpreter on the test database; (returncode, run ids printed)."""
    env = dict(os.environ)
    # The test's database, SQLite file or PostgreSQL database alike (app_config set it up).
    env["POWERON_DB_URL"] = get_settings().db_url
    env.pop("POWERON_ENGINE_CRASH_AT", None)
    if crash_at:
        env["POWERON_ENGINE_CRASH_AT"] = crash_at
    args = [str(a) for workflow_id, data in runs for a in (workflow_id, json.dumps(data))]
    done = subprocess.run([sys.executable, "-c", START_RUNS, *args], cwd=PROJECT_ROOT, env=env,
                          capture_output=True, text=True, timeout=120)
    return done.returncode, done.stdout.split()


def get_run(api, run_id: str, wait: bool = True) -> dict[str, Any]:
    """The run as stored; with `wait`, once it came to rest (a woken or resumed run executes on a run
    thread or a worker). A run whose process was killed stays `running` until recovered: read it
    with `wait=False`, or the read would wait out the whole timeout."""
    if wait:
        run_queue.wait_for_rest(run_id, 30)
    response = api.client.get(f"{api.base()}/runs/{run_id}", headers=api.auth)
    assert response.status_code == 200, response.text
    return response.json()


def completed_steps(run: dict[str, Any]) -> dict[str, int]:
    counts: dict[str, int] = {}
    for step in run["steps"]:
        if step["status"] == "completed":
            counts[step["nodeId"]] = counts.get(step["nodeId"], 0) + 1
    return counts


def assert_chain_and_loop_done(run: dict[str, Any]) -> None:
    assert run["status"] == "completed", run
    assert run["output"] == {"after": {"result": "2,4,6", "missing": []}}
    assert completed_steps(run) == {"start": 1, "a": 1, "b": 1, "each": 1, "double": 3, "after": 1}, ran(run)
    outputs = {s["nodeId"]: s["output"] for s in run["steps"] if s["status"] == "completed"}
    assert outputs["a"]["result"] == "a1" and outputs["b"]["result"] == "a1b"
    doubles = [s["output"]["result"] for s in run["steps"] if s["nodeId"] == "double"]
    assert doubles == ["2", "4", "6"]


def test_without_a_crash_point_the_subprocess_completes_the_run(api):
    code, run_ids = run_in_subprocess([(create(api, CHAIN_AND_LOOP), CHAIN_INPUT)], None)
    assert code == 0
    assert_chain_and_loop_done(get_run(api, run_ids[0]))
    assert recover_runs() == []


@pytest.mark.parametrize("crash_at", ["node_started:b", "before_step_commit:b", "after_step_commit:b",
                                      "after_step_commit:double", "before_step_commit:each",
                                      "after_step_commit:after"])
def test_a_run_killed_mid_way_resumes_from_its_persisted_frontier(api, crash_at):
    code, run_ids = run_in_subprocess([(create(api, CHAIN_AND_LOOP), CHAIN_INPUT)], crash_at)
    assert code == -signal.SIGKILL
    (run_id,) = run_ids
    before = get_run(api, run_id, wait=False)
    assert before["status"] == "running"
    done_before = {s["id"] for s in before["steps"] if s["status"] == "completed"}
    point, node_id = crash_at.split(":")
    if point == "after_step_commit":
        assert node_id in {s["nodeId"] for s in before["steps"] if s["status"] == "completed"}
    else:
        assert node_id not in {s["nodeId"] for s in before["steps"]}

    assert recover_runs() == [run_id]

    after = get_run(api, run_id)
    assert_chain_and_loop_done(after)
    # The steps committed before the crash are still the ones of record: none ran again.
    assert done_before <= {s["id"] for s in after["steps"] if s["status"] == "completed"}
    assert recover_runs() == []


def test_a_paused_run_survives_a_crash_untouched_and_completes_afterwards(api):
    me = api.client.get("/api/me", headers=api.auth).json()["id"]
    approval = create(api, approval_graph({"user": me}))
    chain = create(api, CHAIN_AND_LOOP)
    code, (paused_id, crashed_id) = run_in_subprocess([(approval, {"amount": 7}), (chain, CHAIN_INPUT)],
                                                      "after_step_commit:a")
    assert code == -signal.SIGKILL
    paused = get_run(api, paused_id)
    assert paused["status"] == "paused" and paused["pauseReason"] == "humanTask", paused

    assert recover_runs() == [crashed_id]

    assert_chain_and_loop_done(get_run(api, crashed_id))
    untouched = get_run(api, paused_id)
    assert untouched["status"] == "paused" and untouched["steps"] == paused["steps"]
    tasks = api.client.get("/api/tasks", params={"status": "pending"}, headers=api.auth).json()
    task = next(t for t in tasks if t["runId"] == paused_id)
    done = api.client.post(f"/api/tasks/{task['id']}/complete", json={"data": {"approved": True, "comment": "ok"}},
                           headers=api.auth)
    assert done.status_code == 200, done.text
    final = get_run(api, paused_id)
    assert final["status"] == "completed", final
    assert ran(final) == ["start", "ok", "yes"]


FLAKY_AI = {
    "nodes": [START,
              transform("a", "topic {{ n }}"),
              {"id": "p", "type": "ai.prompt", "parameters": {"prompt": "{{ nodes.a.output.result }}"}},
              transform("z", "said: {{ text }}", data="{{ nodes.p.output }}")],
    "edges": [edge("start", "a"), edge("a", "p"), edge("p", "z")],
}


def test_retry_from_the_failed_node_reuses_completed_outputs(api, ai_server):
    ai_server.fail(500, times=50)
    created = api.client.post(f"{api.base()}/workflows/{create(api, FLAKY_AI)}/runs", json={"input": {"n": 3}},
                              headers=api.auth)
    assert created.status_code == 201, created.text
    failed = created.json()
    assert failed["status"] == "failed", failed
    assert ran(failed)[:2] == ["start", "a"] and ran(failed)[-1] == "p"

    ai_server.clear()
    ai_server.reply("fine")
    retried = api.client.post(f"{api.base()}/runs/{failed['id']}/retry", headers=api.auth)
    assert retried.status_code == 201, retried.text
    run = retried.json()
    assert run["id"] != failed["id"] and run["status"] == "completed", run
    assert ran(run) == ["p", "z"]  # start and a were not executed again
    assert ai_server.last_chat.user_text == "topic 3"  # p saw a's reused output
    assert run["output"] == {"z": {"result": "said: fine", "missing": []}}
    assert get_run(api, failed["id"])["status"] == "failed"

    again = api.client.post(f"{api.base()}/runs/{run['id']}/retry", headers=api.auth)
    assert again.status_code == 409, again.text
    missing = api.client.post(f"{api.base()}/runs/no-such-run/retry", headers=api.auth)
    assert missing.status_code == 404


def test_a_retry_interrupted_by_a_crash_goes_on_with_the_next_attempt(api, ai_server):
    ai_server.fail(500, times=50)
    graph = {**FLAKY_AI, "nodes": [node if node["id"] != "p" else
                                   {**node, "retry": {"maxAttempts": 3, "delaySeconds": 0.1}}
                                   for node in FLAKY_AI["nodes"]]}
    code, (run_id,) = run_in_subprocess([(create(api, graph), {"n": 4})], "retry_wait:p")
    assert code == -signal.SIGKILL
    before = get_run(api, run_id, wait=False)
    assert [(s["nodeId"], s["attempt"], s["status"]) for s in before["steps"] if s["nodeId"] == "p"] == [
        ("p", 1, "failed")]

    ai_server.clear()
    ai_server.reply("recovered")
    assert recover_runs() == [run_id]

    after = get_run(api, run_id)
    assert after["status"] == "completed", after
    assert [(s["attempt"], s["status"]) for s in after["steps"] if s["nodeId"] == "p"] == [
        (1, "failed"), (2, "completed")]
    assert after["output"] == {"z": {"result": "said: recovered", "missing": []}}
