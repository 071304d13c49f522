"""Runs off the request thread and branches at the same time (issue 5, items 2 and 8).

- independent slow nodes (here sandboxed scripts) of one run execute at the same time, and a
  merge after them waits for both;
- a request that starts a run waits at most POWERON_RUN_WAIT_SECONDS: a longer run answers
  `running` and finishes in the background, where GET …/runs/{id} follows it;
- cancelling such a run stops it at the next safe point: the node that was running finishes
  and is logged, nothing after it runs.
"""

from __future__ import annotations

import time
from datetime import datetime
from typing import Any

import pytest

from backend.config import reset_settings_cache
from backend.engine.queue import stop_queue
from tests.integration.test_engine import START, edge, ran, run_graph, transform


def sleeper(node_id: str, seconds: float) -> dict[str, Any]:
    return {"id": node_id, "type": "script.python",
            "parameters": {"code": f"import time\ntime.sleep({seconds})\noutput = '{node_id} done'"}}


def moment(text: str) -> datetime:
    return datetime.fromisoformat(text.replace("Z", "+00:00"))


def poll_run(api, run_id: str, until, timeout: float = 30.0) -> dict[str, Any]:
    """GET the run until `until(run)` holds (or fail after `timeout` seconds)."""
    deadline = time.monotonic() + timeout
    while True:
        run = api.client.get(f"{api.base()}/runs/{run_id}", headers=api.auth).json()
        if until(run):
            return run
        assert time.monotonic() < deadline, f"run did not get there in {timeout} s: {run}"
        time.sleep(0.05)


@pytest.fixture
def short_wait(monkeypatch):
    """Requests wait only briefly for their run, so a slow run answers `running`."""
    monkeypatch.setenv("POWERON_RUN_WAIT_SECONDS", "0.2")
    reset_settings_cache()
    yield
    reset_settings_cache()


PARALLEL = {
    "nodes": [START, sleeper("left", 1.0), sleeper("right", 1.0),
              {"id": "join", "type": "flow.merge", "parameters": {}},
              transform("after", "{{ l }} + {{ r }}",
                        data={"l": "{{ nodes.left.output }}", "r": "{{ nodes.right.output }}"})],
    "edges": [edge("start", "left"), edge("start", "right"), edge("left", "join"), edge("right", "join"),
              edge("join", "after")],
}


def test_independent_slow_branches_run_at_the_same_time(api):
    run = run_graph(api, PARALLEL)
    assert run["status"] == "completed", run
    steps = {s["nodeId"]: s for s in run["steps"]}
    left, right = steps["left"], steps["right"]
    assert left["status"] == right["status"] == "completed"
    # Each script sleeps a second: one after the other their time spans could not overlap.
    assert moment(left["startedAt"]) < moment(right["finishedAt"])
    assert moment(right["startedAt"]) < moment(left["finishedAt"])
    assert ran(run)[-2:] == ["join", "after"]
    assert run["output"] == {"after": {"result": "left done + right done", "missing": []}}


SLOW_CHAIN = {
    "nodes": [START, sleeper("slow", 1.5), transform("after", "after {{ v }}", data={"v": "{{ input }}"})],
    "edges": [edge("start", "slow"), edge("slow", "after")],
}


def test_a_long_run_answers_running_and_finishes_in_the_background(api, short_wait):
    started = run_graph(api, SLOW_CHAIN, "x")
    assert started["status"] == "running", started
    done = poll_run(api, started["id"], lambda run: run["status"] != "running")
    assert done["status"] == "completed", (done["error"], done["steps"])
    assert ran(done) == ["start", "slow", "after"]


def test_cancelling_a_background_run_stops_it_before_its_next_node(api, short_wait):
    started = run_graph(api, SLOW_CHAIN, "x")
    assert started["status"] == "running", started
    cancelled = api.client.post(f"{api.base()}/runs/{started['id']}/cancel", headers=api.auth)
    assert cancelled.status_code == 200, cancelled.text
    assert cancelled.json()["status"] == "cancelled"
    stop_queue()  # waits for the run to reach its safe point (a run thread, or the queue's worker)
    final = poll_run(api, started["id"], lambda run: "slow" in ran(run))
    assert final["status"] == "cancelled", final
    assert "after" not in ran(final)
