"""The in-process run event stream (issue 5, item 11): a run's events arrive in order, subscribers
filter by run or workflow, asyncio subscribers receive events published from worker threads, and
events of a rolled-back transaction are never published."""

from __future__ import annotations

import asyncio
import threading
import uuid
from typing import Any

from backend.db import session_scope
from backend.engine import events
from backend.engine.events import EventBus

START = {"id": "start", "type": "trigger.manual", "parameters": {}}


def run_in_own_loop(coroutine_function):
    """asyncio.run in a thread of its own: the session's Playwright fixture keeps a loop running here."""
    outcome = {}

    def target():
        try:
            outcome["value"] = asyncio.run(coroutine_function())
        except BaseException as exc:  # noqa: BLE001 - re-raised in the test's thread
            outcome["error"] = exc

    thread = threading.Thread(target=target)
    thread.start()
    thread.join(timeout=60)
    assert not thread.is_alive(), "the event loop did not finish within 60 s"
    if "error" in outcome:
        raise outcome["error"]
    return outcome["value"]


def transform(node_id: str, template: str, **extra: Any) -> dict[str, Any]:
    return {"id": node_id, "type": "context.transform", "parameters": {"data": "{{ input }}", "template": template},
            **extra}


def edge(source: str, target: str, handle: str | None = None) -> dict[str, Any]:
    return {"source": source, "target": target, **({"sourceHandle": handle} if handle else {})}


CHAIN = {"nodes": [START, transform("a", "A"), transform("b", "B")], "edges": [edge("start", "a"), edge("a", "b")]}


def create(api, graph: dict[str, Any]) -> str:
    created = api.client.post(f"{api.base()}/workflows", json={"name": f"wf-{uuid.uuid4().hex}", "graph": graph},
                              headers=api.auth)
    assert created.status_code == 201, created.text
    return created.json()["id"]


def start(api, workflow_id: str, input: Any = None) -> dict[str, Any]:  # noqa: A002
    response = api.client.post(f"{api.base()}/workflows/{workflow_id}/runs", json={"input": input},
                               headers=api.auth)
    assert response.status_code == 201, response.text
    return response.json()


def summary(received: list[events.Event]) -> list[tuple[str, ...]]:
    return [(e.type, e.data["nodeId"], e.data["status"]) if e.type.startswith("node.") else (e.type,)
            for e in received]


def test_a_run_publishes_status_and_node_events_in_order(api):
    workflow_id = create(api, CHAIN)
    with events.subscribe(workflow_id=workflow_id) as sub:
        run = start(api, workflow_id, {"x": 1})
        received = sub.drain()
    assert run["status"] == "completed"
    assert summary(received) == [
        ("run.started",),
        ("node.started", "start", "running"), ("node.finished", "start", "completed"),
        ("node.started", "a", "running"), ("node.finished", "a", "completed"),
        ("node.started", "b", "running"), ("node.finished", "b", "completed"),
        ("run.completed",),
    ]
    assert all(e.run_id == run["id"] and e.workflow_id == workflow_id for e in received)
    assert [e.seq for e in received] == sorted(e.seq for e in received)
    finished = [e for e in received if e.type == "node.finished"]
    assert all(e.data["attempt"] == 1 and isinstance(e.data["durationMs"], int) for e in finished)
    assert received[0].to_dict()["runId"] == run["id"]


def test_retries_failures_pauses_resumes_and_cancels_are_published(api):
    failing = {"nodes": [START, {"id": "bad", "type": "context.transform",
                                 "parameters": {"data": {}, "template": "{{ 1 / 0 }}"},
                                 "retry": {"maxAttempts": 2, "delaySeconds": 0}}],
               "edges": [edge("start", "bad")]}
    workflow_id = create(api, failing)
    with events.subscribe(workflow_id=workflow_id) as sub:
        run = start(api, workflow_id)
        received = sub.drain()
    assert run["status"] == "failed"
    bad = [(e.type, e.data["attempt"], e.data["status"]) for e in received if e.data.get("nodeId") == "bad"]
    assert bad[-1][0] == "node.finished" and bad[-1][2] == "failed"
    assert received[-1].type == "run.failed" and "bad" in received[-1].data["error"]

    me = api.client.get("/api/me", headers=api.auth).json()["id"]
    approval = {"nodes": [START, {"id": "ok", "type": "input.approval",
                                  "parameters": {"title": "Approve", "assignee": {"user": me}}},
                          transform("yes", "yes"), transform("no", "no")],
                "edges": [edge("start", "ok"), edge("ok", "yes", "approved"), edge("ok", "no", "rejected")]}
    workflow_id = create(api, approval)
    with events.subscribe(workflow_id=workflow_id) as sub:
        run = start(api, workflow_id)
        assert run["status"] == "paused"
        paused = sub.drain()
        assert summary(paused)[-2:] == [("node.finished", "ok", "waiting"), ("run.paused",)]
        assert paused[-1].data["reason"] == "humanTask"
        task = next(t for t in api.client.get("/api/tasks", params={"status": "pending"}, headers=api.auth).json()
                    if t["runId"] == run["id"])
        done = api.client.post(f"/api/tasks/{task['id']}/complete", json={"data": {"approved": True}},
                               headers=api.auth)
        assert done.status_code == 200, done.text
        assert summary(sub.drain()) == [
            ("run.resumed",), ("node.finished", "ok", "completed"),
            ("node.started", "yes", "running"), ("node.finished", "yes", "completed"), ("run.completed",),
        ]
        second = start(api, workflow_id)
        sub.drain()
        cancelled = api.client.post(f"{api.base()}/runs/{second['id']}/cancel", headers=api.auth)
        assert cancelled.status_code == 200, cancelled.text
        last = sub.drain()
        assert summary(last) == [("node.finished", "ok", "cancelled"), ("run.cancelled",)]
        assert all(e.run_id == second["id"] for e in last)


def test_subscribers_filter_by_run_and_by_workflow(api):
    first, second = create(api, CHAIN), create(api, CHAIN)
    with events.subscribe(workflow_id=first) as by_workflow, events.subscribe() as everything:
        one = start(api, first)
        two = start(api, second)
        assert {e.workflow_id for e in by_workflow.drain()} == {first}
        assert {e.run_id for e in everything.drain()} >= {one["id"], two["id"]}

    bus = EventBus()
    with bus.subscribe(run_id="r1") as r1, bus.subscribe(run_id="r1", workflow_id="w2") as nothing:
        bus.publish("run.started", "r1", "w1")
        bus.publish("run.started", "r2", "w1")
        assert [e.run_id for e in r1.drain()] == ["r1"]
        assert nothing.drain() == []
    bus.publish("run.started", "r1", "w1")
    assert r1.drain() == []  # closed subscriptions receive nothing more


def test_a_full_queue_drops_events_instead_of_blocking():
    bus = EventBus()
    with bus.subscribe(maxsize=2) as small:
        for index in range(5):
            bus.publish("run.started", f"r{index}", None)
        assert len(small.drain()) == 2 and small.dropped == 3


def test_an_asyncio_subscriber_receives_events_published_from_other_threads():
    bus = EventBus()

    async def listen() -> list[events.Event]:
        async with bus.subscribe_async(workflow_id="w") as sub:
            loop_thread = threading.get_ident()
            publishers = [threading.Thread(target=lambda i=i: [bus.publish("node.started", f"r{i}", "w", n=n)
                                                               for n in range(50)]) for i in range(4)]
            for thread in publishers:
                thread.start()
            got = [await asyncio.wait_for(sub.get(), timeout=5) for _ in range(200)]
            for thread in publishers:
                thread.join()
            assert threading.get_ident() == loop_thread
            return got

    got = run_in_own_loop(listen)
    assert len(got) == 200
    assert [e.seq for e in got] == sorted(e.seq for e in got)
    for index in range(4):
        assert [e.data["n"] for e in got if e.run_id == f"r{index}"] == list(range(50))


def test_an_asyncio_subscriber_follows_a_real_run_executed_in_a_worker_thread(api):
    workflow_id = create(api, CHAIN)

    async def follow() -> tuple[dict[str, Any], list[events.Event]]:
        async with events.subscribe_async(workflow_id=workflow_id) as sub:
            run = await asyncio.get_running_loop().run_in_executor(None, start, api, workflow_id)
            received = []
            while not received or received[-1].type != "run.completed":
                received.append(await asyncio.wait_for(sub.get(), timeout=5))
            return run, received

    run, received = run_in_own_loop(follow)
    assert run["status"] == "completed"
    assert received[0].type == "run.started" and len(received) == 8


def test_events_of_a_rolled_back_transaction_are_not_published(app_config):
    with events.subscribe(run_id="ghost") as sub:
        with session_scope() as session:
            events.publish_on_commit(session, events.RUN_STARTED, "ghost", None)
            session.rollback()
            session.commit()
        assert sub.drain() == []
        with session_scope() as session:
            events.publish_on_commit(session, events.RUN_STARTED, "ghost", None)
            session.commit()
        assert [e.type for e in sub.drain()] == ["run.started"]
