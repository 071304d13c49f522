"""The monitoring dashboard's REST routes (issue 10): runs across workflows, and the overview.

Any signed-in user may call them; the door (backend.monitoring.service.Monitor) answers only
with what their roles let them read, and a filter naming a foreign or unknown instance or workflow is 404.
Both count production runs unless `kind` asks for test runs (runs of a draft and their retries) or all.
"""

from __future__ import annotations

from dataclasses import asdict
from datetime import datetime
from typing import Annotated, Literal

from fastapi import APIRouter, Query
from pydantic import BeforeValidator

from backend.api.deps import CurrentUser, DbSession
from backend.api.permissions import declared_by
from backend.api.schemas import (
    MonitorCostsOut,
    MonitorDayOut,
    MonitorOverview,
    MonitorRunOut,
    MonitorRunPage,
    MonitorUpcomingOut,
)
from backend.monitoring import service
from backend.rbac.access import AccessContext

router = APIRouter(prefix="/api/monitor", tags=["monitor"])

InstanceId = Annotated[str | None, Query(alias="instanceId", description="only this Graphical Editor instance")]
WorkflowId = Annotated[str | None, Query(alias="workflowId", description="only this workflow")]
Status = Annotated[Literal[service.STATUSES] | None, Query(description=f"one of {', '.join(service.STATUSES)}")]
Kind = Annotated[Literal[service.KINDS], Query(
    description="which runs every figure counts: `production` (the default: all but test runs), `test` (runs of "
                "a draft — the editor's Test run, step mode, REST runs of the draft — and their retries) or `all`")]


def _iso_time(value: object) -> object:
    """ISO 8601 only: pydantic would read a bare number as unix seconds, which the document does not say."""
    if isinstance(value, str) and value.strip().lstrip("+-").replace(".", "", 1).isdigit():
        raise ValueError("must be an ISO 8601 date or time")
    return value


Since = Annotated[datetime | None, BeforeValidator(_iso_time),
                  Query(description="runs started at or after this time (ISO 8601)")]
Until = Annotated[datetime | None, BeforeValidator(_iso_time),
                  Query(description="runs started before this time (ISO 8601)")]


def _filter(instance_id: str | None, workflow_id: str | None, status: str | None,
            since: datetime | None, until: datetime | None, kind: str) -> service.MonitorFilter:
    return service.MonitorFilter(instance_id=instance_id, workflow_id=workflow_id, status=status or None,
                                 since=since, until=until, kind=kind)


def _run(row: service.RunRow) -> MonitorRunOut:
    return MonitorRunOut.model_validate(asdict(row))


@router.get("/runs", response_model=MonitorRunPage, **declared_by(service.Monitor.runs))
def monitor_runs(user: CurrentUser, session: DbSession, instance_id: InstanceId = None, workflow_id: WorkflowId = None,
                 status: Status = None, since: Since = None, until: Until = None, kind: Kind = service.PRODUCTION,
                 limit: Annotated[int, Query(ge=1, le=service.MAX_LIMIT)] = 50,
                 before: Annotated[str | None, Query(description="nextBefore of the previous page, or an ISO time")]
                 = None) -> MonitorRunPage:
    """Runs of every workflow the caller may read, newest first, one page at a time."""
    page = service.Monitor(AccessContext(session, user)).runs(
        _filter(instance_id, workflow_id, status, since, until, kind), limit, before)
    return MonitorRunPage(items=[_run(r) for r in page.rows], next_before=page.next_before)


@router.get("/overview", response_model=MonitorOverview, **declared_by(service.Monitor.overview))
def monitor_overview(user: CurrentUser, session: DbSession, instance_id: InstanceId = None,
                     workflow_id: WorkflowId = None, status: Status = None, since: Since = None, until: Until = None,
                     kind: Kind = service.PRODUCTION,
                     days: Annotated[int, Query(ge=1, le=service.MAX_DAYS, description="the window of daily "
                                                "figures and costs")] = 14) -> MonitorOverview:
    """Live runs, upcoming scheduled runs, runs per day, AI costs and the latest failures."""
    result = service.Monitor(AccessContext(session, user)).overview(
        _filter(instance_id, workflow_id, status, since, until, kind), days)
    return MonitorOverview(
        live=[_run(r) for r in result.live],
        upcoming=[MonitorUpcomingOut.model_validate(asdict(r)) for r in result.upcoming],
        daily=[MonitorDayOut.model_validate(asdict(r)) for r in result.daily],
        costs=MonitorCostsOut.model_validate(asdict(result.costs)),
        recent_failures=[_run(r) for r in result.recent_failures],
    )
