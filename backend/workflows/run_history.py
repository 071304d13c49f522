"""Run history of one workflow (issue 7, item 5): pages of runs and the monitor's figures.

Pure queries; the caller (GraphicalEditorInterface) has checked the rights and passes
`created_by` when the user may read only their own runs. Pages are newest first, ordered by
(started_at, id) so that runs started in the same instant are neither skipped nor repeated:
the cursor `before` is the `nextBefore` of the previous page ("<ISO time>|<run id>"), or a
plain ISO time (runs started before it).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from sqlalchemy import and_, func, or_
from sqlmodel import Session, select

from backend.db.models import WorkflowRun, utcnow
from backend.errors import FieldError, InvalidInput
from backend.statemachines import workflow_run as run_lifecycle

STATUSES = (run_lifecycle.RUNNING, run_lifecycle.PAUSED, *run_lifecycle.FINISHED)
TRIGGERS = ("manual", "schedule", "webhook", "event", "form")
DEFAULT_LIMIT, MAX_LIMIT = 50, 200
DEFAULT_DAYS, MAX_DAYS = 7, 366
AVERAGE_OF = 1000  # the average duration is that of the newest finished runs in the window, at most this many


@dataclass(frozen=True)
class RunPage:
    runs: list[WorkflowRun]
    next_before: str | None  # the cursor of the next (older) page; None: this was the last


@dataclass(frozen=True)
class RunSummary:
    days: int
    since: datetime
    total: int
    by_status: dict[str, int]
    by_trigger: dict[str, int]
    last_run: WorkflowRun | None
    last_failure: WorkflowRun | None
    average_duration_ms: int | None  # of the newest (≤ AVERAGE_OF) runs finished in the window


def _aware(moment: datetime) -> datetime:
    return moment if moment.tzinfo else moment.replace(tzinfo=UTC)


def duration_ms(run: WorkflowRun) -> int | None:
    """How long a finished run took; None while it has not finished."""
    if run.finished_at is None:
        return None
    return max(0, int((_aware(run.finished_at) - _aware(run.started_at)).total_seconds() * 1000))


def cursor(run: WorkflowRun) -> str:
    return f"{_aware(run.started_at).isoformat()}|{run.id}"


def _parse_before(before: str) -> tuple[datetime, str | None]:
    moment, _, run_id = before.partition("|")
    try:
        parsed = datetime.fromisoformat(moment.strip().replace("Z", "+00:00"))
    except ValueError:
        raise InvalidInput([FieldError("before", "must be the nextBefore of a previous page or an ISO time")]) from None
    return _aware(parsed), (run_id.strip() or None)


def _check(status: str | None, trigger: str | None, limit: int) -> None:
    errors = []
    if status and status not in STATUSES:
        errors.append(FieldError("status", f"must be one of {', '.join(STATUSES)}"))
    if trigger and trigger not in TRIGGERS:
        errors.append(FieldError("trigger", f"must be one of {', '.join(TRIGGERS)}"))
    if not 1 <= limit <= MAX_LIMIT:
        errors.append(FieldError("limit", f"must be between 1 and {MAX_LIMIT}"))
    if errors:
        raise InvalidInput(errors)


def _scope(query: Any, workflow_id: str, created_by: str | None) -> Any:
    query = query.where(WorkflowRun.workflow_id == workflow_id)
    return query.where(WorkflowRun.sys_created_by == created_by) if created_by else query


def list_runs(session: Session, workflow_id: str, *, created_by: str | None = None, status: str | None = None,
              trigger: str | None = None, limit: int = DEFAULT_LIMIT, before: str | None = None) -> RunPage:
    """One page of the workflow's runs, newest first, filtered by status and trigger."""
    _check(status, trigger, limit)
    query = _scope(select(WorkflowRun), workflow_id, created_by)
    if status:
        query = query.where(WorkflowRun.status == status)
    if trigger:
        query = query.where(WorkflowRun.trigger == trigger)
    if before:
        moment, run_id = _parse_before(before)
        earlier = WorkflowRun.started_at < moment
        if run_id:
            earlier = or_(earlier, and_(WorkflowRun.started_at == moment, WorkflowRun.id < run_id))
        query = query.where(earlier)
    query = query.order_by(WorkflowRun.started_at.desc(), WorkflowRun.id.desc()).limit(limit + 1)
    runs = list(session.exec(query).all())
    more = len(runs) > limit
    runs = runs[:limit]
    return RunPage(runs, cursor(runs[-1]) if more else None)


def summarize(session: Session, workflow_id: str, *, created_by: str | None = None,
              days: int = DEFAULT_DAYS, now: datetime | None = None) -> RunSummary:
    """Counts per status and trigger over the last `days` days, the last run and the last failure
    (whenever they were), and the average duration of the newest runs finished in the window."""
    if not 1 <= days <= MAX_DAYS:
        raise InvalidInput([FieldError("days", f"must be between 1 and {MAX_DAYS}")])
    since = (now or utcnow()) - timedelta(days=days)
    in_window = WorkflowRun.started_at >= since

    def counts(column: Any) -> dict[str, int]:
        query = _scope(select(column, func.count()), workflow_id, created_by).where(in_window).group_by(column)
        return {key: int(count) for key, count in session.exec(query).all()}

    by_status = {status: 0 for status in STATUSES} | counts(WorkflowRun.status)
    by_trigger = counts(WorkflowRun.trigger)
    newest = (WorkflowRun.started_at.desc(), WorkflowRun.id.desc())
    last_run = session.exec(_scope(select(WorkflowRun), workflow_id, created_by).order_by(*newest).limit(1)).first()
    last_failure = session.exec(_scope(select(WorkflowRun), workflow_id, created_by)
                                .where(WorkflowRun.status == run_lifecycle.FAILED).order_by(*newest).limit(1)).first()
    finished = session.exec(_scope(select(WorkflowRun.started_at, WorkflowRun.finished_at), workflow_id, created_by)
                            .where(in_window, WorkflowRun.finished_at.is_not(None))
                            .order_by(*newest).limit(AVERAGE_OF)).all()
    durations = [(_aware(end) - _aware(start)).total_seconds() * 1000 for start, end in finished]
    average = int(sum(durations) / len(durations)) if durations else None
    return RunSummary(days, since, sum(by_status.values()), by_status, by_trigger, last_run, last_failure, average)
