"""Webhook acceptance benchmark (issue 7, items 4 and 7): signed webhook calls accepted per second.

The real API (backend.api.app.create_api) is served by granian, the ASGI server the app already
depends on, in a subprocess on 127.0.0.1 (a free port) against a temporary SQLite database. N
calls, each with its own webhook-id and a valid Standard Webhooks signature, are sent over
loopback by httpx with CONCURRENCY connections at a time. Accepted = answered 202 {runId}: the
delivery row and the run are committed and the run is handed to the run worker; the runs execute
in the background while the calls go on (their completion is reported, not timed).
POWERON_MAX_QUEUED_RUNS is raised for the bench so back-pressure does not refuse calls (any 429
would be counted and shown).

Target: at least 200 accepted webhooks per second.
Usage: .venv/bin/python bench/webhooks.py [N]
"""

from __future__ import annotations

import asyncio
import base64
import os
import socket
import statistics
import subprocess
import sys
import time
import uuid
from collections import Counter
from datetime import UTC, datetime

from support import PROJECT_ROOT, temporary_app

temporary_app("webhooks")
os.environ["POWERON_MAX_QUEUED_RUNS"] = "1000000"

import httpx  # noqa: E402
from sqlmodel import func, select  # noqa: E402
from standardwebhooks.webhooks import Webhook  # noqa: E402

from backend.bootstrap import prepare  # noqa: E402
from backend.db import session_scope  # noqa: E402
from backend.db.models import FeatureInstance, User, WorkflowRun  # noqa: E402
from backend.workflows import service  # noqa: E402

CALLS = int(sys.argv[1]) if len(sys.argv) > 1 else 2000
CONCURRENCY = 32
WARM_UP = 50
TARGET = 200
SECRET = "whsec_" + base64.b64encode(os.urandom(24)).decode()


def make_workflow() -> str:
    """An active workflow whose published version starts with trigger.webhook (path 'bench')."""
    graph = {"nodes": [{"id": "hook", "type": "trigger.webhook",
                        "parameters": {"path": "bench", "method": "POST", "secret": SECRET}},
                       {"id": "echo", "type": "context.transform",
                        "parameters": {"data": "{{ input.body }}", "template": "order {{ n }}"}}],
             "edges": [{"source": "hook", "target": "echo"}]}
    with session_scope() as session:
        admin = session.exec(select(User).where(User.username == "admin")).one()
        instance = session.exec(select(FeatureInstance).where(FeatureInstance.feature_code == "graphicalEditor")).one()
        workflow = service.create_workflow(session, admin, instance, "bench-webhook", "", graph)
        service.publish(session, admin, workflow)
        service.update_workflow(session, admin, workflow, instance, active=True)
        return workflow.id


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def serve(port: int) -> subprocess.Popen:
    """granian serving create_api() on 127.0.0.1:port, with this process's settings."""
    env = {**os.environ, "PYTHONPATH": str(PROJECT_ROOT)}
    command = [sys.executable, "-m", "granian", "--interface", "asgi", "--host", "127.0.0.1", "--port", str(port),
               "--workers", "1", "--log-level", "warning", "--no-access-log", "--factory",
               "backend.api.app:create_api"]
    server = subprocess.Popen(command, env=env, cwd=PROJECT_ROOT)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            if httpx.get(f"http://127.0.0.1:{port}/api/health", timeout=1).status_code == 200:
                return server
        except httpx.HTTPError:
            time.sleep(0.1)
        if server.poll() is not None:
            raise SystemExit(f"the server stopped with exit code {server.returncode}")
    server.terminate()
    raise SystemExit("the server did not answer /api/health within 30 s")


def signed(n: int) -> tuple[bytes, dict[str, str]]:
    body = f'{{"n": {n}, "customer": "bench"}}'.encode()
    webhook_id = f"msg_{uuid.uuid4().hex}"
    now = int(time.time())
    signature = Webhook(SECRET).sign(webhook_id, datetime.fromtimestamp(now, tz=UTC), body.decode())
    return body, {"webhook-id": webhook_id, "webhook-timestamp": str(now), "webhook-signature": signature,
                  "content-type": "application/json"}


async def fire(url: str, count: int, offset: int = 0) -> tuple[float, Counter, list[float]]:
    """Send `count` signed calls, CONCURRENCY at a time; (seconds, status counts, latencies)."""
    calls = [signed(offset + n) for n in range(count)]  # signing is the sender's work, not timed
    statuses: Counter = Counter()
    latencies: list[float] = []
    queue: asyncio.Queue = asyncio.Queue()
    for call in calls:
        queue.put_nowait(call)
    limits = httpx.Limits(max_connections=CONCURRENCY, max_keepalive_connections=CONCURRENCY)
    async with httpx.AsyncClient(limits=limits, timeout=60) as client:
        async def sender() -> None:
            while not queue.empty():
                body, headers = queue.get_nowait()
                began = time.perf_counter()
                response = await client.post(url, content=body, headers=headers)
                latencies.append(time.perf_counter() - began)
                statuses[response.status_code] += 1

        started = time.perf_counter()
        await asyncio.gather(*(sender() for _ in range(CONCURRENCY)))
        return time.perf_counter() - started, statuses, latencies


async def ceiling(url: str, count: int) -> float:
    """Requests per second of a trivial route with the same client: what the machine allows."""
    limits = httpx.Limits(max_connections=CONCURRENCY, max_keepalive_connections=CONCURRENCY)
    left = list(range(count))
    async with httpx.AsyncClient(limits=limits, timeout=60) as client:
        async def sender() -> None:
            while left:
                left.pop()
                await client.get(url)

        started = time.perf_counter()
        await asyncio.gather(*(sender() for _ in range(CONCURRENCY)))
        return count / (time.perf_counter() - started)


def runs_by_status() -> dict[str, int]:
    with session_scope() as session:
        rows = session.exec(select(WorkflowRun.status, func.count()).group_by(WorkflowRun.status)).all()
        return dict(rows)


def main() -> None:
    prepare()
    workflow_id = make_workflow()
    port = free_port()
    server = serve(port)
    url = f"http://127.0.0.1:{port}/api/hooks/{workflow_id}/bench"
    try:
        asyncio.run(fire(url, WARM_UP, offset=-WARM_UP))
        health = asyncio.run(ceiling(f"http://127.0.0.1:{port}/api/health", CALLS // 2))
        print(f"webhooks: calibration: GET /api/health with the same client and server: {health:.0f}/s "
              "(the loopback ceiling of this machine as loaded now)")
        elapsed, statuses, latencies = asyncio.run(fire(url, CALLS))
        accepted = statuses.get(202, 0)
        latencies.sort()
        p50 = statistics.median(latencies) * 1000
        p95 = latencies[int(len(latencies) * 0.95) - 1] * 1000
        print(f"webhooks: {CALLS} signed calls, {CONCURRENCY} concurrent, over loopback to granian + SQLite: "
              f"{accepted} accepted (202) in {elapsed:.2f} s = {accepted / elapsed:.0f} accepted/s "
              f"(target >= {TARGET}); latency p50 {p50:.1f} ms, p95 {p95:.1f} ms; answers {dict(statuses)}")
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and runs_by_status().get("running", 0):
            time.sleep(0.5)
        print(f"webhooks: runs after the burst (executed in the background): {runs_by_status()}")
        if accepted != CALLS:
            raise SystemExit(f"only {accepted} of {CALLS} calls were accepted")
    finally:
        server.terminate()
        try:
            server.wait(10)
        except subprocess.TimeoutExpired:
            server.kill()


if __name__ == "__main__":
    main()
