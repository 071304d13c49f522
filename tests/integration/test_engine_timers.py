"""Due work of paused runs (DESIGN §4): durable flow.wait timers (they fire after a restart) and
human task timeouts (onTimeout cancel / default). email.checkEmail's mail poller, the third kind,
is tested against a real IMAP server in tests/integration/test_mail_check.py."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from sqlmodel import select

from backend.config import get_settings, reset_settings_cache
from backend.db import reset_engine, session_scope
from backend.db.models import HumanTask, WorkflowRun, utcnow
from backend.engine import queue as run_queue
from backend.engine import timers
from backend.engine.timers import expire_due_tasks, run_due_work, start_timer_thread, wake_due_runs
from tests.integration.test_engine import START, edge, ran, run_graph, steps_of, transform


def get_run(api, run_id: str) -> dict[str, Any]:
    run_queue.wait_for_rest(run_id, 30)  # a woken or resumed run executes on a run thread or a worker
    response = api.client.get(f"{api.base()}/runs/{run_id}", headers=api.auth)
    assert response.status_code == 200, response.text
    return response.json()


def wait_graph(parameters: dict[str, Any]) -> dict[str, Any]:
    return {"nodes": [START, {"id": "w", "type": "flow.wait", "parameters": parameters},
                      transform("after", "woke")],
            "edges": [edge("start", "w"), edge("w", "after")]}


def test_wait_pauses_durably_and_fires_after_a_restart(api):
    run = run_graph(api, wait_graph({"seconds": 3600}))
    assert run["status"] == "paused" and run["pauseReason"] == "wait", run
    with session_scope() as session:
        stored = session.get(WorkflowRun, run["id"])
        wake_at = datetime.fromisoformat(stored.context["suspended"]["w"]["output"]["wakeAt"])
    assert timedelta(minutes=59) < wake_at - utcnow() <= timedelta(hours=1)
    assert wake_due_runs(now=utcnow()) == 0
    assert get_run(api, run["id"])["status"] == "paused"
    reset_engine()  # a fresh database engine and sessions, as after a restart
    assert wake_due_runs(now=utcnow() + timedelta(hours=2)) == 1
    final = get_run(api, run["id"])
    assert final["status"] == "completed", final
    assert ran(final) == ["start", "w", "after"]
    assert steps_of(final)["w"]["status"] == "completed"
    assert wake_due_runs(now=utcnow() + timedelta(hours=3)) == 0


def test_wait_until_a_date_time(api):
    until = datetime(2030, 1, 1, 12, 0, tzinfo=UTC)
    run = run_graph(api, wait_graph({"until": until.isoformat()}))
    assert run["pauseReason"] == "wait", run
    assert wake_due_runs(now=until - timedelta(seconds=1)) == 0
    assert wake_due_runs(now=until) == 1
    assert get_run(api, run["id"])["status"] == "completed"


def test_cancelling_a_waiting_run_cancels_its_wait_step_and_the_timer(api):
    run = run_graph(api, wait_graph({"seconds": 60}))
    assert steps_of(run)["w"]["status"] == "waiting", run
    cancelled = api.client.post(f"{api.base()}/runs/{run['id']}/cancel", headers=api.auth)
    assert cancelled.status_code == 200, cancelled.text
    final = get_run(api, run["id"])
    assert final["status"] == "cancelled" and ran(final) == ["start", "w"], final
    step = steps_of(final)["w"]
    assert step["status"] == "cancelled" and step["finishedAt"] and isinstance(step["durationMs"], int), step
    assert wake_due_runs(now=utcnow() + timedelta(hours=1)) == 0
    assert steps_of(get_run(api, run["id"]))["w"]["status"] == "cancelled"


def test_concurrent_tickers_resume_a_due_wait_and_expire_a_task_exactly_once(api):
    """Two processes ticking: each item is done by one ticker; the others lose the guarded
    transition (ConcurrentTransition), skip the item and go on with the rest of their round."""
    run = run_graph(api, wait_graph({"until": "2020-01-01T00:00:00+00:00"}))
    assert run["pauseReason"] == "wait", run
    timed = run_graph(api, timed_approval("cancel"))
    later = utcnow() + timedelta(minutes=2)
    start_together = threading.Barrier(4)
    rounds: list[dict[str, int]] = []
    errors: list[BaseException] = []

    def tick_now() -> None:
        try:
            start_together.wait(10)
            rounds.append(run_due_work(now=later))
        except BaseException as exc:  # noqa: BLE001 - reported by the test
            errors.append(exc)

    threads = [threading.Thread(target=tick_now) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    assert not errors, errors
    assert sum(r["woken"] for r in rounds) == 1 and sum(r["expired"] for r in rounds) == 1, rounds
    final = get_run(api, run["id"])
    assert final["status"] == "completed", final
    assert ran(final) == ["start", "w", "after"]
    cancelled = get_run(api, timed["id"])
    assert cancelled["status"] == "cancelled" and steps_of(cancelled)["ok"]["status"] == "cancelled", cancelled


def timed_approval(on_timeout: str) -> dict[str, Any]:
    return {"nodes": [START,
                      {"id": "ok", "type": "input.approval",
                       "parameters": {"title": "Approve", "timeoutSeconds": 60, "onTimeout": on_timeout}},
                      transform("yes", "approved"), transform("no", "rejected")],
            "edges": [edge("start", "ok"), edge("ok", "yes", "approved"), edge("ok", "no", "rejected")]}


def _task(run_id: str) -> HumanTask:
    with session_scope() as session:
        return session.exec(select(HumanTask).where(HumanTask.run_id == run_id)).one()


def test_task_timeout_cancel_expires_the_task_and_cancels_the_run(api):
    run = run_graph(api, timed_approval("cancel"))
    assert run["pauseReason"] == "humanTask", run
    assert _task(run["id"]).due_at is not None
    assert expire_due_tasks(now=utcnow()) == 0
    assert expire_due_tasks(now=utcnow() + timedelta(minutes=2)) == 1
    assert _task(run["id"]).status == "expired"
    final = get_run(api, run["id"])
    assert final["status"] == "cancelled" and "timed out" in final["error"], final
    step = steps_of(final)["ok"]
    assert step["status"] == "cancelled" and step["finishedAt"] and isinstance(step["durationMs"], int), step
    assert "timed out" in step["error"]
    completing = api.client.post(f"/api/tasks/{_task(run['id']).id}/complete", json={"data": {"approved": True}},
                                 headers=api.auth)
    assert completing.status_code == 409


def test_task_timeout_default_rejects_an_approval_and_fills_form_defaults(api):
    run = run_graph(api, timed_approval("default"))
    assert expire_due_tasks(now=utcnow() + timedelta(minutes=2)) == 1
    final = get_run(api, run["id"])
    assert final["status"] == "completed", final
    assert ran(final) == ["start", "ok", "no"]
    assert steps_of(final)["ok"]["output"]["approved"] is False
    assert _task(run["id"]).status == "expired"

    form = {"nodes": [START,
                      {"id": "f", "type": "input.form",
                       "parameters": {"title": "Fill", "timeoutSeconds": 5, "onTimeout": "default",
                                      "fields": [{"name": "size", "default": 3}, {"name": "note"}]}},
                      transform("after", "{{ size }}", data="{{ nodes.f.output }}")],
            "edges": [edge("start", "f"), edge("f", "after")]}
    run = run_graph(api, form)
    assert run["pauseReason"] == "humanTask", run
    assert expire_due_tasks(now=utcnow() + timedelta(seconds=10)) == 1
    final = get_run(api, run["id"])
    assert final["status"] == "completed", final
    assert steps_of(final)["f"]["output"] == {"size": 3, "note": None}
    assert steps_of(final)["after"]["output"]["result"] == "3"


# --- the timer thread -------------------------------------------------------------------------


@pytest.fixture
def ticker_stopped() -> Iterator[None]:
    """Whatever timer thread a test started is stopped when it ends."""
    yield
    if timers._ticker is not None:
        timers._ticker.stop()
        assert not timers._ticker.is_alive()


def poll(condition, what: str, timeout: float = 20.0) -> None:
    """Wait until `condition()` holds, checking often; fail naming `what` after `timeout` seconds."""
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, f"{what} did not happen within {timeout} s"
        time.sleep(0.02)


def test_the_timer_thread_wakes_a_due_wait_until_it_is_stopped(api, ticker_stopped):
    run = run_graph(api, wait_graph({"until": "2020-01-01T00:00:00+00:00"}))  # due at once
    assert run["status"] == "paused" and run["pauseReason"] == "wait", run
    ticker = start_timer_thread(0.05)
    assert start_timer_thread(0.05) is ticker  # one per process
    assert ticker.thread.daemon and ticker.thread.name == "poweron-timers"
    poll(lambda: get_run(api, run["id"])["status"] == "completed", "waking the due flow.wait")
    assert ran(get_run(api, run["id"])) == ["start", "w", "after"]
    ticker.stop()
    assert not ticker.is_alive()
    again = start_timer_thread(0.05)  # a stopped ticker may be started anew
    assert again is not ticker and again.is_alive()


def test_the_timer_thread_logs_a_failing_round_and_goes_on(ticker_stopped, monkeypatch, caplog):
    rounds: list[int] = []
    second_round = threading.Event()

    def flaky(now=None):
        rounds.append(len(rounds))
        if len(rounds) == 1:
            raise RuntimeError("database away")
        second_round.set()
        return {"woken": 0, "expired": 0, "mails": 0}

    monkeypatch.setattr(timers, "run_due_work", flaky)
    with caplog.at_level(logging.ERROR, logger="backend.engine.timers"):
        ticker = start_timer_thread(0.02)
        assert second_round.wait(20), "the ticker stopped after a failing round"
    assert ticker.is_alive()
    assert "due work of paused runs failed" in caplog.text and "database away" in caplog.text


def test_the_timer_interval_comes_from_the_setting(monkeypatch, ticker_stopped):
    monkeypatch.setattr(timers, "run_due_work", lambda now=None: {})  # no database here
    monkeypatch.delenv("POWERON_TIMER_INTERVAL_SECONDS", raising=False)
    reset_settings_cache()
    assert get_settings().timer_interval_seconds == 5.0
    monkeypatch.setenv("POWERON_TIMER_INTERVAL_SECONDS", "0.5")
    reset_settings_cache()
    try:
        assert get_settings().timer_interval_seconds == 0.5
        assert start_timer_thread().interval_seconds == 0.5
        for bad in ("0", "-1", "soon", "nan"):
            monkeypatch.setenv("POWERON_TIMER_INTERVAL_SECONDS", bad)
            reset_settings_cache()
            with pytest.raises(ValueError, match="POWERON_TIMER_INTERVAL_SECONDS"):
                get_settings()
    finally:
        monkeypatch.delenv("POWERON_TIMER_INTERVAL_SECONDS")
        reset_settings_cache()
