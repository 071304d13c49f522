"""Schedules in words and their next fire time (backend/scheduler/preview.py): the editor's
Versions tab status line and the monitor's upcoming runs."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from backend.scheduler.cron import Schedule
from backend.scheduler.preview import (
    NO_SCHEDULE,
    NOT_REGISTERED,
    cron_words,
    describe_schedule,
    next_fire_time,
    next_run,
    schedule_text,
)

ZURICH = "Europe/Zurich"


def _schedule_graph(**parameters) -> dict:
    return {"nodes": [{"id": "clock", "type": "trigger.schedule", "parameters": parameters}], "edges": []}


MANUAL = {"nodes": [{"id": "start", "type": "trigger.manual", "parameters": {}}], "edges": []}


# --- schedule descriptions ---------------------------------------------------------------------


@pytest.mark.parametrize(("cron", "words"), [
    ("0 7 * * *", "every day 07:00"),
    ("30 18 * * 1-5", "on weekdays 18:30"),
    ("0 9 * * mon", "every mon 09:00"),
    ("0 9 * * 0", "every sun 09:00"),
    ("15 6 1 * *", "monthly on day 1 06:15"),
    ("*/10 * * * *", "every 10 min"),
    ("5 * * * *", "every hour at :05"),
    ("0 0 7 * * *", "every day 07:00"),
    ("30 0 7 * * *", "every day 07:00:30"),
    ("0 */2 * * *", None),
    ("0 7 * 1 *", None),
    ("0 7 1 * 1", None),
])
def test_simple_crontab_schedules_are_put_into_words(cron, words):
    assert cron_words(cron) == words


def test_describe_schedule_shows_words_expression_and_zone():
    assert describe_schedule(Schedule("0 7 * * *", None, ZURICH)) == "every day 07:00 (0 7 * * *, Europe/Zurich)"
    assert describe_schedule(Schedule("0 */2 * * *", None, "UTC")) == "cron 0 */2 * * * (UTC)"
    assert describe_schedule(Schedule(None, 900, "UTC")) == "every 15 min (UTC)"
    assert describe_schedule(Schedule(None, 7200, "UTC")) == "every 2 h (UTC)"
    assert describe_schedule(Schedule(None, 45, "UTC")) == "every 45 s (UTC)"


def test_next_fire_time_uses_the_schedulers_trigger_with_crontab_semantics():
    now = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)
    moment = next_fire_time(Schedule("0 7 * * *", None, ZURICH), None, now)
    assert moment.strftime("%Y-%m-%d %H:%M %z") == "2026-12-01 07:00 +0100"
    # Crontab's 0 = Sunday (APScheduler counts from Monday): 2026-12-06 is a Sunday.
    sunday = next_fire_time(Schedule("0 9 * * 0", None, "UTC"), None, now)
    assert sunday.strftime("%Y-%m-%d %a") == "2026-12-06 Sun"
    # An interval keeps the grid of its publication.
    anchor = datetime(2026, 11, 30, 11, 55, tzinfo=UTC)
    assert next_fire_time(Schedule(None, 900, "UTC"), anchor, now) == datetime(2026, 11, 30, 12, 10, tzinfo=UTC)


# --- the status line -----------------------------------------------------------------------------


def test_schedule_text_of_an_active_registered_workflow():
    now = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)
    graph = _schedule_graph(cron="0 7 * * *", timezone=ZURICH)
    text = schedule_text(graph, None, True, "wf:w1:clock", now=now)
    assert text == ("Schedule: every day 07:00 (0 7 * * *, Europe/Zurich) · next run 2026-12-01 07:00 · "
                    "job registered (eventId wf:w1:clock)")
    # Active, but the scheduler has not written the eventId yet.
    assert schedule_text(graph, None, True, "", now=now).endswith(
        "next run 2026-12-01 07:00 · job not registered yet (the scheduler registers it shortly)")


def test_schedule_text_when_inactive_missing_or_only_in_the_draft():
    graph = _schedule_graph(cron="0 7 * * *", timezone=ZURICH)
    assert schedule_text(graph, None, False, None) == (
        "Schedule: every day 07:00 (0 7 * * *, Europe/Zurich) · not registered: switch the workflow active")
    assert schedule_text(MANUAL, MANUAL, True, None) == NO_SCHEDULE
    assert schedule_text(None, None, False, None) == NO_SCHEDULE
    # The draft has a schedule, the published version (if any) has none.
    assert schedule_text(None, graph, False, None) == NOT_REGISTERED
    assert schedule_text(MANUAL, graph, True, None) == NOT_REGISTERED
    # A disabled schedule node does not run.
    disabled = {"nodes": [{**graph["nodes"][0], "disabled": True}], "edges": []}
    assert schedule_text(disabled, None, True, None) == NO_SCHEDULE


def test_several_schedule_nodes_show_the_earliest_next_run():
    now = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)
    graph = {"nodes": [
        {"id": "a", "type": "trigger.schedule", "parameters": {"cron": "0 7 * * *", "timezone": "UTC"}},
        {"id": "b", "type": "trigger.schedule", "parameters": {"cron": "0 13 * * *", "timezone": "UTC"}},
    ], "edges": []}
    text = schedule_text(graph, None, True, "wf:w:a wf:w:b", now=now)
    assert text.startswith("Schedule: every day 07:00 (0 7 * * *, UTC); every day 13:00 (0 13 * * *, UTC)")
    assert "next run 2026-11-30 13:00" in text


def test_next_run_is_the_soonest_of_the_enabled_schedule_nodes():
    now = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)
    graph = {"nodes": [
        {"id": "a", "type": "trigger.schedule", "parameters": {"cron": "0 7 * * *", "timezone": "UTC"}},
        {"id": "b", "type": "trigger.schedule", "parameters": {"cron": "0 13 * * *", "timezone": "UTC"}},
        {"id": "c", "type": "trigger.schedule", "parameters": {"cron": "30 12 * * *"}, "disabled": True},
    ], "edges": []}
    moment, schedule = next_run(graph, None, now)
    assert moment == datetime(2026, 11, 30, 13, 0, tzinfo=UTC) and schedule.cron == "0 13 * * *"
    assert next_run(MANUAL, None, now) is None and next_run(None) is None
