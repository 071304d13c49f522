"""State of the Monitor page: what runs, what failed and what waits, across the user's instances.

Everything is read through the door backend.monitoring.service.Monitor, which limits it to the
runs the user may read. The state holds only what the page shows, as display strings: the runs
themselves stay in the database. A client-side timer (rx.moment on the page) calls `tick` every
few seconds while the page is open; it reloads only the live list and its counters.

The run filter (production, the default; test; all) narrows every figure: trying workflows out
in the editor never shows up in the production view, and so never raises its error rate.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import UTC, date, datetime, timedelta
from typing import Any, TypedDict

import reflex as rx

from backend.errors import DomainError
from backend.monitoring import service as monitoring
from backend.monitoring.service import Monitor, MonitorFilter
from backend.rbac.access import AccessContext
from state.auth import AuthState, NotSignedIn
from state.instance_choice import InstanceChoiceMixin
from state.page import PageMixin, user_message
from state.permissions import requires_door

ALL = "all"  # the select value for "no filter" (Radix selects refuse an empty value)
STATUSES = monitoring.STATUSES  # running, paused, completed, failed, cancelled
# range key → (label, how far back, days shown in the charts)
RANGES: dict[str, tuple[str, timedelta, int]] = {
    "24h": ("Last 24 hours", timedelta(hours=24), 2),
    "7d": ("Last 7 days", timedelta(days=7), 7),
    "30d": ("Last 30 days", timedelta(days=30), 30),
    "90d": ("Last 90 days", timedelta(days=90), 90),
}
DEFAULT_RANGE = "7d"
# run kind → its label in the filter (backend.monitoring.service.KINDS)
KINDS: dict[str, str] = {monitoring.PRODUCTION: "Production runs", monitoring.TEST: "Test runs",
                         monitoring.ALL_RUNS: "All runs"}
PRODUCTION, TEST = monitoring.PRODUCTION, monitoring.TEST
DEFAULT_KIND = PRODUCTION
HISTORY_PAGE_SIZE = 50
LIVE_LIMIT = 100
UPCOMING_LIMIT = 20
FAILURES_LIMIT = 10
TOP_COSTS = 10
ERROR_CHARS = 300
PAUSE_REASONS = {"step": "step mode: waits for Next step", "humanTask": "waits for a person (Inbox)",
                 "wait": "waits for its time", "email": "waits for an e-mail"}


class Option(TypedDict):
    id: str
    label: str


class LiveRow(TypedDict):
    id: str
    test: bool
    workflow: str
    instance: str
    status: str
    started: str
    running_for: str
    pause_reason: str
    href: str


class UpcomingView(TypedDict):
    workflow_id: str
    workflow: str
    instance: str
    next_run: str
    schedule: str
    registered: str


class HistoryRow(TypedDict):
    id: str
    test: bool
    workflow: str
    instance: str
    status: str
    trigger: str
    started: str
    duration: str
    cost: str
    href: str


class FailureRow(TypedDict):
    id: str
    test: bool
    workflow: str
    when: str
    error: str
    href: str


class DayPoint(TypedDict):
    day: str
    completed: int
    failed: int
    cancelled: int
    error_rate: float


class CostLine(TypedDict):
    key: str
    label: str
    cost: str
    runs: int


class CostPoint(TypedDict):
    day: str
    cost: float


# --- display helpers (pure) ----------------------------------------------------------------------


def aware(moment: datetime) -> datetime:
    """A stored time as UTC (SQLite hands back naive times, which are UTC)."""
    return moment.replace(tzinfo=UTC) if moment.tzinfo is None else moment.astimezone(UTC)


def format_time(moment: datetime | None) -> str:
    return aware(moment).strftime("%Y-%m-%d %H:%M UTC") if moment else ""


def human_duration(milliseconds: int | float | None) -> str:
    """A duration as a person reads it: "850 ms", "1.2 s", "3 min", "2 h 5 min", "3 d 4 h"."""
    if milliseconds is None:
        return ""
    ms = max(0, int(milliseconds))
    if ms < 1000:
        return f"{ms} ms"
    seconds = ms / 1000
    if seconds < 60:
        return f"{seconds:.1f} s"
    minutes = int(seconds // 60)
    if minutes < 60:
        return f"{minutes} min"
    hours, minutes = divmod(minutes, 60)
    if hours < 24:
        return f"{hours} h {minutes} min" if minutes else f"{hours} h"
    days, hours = divmod(hours, 24)
    return f"{days} d {hours} h" if hours else f"{days} d"


def format_chf(amount: float | None) -> str:
    """Swiss francs with the Swiss thousands mark; fractions of a centime keep four decimals."""
    value = float(amount or 0)
    if value and abs(value) < 0.01:
        return f"CHF {value:.4f}"
    return "CHF " + f"{value:,.2f}".replace(",", "'")


def pause_text(reason: str | None) -> str:
    return PAUSE_REASONS.get(reason, reason) if reason else ""


def shorten(text: str | None, limit: int = ERROR_CHARS) -> str:
    text = (text or "").strip()
    return text if len(text) <= limit else text[: limit - 1] + "…"


def trace_href(workflow_id: str, run_id: str) -> str:
    """The editor with the run's trace open."""
    return f"/editor/{workflow_id}?run={run_id}"


def monitor_filter(instance: str, workflow: str, status: str, range_key: str, now: datetime | None = None,
                   with_status: bool = True, with_range: bool = True, kind: str = DEFAULT_KIND) -> MonitorFilter:
    """The backend filter for the page's choices ("all" means no filter; an unknown kind: production)."""
    now = now or datetime.now(UTC)
    _label, back, _days = RANGES.get(range_key, RANGES[DEFAULT_RANGE])
    return MonitorFilter(
        instance_id=None if instance in ("", ALL) else instance,
        workflow_id=None if workflow in ("", ALL) else workflow,
        status=None if (not with_status or status in ("", ALL)) else status,
        since=now - back if with_range else None,
        kind=kind if kind in KINDS else DEFAULT_KIND,
    )


def chart_days(range_key: str) -> int:
    return RANGES.get(range_key, RANGES[DEFAULT_RANGE])[2]


def live_rows(rows: Iterable[Any], now: datetime | None = None) -> list[LiveRow]:
    now = now or datetime.now(UTC)
    return [LiveRow(id=r.id, test=r.test, workflow=r.workflow_name, instance=r.instance_label, status=r.status,
                    started=format_time(r.started_at),
                    running_for=human_duration((now - aware(r.started_at)).total_seconds() * 1000),
                    pause_reason=pause_text(r.pause_reason), href=trace_href(r.workflow_id, r.id))
            for r in rows]


def history_rows(rows: Iterable[Any]) -> list[HistoryRow]:
    return [HistoryRow(id=r.id, test=r.test, workflow=r.workflow_name, instance=r.instance_label, status=r.status,
                       trigger=r.trigger or "manual", started=format_time(r.started_at),
                       duration=human_duration(r.duration_ms) if r.duration_ms is not None else "running",
                       cost=format_chf(r.cost_chf), href=trace_href(r.workflow_id, r.id))
            for r in rows]


def failure_rows(rows: Iterable[Any]) -> list[FailureRow]:
    return [FailureRow(id=r.id, test=r.test, workflow=r.workflow_name, when=format_time(r.finished_at or r.started_at),
                       error=shorten(r.error) or "(no message)", href=trace_href(r.workflow_id, r.id))
            for r in rows]


def upcoming_rows(rows: Iterable[Any]) -> list[UpcomingView]:
    return [UpcomingView(workflow_id=r.workflow_id, workflow=r.workflow_name, instance=r.instance_label,
                         next_run=format_time(r.next_run), schedule=r.schedule,
                         registered="yes" if r.registered else "no")
            for r in rows]


def _day_label(day: date | str) -> str:
    """A chart's day: "05-14" (a date or an ISO date string)."""
    if isinstance(day, date):
        return day.strftime("%m-%d")
    text = str(day)
    try:
        return date.fromisoformat(text[:10]).strftime("%m-%d")
    except ValueError:
        return text


def day_points(rows: Iterable[Any]) -> list[DayPoint]:
    return [DayPoint(day=_day_label(r.day), completed=r.completed, failed=r.failed, cancelled=r.cancelled,
                     error_rate=round(100 * float(r.error_rate or 0), 1))
            for r in rows]


def cost_lines(rows: Iterable[Any], limit: int = TOP_COSTS) -> list[CostLine]:
    ordered = sorted(rows, key=lambda r: r.cost_chf, reverse=True)[:limit]
    return [CostLine(key=r.key, label=r.label, cost=format_chf(r.cost_chf), runs=r.runs) for r in ordered]


def cost_points(rows: Iterable[Any]) -> list[CostPoint]:
    return [CostPoint(day=_day_label(r.key), cost=round(float(r.cost_chf), 4))
            for r in rows]


def percent(part: int, whole: int) -> str:
    return f"{100 * part / whole:.1f} %" if whole else "–"


# --- the state -----------------------------------------------------------------------------------


class MonitorState(InstanceChoiceMixin, PageMixin, AuthState):
    """Filters, live runs, upcoming runs, charts, costs, failures and the run history's page."""

    instances: list[Option] = []
    workflow_choices: list[Option] = []
    instance_filter: str = ALL
    workflow_filter: str = ALL
    status_filter: str = ALL
    range_filter: str = DEFAULT_RANGE
    kind_filter: str = DEFAULT_KIND
    has_instances: bool = True

    live: list[LiveRow] = []
    running_count: int = 0
    paused_count: int = 0
    upcoming: list[UpcomingView] = []
    days: list[DayPoint] = []
    range_total: int = 0
    range_failed: int = 0
    range_error_rate: str = "–"
    costs_by_workflow: list[CostLine] = []
    costs_by_day: list[CostPoint] = []
    cost_total: str = format_chf(0)
    failures: list[FailureRow] = []
    history: list[HistoryRow] = []
    history_page: int = 1
    history_before: str = ""
    history_next: str = ""

    # --- loading ---------------------------------------------------------------------------------

    def _filter(self, **kwargs) -> MonitorFilter:
        return monitor_filter(self.instance_filter, self.workflow_filter, self.status_filter, self.range_filter,
                              kind=self.kind_filter, **kwargs)

    def _refresh(self) -> None:
        with self._user_session() as (session, user):
            self._load_navigation(session, user)
            monitor = Monitor(AccessContext(session, user))
            self._load_options(monitor)
            self._show_all_instances(session, user, self.instance_filter, "All instances",
                                     only={o["id"] for o in self.instances})
            self._load_live(monitor)
            self._load_overview(monitor)
            self._load_history(monitor)
        self.loaded = True

    def _load_options(self, monitor: Monitor) -> None:
        self.instances = [Option(id=i, label=label) for i, label in monitor.instance_options()]
        self.has_instances = bool(self.instances)
        if self.instance_filter not in {o["id"] for o in self.instances}:
            self.instance_filter = ALL
        chosen = None if self.instance_filter == ALL else self.instance_filter
        labels = {o["id"]: o["label"] for o in self.instances}
        many = len(self.instances) > 1 and chosen is None
        self.workflow_choices = [
            Option(id=w, label=f"{name} ({labels.get(inst, inst)})" if many else name)
            for w, name, inst in monitor.workflow_options(chosen)
        ]
        if self.workflow_filter not in {o["id"] for o in self.workflow_choices}:
            self.workflow_filter = ALL

    def _load_live(self, monitor: Monitor) -> None:
        """Running and paused runs, whenever they started (a paused run may wait for weeks)."""
        rows = monitor.live(self._filter(with_status=False, with_range=False), limit=LIVE_LIMIT)
        self.live = live_rows(rows)
        self.running_count = sum(1 for r in rows if r.status == "running")
        self.paused_count = sum(1 for r in rows if r.status == "paused")

    def _load_overview(self, monitor: Monitor) -> None:
        """Upcoming runs, charts, costs and failures: the status filter narrows only the history."""
        overall = self._filter(with_status=False)
        days = chart_days(self.range_filter)
        self.upcoming = upcoming_rows(monitor.upcoming(self._filter(with_status=False, with_range=False),
                                                       limit=UPCOMING_LIMIT))
        daily = monitor.daily(overall, days=days)
        self.days = day_points(daily)
        self.range_total = sum(d.total for d in daily)
        self.range_failed = sum(d.failed for d in daily)
        finished = sum(d.completed + d.failed + d.cancelled for d in daily)
        self.range_error_rate = percent(self.range_failed, finished)  # as the chart: failed / finished
        report = monitor.costs(overall, days=days)
        self.costs_by_workflow = cost_lines(report.by_workflow)
        self.costs_by_day = cost_points(report.by_day)
        self.cost_total = format_chf(report.total_chf)
        self.failures = failure_rows(monitor.failures(overall, limit=FAILURES_LIMIT))

    def _load_history(self, monitor: Monitor) -> None:
        page = monitor.runs(self._filter(), limit=HISTORY_PAGE_SIZE, before=self.history_before or None)
        self.history = history_rows(page.rows)
        self.history_next = page.next_before or ""

    def _read(self, load) -> Any:
        """Run `load(monitor)` in a transaction; the event to return (a redirect when signed out)."""
        try:
            with self._user_session() as (session, user):
                load(Monitor(AccessContext(session, user)))
        except NotSignedIn:
            return self._signed_out()
        except DomainError as exc:
            self.error = user_message(exc)
        return None

    def _first_page(self) -> None:
        self.history_page, self.history_before, self.history_next = 1, "", ""

    # --- events ----------------------------------------------------------------------------------

    @rx.event
    @requires_door(Monitor.overview, Monitor.runs)
    def load(self):
        """on_load: check the sign-in, then everything the page shows (history from its first page)."""
        self.error = self.notice = ""
        self._first_page()
        return self._reload()

    @rx.event
    @requires_door(Monitor.live)
    def tick(self, _now: str = ""):
        """The page's timer: reload the live list and its counters only."""
        if not self.loaded or not self.has_instances:
            return None
        return self._read(self._load_live)

    def _instance_switched(self, instance_id: str):
        self.instance_filter = instance_id or ALL
        self.workflow_filter = ALL
        return self._filters_changed()

    def _filters_changed(self):
        self.error = ""
        self._first_page()
        return self._reload()

    @rx.event
    @requires_door(Monitor.overview, Monitor.runs)
    def set_instance_filter(self, value: str):
        self.instance_filter = value or ALL
        self.workflow_filter = ALL
        return self._filters_changed()

    @rx.event
    @requires_door(Monitor.overview, Monitor.runs)
    def set_workflow_filter(self, value: str):
        self.workflow_filter = value or ALL
        return self._filters_changed()

    @rx.event
    @requires_door(Monitor.runs)
    def set_status_filter(self, value: str):
        self.status_filter = value if value in STATUSES else ALL
        self.error = ""
        self._first_page()
        return self._read(self._load_history)

    @rx.event
    @requires_door(Monitor.overview, Monitor.runs)
    def set_kind_filter(self, value: str):
        """Production, test or all runs: every figure of the page follows."""
        self.kind_filter = value if value in KINDS else DEFAULT_KIND
        return self._filters_changed()

    @rx.event
    @requires_door(Monitor.overview, Monitor.runs)
    def set_range_filter(self, value: str):
        self.range_filter = value if value in RANGES else DEFAULT_RANGE
        return self._filters_changed()

    @rx.event
    @requires_door(Monitor.runs)
    def next_history_page(self):
        """The next (older) 50 runs of the history."""
        if not self.history_next:
            return None
        self.history_before = self.history_next
        self.history_page += 1
        return self._read(self._load_history)

    @rx.event
    @requires_door(Monitor.runs)
    def first_history_page(self):
        self._first_page()
        return self._read(self._load_history)
