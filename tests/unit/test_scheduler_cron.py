"""Strict cron parsing, weekday translation, intervals and time zones (backend/scheduler/cron.py)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from apscheduler.triggers.combining import OrTrigger
from apscheduler.triggers.interval import IntervalTrigger

from backend.scheduler.cron import (
    Schedule,
    ScheduleError,
    cron_trigger,
    crontab_days_to_apscheduler,
    parse_cron,
    parse_schedule,
    schedule_errors,
)
from backend.workflows.validation import validate_graph

# A Thursday: 2026-01-01 00:00 UTC.
THURSDAY = datetime(2026, 1, 1, tzinfo=UTC)


def fire_times(expression: str, count: int = 4, timezone: str = "UTC", start: datetime = THURSDAY) -> list[datetime]:
    trigger = cron_trigger(expression, timezone)
    times, previous = [], None
    for _ in range(count):
        previous = trigger.get_next_fire_time(previous, previous or start)
        times.append(previous)
    return times


def weekdays(expression: str, count: int = 7) -> list[str]:
    return [t.strftime("%a") for t in fire_times(expression, count)]


@pytest.mark.parametrize("expression, days", [
    ("0 9 * * 0", ["Sun"]),
    ("0 9 * * 7", ["Sun"]),
    ("0 9 * * sun", ["Sun"]),
    ("0 9 * * 1", ["Mon"]),
    ("0 9 * * 6", ["Sat"]),
    ("0 9 * * 1-5", ["Mon", "Tue", "Wed", "Thu", "Fri"]),
    ("0 9 * * mon-fri", ["Mon", "Tue", "Wed", "Thu", "Fri"]),
    ("0 9 * * 0,6", ["Sat", "Sun"]),
    ("0 9 * * 6,7", ["Sat", "Sun"]),
    ("0 9 * * */2", ["Sun", "Tue", "Thu", "Sat"]),  # crontab: 0,2,4,6
    ("0 9 * * 1-5/2", ["Mon", "Wed", "Fri"]),
    ("0 9 * * 0-6", ["Sun", "Mon", "Tue", "Wed", "Thu", "Fri", "Sat"]),
    ("0 9 * * 5-7", ["Fri", "Sat", "Sun"]),
])
def test_crontab_weekdays_are_translated_for_apscheduler(expression, days):
    seen = weekdays(expression, 14)
    assert sorted(set(seen)) == sorted(days)
    assert all(t.hour == 9 and t.minute == 0 and t.second == 0 for t in fire_times(expression, 7))


def test_sunday_9_oclock_next_fire_time_is_a_sunday():
    first = cron_trigger("0 9 * * 0").get_next_fire_time(None, THURSDAY)
    assert first == datetime(2026, 1, 4, 9, 0, tzinfo=UTC)  # Sunday 4 January
    assert first.weekday() == 6


def test_day_names_compress_into_ranges():
    assert crontab_days_to_apscheduler({1, 2, 3, 4, 5}) == "mon-fri"
    assert crontab_days_to_apscheduler({0, 6}) == "sat-sun"
    assert crontab_days_to_apscheduler({0, 2, 4, 6}) == "tue,thu,sat-sun"
    assert crontab_days_to_apscheduler(set(range(7))) == "*"


def test_six_fields_have_seconds_first():
    times = fire_times("*/2 * * * * *", 3)
    assert [t - THURSDAY for t in times] == [timedelta(0), timedelta(seconds=2), timedelta(seconds=4)]
    assert parse_cron("30 5 * * * *").fields["second"] == "30"
    assert parse_cron("5 * * * *").fields == {"second": "0", "minute": "5", "hour": "*", "day": "*",
                                              "month": "*", "day_of_week": "*"}


def test_day_of_month_and_weekday_both_given_fire_on_either_as_crontab_does():
    trigger = cron_trigger("0 0 13 * 5")
    assert isinstance(trigger, OrTrigger)
    times = fire_times("0 0 13 * 5", 6)
    assert datetime(2026, 1, 2, tzinfo=UTC) in times  # a Friday
    assert datetime(2026, 1, 13, tzinfo=UTC) in times  # a Tuesday, the 13th
    assert all(t.weekday() == 4 or t.day == 13 for t in times)


def test_timezone_per_trigger():
    (first,) = fire_times("0 9 * * *", 1, timezone="Europe/Zurich")
    assert first.astimezone(UTC) == datetime(2026, 1, 1, 8, 0, tzinfo=UTC)


@pytest.mark.parametrize("expression, words", [
    ("0 9 * *", ["4 fields", "expected 5"]),
    ("0 9 * * * * *", ["7 fields", "expected 5"]),
    ("", ["must be a cron expression"]),
    ("60 * * * *", ["field 1 (minute)", "60 is out of range 0-59"]),
    ("0 24 * * *", ["field 2 (hour)", "24"]),
    ("0 9 0 * *", ["field 3 (day of month)", "0 is out of range 1-31"]),
    ("0 9 * 13 *", ["field 4 (month)", "13"]),
    ("0 9 * * 8", ["field 5 (day of week)", "8 is out of range 0-7"]),
    ("0 9 * * funday", ["field 5 (day of week)", "'funday'"]),
    ("61 0 9 * * *", ["field 1 (second)", "61"]),
    ("0 9 * * 5-1", ["field 5 (day of week)", "starts after it ends"]),
    ("*/0 * * * *", ["field 1 (minute)", "step"]),
    ("5/15 * * * *", ["field 1 (minute)", "step without a range", "5-59/15"]),
    ("0 9 ? * *", ["field 3 (day of month)", "'?'"]),
    ("0 9 L * *", ["field 3 (day of month)", "'l'"]),
    ("0 9 * * 5#3", ["field 5 (day of week)"]),
    ("0 9 1,,2 * *", ["field 3 (day of month)", "empty list item"]),
])
def test_invalid_cron_is_refused_with_what_is_wrong(expression, words):
    with pytest.raises(ScheduleError) as caught:
        cron_trigger(expression)
    assert caught.value.field == "cron"
    for word in words:
        assert word in str(caught.value), str(caught.value)


def test_intervals_and_timezones():
    schedule = parse_schedule({"intervalSeconds": 90, "timezone": "Europe/Zurich"})
    assert schedule == Schedule(None, 90, "Europe/Zurich")
    anchor = datetime(2026, 1, 1, tzinfo=UTC)
    trigger = schedule.trigger(anchor=anchor)
    assert isinstance(trigger, IntervalTrigger)
    assert trigger.get_next_fire_time(None, anchor + timedelta(seconds=100)) == anchor + timedelta(seconds=180)
    assert schedule_errors({"intervalSeconds": 0}) == [("intervalSeconds", "must be a whole number of seconds "
                                                                            "above 0, not 0")]
    assert schedule_errors({"cron": "* * * * *", "timezone": "Mars/Olympus"})[0][0] == "timezone"
    assert schedule_errors({"cron": "* * * * *", "intervalSeconds": 5}) == [
        ("cron", "give exactly one of cron and intervalSeconds")]
    assert parse_schedule({"cron": "* * * * *"}).timezone == "UTC"


def _graph(parameters: dict) -> dict:
    return {"nodes": [{"id": "tick", "type": "trigger.schedule", "parameters": parameters}], "edges": []}


@pytest.mark.parametrize("parameters, field, words", [
    ({"cron": "0 9 * *"}, "parameters.cron", "4 fields"),
    ({"cron": "0 9 * * 8"}, "parameters.cron", "field 5 (day of week)"),
    ({"cron": "0 9 * * *", "timezone": "Nowhere/City"}, "parameters.timezone", "unknown time zone"),
    ({"intervalSeconds": 0}, "parameters.intervalSeconds", "greater than or equal to 1"),
    ({"intervalSeconds": -5}, "parameters.intervalSeconds", "greater than or equal to 1"),
    ({"cron": "{{ input.cron }}"}, "parameters.cron", "must be written out"),
    ({}, "parameters", "exactly one of cron and intervalSeconds"),
])
def test_graph_validation_names_node_and_field(parameters, field, words):
    errors = validate_graph(_graph(parameters))
    assert [(e.node_id, e.field) for e in errors] == [("tick", field)], errors
    assert words in errors[0].message


def test_valid_schedules_pass_graph_validation():
    for parameters in ({"cron": "*/2 * * * * *"}, {"cron": "0 9 * * 1-5", "timezone": "Europe/Zurich"},
                       {"intervalSeconds": 30}):
        assert validate_graph(_graph(parameters)) == []
