"""Schedules in words and their next fire time, for people (the editor's Versions tab, the monitor).

Pure: no database, no Reflex. Next fire times come from the very trigger the scheduler registers
(backend/scheduler/cron.py: `Schedule.trigger`), never from a second cron translation, so what a
page announces is what the scheduler does.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime
from typing import Any

from backend.scheduler.cron import Schedule
from backend.scheduler.jobs import schedule_nodes

NO_SCHEDULE = "No schedule trigger"
NOT_REGISTERED = "Schedule not registered: publish the workflow and switch it active"


def _clock(hour: str, minute: str, second: str | None = None) -> str | None:
    if not (hour.isdigit() and minute.isdigit() and (second is None or second.isdigit())):
        return None
    text = f"{int(hour):02d}:{int(minute):02d}"
    return text if second in (None, "0", "00") else f"{text}:{int(second):02d}"


_WEEKDAYS = {"1-5": "on weekdays", "mon-fri": "on weekdays", "0,6": "on weekends", "6,0": "on weekends",
             "sat,sun": "on weekends", "sun,sat": "on weekends"}
_DAY_NAMES = ("sun", "mon", "tue", "wed", "thu", "fri", "sat", "sun")


def cron_words(expression: str) -> str | None:
    """A plain description of the simplest crontab schedules ("every day 07:00"), else None."""
    parts = expression.split()
    if len(parts) == 6:
        second, parts = parts[0], parts[1:]
    elif len(parts) == 5:
        second = None
    else:
        return None
    minute, hour, day, month, weekday = parts
    if month != "*":
        return None
    if hour == "*" and day == "*" and weekday == "*":
        if minute == "*" and second in (None, "0", "00"):
            return "every minute"
        if minute.isdigit() and second in (None, "0", "00"):
            return f"every hour at :{int(minute):02d}"
        match = re.fullmatch(r"\*/(\d+)", minute)
        if match and second in (None, "0", "00"):
            return f"every {int(match.group(1))} min"
        return None
    clock = _clock(hour, minute, second)
    if clock is None:
        return None
    if day == "*" and weekday == "*":
        return f"every day {clock}"
    if day == "*":
        lowered = weekday.lower()
        if lowered in _WEEKDAYS:
            return f"{_WEEKDAYS[lowered]} {clock}"
        if lowered.isdigit() and int(lowered) <= 7:
            return f"every {_DAY_NAMES[int(lowered)]} {clock}"
        if lowered in _DAY_NAMES:
            return f"every {lowered} {clock}"
        return None
    if weekday == "*" and day.isdigit():
        return f"monthly on day {int(day)} {clock}"
    return None


def interval_words(seconds: int) -> str:
    for size, unit in ((86400, "d"), (3600, "h"), (60, "min")):
        if seconds % size == 0:
            return f"every {seconds // size} {unit}"
    return f"every {seconds} s"


def describe_schedule(schedule: Schedule) -> str:
    """E.g. "every day 07:00 (0 7 * * *, Europe/Zurich)" or "every 15 min (UTC)"."""
    if schedule.cron is not None:
        words = cron_words(schedule.cron)
        if words:
            return f"{words} ({schedule.cron}, {schedule.timezone})"
        return f"cron {schedule.cron} ({schedule.timezone})"
    return f"{interval_words(schedule.interval_seconds or 0)} ({schedule.timezone})"


def next_fire_time(schedule: Schedule, anchor: datetime | None, now: datetime | None = None) -> datetime | None:
    """The next fire time after `now`, from the very trigger the scheduler registers (cron.py)."""
    now = now or datetime.now(UTC)
    return schedule.trigger(anchor=anchor).get_next_fire_time(None, now)


def schedule_text(published_graph: dict[str, Any] | None, draft_graph: dict[str, Any] | None, active: bool,
                  event_id: str | None, published_at: datetime | None = None, now: datetime | None = None) -> str:
    """The schedule status line of the Versions tab.

    Only the published version's schedule nodes run, and only while the workflow is active; the
    eventId (written by the scheduler) shows the jobs are registered.
    """
    published = schedule_nodes(published_graph) if published_graph else []
    if not published:
        if draft_graph and schedule_nodes(draft_graph):
            return NOT_REGISTERED
        return NO_SCHEDULE
    parts = ["Schedule: " + "; ".join(describe_schedule(schedule) for _node, schedule in published)]
    if not active:
        parts.append("not registered: switch the workflow active")
        return " · ".join(parts)
    times = [t for _node, schedule in published if (t := next_fire_time(schedule, published_at, now)) is not None]
    if times:
        first = min(times)
        parts.append(f"next run {first.strftime('%Y-%m-%d %H:%M')}")
    if event_id:
        parts.append(f"job registered (eventId {event_id})")
    else:
        parts.append("job not registered yet (the scheduler registers it shortly)")
    return " · ".join(parts)


def next_run(graph: dict[str, Any] | None, anchor: datetime | None = None,
             now: datetime | None = None) -> tuple[datetime, Schedule] | None:
    """The soonest next fire time of a graph's enabled schedule nodes after `now`, with that
    node's schedule; None when the graph has none (or none fires again)."""
    found = [(moment, schedule) for _node, schedule in schedule_nodes(graph)
             if (moment := next_fire_time(schedule, anchor, now)) is not None]
    return min(found, key=lambda pair: pair[0]) if found else None
