"""The monitoring dashboard's data (issue 10): runs across workflows and instances, live runs,
upcoming schedules, daily counts and AI costs.

Rights: a user sees the runs of the Graphical Editor instances they may open whose DATA right
`workflow_run` read is not NONE, narrowed per instance by the one own/all rule
(`backend.rbac.access.owner_filter`: where it is OWN, only the runs they started, sysCreatedBy).
A filter naming an instance or workflow outside that answers NotFound, like a missing one.
:class:`Monitor` is the door the Monitor page and /api/monitor call.

Test runs (`workflow_run.test`: runs of a draft — the editor's Test run, step mode, REST runs of
the draft — and their retries) are kept apart from production runs: every figure counts the
filter's `kind` of runs only, production by default, so trying things out never raises the
error rate. The flag is a column of the covering index ix_workflow_run_instance_started, so the
condition is checked in the index.

Everything is counted and summed by the database (GROUP BY, day buckets in UTC); Python only
zero-fills days and adds up small per-(workflow, day) partials. Pages are newest first, keyset
paged with the cursor of backend.workflows.run_history ("<ISO time>|<run id>").
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from datetime import UTC, date, datetime, time, timedelta
from typing import Any

from sqlalchemy import Date, Text, and_, case, cast, false, func, or_, union_all
from sqlmodel import Session, select

from backend.db.models import FeatureInstance, Mandate, Workflow, WorkflowRun, WorkflowVersion, utcnow
from backend.engine.steps import split_error
from backend.errors import FieldError, InvalidInput, NotFound
from backend.rbac.access import AccessContext, owner_filter
from backend.rbac.door import Door, guarded
from backend.rbac.rights import Level
from backend.scheduler.jobs import SCHEDULE_TYPE
from backend.scheduler.preview import describe_schedule, next_run
from backend.statemachines import workflow_run as run_lifecycle
from backend.statemachines import workflow_version as version_lifecycle
from backend.workflows import run_history

FEATURE_CODE = "graphicalEditor"
RUN_DATA = f"data.feature.{FEATURE_CODE}.workflow_run"
STATUSES = run_history.STATUSES  # running, paused, completed, failed, cancelled
LIVE = (run_lifecycle.RUNNING, run_lifecycle.PAUSED)
MAX_LIMIT = run_history.MAX_LIMIT
MAX_DAYS = run_history.MAX_DAYS
MERGE_INSTANCES_MAX = 50  # beyond that many instances, one plain query (the merge would grow too wide)
PRODUCTION, TEST, ALL_RUNS = "production", "test", "all"
KINDS = (PRODUCTION, TEST, ALL_RUNS)  # which runs a filter counts: not test runs, test runs only, both


# --- the API ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class MonitorFilter:
    instance_id: str | None = None
    workflow_id: str | None = None
    status: str | None = None      # running | paused | completed | failed | cancelled
    since: datetime | None = None  # started_at >= since (aware UTC)
    until: datetime | None = None  # started_at < until
    kind: str = PRODUCTION         # production | test | all (KINDS)


@dataclass(frozen=True)
class RunRow:
    id: str
    workflow_id: str
    workflow_name: str
    instance_id: str
    instance_label: str
    status: str
    pause_reason: str | None
    trigger: str | None
    started_at: datetime
    finished_at: datetime | None
    duration_ms: int | None
    error: str | None          # message only (engine.steps.split_error)
    cost_chf: float            # sum of its steps' cost_chf (0.0 when none)
    test: bool = False         # a test run (of a draft, or a retry of one)


@dataclass(frozen=True)
class RunPage:
    rows: list[RunRow]
    next_before: str | None


@dataclass(frozen=True)
class UpcomingRow:
    workflow_id: str
    workflow_name: str
    instance_label: str
    next_run: datetime
    schedule: str
    registered: bool


@dataclass(frozen=True)
class DayRow:
    day: date
    total: int
    completed: int
    failed: int
    cancelled: int
    error_rate: float  # failed / finished (0..1)


@dataclass(frozen=True)
class CostRow:
    key: str
    label: str
    cost_chf: float
    runs: int   # key = workflow id or ISO day


@dataclass(frozen=True)
class CostReport:
    by_workflow: list[CostRow]
    by_day: list[CostRow]
    total_chf: float


# --- rights and filters -------------------------------------------------------------------------


def _aware(moment: datetime) -> datetime:
    return moment if moment.tzinfo else moment.replace(tzinfo=UTC)


@dataclass(frozen=True)
class _Scope:
    """What one user may read, narrowed by a filter: each instance with the user's read level."""

    user_id: str
    levels: tuple[tuple[str, Level], ...]  # (instance id, workflow_run read level), by instance id
    labels: dict[str, str]
    filt: MonitorFilter

    @property
    def empty(self) -> bool:
        return not self.levels

    @property
    def instance_ids(self) -> tuple[str, ...]:
        return tuple(instance_id for instance_id, _level in self.levels)

    def rows_of(self, model: Any, instance_id: str | None = None) -> Any:
        """The WHERE clause of the rows of `model` (runs, or workflows: whose runs are the
        creator's) the user may read, per instance by the own/all rule; of one of the scope's
        instances when `instance_id` is given. Instances of one level share one IN (…)."""
        by_level: dict[Level, list[str]] = defaultdict(list)
        for instance, level in self.levels:
            if instance_id is None or instance == instance_id:
                by_level[level].append(instance)
        parts = [self._part(model, tuple(ids), level) for level, ids in sorted(by_level.items(), reverse=True)]
        return (or_(*parts) if len(parts) > 1 else parts[0]) if parts else false()

    def _part(self, model: Any, ids: tuple[str, ...], level: Level) -> Any:
        where = model.feature_instance_id.in_(ids) if len(ids) > 1 else model.feature_instance_id == ids[0]
        return owner_filter(select(model.id).where(where), model, level, self.user_id).whereclause

    def readable(self, instance_id: str | None = None) -> Any:
        """The WHERE clause of the runs the user may read (and the filter keeps); of one of the
        scope's instances when `instance_id` is given."""
        run = WorkflowRun
        conditions = [self.rows_of(run, instance_id)]
        if self.filt.workflow_id:
            conditions.append(run.workflow_id == self.filt.workflow_id)
        if self.filt.status:
            conditions.append(run.status == self.filt.status)
        if self.filt.since:
            conditions.append(run.started_at >= _aware(self.filt.since))
        if self.filt.until:
            conditions.append(run.started_at < _aware(self.filt.until))
        if self.filt.kind != ALL_RUNS:
            conditions.append(run.test == (self.filt.kind == TEST))
        return and_(*conditions)


def _readable_instances(access: AccessContext) -> list[tuple[FeatureInstance, Level]]:
    """The editor instances the user may open with their workflow_run read level (not NONE)."""
    found = []
    for instance in access.visible_instances(FEATURE_CODE):
        level = access.data_level(RUN_DATA, "read", instance.mandate_id, instance.id)
        if level != Level.NONE:
            found.append((instance, level))
    return found


def _labels(session: Session, instances: list[FeatureInstance]) -> dict[str, str]:
    """Instance labels; prefixed by the mandate's name when the user sees several mandates."""
    mandate_ids = {i.mandate_id for i in instances}
    if len(mandate_ids) <= 1:
        return {i.id: i.label for i in instances}
    names = dict(session.exec(select(Mandate.id, Mandate.name).where(Mandate.id.in_(mandate_ids))).all())
    return {i.id: f"{names.get(i.mandate_id, '?')} / {i.label}" for i in instances}


def _check_status(status: str | None) -> None:
    if status and status not in STATUSES:
        raise InvalidInput([FieldError("status", f"must be one of {', '.join(STATUSES)}")])


def _check_kind(kind: str) -> None:
    if kind not in KINDS:
        raise InvalidInput([FieldError("kind", f"must be one of {', '.join(KINDS)}")])


def _check_range(name: str, value: int, high: int) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= high:
        raise InvalidInput([FieldError(name, f"must be between 1 and {high}")])


def _scope(access: AccessContext, filt: MonitorFilter) -> _Scope:
    """The user's readable runs narrowed by `filt`; worked out once per AccessContext (a request)
    and filter, as the AccessContext caches role lookups for one request."""
    memo = access.__dict__.setdefault("_monitor_scopes", {})
    if filt not in memo:
        memo[filt] = _build_scope(access, filt)
    return memo[filt]


def _build_scope(access: AccessContext, filt: MonitorFilter) -> _Scope:
    _check_status(filt.status)
    _check_kind(filt.kind)
    if filt.since and filt.until and _aware(filt.since) >= _aware(filt.until):
        raise InvalidInput([FieldError("until", "must be after since")])
    readable = _readable_instances(access)
    labels = _labels(access.session, [i for i, _level in readable])
    levels = {i.id: level for i, level in readable}
    if filt.instance_id is not None:
        if filt.instance_id not in levels:
            raise NotFound(f"feature instance {filt.instance_id} not found")
        levels = {filt.instance_id: levels[filt.instance_id]}
    if filt.workflow_id is not None:
        instance_id = access.session.exec(
            select(Workflow.feature_instance_id).where(Workflow.id == filt.workflow_id)).first()
        if instance_id is None or instance_id not in levels:
            raise NotFound(f"workflow {filt.workflow_id} not found")
        levels = {instance_id: levels[instance_id]}
    return _Scope(access.user.id, tuple(sorted(levels.items())), labels, filt)


# --- runs ---------------------------------------------------------------------------------------


def _newest(scope: _Scope, limit: int, *extra: Any, by_instance: bool = True) -> Any:
    """The ids of the newest `limit` runs in scope (and `extra`), as a subquery.

    With several instances, the newest of each instance (an index range read in order) are
    merged, UNION ALL: "instance IN (…) ORDER BY started_at" would sort every run instead.
    Not for rare statuses (`by_instance` False): the (status, started_at) index finds those."""
    run = WorkflowRun
    order = (run.started_at.desc(), run.id.desc())
    ids = scope.instance_ids
    if not by_instance or len(ids) == 1 or len(ids) > MERGE_INSTANCES_MAX:
        return select(run.id).where(scope.readable(), *extra).order_by(*order).limit(limit).subquery()
    parts = [select(run.id, run.started_at).where(scope.readable(i), *extra).order_by(*order).limit(limit).subquery()
             for i in ids]
    merged = union_all(*(select(part.c.id, part.c.started_at) for part in parts)).subquery()
    return select(merged.c.id).order_by(merged.c.started_at.desc(), merged.c.id.desc()).limit(limit).subquery()


def _run_rows(access: AccessContext, scope: _Scope, limit: int, *extra: Any, by_instance: bool = True) -> list[RunRow]:
    run = WorkflowRun
    newest = _newest(scope, limit, *extra, by_instance=by_instance)
    query = (select(run.id, run.workflow_id, Workflow.name, run.feature_instance_id, run.status, run.pause_reason,
                    run.trigger, run.started_at, run.finished_at, run.error, run.cost_chf, run.test)
             .join(newest, newest.c.id == run.id)
             .join(Workflow, Workflow.id == run.workflow_id)
             .order_by(run.started_at.desc(), run.id.desc()))
    rows = []
    for (run_id, workflow_id, name, instance_id, status, pause_reason, trigger, started, finished, error,
         cost, test) in access.session.exec(query).all():
        started = _aware(started)
        finished = _aware(finished) if finished else None
        duration = max(0, int((finished - started).total_seconds() * 1000)) if finished else None
        rows.append(RunRow(run_id, workflow_id, name, instance_id, scope.labels.get(instance_id, instance_id),
                           status, pause_reason, trigger, started, finished, duration, split_error(error)[0],
                           float(cost or 0.0), bool(test)))
    return rows


def list_runs(access: AccessContext, filt: MonitorFilter, limit: int = 50, before: str | None = None) -> RunPage:
    """One page of the runs the user may read, newest first; `before` is the previous page's
    `next_before` (or an ISO time)."""
    _check_range("limit", limit, MAX_LIMIT)
    scope = _scope(access, filt)
    if scope.empty:
        return RunPage([], None)
    extra = []
    if before:
        moment, run_id = run_history._parse_before(before)
        earlier = WorkflowRun.started_at < moment
        if run_id:
            earlier = or_(earlier, and_(WorkflowRun.started_at == moment, WorkflowRun.id < run_id))
        extra.append(earlier)
    rows = _run_rows(access, scope, limit + 1, *extra, by_instance=filt.status not in LIVE)
    more = len(rows) > limit
    rows = rows[:limit]
    return RunPage(rows, run_history.cursor(rows[-1]) if more else None)  # type: ignore[arg-type]


def live_runs(access: AccessContext, filt: MonitorFilter, limit: int = 100) -> list[RunRow]:
    """Running and paused runs, newest first."""
    _check_range("limit", limit, MAX_LIMIT)
    scope = _scope(access, filt)
    if scope.empty or (filt.status and filt.status not in LIVE):
        return []
    return _run_rows(access, scope, limit, WorkflowRun.status.in_(LIVE), by_instance=False)


def recent_failures(access: AccessContext, filt: MonitorFilter, limit: int = 10) -> list[RunRow]:
    """The newest failed runs."""
    _check_range("limit", limit, MAX_LIMIT)
    scope = _scope(access, filt)
    if scope.empty or (filt.status and filt.status != run_lifecycle.FAILED):
        return []
    return _run_rows(access, scope, limit, WorkflowRun.status == run_lifecycle.FAILED)


# --- upcoming schedules -------------------------------------------------------------------------


def upcoming(access: AccessContext, filt: MonitorFilter, limit: int = 20, *,
             now: datetime | None = None) -> list[UpcomingRow]:
    """The next fire time of each active workflow's published schedule triggers, soonest first
    (computed with the scheduler's own triggers). Where the user may read only their own runs,
    only the workflows they created (whose scheduled runs are theirs). Scheduled runs are
    production runs: none when the filter asks for test runs only."""
    _check_range("limit", limit, MAX_LIMIT)
    scope = _scope(access, filt)
    if scope.empty or filt.kind == TEST:
        return []
    query = (select(Workflow.id, Workflow.name, Workflow.feature_instance_id, Workflow.event_id,
                    WorkflowVersion.graph, WorkflowVersion.published_at)
             .join(WorkflowVersion, and_(WorkflowVersion.workflow_id == Workflow.id,
                                         WorkflowVersion.status == version_lifecycle.PUBLISHED))
             .where(Workflow.active.is_(True), scope.rows_of(Workflow),
                    cast(WorkflowVersion.graph, Text).contains(SCHEDULE_TYPE)))
    if filt.workflow_id:
        query = query.where(Workflow.id == filt.workflow_id)
    now = now or utcnow()
    rows = []
    for workflow_id, name, instance_id, event_id, graph, published_at in access.session.exec(query).all():
        found = next_run(graph, _aware(published_at) if published_at else None, now)
        if found is None:
            continue
        moment, schedule = found
        rows.append(UpcomingRow(workflow_id, name, scope.labels.get(instance_id, instance_id),
                                moment.astimezone(UTC), describe_schedule(schedule), bool(event_id)))
    rows.sort(key=lambda r: (r.next_run, r.workflow_name, r.workflow_id))
    return rows[:limit]


# --- daily figures and costs --------------------------------------------------------------------


def _day_bucket(session: Session) -> Any:
    """The UTC day a run started, as the database computes it (a date, or 'YYYY-MM-DD' on SQLite)."""
    if session.get_bind().dialect.name == "postgresql":
        return cast(func.timezone("UTC", WorkflowRun.started_at), Date)
    # SQLite stores UTC as "YYYY-MM-DD HH:MM:SS.ffffff" (no offset): its first 10 characters are
    # the day, cheaper than date() on every row.
    return func.substr(WorkflowRun.started_at, 1, 10)


def _as_date(value: Any) -> date:
    if isinstance(value, datetime):
        return value.date()
    if isinstance(value, date):
        return value
    return date.fromisoformat(str(value)[:10])


def _window(filt: MonitorFilter, days: int, now: datetime | None) -> tuple[list[date], datetime, datetime]:
    """The `days` UTC days ending today (or on the day before `filt.until`), their bounds."""
    _check_range("days", days, MAX_DAYS)
    end = _aware(filt.until) - timedelta(microseconds=1) if filt.until else (now or utcnow())
    last = end.astimezone(UTC).date()
    first = last - timedelta(days=days - 1)
    start = datetime.combine(first, time(), tzinfo=UTC)
    stop = datetime.combine(last + timedelta(days=1), time(), tzinfo=UTC)
    return [first + timedelta(days=n) for n in range(days)], start, stop


def _figures(access: AccessContext, scope: _Scope, start: datetime, stop: datetime) -> dict[tuple[str, date], tuple]:
    """(workflow id, UTC day) → (runs, completed, failed, cancelled, cost) of the runs started in
    [start, stop): one GROUP BY over the covering index ix_workflow_run_instance_started."""
    if scope.empty:
        return {}
    bucket = _day_bucket(access.session).label("day")
    run = WorkflowRun

    def tally(value: str) -> Any:
        return func.sum(case((run.status == value, 1), else_=0))

    query = (select(run.workflow_id, bucket, func.count(), tally(run_lifecycle.COMPLETED), tally(run_lifecycle.FAILED),
                    tally(run_lifecycle.CANCELLED), func.sum(run.cost_chf))
             .where(scope.readable(), run.started_at >= start, run.started_at < stop)
             .group_by(run.workflow_id, bucket))
    figures: dict[tuple[str, date], tuple] = {}
    for workflow_id, day, total, completed, failed, cancelled, cost in access.session.exec(query).all():
        figures[(workflow_id, _as_date(day))] = (int(total), int(completed or 0), int(failed or 0),
                                                 int(cancelled or 0), float(cost or 0.0))
    return figures


def _daily_rows(window: list[date], figures: dict[tuple[str, date], tuple]) -> list[DayRow]:
    per_day: dict[date, list[int]] = defaultdict(lambda: [0, 0, 0, 0])
    for (_workflow, day), (total, completed, failed, cancelled, _cost) in figures.items():
        counts = per_day[day]
        counts[0] += total
        counts[1] += completed
        counts[2] += failed
        counts[3] += cancelled
    rows = []
    for day in window:
        total, completed, failed, cancelled = per_day.get(day, (0, 0, 0, 0))
        finished = completed + failed + cancelled
        rows.append(DayRow(day, total, completed, failed, cancelled, failed / finished if finished else 0.0))
    return rows


def _cost_report(access: AccessContext, window: list[date], figures: dict[tuple[str, date], tuple]) -> CostReport:
    per_workflow: dict[str, list[float]] = defaultdict(lambda: [0.0, 0])
    per_day: dict[date, list[float]] = defaultdict(lambda: [0.0, 0])
    for (workflow_id, day), (total, _completed, _failed, _cancelled, cost) in figures.items():
        for bucket in (per_workflow[workflow_id], per_day[day]):
            bucket[0] += cost
            bucket[1] += total
    names: dict[str, str] = {}
    if per_workflow:
        names = dict(access.session.exec(
            select(Workflow.id, Workflow.name).where(Workflow.id.in_(list(per_workflow)))).all())
    by_workflow = sorted(
        (CostRow(workflow_id, names.get(workflow_id, workflow_id), round(cost, 6), int(count))
         for workflow_id, (cost, count) in per_workflow.items()),
        key=lambda r: (-r.cost_chf, -r.runs, r.label))
    by_day = [CostRow(day.isoformat(), day.isoformat(), round(per_day[day][0], 6), int(per_day[day][1]))
              if day in per_day else CostRow(day.isoformat(), day.isoformat(), 0.0, 0) for day in window]
    return CostReport(by_workflow, by_day, round(sum(r.cost_chf for r in by_day), 6))


def daily(access: AccessContext, filt: MonitorFilter, days: int = 14, *, now: datetime | None = None) -> list[DayRow]:
    """Runs started per UTC day over the last `days` days, oldest first, days without runs as zeros;
    error_rate = failed / finished (completed + failed + cancelled)."""
    window, start, stop = _window(filt, days, now)
    return _daily_rows(window, _figures(access, _scope(access, filt), start, stop))


def costs(access: AccessContext, filt: MonitorFilter, days: int = 14, *, now: datetime | None = None) -> CostReport:
    """AI cost (each run's cost_chf, the sum of its steps') and runs started in the last `days` UTC
    days, per workflow (most expensive first, then most runs) and per day (oldest first, zero-filled)."""
    window, start, stop = _window(filt, days, now)
    return _cost_report(access, window, _figures(access, _scope(access, filt), start, stop))


@dataclass(frozen=True)
class Overview:
    live: list[RunRow]
    upcoming: list[UpcomingRow]
    daily: list[DayRow]
    costs: CostReport
    recent_failures: list[RunRow]


def overview(access: AccessContext, filt: MonitorFilter, days: int = 14, *, now: datetime | None = None) -> Overview:
    """live_runs, upcoming, daily, costs and recent_failures with their default limits, the daily
    figures and costs from one grouped query (what GET /api/monitor/overview answers)."""
    window, start, stop = _window(filt, days, now)
    figures = _figures(access, _scope(access, filt), start, stop)
    return Overview(live_runs(access, filt), upcoming(access, filt, now=now), _daily_rows(window, figures),
                    _cost_report(access, window, figures), recent_failures(access, filt))


# --- filter choices -----------------------------------------------------------------------------


def instance_options(access: AccessContext) -> list[tuple[str, str]]:
    """(id, label) of every instance the user may read runs in, by label."""
    readable = [i for i, _level in _readable_instances(access)]
    labels = _labels(access.session, readable)
    return sorted(((i.id, labels[i.id]) for i in readable), key=lambda pair: (pair[1].casefold(), pair[0]))


def workflow_options(access: AccessContext, instance_id: str | None = None) -> list[tuple[str, str, str]]:
    """(id, name, instance id) of the workflows of those instances (of `instance_id` alone when
    given: NotFound when the user may not read runs there), by name."""
    ids = [i.id for i, _level in _readable_instances(access)]
    if instance_id is not None:
        if instance_id not in ids:
            raise NotFound(f"feature instance {instance_id} not found")
        ids = [instance_id]
    if not ids:
        return []
    query = (select(Workflow.id, Workflow.name, Workflow.feature_instance_id)
             .where(Workflow.feature_instance_id.in_(ids)).order_by(Workflow.name, Workflow.id))
    return [(workflow_id, name, instance) for workflow_id, name, instance in access.session.exec(query).all()]


# --- the door -----------------------------------------------------------------------------------


class Monitor(Door):
    """The Monitor's door, as one signed-in user: every answer spans the Graphical Editor
    instances they may read runs in, narrowed per instance (any signed-in user may ask)."""

    def __init__(self, access: AccessContext):
        self.access = access

    @guarded("authenticated")
    def runs(self, filt: MonitorFilter, limit: int = 50, before: str | None = None) -> RunPage:
        """One page of the run history, newest first (see :func:`list_runs`)."""
        return list_runs(self.access, filt, limit, before)

    @guarded("authenticated")
    def live(self, filt: MonitorFilter, limit: int = 100) -> list[RunRow]:
        """Running and paused runs, newest first."""
        return live_runs(self.access, filt, limit)

    @guarded("authenticated")
    def upcoming(self, filt: MonitorFilter, limit: int = 20) -> list[UpcomingRow]:
        """The next scheduled runs, soonest first."""
        return upcoming(self.access, filt, limit)

    @guarded("authenticated")
    def daily(self, filt: MonitorFilter, days: int = 14) -> list[DayRow]:
        """Runs per UTC day, oldest first."""
        return daily(self.access, filt, days)

    @guarded("authenticated")
    def costs(self, filt: MonitorFilter, days: int = 14) -> CostReport:
        """AI cost per workflow and per day."""
        return costs(self.access, filt, days)

    @guarded("authenticated")
    def failures(self, filt: MonitorFilter, limit: int = 10) -> list[RunRow]:
        """The newest failed runs."""
        return recent_failures(self.access, filt, limit)

    @guarded("authenticated")
    def overview(self, filt: MonitorFilter, days: int = 14) -> Overview:
        """Live and upcoming runs, daily figures, costs and failures in one answer."""
        return overview(self.access, filt, days)

    @guarded("authenticated")
    def instance_options(self) -> list[tuple[str, str]]:
        """(id, label) of the instances the filter offers."""
        return instance_options(self.access)

    @guarded("authenticated")
    def workflow_options(self, instance_id: str | None = None) -> list[tuple[str, str, str]]:
        """(id, name, instance id) of the workflows the filter offers."""
        return workflow_options(self.access, instance_id)


__all__ = [
    "ALL_RUNS", "KINDS", "PRODUCTION", "TEST",
    "CostReport", "CostRow", "DayRow", "Monitor", "MonitorFilter", "Overview", "RunPage", "RunRow", "UpcomingRow",
    "costs", "daily", "instance_options", "list_runs", "live_runs", "overview", "recent_failures", "upcoming",
    "workflow_options",
]
