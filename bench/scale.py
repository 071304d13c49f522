"""Scale-out benchmark (issue 18), on PostgreSQL with real API and worker processes.

A private PostgreSQL server is started for the bench (the one `make test` installs: Debian's
`postgresql`, found under /usr/lib/postgresql/*/bin; installed with apt when missing and root, as
the tests do). Each configuration gets a fresh migrated database and a cluster of real processes
(tests/scale_cluster.py): `POWERON_ROLE=api python -m backend.runtime` API processes and
`python -m backend.worker` workers, or one `POWERON_ROLE=all` process (the single-process figure:
what one `make run` process does on PostgreSQL).

Per configuration, CALLS signed webhook calls (Standard Webhooks) of a 10-node workflow
(trigger.webhook → 9 context.transform) are sent by LOADERS load-generator processes (httpx,
asyncio, CONCURRENCY connections each, alternating over the API processes), so the load does not
share a GIL, nor a process, with a server. Reported:

- accepted/s: 202 answers per second of sending (next to it, GET /api/health per second with the
  same load processes: the HTTP ceiling of the machine as loaded at that moment);
- executed/s: runs finished per second, from the first step of the first run to the end of the
  last run;
- latency p50/p99: start (the run row's started_at, written when the call is accepted) to finish
  (finished_at) of each 10-node run under that load.

The last configuration starts its workers only after the burst: intake alone, then how fast two
workers drain a backlog.

Then the per-node overhead on PostgreSQL: one run of a CHAIN-node chain of context.transform nodes
through an idle 1 API + 1 worker cluster: first step's start to last step's end, per step.

Targets on the 2-core reference machine: ≥ 250 accepted webhook calls/s with 2 API processes;
executed/s (2 API + 2 workers) not lower than the single-process figure; per-node overhead ≤ 2 ms.
Usage: .venv/bin/python bench/scale.py [CALLS]
"""

from __future__ import annotations

import asyncio
import base64
import multiprocessing
import os
import shutil
import statistics
import sys
import tempfile
import time
import uuid
from collections import Counter
from datetime import UTC, datetime
from pathlib import Path

from support import PROJECT_ROOT, temporary_app

CALLS = int(sys.argv[1]) if len(sys.argv) > 1 else 1000
LOADERS = 2
CONCURRENCY = 16
WARM_UP = 40
CHAIN = 500
SHORT_NODES = 10
FINISH_SECONDS = 600.0
ACCEPTED_TARGET = 250
NODE_TARGET_MS = 2.0
# (label, API processes, workers, workers started only after the burst); 0 API processes means one
# POWERON_ROLE=all process. The last row measures intake alone (no run executes while calls arrive)
# and then how fast two workers drain the backlog.
CONFIGS = (("1 process (role all)", 0, 0, False), ("1 API + 1 worker", 1, 1, False),
           ("1 API + 2 workers", 1, 2, False), ("2 API + 1 worker", 2, 1, False), ("2 API + 2 workers", 2, 2, False),
           ("2 API, then 2 workers", 2, 2, True))
HEALTH_CALLS = 1000


# --- the load generator (runs in its own processes) ---------------------------------------------


def signed_calls(secret: str, count: int, offset: int) -> list[tuple[bytes, dict[str, str]]]:
    """`count` bodies with fresh webhook-ids and valid Standard Webhooks headers."""
    from standardwebhooks.webhooks import Webhook

    signer = Webhook(secret)
    now = int(time.time())
    moment = datetime.fromtimestamp(now, tz=UTC)
    calls = []
    for n in range(offset, offset + count):
        body = f'{{"n": {n}, "customer": "bench"}}'
        webhook_id = f"msg_{uuid.uuid4().hex}"
        calls.append((body.encode(), {"webhook-id": webhook_id, "webhook-timestamp": str(now),
                                      "webhook-signature": signer.sign(webhook_id, moment, body),
                                      "content-type": "application/json"}))
    return calls


async def send_all(urls: list[str], calls: list[tuple[bytes, dict[str, str]]]) -> tuple[Counter, list[float]]:
    """POST every call, CONCURRENCY at a time; sender i always uses urls[i % len(urls)]."""
    import httpx

    statuses: Counter = Counter()
    latencies: list[float] = []
    pending = list(reversed(calls))
    limits = httpx.Limits(max_connections=CONCURRENCY, max_keepalive_connections=CONCURRENCY)
    async with httpx.AsyncClient(limits=limits, timeout=60) as client:
        async def sender(url: str) -> None:
            while pending:
                body, headers = pending.pop()
                began = time.perf_counter()
                try:
                    response = await client.post(url, content=body, headers=headers)
                    statuses[response.status_code] += 1
                except httpx.HTTPError as error:
                    statuses[type(error).__name__] += 1
                latencies.append(time.perf_counter() - began)

        await asyncio.gather(*(sender(urls[i % len(urls)]) for i in range(CONCURRENCY)))
    return statuses, latencies


async def get_all(urls: list[str], count: int) -> None:
    """GET every url in turn `count` times, CONCURRENCY at a time (the calibration)."""
    import httpx

    left = list(range(count))
    limits = httpx.Limits(max_connections=CONCURRENCY, max_keepalive_connections=CONCURRENCY)
    async with httpx.AsyncClient(limits=limits, timeout=60) as client:
        async def sender(url: str) -> None:
            while left:
                left.pop()
                await client.get(url)

        await asyncio.gather(*(sender(urls[i % len(urls)]) for i in range(CONCURRENCY)))


def health_load(urls: list[str], count: int, start_at: float) -> tuple[float, float]:
    """One load-generator process sending `count` GET /api/health; (wall-clock start, end)."""
    time.sleep(max(0.0, start_at - time.time()))
    began = time.time()
    asyncio.run(get_all(urls, count))
    return began, time.time()


def load(urls: list[str], secret: str, count: int, offset: int, start_at: float) -> tuple[float, float, Counter,
                                                                                          list[float]]:
    """One load-generator process: sign `count` calls, wait for `start_at` (wall clock), send them.

    Returns (wall-clock start, wall-clock end, answers by status, latencies in seconds).
    """
    calls = signed_calls(secret, count, offset)  # the sender's work, not timed
    time.sleep(max(0.0, start_at - time.time()))
    began = time.time()
    statuses, latencies = asyncio.run(send_all(urls, calls))
    return began, time.time(), statuses, latencies


def burst(pool, urls: list[str], secret: str, count: int) -> tuple[float, Counter, list[float]]:
    """`count` calls split over LOADERS processes started together; (seconds, answers, latencies)."""
    start_at = time.time() + 1.5
    share = [count // LOADERS + (1 if i < count % LOADERS else 0) for i in range(LOADERS)]
    offsets = [sum(share[:i]) for i in range(LOADERS)]
    # Each loader starts at another API process, so two loaders alternate over two processes.
    futures = [pool.submit(load, urls[i % len(urls):] + urls[:i % len(urls)], secret, share[i], offsets[i], start_at)
               for i in range(LOADERS)]
    results = [future.result() for future in futures]
    statuses: Counter = Counter()
    latencies: list[float] = []
    for _began, _ended, answered, waited in results:
        statuses.update(answered)
        latencies.extend(waited)
    elapsed = max(r[1] for r in results) - min(r[0] for r in results)
    return elapsed, statuses, latencies


def ceiling(pool, urls: list[str]) -> float:
    """GET /api/health per second with the same load processes: what the machine allows as loaded now."""
    start_at = time.time() + 1.0
    futures = [pool.submit(health_load, urls[i % len(urls):] + urls[:i % len(urls)], HEALTH_CALLS // LOADERS,
                           start_at) for i in range(LOADERS)]
    results = [future.result() for future in futures]
    return HEALTH_CALLS // LOADERS * LOADERS / (max(r[1] for r in results) - min(r[0] for r in results))


# --- the bench (main process) ---------------------------------------------------------------------


def percentile(values: list[float], fraction: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, int(round(fraction * len(ordered))) - 1))]


def start_postgres():
    """A private PostgreSQL server (tests/conftest.py's), installed with apt when missing and root."""
    from tests.conftest import PostgresServer, _find_pg_bindir, _install_postgres

    bindir = _find_pg_bindir()
    if bindir is None and os.geteuid() == 0 and shutil.which("apt-get"):
        _install_postgres()
        bindir = _find_pg_bindir()
    if bindir is None:
        raise SystemExit("scale: PostgreSQL is not installed (initdb/pg_ctl not found under "
                         "/usr/lib/postgresql/*/bin): `make test` installs it (Debian's postgresql)")
    # Its own folder directly under /tmp: the server runs as the postgres user, who cannot enter `root`.
    server = PostgresServer(bindir=bindir, root=Path(tempfile.mkdtemp(prefix="poweron-bench-pg-")))
    try:
        server.start()
    except Exception:
        server.stop()
        raise
    return server


def webhook_graph(secret: str) -> dict:
    from tests.scale_cluster import chain_graph, transform

    trigger = {"type": "trigger.webhook", "parameters": {"path": "bench", "method": "POST", "secret": secret}}
    return chain_graph(trigger, [transform(f"t{i}", i) for i in range(SHORT_NODES - 1)])


def finished_runs(cluster, workflow_id: str) -> list[tuple[str, datetime, datetime | None]]:
    return [(row[0], row[1], row[2]) for row in cluster.query(
        "SELECT status, started_at, finished_at FROM workflow_run WHERE workflow_id = %(w)s AND "
        "status IN ('completed', 'failed', 'cancelled')", w=workflow_id)]


def count_runs(cluster, workflow_id: str) -> int:
    return int(cluster.query("SELECT count(*) FROM workflow_run WHERE workflow_id = %(w)s", w=workflow_id)[0][0])


def start_cluster(cluster, apis: int, workers: int) -> list:
    """Start the configuration's processes (the first API process alone: it bootstraps the database)."""
    if apis == 0:
        first = cluster.spawn_api(env={"POWERON_ROLE": "all"})
        cluster.wait_api(first)
        return [first]
    first = cluster.spawn_api()
    cluster.wait_api(first)
    more, _workers = cluster.start(apis - 1, workers)
    return [first, *more]


def run_times(cluster, workflow_id: str, skip: set[str]) -> list[tuple]:
    """(id, status, started_at, first step's start, finished_at) of the workflow's runs not in `skip`."""
    rows = cluster.query(
        "SELECT r.id, r.status, r.started_at, min(s.started_at), r.finished_at FROM workflow_run r "
        "LEFT JOIN run_step_log s ON s.run_id = r.id WHERE r.workflow_id = %(w)s GROUP BY r.id", w=workflow_id)
    return [row for row in rows if row[0] not in skip]


def measure(pool, server, template: str, config: tuple, root: Path) -> dict:
    """One configuration: a fresh database and cluster, a warm-up, the burst, the runs' finish."""
    from tests.scale_cluster import Cluster, create_workflow, wait_until

    label, apis, workers, late = config
    database = f"bench_{uuid.uuid4().hex[:12]}"
    server.execute(f'CREATE DATABASE "{database}" TEMPLATE "{template}"')
    secret = "whsec_" + base64.b64encode(os.urandom(24)).decode()
    env = {"POWERON_WORKER_HEARTBEAT_SECONDS": "2", "POWERON_WORKER_TIMEOUT_SECONDS": "10"}
    try:
        with Cluster(server.url(database), root / database, env=env) as cluster:
            servers = start_cluster(cluster, apis, 0 if late else workers)
            workflow_id = create_workflow(cluster.api(servers[0]), webhook_graph(secret))
            urls = [f"{p.url}/api/hooks/{workflow_id}/bench" for p in servers]
            burst(pool, urls, secret, WARM_UP)
            if late:  # the warm-up waits in the queue with the burst's runs
                warm: set[str] = set()
            else:
                wait_until(lambda: len(finished_runs(cluster, workflow_id)) >= WARM_UP, FINISH_SECONDS,
                           "the warm-up runs", interval=0.2, details=cluster.tails)
                warm = {row[0] for row in run_times(cluster, workflow_id, set())}
            health = ceiling(pool, [f"{p.url}/api/health" for p in servers])
            elapsed, statuses, latencies = burst(pool, urls, secret, CALLS)
            accepted = statuses.get(202, 0)
            expected = accepted + (WARM_UP if late else 0)
            if late:
                cluster.start_workers(workers)
            wait_until(lambda: len(finished_runs(cluster, workflow_id)) >= len(warm) + expected, FINISH_SECONDS,
                       f"{expected} runs to finish", interval=0.25, details=cluster.tails)
            rows = run_times(cluster, workflow_id, warm)
    finally:
        server.execute(f'DROP DATABASE IF EXISTS "{database}" WITH (FORCE)')
    first_step = min(r[3] for r in rows)
    last_finish = max(r[4] for r in rows)
    durations = [(r[4] - r[2]).total_seconds() for r in rows]
    return {"label": label, "apis": apis, "late": late, "calls": CALLS, "accepted": accepted, "elapsed": elapsed,
            "statuses": dict(statuses), "call_p50": statistics.median(latencies) * 1000, "health": health,
            "executed": len(rows) / (last_finish - first_step).total_seconds(),
            "completed": sum(1 for r in rows if r[1] == "completed"), "runs": len(rows),
            "run_p50": statistics.median(durations), "run_p99": percentile(durations, 0.99)}


def node_overhead(server, template: str, root: Path) -> float:
    """Milliseconds per node of one CHAIN-node run on an idle 1 API + 1 worker cluster."""
    from tests.scale_cluster import Cluster, chain_graph, transform, wait_until

    database = f"bench_{uuid.uuid4().hex[:12]}"
    server.execute(f'CREATE DATABASE "{database}" TEMPLATE "{template}"')
    try:
        with Cluster(server.url(database), root / database) as cluster:
            servers = start_cluster(cluster, 1, 1)
            api = cluster.api(servers[0], timeout=120)
            graph = chain_graph({"type": "trigger.manual", "parameters": {}},
                                [transform(f"t{i}", i) for i in range(CHAIN)])
            created = api.client.post(f"{api.base()}/workflows", json={"name": "chain", "graph": graph},
                                      headers=api.auth)
            assert created.status_code == 201, created.text
            started = api.client.post(f"{api.base()}/workflows/{created.json()['id']}/runs", json={"input": {}},
                                      headers=api.auth)
            assert started.status_code == 201, started.text
            run_id = started.json()["id"]

            def finished():
                rows = cluster.query("SELECT status, started_at, finished_at FROM workflow_run WHERE id = %(r)s",
                                     r=run_id)
                return rows[0] if rows[0][0] in ("completed", "failed", "cancelled") else None

            status, _began, _ended = wait_until(finished, FINISH_SECONDS, "the chain run", interval=0.2,
                                                details=cluster.tails)
            assert status == "completed", f"the chain run ended {status}\n{cluster.tails()}"
            # From the first step's start to the last step's end: the engine's time, not the queue's.
            steps, first, last = cluster.query("SELECT count(*), min(started_at), max(finished_at) FROM run_step_log "
                                               "WHERE run_id = %(r)s AND status = 'completed'", r=run_id)[0]
            assert steps == CHAIN + 1, f"{steps} steps completed of {CHAIN + 1}"
            return (last - first).total_seconds() * 1000 / steps
    finally:
        server.execute(f'DROP DATABASE IF EXISTS "{database}" WITH (FORCE)')


def report(result: dict) -> None:
    latency = ("n/a (queued until the workers start)" if result["late"] else
               f"p50 {result['run_p50']:.2f} s, p99 {result['run_p99']:.2f} s")
    print(f"scale: {result['label']:<22} {result['accepted']:>5}/{result['calls']} accepted in "
          f"{result['elapsed']:.2f} s = {result['accepted'] / result['elapsed']:4.0f} accepted/s "
          f"(call p50 {result['call_p50']:.0f} ms; GET /api/health {result['health']:.0f}/s); "
          f"{result['executed']:5.1f} executed/s ({result['completed']}/{result['runs']} completed); "
          f"{SHORT_NODES}-node run start→finish {latency}; answers {result['statuses']}", flush=True)


def main() -> None:
    root = temporary_app("scale")
    from backend.db.engine import migrate

    server = start_postgres()
    try:
        template = "bench_template"
        server.execute(f'CREATE DATABASE "{template}"')
        migrate(server.url(template))
        print(f"scale: {CALLS} signed webhook calls per configuration of a {SHORT_NODES}-node workflow, "
              f"{LOADERS} load processes x {CONCURRENCY} connections, PostgreSQL "
              f"{server.bindir.parent.name} on {os.cpu_count()} cores", flush=True)
        results = []
        context = multiprocessing.get_context("spawn")
        from concurrent.futures import ProcessPoolExecutor

        with ProcessPoolExecutor(LOADERS, mp_context=context) as pool:
            for config in CONFIGS:
                result = measure(pool, server, template, config, root)
                report(result)
                results.append(result)
        overhead = node_overhead(server, template, root)
        print(f"scale: per-node overhead on PostgreSQL ({CHAIN}-node chain, 1 API + 1 worker, idle): "
              f"{overhead:.2f} ms/node (target <= {NODE_TARGET_MS:g} ms)", flush=True)
        summarise(results, overhead)
    finally:
        server.stop()


def summarise(results: list[dict], overhead: float) -> None:
    """The targets next to the figures, each marked met or missed."""
    by_label = {r["label"]: r for r in results}
    single = by_label["1 process (role all)"]
    two_two = by_label["2 API + 2 workers"]
    intake = by_label["2 API, then 2 workers"]
    two_api = intake["accepted"] / intake["elapsed"]
    busy = ", ".join(f"{by_label[label]['accepted'] / by_label[label]['elapsed']:.0f}/s with {label[8:]} executing"
                     for label in ("2 API + 1 worker", "2 API + 2 workers"))
    checks = [
        (f"accepted/s with 2 API processes: {two_api:.0f} (intake alone; {busy} on the same cores)",
         f">= {ACCEPTED_TARGET}", two_api >= ACCEPTED_TARGET),
        (f"executed/s 2 API + 2 workers {two_two['executed']:.1f} vs single process {single['executed']:.1f}",
         "not lower", two_two["executed"] >= single["executed"]),
        (f"per-node overhead {overhead:.2f} ms", f"<= {NODE_TARGET_MS:g} ms", overhead <= NODE_TARGET_MS),
    ]
    for figure, target, met in checks:
        print(f"scale: target {target}: {figure}: {'met' if met else 'MISSED'}")


if __name__ == "__main__":
    if str(PROJECT_ROOT) not in sys.path:
        sys.path.insert(0, str(PROJECT_ROOT))
    main()
