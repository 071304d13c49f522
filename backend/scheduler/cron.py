"""Schedules of trigger.schedule nodes: strict crontab parsing, intervals and time zones.

A schedule is either

- ``cron``: 5 fields ``minute hour day-of-month month day-of-week`` or 6 fields with seconds
  first (``second minute hour day-of-month month day-of-week``). Anything else is refused with a
  message saying what is wrong (the number of fields, which field, which value). Each field is a
  comma-separated list of ``*``, ``*/step``, ``value``, ``first-last`` or ``first-last/step``;
  months may be named (jan–dec), days of the week too (sun–sat). ``value/step`` without a range,
  Quartz's ``?``, ``L``, ``W`` and ``#`` and a year field are refused rather than guessed.
- ``intervalSeconds``: a whole number of seconds > 0 (an APScheduler IntervalTrigger).

plus a ``timezone`` (an IANA name such as ``Europe/Zurich``; default ``UTC``).

Crontab semantics are kept where APScheduler differs:

- **Day of week.** Crontab counts 0 = Sunday … 6 = Saturday and accepts 7 for Sunday too;
  APScheduler counts 0 = Monday … 6 = Sunday. The field is expanded to the set of days it names
  (ranges, lists and steps such as ``1-5``, ``0,6``, ``*/2`` = Sun, Tue, Thu, Sat, names such as
  ``mon-fri``) and handed to APScheduler as day names, so nothing depends on the numbering.
- **Day of month and day of week both restricted** (neither starts with ``*``): crontab fires
  when *either* matches, APScheduler's CronTrigger only when both do. Such a schedule becomes an
  OrTrigger of two CronTriggers, one per field.

Everything here is pure (no database); :func:`schedule_errors` is what graph validation uses.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass
from datetime import datetime
from typing import Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from apscheduler.triggers.base import BaseTrigger
from apscheduler.triggers.combining import OrTrigger
from apscheduler.triggers.cron import CronTrigger
from apscheduler.triggers.interval import IntervalTrigger

DEFAULT_TIMEZONE = "UTC"
FIELDS_5 = ("minute", "hour", "day", "month", "day_of_week")
FIELDS_6 = ("second", *FIELDS_5)
FIELD_LABELS = {"second": "second", "minute": "minute", "hour": "hour", "day": "day of month",
                "month": "month", "day_of_week": "day of week"}
RANGES = {"second": (0, 59), "minute": (0, 59), "hour": (0, 23), "day": (1, 31), "month": (1, 12),
          "day_of_week": (0, 7)}
MONTH_NAMES = ("jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec")
CRONTAB_DAYS = ("sun", "mon", "tue", "wed", "thu", "fri", "sat")  # crontab numbering: 0 = Sunday
APSCHEDULER_DAYS = ("mon", "tue", "wed", "thu", "fri", "sat", "sun")  # APScheduler's: 0 = Monday
_TOKEN = re.compile(r"^(?P<base>\*|[a-z0-9]+(?:-[a-z0-9]+)?)(?:/(?P<step>[^/]*))?$")


class ScheduleError(ValueError):
    """An invalid schedule; `field` is the parameter (cron, intervalSeconds, timezone)."""

    def __init__(self, field: str, message: str):
        self.field = field
        self.message = message
        super().__init__(message)


# --- time zones ---------------------------------------------------------------------------------


def parse_timezone(name: Any) -> ZoneInfo:
    """The zone of an IANA name ("UTC", "Europe/Zurich"); ScheduleError for anything else."""
    if not isinstance(name, str) or not name.strip():
        raise ScheduleError("timezone", "must be an IANA time zone name such as UTC or Europe/Zurich")
    try:
        return ZoneInfo(name.strip())
    except (ZoneInfoNotFoundError, ValueError):
        raise ScheduleError("timezone", f"unknown time zone '{name}'; expected an IANA name such as UTC "
                                        "or Europe/Zurich") from None


# --- cron ------------------------------------------------------------------------------------------


def _value(field: str, text: str, position: int) -> int:
    """One value of a field: a number in range, or a month / weekday name where allowed."""
    low, high = RANGES[field]
    where = f"field {position} ({FIELD_LABELS[field]})"
    if text.isdigit():
        number = int(text)
        if not low <= number <= high:
            extra = " (0 and 7 are Sunday)" if field == "day_of_week" else ""
            raise ScheduleError("cron", f"{where}: {number} is out of range {low}-{high}{extra}")
        return number
    names = MONTH_NAMES if field == "month" else CRONTAB_DAYS if field == "day_of_week" else None
    if names is not None and text in names:
        return names.index(text) + (1 if field == "month" else 0)
    allowed = {"month": "a number 1-12 or jan-dec", "day_of_week": "a number 0-7 or sun-sat"}
    raise ScheduleError("cron", f"{where}: '{text}' is not a valid value; expected "
                                f"{allowed.get(field, f'a number {low}-{high}')}")


def _expand(field: str, text: str, position: int) -> set[int]:
    """The values one field names; ScheduleError naming the field and the bad part otherwise."""
    where = f"field {position} ({FIELD_LABELS[field]})"
    low, high = RANGES[field]
    values: set[int] = set()
    for part in text.lower().split(","):
        if not part:
            raise ScheduleError("cron", f"{where}: '{text}' has an empty list item")
        match = _TOKEN.match(part)
        if match is None:
            raise ScheduleError("cron", f"{where}: '{part}' is not valid; expected *, */step, a value, "
                                        "first-last or first-last/step (lists with commas)")
        base, step_text = match.group("base"), match.group("step")
        step = 1
        if step_text is not None:
            if not step_text.isdigit() or int(step_text) == 0:
                raise ScheduleError("cron", f"{where}: the step in '{part}' must be a whole number above 0")
            step = int(step_text)
            if base != "*" and "-" not in base:
                raise ScheduleError("cron", f"{where}: '{part}' has a step without a range; write "
                                            f"{base}-{high}/{step} or */{step}")
        if base == "*":
            first, last = low, (6 if field == "day_of_week" else high)
        elif "-" in base:
            first_text, last_text = base.split("-", 1)
            first, last = _value(field, first_text, position), _value(field, last_text, position)
            if first > last:
                raise ScheduleError("cron", f"{where}: the range '{part}' starts after it ends")
        else:
            first = last = _value(field, base, position)
        values.update(range(first, last + 1, step))
    if field == "day_of_week" and 7 in values:
        values.discard(7)
        values.add(0)
    return values


def crontab_days_to_apscheduler(days: set[int]) -> str:
    """Crontab weekdays (0 = Sunday … 6 = Saturday) as an APScheduler day_of_week expression.

    Written with day names, consecutive days joined into ranges: {1, 2, 3, 4, 5} → "mon-fri",
    {0, 6} → "sat-sun", all seven → "*".
    """
    indexes = sorted({(day - 1) % 7 for day in days})  # APScheduler: 0 = Monday
    if len(indexes) == 7:
        return "*"
    runs: list[tuple[int, int]] = []
    for index in indexes:
        if runs and runs[-1][1] == index - 1:
            runs[-1] = (runs[-1][0], index)
        else:
            runs.append((index, index))
    return ",".join(APSCHEDULER_DAYS[a] if a == b else f"{APSCHEDULER_DAYS[a]}-{APSCHEDULER_DAYS[b]}"
                    for a, b in runs)


@dataclass(frozen=True)
class CronFields:
    """A parsed cron expression: the APScheduler field values and whether day and weekday are OR-ed."""

    fields: dict[str, str]
    either_day: bool


def parse_cron(expression: Any) -> CronFields:
    """Check a crontab expression strictly (see the module docstring) and translate it.

    Raises:
        ScheduleError: naming the field count, or the field (by position and name) and the value.
    """
    if not isinstance(expression, str) or not expression.strip():
        raise ScheduleError("cron", "must be a cron expression of 5 fields (minute hour day-of-month month "
                                    "day-of-week) or 6 with seconds first")
    parts = expression.split()
    if len(parts) not in (5, 6):
        raise ScheduleError("cron", f"'{expression.strip()}' has {len(parts)} field{'s' if len(parts) != 1 else ''}; "
                                    "expected 5 (minute hour day-of-month month day-of-week) or 6 with seconds "
                                    "first (second minute hour day-of-month month day-of-week)")
    names = FIELDS_6 if len(parts) == 6 else FIELDS_5
    fields: dict[str, str] = {} if len(parts) == 6 else {"second": "0"}
    for position, (name, text) in enumerate(zip(names, parts, strict=True), start=1):
        values = _expand(name, text, position)
        if name == "day_of_week":
            fields[name] = crontab_days_to_apscheduler(values)
        else:
            fields[name] = text.lower()
    day_text, weekday_text = parts[names.index("day")], parts[names.index("day_of_week")]
    either_day = not day_text.startswith("*") and not weekday_text.startswith("*")
    return CronFields(fields, either_day)


def cron_trigger(expression: Any, timezone: Any = DEFAULT_TIMEZONE) -> BaseTrigger:
    """The APScheduler trigger of a crontab expression in `timezone` (see the module docstring).

    Triggers are immutable and only compute fire times, so one object serves every job with the
    same expression and zone (cached: start-up builds thousands of jobs)."""
    if isinstance(expression, str) and isinstance(timezone, str):
        return _cached_cron_trigger(expression, timezone)
    return _build_cron_trigger(expression, timezone)


@functools.lru_cache(maxsize=4096)
def _cached_cron_trigger(expression: str, timezone: str) -> BaseTrigger:
    return _build_cron_trigger(expression, timezone)


def _build_cron_trigger(expression: Any, timezone: Any) -> BaseTrigger:
    zone = parse_timezone(timezone)
    parsed = parse_cron(expression)
    try:
        if parsed.either_day:
            return OrTrigger([
                CronTrigger(**{**parsed.fields, "day_of_week": "*"}, timezone=zone),
                CronTrigger(**{**parsed.fields, "day": "*"}, timezone=zone),
            ])
        return CronTrigger(**parsed.fields, timezone=zone)
    except ValueError as exc:  # e.g. "31 * 2 *": APScheduler's own checks
        raise ScheduleError("cron", f"'{expression}' is not a valid schedule: {exc}") from None


def interval_trigger(seconds: Any, timezone: Any = DEFAULT_TIMEZONE, anchor: datetime | None = None) -> IntervalTrigger:
    """An IntervalTrigger every `seconds`; `anchor` fixes the grid of fire times (anchor + k·seconds),
    so every process computes the same ones."""
    if isinstance(seconds, bool) or not isinstance(seconds, int) or seconds <= 0:
        raise ScheduleError("intervalSeconds", f"must be a whole number of seconds above 0, not {seconds!r}")
    return IntervalTrigger(seconds=seconds, timezone=parse_timezone(timezone), start_date=anchor)


# --- a schedule as the node holds it -----------------------------------------------------------------


@dataclass(frozen=True)
class Schedule:
    """The schedule of one trigger.schedule node (hashable: the scheduler compares them)."""

    cron: str | None
    interval_seconds: int | None
    timezone: str = DEFAULT_TIMEZONE

    def trigger(self, anchor: datetime | None = None) -> BaseTrigger:
        """The APScheduler trigger; `anchor` is the start of an interval's grid."""
        if self.cron is not None:
            return cron_trigger(self.cron, self.timezone)
        return interval_trigger(self.interval_seconds, self.timezone, anchor)

    def describe(self) -> str:
        what = f"cron '{self.cron}'" if self.cron is not None else f"every {self.interval_seconds} s"
        return f"{what} ({self.timezone})"


def parse_schedule(parameters: Any) -> Schedule:
    """The Schedule of a trigger.schedule node's parameters (camelCase, as in the graph).

    Raises:
        ScheduleError: the first problem (see :func:`schedule_errors` for all of them).
    """
    errors = schedule_errors(parameters)
    if errors:
        field, message = errors[0]
        raise ScheduleError(field, message)
    timezone = parameters.get("timezone") or DEFAULT_TIMEZONE
    return Schedule(parameters.get("cron"), parameters.get("intervalSeconds"), timezone.strip())


def schedule_errors(parameters: Any) -> list[tuple[str, str]]:
    """Every problem of a trigger.schedule node's parameters as (parameter, message) pairs."""
    if not isinstance(parameters, dict):
        return [("", "must be an object with cron or intervalSeconds, and timezone")]
    errors: list[tuple[str, str]] = []
    cron, interval = parameters.get("cron"), parameters.get("intervalSeconds")
    if (cron is None) == (interval is None):
        errors.append(("cron", "give exactly one of cron and intervalSeconds"))
    timezone = parameters.get("timezone", DEFAULT_TIMEZONE)
    zone_ok = True
    try:
        parse_timezone(timezone)
    except ScheduleError as exc:
        errors.append((exc.field, exc.message))
        zone_ok = False
    try:
        if cron is not None:
            cron_trigger(cron, timezone if zone_ok else DEFAULT_TIMEZONE)
        if interval is not None:
            interval_trigger(interval)
    except ScheduleError as exc:
        errors.append((exc.field, exc.message))
    return errors
