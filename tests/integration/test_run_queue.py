"""The shared run queue on PostgreSQL (backend/engine/queue.py): what an API process and a worker see.

An API process (POWERON_ROLE=api) only accepts and enqueues; these tests play it in the test process
and start the queue's consumer (what a worker or a process of role `all` runs) when they want runs
executed. The many-process tests (2 API + 2 worker processes, SIGKILL) are in test_scale_out.py.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections import Counter
from typing import Any

import pytest
from sqlalchemy import text
from sqlmodel import select

from backend.config import get_settings, reset_settings_cache
from backend.db import session_scope
from backend.db.models import RunStepLog, User, Workflow, WorkflowRun
from backend.engine import executor
from backend.engine import queue as run_queue
from backend.workflows import service
from tests.conftest import PROJECT_ROOT
from tests.integration.test_engine import START, edge, transform
from tests.integration.test_engine_concurrency import sleeper
from tests.integration.test_webhooks import hook
from tests.integration.trigger_support import create_published, echo_graph, new_secret, sign

pytestmark = pytest.mark.parametrize("db_url", ["postgresql"], indirect=True)

CHAIN = {"nodes": [START, transform("a", "a {{ n }}"), transform("b", "b")],
         "edges": [edge("start", "a"), edge("a", "b")]}
SLOW = {"nodes": [START, sleeper("s1", 1.0), sleeper("s2", 1.0), sleeper("s3", 1.0), transform("end", "end")],
        "edges": [edge("start", "s1"), edge("s1", "s2"), edge("s2", "s3"), edge("s3", "end")]}


@pytest.fixture
def api_role(monkeypatch):
    """This process plays an API process: it enqueues and executes nothing until a test starts the consumer."""
    monkeypatch.setenv("POWERON_ROLE", "api")
    monkeypatch.setenv("POWERON_RUN_WAIT_SECONDS", "0.2")
    reset_settings_cache()
    yield
    run_queue.stop_queue()


def jobs(run_id: str | None = None) -> list[dict[str, Any]]:
    with session_scope() as session:
        rows = session.execute(text("SELECT lock, status, args FROM procrastinate_jobs"
                                    + (" WHERE lock = :run" if run_id else "")),
                               {"run": run_id} if run_id else {}).mappings().all()
    return [dict(row) for row in rows]


def run_status(run_id: str) -> str:
    with session_scope() as session:
        return session.execute(text("SELECT status FROM workflow_run WHERE id = :id"), {"id": run_id}).scalar_one()


def wait_until(condition, timeout: float = 60.0, what: str = "condition") -> Any:
    deadline = time.monotonic() + timeout
    while True:
        value = condition()
        if value:
            return value
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.05)


def start_draft_run(api, graph: dict[str, Any], data: Any = None) -> dict[str, Any]:
    created = api.client.post(f"{api.base()}/workflows", json={"name": "queued", "graph": graph}, headers=api.auth)
    assert created.status_code == 201, created.text
    response = api.client.post(f"{api.base()}/workflows/{created.json()['id']}/runs", json={"input": data},
                               headers=api.auth)
    assert response.status_code == 201, response.text
    return response.json()


def completed_steps(run_id: str) -> Counter:
    with session_scope() as session:
        steps = session.exec(select(RunStepLog).where(RunStepLog.run_id == run_id)).all()
    return Counter(step.node_id for step in steps if step.status == "completed")


def test_an_api_process_only_enqueues_and_any_consumer_executes(api, api_role):
    run = start_draft_run(api, CHAIN, {"n": 1})
    assert run["status"] == "running"  # nobody executes in an API process
    assert [(j["lock"], j["status"], j["args"]) for j in jobs(run["id"])] == [
        (run["id"], "todo", {"run_id": run["id"]})]
    assert run_queue.waiting() >= 1

    run_queue.start_consumer()
    run_queue.wait_for_rest(run["id"], 60)
    final = api.client.get(f"{api.base()}/runs/{run['id']}", headers=api.auth).json()
    assert final["status"] == "completed", final
    assert final["output"]["b"]["result"] == "b"
    assert completed_steps(run["id"]) == Counter({"start": 1, "a": 1, "b": 1})
    wait_until(lambda: jobs(run["id"]) == [], what="the finished job to be removed")


def test_a_run_rolled_back_leaves_no_job_and_a_committed_one_has_exactly_one(api, api_role):
    workflow_id = api.client.post(f"{api.base()}/workflows", json={"name": "tx", "graph": CHAIN},
                                  headers=api.auth).json()["id"]
    with session_scope() as session:
        workflow = session.get(Workflow, workflow_id)
        admin = session.exec(select(User).where(User.username == "admin")).one()
        version = service.draft_version(session, workflow)
        gone = executor.start_run(session, admin, workflow, version, {"n": 1}).id
        session.rollback()
    assert jobs(gone) == []
    with session_scope() as session:
        workflow = session.get(Workflow, workflow_id)
        admin = session.exec(select(User).where(User.username == "admin")).one()
        kept = executor.start_run(session, admin, workflow, service.draft_version(session, workflow), {"n": 2})
        run_queue.enqueue(session, kept.id)  # a second hand-on of a waiting run is absorbed
        kept_id = kept.id
    assert [j["status"] for j in jobs(kept_id)] == ["todo"]


def test_back_pressure_counts_the_shared_queue_and_everything_accepted_runs(api, api_role, monkeypatch):
    monkeypatch.setenv("POWERON_MAX_QUEUED_RUNS", "3")
    reset_settings_cache()
    secret = new_secret()
    trigger = {"id": "start", "type": "trigger.webhook",
               "parameters": {"path": "orders/new", "method": "POST", "secret": secret}}
    workflow_id = create_published(api, echo_graph(trigger))
    accepted: list[str] = []

    def call(n: int):
        body = json.dumps({"n": n}).encode()
        return hook(api, workflow_id, body, sign(secret, body))

    refused = None
    for n in range(40):  # the count is read at most every half second: a few more may pass
        response = call(n)
        if response.status_code == 429:
            refused = response
            break
        assert response.status_code == 202, response.text
        accepted.append(response.json()["runId"])
        if len(accepted) >= 3:
            time.sleep(0.05)  # let the half-second count catch up
    assert refused is not None, "never refused"
    assert "POWERON_MAX_QUEUED_RUNS" in refused.json()["detail"] and int(refused.headers["retry-after"]) >= 1
    assert len(jobs()) == len(accepted) >= 3

    run_queue.start_consumer()
    for run_id in accepted:
        run_queue.wait_for_rest(run_id, 60)
        assert run_status(run_id) == "completed"
    wait_until(lambda: run_queue.waiting() == 0 and call(99).status_code == 202, what="room in the queue again")


def test_a_worker_stopped_gracefully_hands_its_run_back_and_another_finishes_it(api, api_role):
    run = start_draft_run(api, SLOW)
    env = {**os.environ, "POWERON_DB_URL": get_settings().db_url, "POWERON_DATA_DIR": str(get_settings().data_dir),
           "POWERON_ROLE": "worker", "POWERON_WORKER_HEARTBEAT_SECONDS": "1"}
    worker = subprocess.Popen([sys.executable, "-m", "backend.worker"], cwd=PROJECT_ROOT, env=env,
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        wait_until(lambda: completed_steps(run["id"])["s1"] == 1, what="the worker to finish the first slow step")
        worker.send_signal(signal.SIGTERM)
        output, _ = worker.communicate(timeout=60)
        assert worker.returncode == 0, output
    finally:
        if worker.poll() is None:
            worker.kill()
            worker.wait(10)
    assert "go back to the queue" in output
    assert run_status(run["id"]) == "running"
    handed_back = completed_steps(run["id"])
    assert handed_back["s1"] == 1 and handed_back["end"] == 0
    assert [j["status"] for j in jobs(run["id"])] == ["todo"]

    run_queue.start_consumer()
    run_queue.wait_for_rest(run["id"], 60)
    assert run_status(run["id"]) == "completed"
    assert completed_steps(run["id"]) == Counter({"start": 1, "s1": 1, "s2": 1, "s3": 1, "end": 1})


def test_a_running_run_without_a_job_is_queued_again(api, api_role):
    run = start_draft_run(api, CHAIN, {"n": 3})
    with session_scope() as session:
        session.execute(text("DELETE FROM procrastinate_jobs WHERE lock = :run"), {"run": run["id"]})
    assert run_queue.requeue_orphans() == [run["id"]]
    assert run_queue.requeue_orphans() == []  # queued now
    run_queue.start_consumer()
    run_queue.wait_for_rest(run["id"], 60)
    assert run_status(run["id"]) == "completed"


def test_an_execution_taken_over_elsewhere_writes_no_further_step(api, api_role):
    """A worker taken for dead while it still runs (a long pause) is fenced out: once another execution
    of the run started, the first one's next step is refused and nothing of it is written."""
    run = start_draft_run(api, CHAIN, {"n": 4})
    with session_scope() as stale_session, session_scope() as session:
        stale = executor.RunEngine(stale_session, stale_session.get(WorkflowRun, run["id"]))
        stale.claim()  # the first execution starts ...
        taken_over = executor.RunEngine(session, session.get(WorkflowRun, run["id"])).execute()  # ... another one
        assert taken_over.status == "completed"
        node_id = stale.frontier.get_ready()[0]
        stale.frontier.take(node_id)
        stale.apply(node_id, stale.attempt_node(stale_session, node_id))
        with pytest.raises(executor.Superseded):
            stale.persist()
        stale_session.rollback()
    assert run_status(run["id"]) == "completed"
    assert completed_steps(run["id"]) == Counter({"start": 1, "a": 1, "b": 1})
