"""A PowerOn cluster of real processes on one PostgreSQL database (issue 18): API processes and workers.

Used by tests/integration/test_scale_out.py and bench/scale.py. :class:`Cluster` starts, as a user
following README "Scaling out" would:

- API processes: ``POWERON_ROLE=api python -m backend.runtime --host 127.0.0.1 --port P`` (granian
  serving /api, plus the scheduler and the timers, which keep one leader across processes);
- workers: ``python -m backend.worker`` (run execution from the shared queue).

Every process of a cluster shares the database URL, one data folder and one secret key
(POWERON_SECRET_KEY is set explicitly: processes starting at once must not each generate their own
data/secret.key) and the admin's password. Each process runs in its own process group (granian
serves from a child process; scripts run in sandbox children), so stopping or killing a process
ends everything it started. Output goes to ``<root>/<name>.log``; :meth:`Cluster.tails` shows the
end of every log for failure messages. Use the cluster as a context manager: leaving it stops every
process it started (SIGTERM, then SIGKILL after a timeout), whatever happened.

Readiness: an API process is ready when GET /api/health answers 200; a worker when it has
registered in procrastinate's ``procrastinate_workers`` table (procrastinate inserts a row when a
worker starts and refreshes its heartbeat while it lives).
"""

from __future__ import annotations

import os
import secrets
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

from tests.integration.trigger_support import create_published

PROJECT_ROOT = Path(__file__).resolve().parent.parent
ADMIN_USER = "admin"
ADMIN_PASSWORD = "scale-admin-pass-123"
START_SECONDS = 120.0
STOP_SECONDS = 20.0
TAIL_CHARS = 3000


def free_port() -> int:
    """A TCP port on 127.0.0.1 that was free a moment ago."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def wait_until(condition: Callable[[], Any], timeout: float, what: str, interval: float = 0.05,
               details: Callable[[], str] | None = None) -> Any:
    """Poll `condition` until it returns something truthy (returned); AssertionError after `timeout` s."""
    deadline = time.monotonic() + timeout
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() > deadline:
            extra = f"\n{details()}" if details else ""
            raise AssertionError(f"timed out after {timeout:.0f} s waiting for {what}{extra}")
        time.sleep(interval)


@dataclass
class Process:
    """One process of the cluster: its role, its Popen, its log file and (API) its port."""

    name: str
    role: str
    popen: subprocess.Popen
    log_path: Path
    port: int | None = None

    @property
    def url(self) -> str:
        """The base URL of an API process (http://127.0.0.1:P)."""
        if self.port is None:
            raise ValueError(f"{self.name} is a {self.role} process: it serves no HTTP")
        return f"http://127.0.0.1:{self.port}"

    @property
    def running(self) -> bool:
        return self.popen.poll() is None

    def tail(self, chars: int = TAIL_CHARS) -> str:
        """The end of this process's log."""
        try:
            text = self.log_path.read_text(errors="replace")
        except FileNotFoundError:
            return "(no log)"
        return text[-chars:]

    def signal_group(self, signum: int) -> None:
        """Send `signum` to the process's group (the process and every child it started)."""
        try:
            os.killpg(self.popen.pid, signum)
        except ProcessLookupError:
            pass

    def kill(self) -> None:
        """SIGKILL the process and its children, as a crash or an OOM kill would; waits for the exit."""
        self.signal_group(signal.SIGKILL)
        self.popen.wait(STOP_SECONDS)

    def stop(self, timeout: float = STOP_SECONDS) -> int | None:
        """SIGTERM (graceful shutdown), then SIGKILL after `timeout` s; the exit code (None: killed)."""
        if self.running:
            self.signal_group(signal.SIGTERM)
            try:
                code = self.popen.wait(timeout)
            except subprocess.TimeoutExpired:
                self.kill()
                return None
            self.signal_group(signal.SIGKILL)  # children the process left behind
            return code
        self.signal_group(signal.SIGKILL)
        return self.popen.returncode


@dataclass
class Api:
    """A signed-in REST client of one API process (the shape tests/integration/trigger_support expects)."""

    client: httpx.Client
    token: str
    instance_id: str

    @property
    def auth(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.token}"}

    def base(self, instance_id: str | None = None) -> str:
        return f"/api/graphicalEditor/{instance_id or self.instance_id}"


@dataclass
class Cluster:
    """API and worker processes sharing one PostgreSQL database, a data folder and a secret key.

    Args:
        db_url: The PostgreSQL URL (migrated or not: every process migrates at start).
        root: A folder for the shared data folder and the logs.
        env: Extra settings for every process (e.g. POWERON_WORKER_TIMEOUT_SECONDS).
    """

    db_url: str
    root: Path
    env: dict[str, str] = field(default_factory=dict)
    processes: list[Process] = field(default_factory=list)
    secret_key: str = field(default_factory=lambda: secrets.token_urlsafe(48))
    _clients: list[httpx.Client] = field(default_factory=list)

    def __enter__(self) -> Cluster:
        return self

    def __exit__(self, *_exc: object) -> None:
        self.stop_all()

    # --- processes ----------------------------------------------------------------------------

    def process_env(self, role: str) -> dict[str, str]:
        """The environment of a process of `role` (api or worker)."""
        env = {key: value for key, value in os.environ.items() if not key.startswith("POWERON_")}
        env.update({
            "PYTHONPATH": str(PROJECT_ROOT),
            "PYTHONUNBUFFERED": "1",
            "POWERON_ROLE": role,
            "POWERON_DB_URL": self.db_url,
            "POWERON_DATA_DIR": str(self.root / "data"),
            "POWERON_SECRET_KEY": self.secret_key,
            "POWERON_ADMIN_USER": ADMIN_USER,
            "POWERON_ADMIN_PASSWORD": ADMIN_PASSWORD,
            "POWERON_MAX_QUEUED_RUNS": "1000000",
        })
        env.update(self.env)
        return env

    def _spawn(self, role: str, command: list[str], port: int | None = None,
               env: dict[str, str] | None = None) -> Process:
        index = sum(1 for p in self.processes if p.role == role) + 1
        name = f"{role}-{index}"
        log_path = self.root / f"{name}.log"
        self.root.mkdir(parents=True, exist_ok=True)
        with open(log_path, "w") as log:
            popen = subprocess.Popen(command, cwd=PROJECT_ROOT, env={**self.process_env(role), **(env or {})},
                                     stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                                     start_new_session=True)
        process = Process(name, role, popen, log_path, port)
        self.processes.append(process)
        return process

    def spawn_api(self, env: dict[str, str] | None = None) -> Process:
        """Start an API process on a free port (not waited for; see :meth:`wait_api`)."""
        port = free_port()
        return self._spawn("api", [sys.executable, "-m", "backend.runtime", "--host", "127.0.0.1",
                                   "--port", str(port)], port, env)

    def spawn_worker(self, env: dict[str, str] | None = None) -> Process:
        """Start a worker process (not waited for; see :meth:`start_workers`)."""
        return self._spawn("worker", [sys.executable, "-m", "backend.worker"], env=env)

    def start(self, apis: int, workers: int, timeout: float = START_SECONDS) -> tuple[list[Process], list[Process]]:
        """Start `apis` API processes and `workers` workers at once; return them when all are ready."""
        baseline = self.registered_workers_max_id()
        started_apis = [self.spawn_api() for _ in range(apis)]
        started_workers = [self.spawn_worker() for _ in range(workers)]
        for process in started_apis:
            self.wait_api(process, timeout)
        self.wait_workers(started_workers, baseline, timeout)
        return started_apis, started_workers

    def start_workers(self, count: int, timeout: float = START_SECONDS) -> list[Process]:
        """Start `count` more workers and wait until each has registered."""
        baseline = self.registered_workers_max_id()
        started = [self.spawn_worker() for _ in range(count)]
        self.wait_workers(started, baseline, timeout)
        return started

    def wait_api(self, process: Process, timeout: float = START_SECONDS) -> None:
        """Wait until the API process answers GET /api/health with 200."""
        def healthy() -> bool:
            self.assert_running(process)
            try:
                return httpx.get(f"{process.url}/api/health", timeout=2).status_code == 200
            except httpx.TransportError:
                return False

        wait_until(healthy, timeout, f"{process.name} to answer /api/health", interval=0.1, details=self.tails)

    def wait_workers(self, workers: list[Process], baseline: int, timeout: float = START_SECONDS) -> None:
        """Wait until `workers` (started after procrastinate_workers' id `baseline`) have all registered."""
        if not workers:
            return

        def registered() -> bool:
            for process in workers:
                self.assert_running(process)
            return self.workers_registered_since(baseline) >= len(workers)

        wait_until(registered, timeout, f"{len(workers)} worker(s) to register in procrastinate_workers",
                   interval=0.1, details=self.tails)

    def assert_running(self, process: Process) -> None:
        """AssertionError with the log's tail when `process` has ended."""
        if not process.running:
            raise AssertionError(f"{process.name} ended with exit code {process.popen.returncode}:\n"
                                 f"{process.tail()}")

    def stop_all(self, timeout: float = STOP_SECONDS) -> None:
        """Stop every process (workers first, SIGTERM then SIGKILL) and close the REST clients."""
        for client in self._clients:
            client.close()
        self._clients.clear()
        ordered = [p for p in self.processes if p.role == "worker"] + [p for p in self.processes if p.role != "worker"]
        for process in ordered:
            if process.running:
                process.signal_group(signal.SIGTERM)
        deadline = time.monotonic() + timeout
        for process in ordered:
            try:
                process.popen.wait(max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                pass
            process.signal_group(signal.SIGKILL)
            process.popen.wait(STOP_SECONDS)

    def tails(self) -> str:
        """The end of every process's log, for a failure message."""
        return "\n".join(f"--- {p.name} (pid {p.popen.pid}, exit {p.popen.poll()}) {p.log_path}\n{p.tail()}"
                         for p in self.processes)

    # --- the database -------------------------------------------------------------------------

    def query(self, sql: str, **params: Any) -> list[tuple]:
        """Rows of one SQL statement on the cluster's database (a short-lived psycopg connection)."""
        import psycopg

        with psycopg.connect(psycopg_dsn(self.db_url), autocommit=True) as connection:
            return list(connection.execute(sql, params or None).fetchall())

    def registered_workers_max_id(self) -> int:
        """The highest id in procrastinate_workers (0 before the first worker, or before the table exists)."""
        try:
            return int(self.query("SELECT coalesce(max(id), 0) FROM procrastinate_workers")[0][0])
        except Exception:  # noqa: BLE001 - not migrated yet: no worker has registered
            return 0

    def workers_registered_since(self, baseline: int) -> int:
        """Workers alive in procrastinate_workers with an id above `baseline`."""
        try:
            return int(self.query("SELECT count(*) FROM procrastinate_workers WHERE id > %(b)s", b=baseline)[0][0])
        except Exception:  # noqa: BLE001 - the table appears with the migrations the first process runs
            return 0

    # --- REST -----------------------------------------------------------------------------------

    def api(self, process: Process, timeout: float = 60.0) -> Api:
        """A REST client of `process`, signed in as the admin, on the Graphical Editor instance."""
        client = httpx.Client(base_url=process.url, timeout=timeout)
        self._clients.append(client)
        login = client.post("/api/auth/login", json={"username": ADMIN_USER, "password": ADMIN_PASSWORD})
        assert login.status_code == 200, f"{login.status_code} {login.text}\n{process.tail()}"
        token = login.json()["token"]
        me = client.get("/api/me", headers={"Authorization": f"Bearer {token}"}).json()
        instance_id = next(i["id"] for i in me["instances"] if i["featureCode"] == "graphicalEditor")
        return Api(client, token, instance_id)


def psycopg_dsn(db_url: str) -> str:
    """The libpq form of a SQLAlchemy PostgreSQL URL (postgresql+psycopg://… → postgresql://…)."""
    return "postgresql://" + db_url.split("://", 1)[1]


def create_workflow(api: Api, graph: dict[str, Any], active: bool = True) -> str:
    """A workflow with `graph`, created, published and activated through the REST API; its id."""
    return create_published(api, graph, active=active)


def chain_graph(trigger: dict[str, Any], nodes: Iterable[dict[str, Any]]) -> dict[str, Any]:
    """trigger (id "start") → each of `nodes` in a line."""
    chain = [{"id": "start", **trigger}, *nodes]
    edges = [{"source": a["id"], "target": b["id"]} for a, b in zip(chain, chain[1:], strict=False)]
    return {"nodes": chain, "edges": edges}


def transform(node_id: str, n: int = 0) -> dict[str, Any]:
    """A context.transform node: a trivial mapping (the per-node overhead of the engine, not work)."""
    return {"id": node_id, "type": "context.transform", "parameters": {"data": {"n": n}, "template": "{{ n }}"}}
