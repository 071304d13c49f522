"""The editor's Versions tab helpers: version rows, the draft row after a save, the schedule status line."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from backend.db.models import WorkflowVersion
from backend.scheduler.cron import Schedule
from state.editor_versions import (
    NO_SCHEDULE,
    NOT_REGISTERED,
    cron_words,
    describe_schedule,
    next_fire_time,
    schedule_text,
    version_rows,
    with_draft,
)

ZURICH = "Europe/Zurich"


def _schedule_graph(**parameters) -> dict:
    return {"nodes": [{"id": "clock", "type": "trigger.schedule", "parameters": parameters}], "edges": []}


MANUAL = {"nodes": [{"id": "start", "type": "trigger.manual", "parameters": {}}], "edges": []}


def _version(number: int, status: str, by: str | None = "u1", published: datetime | None = None) -> WorkflowVersion:
    return WorkflowVersion(id=f"v{number}", workflow_id="w", version_number=number, status=status,
                           sys_created_by=by, sys_created_at=datetime(2026, 1, number, 8, 30),
                           published_at=published)


# --- version rows ------------------------------------------------------------------------------


def test_version_rows_are_newest_first_with_dates_and_author():
    rows = version_rows([_version(1, "archived", published=datetime(2026, 1, 2, 9, 0)), _version(3, "draft", by=None),
                         _version(2, "published", by="u2", published=datetime(2026, 1, 3, 10, 5))],
                        {"u1": "alice", "u2": "bob"})
    assert [r["number"] for r in rows] == [3, 2, 1]
    assert rows[0] == {"id": "v3", "number": 3, "status": "draft", "created": "2026-01-03 08:30 UTC",
                       "published": "", "author": ""}
    assert rows[1]["published"] == "2026-01-03 10:05 UTC" and rows[1]["author"] == "bob"
    assert rows[2]["status"] == "archived" and rows[2]["author"] == "alice"


def test_a_saved_draft_updates_its_row_or_is_added_on_top():
    rows = version_rows([_version(1, "published"), _version(2, "draft")], {"u1": "alice"})
    same = with_draft(rows, _version(2, "draft"), "carol")
    assert same == rows  # known draft: stays where it is, author kept
    # After publishing v2, the first save starts draft v3.
    rows = version_rows([_version(1, "archived"), _version(2, "published")], {"u1": "alice"})
    added = with_draft(rows, _version(3, "draft", by="u9"), "carol")
    assert [(r["number"], r["status"], r["author"]) for r in added] == [
        (3, "draft", "carol"), (2, "published", "alice"), (1, "archived", "alice")]
    assert rows[0]["number"] == 2  # the input list is not changed


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
