"""Kill-and-restart of the real application process (issue 15, item 3).

The application is started as it runs in production, minus the pages: ``python -m backend.runtime``
serves the REST API with granian and runs :func:`backend.runtime.start_background_services` (the
start-up the Reflex lifespan runs: migrations, recovery of `running` runs, the timer thread, the
scheduler, the notifier) on the test's database, SQLite file or PostgreSQL alike. A first process
is started with POWERON_ENGINE_CRASH_AT set (backend/engine/crashpoints.py) and SIGKILLs itself
there; the test then starts a second, ordinary process and follows the run through its REST API
until it completed. Every time the run finishes exactly once, and no step that was committed
before the kill runs again.

Crash points covered here: a completed human task resuming its run (before and after the commit),
a due flow.wait being woken (before and after the commit), one of two concurrent slow branches
finished while the other still runs, and a webhook's run committed but not yet handed to the run
worker.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from backend.config import get_settings
from backend.engine import crashpoints
from tests.conftest import PROJECT_ROOT
from tests.integration.conftest import ADMIN_PASSWORD
from tests.integration.test_engine import START, approval_graph, edge, transform
from tests.integration.test_engine_concurrency import sleeper
from tests.integration.trigger_support import create_published, new_secret, runs_of, sign

STARTUP_SECONDS = 120.0
FINISH_SECONDS = 60.0


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


class AppProcess:
    """One application process (``python -m backend.runtime``) on the test's database."""

    def __init__(self, log_path: Path, crash_at: str | None):
        env = dict(os.environ)
        env["POWERON_DB_URL"] = get_settings().db_url
        env["POWERON_TIMER_INTERVAL_SECONDS"] = "0.2"
        # Timers tick in the process holding the scheduler lease: a killed process's lease must lapse
        # soon for the restarted one to take over (the default, 15 s, made each test wait it out).
        env["POWERON_SCHEDULER_LEASE_SECONDS"] = "3"
        env["POWERON_SCHEDULER_STARTUP_DELAY_SECONDS"] = "0"
        # Likewise on PostgreSQL a killed worker's jobs go back to the queue once it is silent this long.
        env["POWERON_WORKER_HEARTBEAT_SECONDS"] = "1"
        env["POWERON_WORKER_TIMEOUT_SECONDS"] = "4"
        env.pop(crashpoints.ENV, None)
        if crash_at:
            env[crashpoints.ENV] = crash_at
        self.port = free_port()
        self.log_path = log_path
        with open(log_path, "w") as log:
            self.process = subprocess.Popen([sys.executable, "-m", "backend.runtime", "--port", str(self.port)],
                                            cwd=PROJECT_ROOT, env=env, stdout=log, stderr=subprocess.STDOUT,
                                            start_new_session=True)
        self.client = httpx.Client(base_url=f"http://127.0.0.1:{self.port}", timeout=30.0)
        self.auth: dict[str, str] = {}

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")[-4000:]

    def wait_ready(self) -> AppProcess:
        """Poll /api/health until the process answers, then sign in as the admin."""
        deadline = time.monotonic() + STARTUP_SECONDS
        while True:
            assert self.process.poll() is None, f"the application process ended:\n{self.log()}"
            try:
                if self.client.get("/api/health").status_code == 200:
                    break
            except httpx.TransportError:
                pass
            assert time.monotonic() < deadline, f"the application did not start:\n{self.log()}"
            time.sleep(0.1)
        login = self.client.post("/api/auth/login", json={"username": "admin", "password": ADMIN_PASSWORD})
        assert login.status_code == 200, login.text
        self.auth = {"Authorization": f"Bearer {login.json()['token']}"}
        return self

    def call_killed(self, method: str, url: str, **kwargs: Any) -> None:
        """A request during which the process kills itself: no answer comes, the process ends."""
        try:
            response = self.client.request(method, url, **kwargs)
        except httpx.TransportError:
            pass
        else:
            raise AssertionError(f"the crash point was not reached: {response.status_code} {response.text}")
        self.wait_killed()

    def wait_killed(self) -> None:
        """Wait for the process to end after its crash point (its server stops with its worker)."""
        try:
            self.process.wait(FINISH_SECONDS)
        except subprocess.TimeoutExpired:
            raise AssertionError(f"the process did not reach its crash point:\n{self.log()}") from None
        assert "Unexpected exit from worker" in self.log() or self.process.returncode == -signal.SIGKILL, self.log()
        self.end()

    def end(self) -> None:
        """Stop what is left of the process group (the server process and its worker)."""
        try:
            os.killpg(self.process.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        self.process.wait(30)
        self.client.close()


@pytest.fixture
def start_app(api, tmp_path) -> Iterator[Callable[[str | None], AppProcess]]:
    """Start application processes (ready and signed in); all are stopped after the test."""
    started: list[AppProcess] = []

    def start(crash_at: str | None = None) -> AppProcess:
        app = AppProcess(tmp_path / f"app-{len(started)}.log", crash_at)
        started.append(app)
        return app.wait_ready()

    yield start
    for app in started:
        if app.process.poll() is None:
            app.end()


def create(api, graph: dict[str, Any]) -> str:
    created = api.client.post(f"{api.base()}/workflows", json={"name": f"wf-{uuid.uuid4().hex}", "graph": graph},
                              headers=api.auth)
    assert created.status_code == 201, created.text
    return created.json()["id"]


def read_run(api, run_id: str) -> dict[str, Any]:
    """The run as stored (read by the test process while no application process runs)."""
    response = api.client.get(f"{api.base()}/runs/{run_id}", headers=api.auth)
    assert response.status_code == 200, response.text
    return response.json()


def poll_finished(app: AppProcess, api, run_id: str) -> dict[str, Any]:
    """GET the run from the application process until it is finished (completed, failed, cancelled)."""
    deadline = time.monotonic() + FINISH_SECONDS
    while True:
        response = app.client.get(f"{api.base()}/runs/{run_id}", headers=app.auth)
        assert response.status_code == 200, response.text
        run = response.json()
        if run["status"] in ("completed", "failed", "cancelled"):
            return run
        assert time.monotonic() < deadline, f"run did not finish: {run}\n{app.log()}"
        time.sleep(0.1)


def completed_steps(run: dict[str, Any]) -> dict[str, int]:
    counts: dict[str, int] = {}
    for step in run["steps"]:
        if step["status"] == "completed":
            counts[step["nodeId"]] = counts.get(step["nodeId"], 0) + 1
    return counts


def committed_step_ids(run: dict[str, Any]) -> set[str]:
    return {s["id"] for s in run["steps"] if s["status"] == "completed"}


def assert_finished_once(final: dict[str, Any], before: dict[str, Any], expected: dict[str, int]) -> None:
    """Completed, every node once, and the steps committed before the kill still the ones of record."""
    assert final["status"] == "completed", final
    assert completed_steps(final) == expected, final["steps"]
    assert committed_step_ids(before) <= committed_step_ids(final)


def pending_task(api, run_id: str) -> dict[str, Any]:
    tasks = api.client.get("/api/tasks", params={"status": "pending"}, headers=api.auth).json()
    return next(t for t in tasks if t["runId"] == run_id)


def start_run(app: AppProcess, api, workflow_id: str, input: Any = None) -> dict[str, Any]:  # noqa: A002
    response = app.client.post(f"{api.base()}/workflows/{workflow_id}/runs", json={"input": input},
                               headers=app.auth)
    assert response.status_code == 201, response.text
    return response.json()


APPROVED = {"data": {"approved": True, "comment": "ok"}}


def test_killed_while_a_completed_task_resumes_before_the_commit_the_task_can_be_completed_again(api, start_app):
    me = api.client.get("/api/me", headers=api.auth).json()["id"]
    workflow_id = create(api, approval_graph({"user": me}))
    first = start_app("resume_before_commit:ok")
    run = start_run(first, api, workflow_id, {"amount": 3})
    assert run["status"] == "paused", run
    task = pending_task(api, run["id"])
    first.call_killed("POST", f"/api/tasks/{task['id']}/complete", json=APPROVED, headers=first.auth)

    before = read_run(api, run["id"])
    assert before["status"] == "paused" and before["pauseReason"] == "humanTask", before
    assert pending_task(api, run["id"])["id"] == task["id"]  # nothing of the completion was kept

    second = start_app()
    done = second.client.post(f"/api/tasks/{task['id']}/complete", json=APPROVED, headers=second.auth)
    assert done.status_code == 200, done.text
    final = poll_finished(second, api, run["id"])
    assert_finished_once(final, before, {"start": 1, "ok": 1, "yes": 1})
    assert final["output"] == {"yes": {"result": "approved: ok", "missing": []}}


def test_killed_after_a_completed_task_resumed_its_run_the_restarted_app_finishes_it(api, start_app):
    me = api.client.get("/api/me", headers=api.auth).json()["id"]
    workflow_id = create(api, approval_graph({"user": me}))
    first = start_app("resume_after_commit:ok")
    run = start_run(first, api, workflow_id, {"amount": 4})
    task = pending_task(api, run["id"])
    first.call_killed("POST", f"/api/tasks/{task['id']}/complete", json=APPROVED, headers=first.auth)

    before = read_run(api, run["id"])
    assert before["status"] == "running", before
    assert {s["nodeId"]: s["status"] for s in before["steps"]}["ok"] == "completed"

    second = start_app()
    final = poll_finished(second, api, run["id"])
    assert_finished_once(final, before, {"start": 1, "ok": 1, "yes": 1})
    again = second.client.post(f"/api/tasks/{task['id']}/complete", json=APPROVED, headers=second.auth)
    assert again.status_code == 409, again.text


NAP = {"nodes": [START, {"id": "nap", "type": "flow.wait", "parameters": {"seconds": 1}},
                 transform("after", "woke {{ n }}")],
       "edges": [edge("start", "nap"), edge("nap", "after")]}


@pytest.mark.parametrize(("crash_at", "status_after_kill"), [("resume_before_commit:nap", "paused"),
                                                            ("resume_after_commit:nap", "running")])
def test_killed_while_a_due_wait_is_woken_the_restarted_app_finishes_the_run(api, start_app, crash_at,
                                                                             status_after_kill):
    workflow_id = create(api, NAP)
    first = start_app(crash_at)
    run = start_run(first, api, workflow_id, {"n": 5})
    assert run["status"] == "paused" and run["pauseReason"] == "wait", run
    first.wait_killed()  # its timer thread woke the wait a second later and reached the crash point

    before = read_run(api, run["id"])
    assert before["status"] == status_after_kill, before

    second = start_app()
    final = poll_finished(second, api, run["id"])
    assert_finished_once(final, before, {"start": 1, "nap": 1, "after": 1})
    assert final["output"] == {"after": {"result": "woke 5", "missing": []}}


BRANCHES = {
    "nodes": [START, sleeper("quick", 0.1), sleeper("slow", 3.0),
              {"id": "join", "type": "flow.merge", "parameters": {}},
              transform("after", "{{ q }} + {{ s }}",
                        data={"q": "{{ nodes.quick.output }}", "s": "{{ nodes.slow.output }}"})],
    "edges": [edge("start", "quick"), edge("start", "slow"), edge("quick", "join"), edge("slow", "join"),
              edge("join", "after")],
}


@pytest.mark.parametrize(("crash_at", "kept"), [
    # quick finished on its branch thread, its step not yet committed: it runs again.
    ("branch_finished:quick", {"start": 1}),
    # quick's step committed while slow still runs: only slow (and what follows) runs again.
    ("after_step_commit:quick", {"start": 1, "quick": 1}),
])
def test_killed_while_one_of_two_concurrent_branches_finished_the_restarted_app_finishes_the_run(api, start_app,
                                                                                                crash_at, kept):
    workflow_id = create(api, BRANCHES)
    first = start_app(crash_at)
    first.call_killed("POST", f"{api.base()}/workflows/{workflow_id}/runs", json={}, headers=first.auth)

    (stored,) = runs_of(workflow_id)
    before = read_run(api, stored.id)
    assert before["status"] == "running", before
    assert completed_steps(before) == kept, before["steps"]
    assert "slow" not in {s["nodeId"] for s in before["steps"]}  # killed while slow was running

    second = start_app()
    final = poll_finished(second, api, stored.id)
    assert_finished_once(final, before, {"start": 1, "quick": 1, "slow": 1, "join": 1, "after": 1})
    assert final["output"] == {"after": {"result": "quick done + slow done", "missing": []}}


# On PostgreSQL the run and its queue job commit in one transaction: there is no hand-off to crash in
# (a killed worker's runs are taken over by another: tests/integration/test_scale_out.py).
@pytest.mark.parametrize("db_url", ["sqlite"], indirect=True)
def test_killed_between_a_webhook_commit_and_the_hand_off_the_run_finishes_once(api, start_app):
    secret = new_secret()
    trigger = {"id": "start", "type": "trigger.webhook",
               "parameters": {"path": "orders", "method": "POST", "secret": secret}}
    workflow_id = create_published(api, {"nodes": [trigger, transform("echo", "order {{ body.n }}")],
                                         "edges": [edge("start", "echo")]})
    body = json.dumps({"n": 9}).encode()
    headers = sign(secret, body)
    first = start_app("before_handoff:*")
    first.call_killed("POST", f"/api/hooks/{workflow_id}/orders", content=body, headers=headers)

    (stored,) = runs_of(workflow_id)
    before = read_run(api, stored.id)
    assert before["status"] == "running" and before["steps"] == [], before

    second = start_app()
    # The sender got no answer and delivers again: the same webhook-id starts nothing new.
    again = second.client.post(f"/api/hooks/{workflow_id}/orders", content=body, headers=headers)
    assert again.status_code == 202, again.text
    assert again.json()["runId"] == stored.id
    final = poll_finished(second, api, stored.id)
    assert_finished_once(final, before, {"start": 1, "echo": 1})
    assert final["output"] == {"echo": {"result": "order 9", "missing": []}}
    assert [run.id for run in runs_of(workflow_id)] == [stored.id]
