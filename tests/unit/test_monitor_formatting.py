"""The Monitor page's display helpers: durations, francs, times, filters and the rows it shows."""

from __future__ import annotations

from datetime import UTC, date, datetime, timedelta
from types import SimpleNamespace

import pytest

from state.monitor import (
    ALL,
    RANGES,
    chart_days,
    cost_lines,
    cost_points,
    day_points,
    failure_rows,
    format_chf,
    format_time,
    history_rows,
    human_duration,
    live_rows,
    monitor_filter,
    pause_text,
    percent,
    shorten,
    trace_href,
    upcoming_rows,
)

NOW = datetime(2025, 5, 14, 12, 0, tzinfo=UTC)


def run(**fields) -> SimpleNamespace:
    base = dict(id="r1", workflow_id="w1", workflow_name="Invoices", instance_id="i1", instance_label="GE",
                status="completed", pause_reason=None, trigger="manual", started_at=NOW - timedelta(seconds=90),
                finished_at=NOW, duration_ms=1234, error=None, cost_chf=0.0, test=False)
    return SimpleNamespace(**{**base, **fields})


@pytest.mark.parametrize(("ms", "text"), [
    (None, ""), (0, "0 ms"), (850, "850 ms"), (1000, "1.0 s"), (1234, "1.2 s"), (59_900, "59.9 s"),
    (60_000, "1 min"), (180_000, "3 min"), (3_599_000, "59 min"), (3_600_000, "1 h"), (7_500_000, "2 h 5 min"),
    (86_400_000, "1 d"), (100_800_000, "1 d 4 h"), (-5, "0 ms"),
])
def test_human_duration(ms, text):
    assert human_duration(ms) == text


@pytest.mark.parametrize(("amount", "text"), [
    (None, "CHF 0.00"), (0, "CHF 0.00"), (0.0042, "CHF 0.0042"), (0.5, "CHF 0.50"), (12.345, "CHF 12.35"),
    (1234.5, "CHF 1'234.50"), (1_234_567, "CHF 1'234'567.00"),
])
def test_format_chf(amount, text):
    assert format_chf(amount) == text


def test_times_are_shown_in_utc_also_when_stored_naive():
    assert format_time(None) == ""
    assert format_time(datetime(2025, 5, 14, 7, 5)) == "2025-05-14 07:05 UTC"
    zurich = datetime(2025, 5, 14, 9, 5, tzinfo=UTC).astimezone(__import__("zoneinfo").ZoneInfo("Europe/Zurich"))
    assert format_time(zurich) == "2025-05-14 09:05 UTC"


def test_small_texts():
    assert pause_text(None) == "" and pause_text("humanTask") == "waits for a person (Inbox)"
    assert pause_text("somethingNew") == "somethingNew"
    assert shorten("  x  ") == "x" and shorten(None) == ""
    assert shorten("a" * 400, 10) == "a" * 9 + "…"
    assert trace_href("w1", "r1") == "/editor/w1?run=r1"
    assert percent(1, 4) == "25.0 %" and percent(0, 0) == "–"


def test_the_filter_of_the_page_choices():
    everything = monitor_filter(ALL, ALL, ALL, "7d", now=NOW)
    assert (everything.instance_id, everything.workflow_id, everything.status) == (None, None, None)
    assert everything.since == NOW - timedelta(days=7)
    narrow = monitor_filter("i1", "w1", "failed", "24h", now=NOW)
    assert (narrow.instance_id, narrow.workflow_id, narrow.status) == ("i1", "w1", "failed")
    assert narrow.since == NOW - timedelta(hours=24)
    assert monitor_filter("i1", "w1", "failed", "90d", now=NOW, with_status=False).status is None
    assert monitor_filter(ALL, ALL, ALL, "90d", now=NOW, with_range=False).since is None
    assert monitor_filter(ALL, ALL, ALL, "bogus", now=NOW).since == NOW - timedelta(days=7)
    assert [chart_days(k) for k in RANGES] == [2, 7, 30, 90]
    # production runs unless the page asks for test runs or all; an unknown choice is production
    assert everything.kind == "production"
    assert [monitor_filter(ALL, ALL, ALL, "7d", now=NOW, kind=k).kind for k in ("test", "all", "bogus")] == [
        "test", "all", "production"]


def test_history_and_failure_rows_are_display_strings_with_trace_links():
    rows = history_rows([run(), run(id="r2", status="running", trigger=None, finished_at=None, duration_ms=None,
                                    cost_chf=0.0123)])
    assert rows[0] == {"id": "r1", "test": False, "workflow": "Invoices", "instance": "GE", "status": "completed",
                       "trigger": "manual", "started": "2025-05-14 11:58 UTC", "duration": "1.2 s",
                       "cost": "CHF 0.00", "href": "/editor/w1?run=r1"}
    assert (rows[1]["trigger"], rows[1]["duration"]) == ("manual", "running")
    failed = failure_rows([run(status="failed", error="ZeroDivisionError: division by zero", test=True)])
    assert failed == [{"id": "r1", "test": True, "workflow": "Invoices", "when": "2025-05-14 12:00 UTC",
                       "error": "ZeroDivisionError: division by zero", "href": "/editor/w1?run=r1"}]
    assert failure_rows([run(error=None)])[0]["error"] == "(no message)"


def test_live_rows_show_the_time_so_far_and_why_a_run_waits():
    rows = live_rows([run(status="paused", pause_reason="humanTask", finished_at=None, duration_ms=None,
                          started_at=(NOW - timedelta(minutes=3)).replace(tzinfo=None))], now=NOW)
    assert rows[0]["running_for"] == "3 min" and rows[0]["pause_reason"] == "waits for a person (Inbox)"
    assert rows[0]["href"] == "/editor/w1?run=r1" and rows[0]["started"] == "2025-05-14 11:57 UTC"


def test_upcoming_day_and_cost_rows():
    upcoming = upcoming_rows([SimpleNamespace(workflow_id="w1", workflow_name="Invoices", instance_label="GE",
                                              next_run=datetime(2025, 5, 15, 7, 0, tzinfo=UTC),
                                              schedule="every day 07:00", registered=False)])
    assert upcoming == [{"workflow_id": "w1", "workflow": "Invoices", "instance": "GE",
                         "next_run": "2025-05-15 07:00 UTC", "schedule": "every day 07:00", "registered": "no"}]
    days = day_points([SimpleNamespace(day=date(2025, 5, 14), total=4, completed=2, failed=1, cancelled=1,
                                       error_rate=0.25)])
    assert days == [{"day": "05-14", "completed": 2, "failed": 1, "cancelled": 1, "error_rate": 25.0}]
    costs = [SimpleNamespace(key=f"w{i}", label=f"Flow {i}", cost_chf=float(i), runs=i) for i in range(12)]
    top = cost_lines(costs)
    assert len(top) == 10 and top[0] == {"key": "w11", "label": "Flow 11", "cost": "CHF 11.00", "runs": 11}
    per_day = cost_points([SimpleNamespace(key="2025-05-14", label="2025-05-14", cost_chf=0.123456, runs=3)])
    assert per_day == [{"day": "05-14", "cost": 0.1235}]
