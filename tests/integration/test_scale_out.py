"""Scale-out (issue 18) with real processes on PostgreSQL: two API processes and two workers.

The cluster (tests/scale_cluster.py) is started once for this module on its own empty database:
``POWERON_ROLE=api python -m backend.runtime`` twice (each on its own port) and
``python -m backend.worker`` twice, all at once, as README "Scaling out" tells a user to (the
processes migrate and bootstrap the database together). Every test first makes sure two workers
are alive (a test that stops or kills one gets its replacement through this check). Workers beat
every second and are taken for dead after 3 s.

What a user notices is asserted: every call answered 202 with its own run, every run `completed`,
every node of a run completed exactly once (its RunStepLog rows), a worker's SIGKILL or SIGTERM
losing nothing, a task completed through one API process finishing its run on a worker (none
executes in an API process), back-pressure counting the runs every process queued, a schedule
firing once per fire time. Waits are polls
with a timeout; on a failure the end of every process's log is shown.

PostgreSQL only (the shared queue needs it): marked ``postgres``; it does not use ``db_url``, so
the SQLite parametrisation does not apply.
"""

from __future__ import annotations

import json
import threading
import time
import uuid
from collections import Counter
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.integration.trigger_support import new_secret, sign
from tests.scale_cluster import Api, Cluster, Process, chain_graph, create_workflow, transform, wait_until

# One cluster for the module: under pytest-xdist the tests stay together with `--dist loadgroup`.
pytestmark = [pytest.mark.postgres, pytest.mark.xdist_group("scale_out")]

CLUSTER_ENV = {
    "POWERON_WORKER_HEARTBEAT_SECONDS": "1",
    "POWERON_WORKER_TIMEOUT_SECONDS": "3",
    "POWERON_TIMER_INTERVAL_SECONDS": "0.2",
    "POWERON_SCHEDULER_LEASE_SECONDS": "2",
    "POWERON_SCHEDULER_STARTUP_DELAY_SECONDS": "0",
    "POWERON_SCHEDULER_MISFIRE_GRACE_SECONDS": "30",
    "POWERON_RUN_WAIT_SECONDS": "2",  # how long a request starting or resuming a run waits for its rest
    "POWERON_READURL_ALLOW_PRIVATE": "1",  # core.readUrl may call the test's server on 127.0.0.1
}
FINISHED = ("completed", "failed", "cancelled")
BURST = 500
SENDERS = 8


@pytest.fixture(scope="module")
def cluster(postgres_server, tmp_path_factory) -> Iterator[Cluster]:
    """2 API processes and 2 workers, started at once on an empty database (they migrate and
    bootstrap it together, as a first deployment does); stopped after the module."""
    name = f"scale_{uuid.uuid4().hex[:12]}"
    postgres_server.execute(f'CREATE DATABASE "{name}"')
    root: Path = tmp_path_factory.mktemp("scale-cluster")
    try:
        with Cluster(postgres_server.url(name), root, env=CLUSTER_ENV) as started:
            started.start(apis=2, workers=2)
            yield started
    finally:
        postgres_server.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@pytest.fixture
def apis(cluster: Cluster) -> tuple[Process, Process]:
    """The two API processes (alive); two live workers are made sure of first."""
    live = [p for p in cluster.processes if p.role == "worker" and p.running]
    if len(live) < 2:
        cluster.start_workers(2 - len(live))
    first, second = [p for p in cluster.processes if p.role == "api"][:2]  # the cluster's own two
    cluster.assert_running(first)
    cluster.assert_running(second)
    return first, second


def workers(cluster: Cluster) -> list[Process]:
    return [p for p in cluster.processes if p.role == "worker" and p.running]


# --- reading the database -------------------------------------------------------------------------


def runs_of(cluster: Cluster, workflow_id: str) -> dict[str, str]:
    """{run id: status} of every run of the workflow."""
    return dict(cluster.query("SELECT id, status FROM workflow_run WHERE workflow_id = %(w)s", w=workflow_id))


def all_finished(cluster: Cluster, workflow_id: str, count: int) -> dict[str, str] | None:
    runs = runs_of(cluster, workflow_id)
    return runs if len(runs) >= count and all(s in FINISHED for s in runs.values()) else None


def completed_steps(cluster: Cluster, workflow_id: str) -> Counter:
    """Counter of (run id, node id) over the completed RunStepLog rows of the workflow's runs."""
    rows = cluster.query("SELECT s.run_id, s.node_id FROM run_step_log s JOIN workflow_run r ON r.id = s.run_id "
                         "WHERE r.workflow_id = %(w)s AND s.status = 'completed'", w=workflow_id)
    return Counter((run_id, node_id) for run_id, node_id in rows)


def assert_each_node_completed_once(cluster: Cluster, workflow_id: str, run_ids: set[str],
                                    node_ids: list[str]) -> None:
    steps = completed_steps(cluster, workflow_id)
    twice = {key: n for key, n in steps.items() if n > 1}
    assert twice == {}, f"steps completed more than once: {list(twice.items())[:10]}"
    missing = [(run, node) for run in run_ids for node in node_ids if steps[(run, node)] != 1]
    assert missing == [], f"{len(missing)} steps not completed, e.g. {missing[:10]}"


# --- webhooks -------------------------------------------------------------------------------------


def webhook_trigger(secret: str) -> dict[str, Any]:
    return {"type": "trigger.webhook", "parameters": {"path": "orders", "method": "POST", "secret": secret}}


def send_webhooks(ports: list[Process], workflow_id: str, secret: str, count: int) -> list[httpx.Response]:
    """`count` signed calls, each with its own webhook-id, call i to API process i % len(ports)."""
    clients = [httpx.Client(base_url=p.url, timeout=60) for p in ports]

    def call(n: int) -> httpx.Response:
        body = json.dumps({"order": n}).encode()
        return clients[n % len(clients)].post(f"/api/hooks/{workflow_id}/orders", content=body,
                                              headers=sign(secret, body))

    try:
        with ThreadPoolExecutor(SENDERS) as pool:
            return list(pool.map(call, range(count)))
    finally:
        for client in clients:
            client.close()


def accepted_run_ids(responses: list[httpx.Response]) -> list[str]:
    answers = Counter(r.status_code for r in responses)
    assert answers == {202: len(responses)}, f"answers {dict(answers)}: {responses[0].text[:300]}"
    return [r.json()["runId"] for r in responses]


def test_500_webhook_runs_across_two_api_processes_each_complete_exactly_once(cluster, apis):
    secret = new_secret()
    workflow_id = create_workflow(cluster.api(apis[0]), chain_graph(webhook_trigger(secret),
                                                                   [transform("a", 1), transform("b", 2)]))
    run_ids = accepted_run_ids(send_webhooks(list(apis), workflow_id, secret, BURST))
    assert len(set(run_ids)) == BURST  # one run per call, none answered with another call's run
    runs = wait_until(lambda: all_finished(cluster, workflow_id, BURST), 150, f"{BURST} runs to finish",
                      interval=0.25, details=cluster.tails)
    assert set(runs) == set(run_ids)  # no run started twice for one call, none without a call
    assert Counter(runs.values()) == {"completed": BURST}
    assert_each_node_completed_once(cluster, workflow_id, set(run_ids), ["start", "a", "b"])


# --- a worker killed mid-burst --------------------------------------------------------------------


def sleeper(node_id: str, seconds: float) -> dict[str, Any]:
    """A script.python node that takes `seconds` (in its sandbox): a step a kill can interrupt."""
    return {"id": node_id, "type": "script.python",
            "parameters": {"code": f"import time\ntime.sleep({seconds})\noutput = '{node_id} done'"}}


def busy_workers(cluster: Cluster) -> int:
    """Workers holding a job right now (procrastinate_jobs in status 'doing')."""
    return int(cluster.query("SELECT count(DISTINCT worker_id) FROM procrastinate_jobs "
                             "WHERE status = 'doing'")[0][0])


def test_a_worker_killed_mid_burst_loses_no_run_and_repeats_no_completed_step(cluster, apis):
    secret = new_secret()
    nodes = [sleeper("s1", 0.3), transform("t1", 1), sleeper("s2", 0.3), transform("t2", 2)]
    workflow_id = create_workflow(cluster.api(apis[0]), chain_graph(webhook_trigger(secret), nodes))
    count = 40
    run_ids = accepted_run_ids(send_webhooks(list(apis), workflow_id, secret, count))
    wait_until(lambda: busy_workers(cluster) >= 2, 60, "both workers to be executing runs",
               details=cluster.tails)
    victim, survivor = workers(cluster)[:2]
    victim.kill()
    assert len(completed_steps(cluster, workflow_id)) < count * 5, "the burst was over before the kill"
    runs = wait_until(lambda: all_finished(cluster, workflow_id, count), 120,
                      "every run to finish on the surviving worker", interval=0.25, details=cluster.tails)
    cluster.assert_running(survivor)
    assert Counter(runs.values()) == {"completed": count}, runs
    assert set(runs) == set(run_ids)
    assert_each_node_completed_once(cluster, workflow_id, set(run_ids), ["start", "s1", "t1", "s2", "t2"])


class SlowService:
    """An HTTP service on 127.0.0.1 that answers GET /call/<node>?run=<id> after `delay` seconds and
    counts the calls per (run, node): what a workflow's external side effects (an order placed, a
    mail sent) see. Each further call to a node waits `stagger` seconds longer, so runs executing
    side by side reach their next step at different moments."""

    def __init__(self, delay: float, stagger: float = 0.5):
        self.delay = delay
        self.stagger = stagger
        self.calls: Counter = Counter()
        self.lock = threading.Lock()
        service = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:  # noqa: N802 - http.server's name
                path, _, query = self.path.partition("?run=")
                node = path.rpartition("/")[2]
                with service.lock:
                    earlier = sum(1 for (_run, called) in service.calls if called == node)
                    service.calls[(query, node)] += 1
                time.sleep(service.delay + service.stagger * earlier)
                body = f"called {path} for {query}".encode()
                self.send_response(200)
                self.send_header("Content-Type", "text/plain")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *_args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def node(self, node_id: str) -> dict[str, Any]:
        """A core.readUrl node calling this service once for its run."""
        url = f"http://127.0.0.1:{self.server.server_address[1]}/call/{node_id}?run={{{{ run.id }}}}"
        return {"id": node_id, "type": "core.readUrl", "parameters": {"url": url}}

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def queue_idle(cluster: Cluster, run_ids: set[str]) -> bool:
    """No job of these runs waits or executes anywhere (procrastinate deletes a job once it succeeded)."""
    rows = cluster.query("SELECT args->>'run_id' FROM procrastinate_jobs WHERE status IN ('todo', 'doing')")
    return not run_ids & {row[0] for row in rows}


def test_a_worker_stopped_with_sigterm_hands_its_runs_back_after_the_step_and_nothing_runs_twice(cluster, apis):
    """A graceful stop (a deploy) while each run is in the first of three calls that each outlast
    POWERON_WORKER_TIMEOUT_SECONDS: the stopping worker finishes that step and hands its runs back,
    each as its call returns (they return one after another), so it stops well before it could
    have made the other two calls; no other worker takes a run over while it still executes there,
    so every call is made once per run and no step completes twice."""
    delay = float(CLUSTER_ENV["POWERON_WORKER_TIMEOUT_SECONDS"]) + 2
    service = SlowService(delay)
    try:
        secret = new_secret()
        calls = ["order", "confirm", "notify"]
        workflow_id = create_workflow(cluster.api(apis[1]), chain_graph(webhook_trigger(secret),
                                                                       [service.node(c) for c in calls]))
        count = 4
        run_ids = set(accepted_run_ids(send_webhooks(list(apis), workflow_id, secret, count)))
        wait_until(lambda: busy_workers(cluster) >= 2 and len(service.calls) >= 2, 60,
                   "both workers to be calling the service", details=cluster.tails)
        leaving, staying = workers(cluster)[:2]
        began = time.monotonic()
        assert leaving.stop() == 0, f"{leaving.name} did not stop gracefully:\n{leaving.tail()}"
        stopped_after = time.monotonic() - began
        assert stopped_after < 2 * delay, f"{leaving.name} took {stopped_after:.1f} s: it did not hand its runs " \
                                          f"back after the step it was in\n{leaving.tail()}"
        runs = wait_until(lambda: all_finished(cluster, workflow_id, count), 120,
                          "every run to finish on the remaining worker", interval=0.25, details=cluster.tails)
        wait_until(lambda: queue_idle(cluster, run_ids), 60, "no job of these runs left in the queue",
                   details=cluster.tails)
        cluster.assert_running(staying)
        assert Counter(runs.values()) == {"completed": count}, runs
        assert service.calls == Counter({(run, c): 1 for run in run_ids for c in calls}), service.calls
        assert_each_node_completed_once(cluster, workflow_id, run_ids, ["start", *calls])
    finally:
        service.close()


# --- back-pressure counts the shared queue ----------------------------------------------------------


def test_back_pressure_counts_the_runs_every_api_process_queued(cluster, apis):
    secret = new_secret()
    workflow_id = create_workflow(cluster.api(apis[0]), chain_graph(webhook_trigger(secret), [transform("t", 1)]))
    for worker in workers(cluster):  # nothing executes: runs wait in the queue
        assert worker.stop() == 0, f"{worker.name} did not stop gracefully:\n{worker.tail()}"
    queued = accepted_run_ids(send_webhooks(list(apis), workflow_id, secret, 4))
    strict = cluster.spawn_api(env={"POWERON_MAX_QUEUED_RUNS": "4"})
    try:
        cluster.wait_api(strict)
        refused = send_webhooks([strict], workflow_id, secret, 1)[0]
        assert refused.status_code == 429, refused.text  # the 4 runs the other processes queued count
        assert "4 runs are waiting" in refused.json()["detail"] and refused.headers["retry-after"]
    finally:
        assert strict.stop() == 0, strict.tail()
    cluster.start_workers(1)
    runs = wait_until(lambda: all_finished(cluster, workflow_id, len(queued)), 60, "the queued runs to finish",
                      interval=0.2, details=cluster.tails)
    assert set(runs) == set(queued) and Counter(runs.values()) == {"completed": len(queued)}


# --- a paused run resumed through one API process -------------------------------------------------


def read_run(api: Api, run_id: str) -> dict[str, Any]:
    response = api.client.get(f"{api.base()}/runs/{run_id}", headers=api.auth)
    assert response.status_code == 200, response.text
    return response.json()


def queued_jobs(cluster: Cluster, run_id: str) -> list[str]:
    """Statuses of the run's jobs in the shared queue (procrastinate deletes a job once it succeeded)."""
    return [row[0] for row in cluster.query("SELECT status FROM procrastinate_jobs WHERE args->>'run_id' = %(r)s",
                                            r=run_id)]


def test_a_task_completed_through_api_process_a_resumes_its_run_on_a_worker(cluster, apis):
    first, second = (cluster.api(p) for p in apis)
    me = first.client.get("/api/me", headers=first.auth).json()["id"]
    graph = {"nodes": [{"id": "start", "type": "trigger.manual", "parameters": {}},
                       {"id": "ask", "type": "input.approval",
                        "parameters": {"title": "Approve the order", "assignee": {"user": me}}},
                       transform("done", 1)],
             "edges": [{"source": "start", "target": "ask"},
                       {"source": "ask", "target": "done", "sourceHandle": "approved"}]}
    workflow_id = create_workflow(first, graph)
    started = second.client.post(f"{second.base()}/workflows/{workflow_id}/runs", json={"input": {}},
                                 headers=second.auth)
    assert started.status_code == 201, started.text
    run_id = started.json()["id"]
    wait_until(lambda: read_run(second, run_id)["status"] == "paused", 60, "the run to pause at its task",
               details=cluster.tails)
    # No worker while the task is completed: the API process only enqueues (SIGTERM: a graceful stop).
    for worker in workers(cluster):
        assert worker.stop() == 0, f"{worker.name} did not stop gracefully:\n{worker.tail()}"
    tasks = first.client.get("/api/tasks", params={"status": "pending"}, headers=first.auth).json()
    task = next(t for t in tasks if t["runId"] == run_id)
    done = first.client.post(f"/api/tasks/{task['id']}/complete", json={"data": {"approved": True}},
                             headers=first.auth)
    assert done.status_code == 200, done.text
    assert read_run(first, run_id)["status"] == "running"
    assert queued_jobs(cluster, run_id) == ["todo"]
    cluster.start_workers(1)
    run = wait_until(lambda: (r := read_run(first, run_id))["status"] in FINISHED and r, 60,
                     "the resumed run to finish on the new worker", details=cluster.tails)
    assert run["status"] == "completed", run
    assert run["output"]["done"]["result"] == "1"
    assert_each_node_completed_once(cluster, workflow_id, {run_id}, ["start", "ask", "done"])


# --- a schedule with two API processes ------------------------------------------------------------


def test_a_schedule_fires_once_per_fire_time_with_two_api_processes(cluster, apis):
    api = cluster.api(apis[1])
    graph = chain_graph({"type": "trigger.schedule", "parameters": {"cron": "* * * * * *"}}, [transform("t", 1)])
    workflow_id = create_workflow(api, graph)
    wait_until(lambda: len(runs_of(cluster, workflow_id)) >= 6, 60, "six scheduled runs", interval=0.2,
               details=cluster.tails)
    stopped = api.client.patch(f"{api.base()}/workflows/{workflow_id}", json={"active": False}, headers=api.auth)
    assert stopped.status_code == 200, stopped.text
    runs = wait_until(lambda: all_finished(cluster, workflow_id, 6), 60, "the scheduled runs to finish",
                      interval=0.2, details=cluster.tails)
    fire_times = Counter(row[0] for row in cluster.query(
        "SELECT input->>'scheduledAt' FROM workflow_run WHERE workflow_id = %(w)s", w=workflow_id))
    assert None not in fire_times
    assert [t for t, n in fire_times.items() if n > 1] == [], f"fire times that ran twice: {fire_times}"
    assert Counter(runs.values()) == {"completed": len(runs)}
    assert_each_node_completed_once(cluster, workflow_id, set(runs), ["start", "t"])
    for process in apis:
        cluster.assert_running(process)
