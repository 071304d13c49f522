"""Where scheduler jobs come from: the published versions' trigger.schedule nodes of active workflows.

Our tables are the source of truth. A job is described by a :class:`JobSpec` (hashable, so the
scheduler can tell whether a change touched the schedule); APScheduler's in-memory job store only
holds the job id ``wf:{workflowId}:{nodeId}`` and its trigger. :class:`JobSource` is the seam for
other sources (tests, benchmarks); :class:`PublishedSchedules` reads the database.
"""

from __future__ import annotations

import logging
from abc import ABC, abstractmethod
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import Text, and_, cast
from sqlmodel import Session, select

from backend.db.models import Workflow, WorkflowVersion
from backend.scheduler.cron import Schedule, ScheduleError, parse_schedule
from backend.statemachines import workflow_version as version_lifecycle

log = logging.getLogger(__name__)

SCHEDULE_TYPE = "trigger.schedule"
EVENT_ID_MAX = 200  # Workflow.event_id


def job_id_for(workflow_id: str, node_id: str) -> str:
    """The APScheduler job id of one trigger.schedule node."""
    return f"wf:{workflow_id}:{node_id}"


@dataclass(frozen=True)
class JobSpec:
    """One job: a schedule node of a workflow's published version."""

    workflow_id: str
    node_id: str
    version_id: str
    schedule: Schedule
    anchor: datetime | None = None  # the version's publication: the grid of an interval

    @property
    def job_id(self) -> str:
        return job_id_for(self.workflow_id, self.node_id)


def event_id_for(specs: list[JobSpec]) -> str | None:
    """The job handle stored as Workflow.eventId: the job id (ids joined by a space when a
    workflow has several schedule nodes; shortened to "wf:{id}:*N" if that does not fit)."""
    if not specs:
        return None
    handle = " ".join(sorted(spec.job_id for spec in specs))
    return handle if len(handle) <= EVENT_ID_MAX else f"wf:{specs[0].workflow_id}:*{len(specs)}"


def schedule_nodes(graph: Any) -> list[tuple[str, Schedule]]:
    """The enabled trigger.schedule nodes of a graph with their schedules (invalid ones skipped)."""
    found = []
    for node in (graph or {}).get("nodes", []) if isinstance(graph, dict) else []:
        if not isinstance(node, dict) or node.get("type") != SCHEDULE_TYPE or node.get("disabled") is True:
            continue
        try:
            found.append((node["id"], parse_schedule(node.get("parameters") or {})))
        except (ScheduleError, KeyError, TypeError) as exc:  # published graphs are validated; be safe anyway
            log.warning("schedule node %r skipped: %s", node.get("id"), exc)
    return found


def specs_of(workflow_id: str, version_id: str, graph: Any, published_at: datetime | None) -> list[JobSpec]:
    return [JobSpec(workflow_id, node_id, version_id, schedule, published_at)
            for node_id, schedule in schedule_nodes(graph)]


class JobSource(ABC):
    """What the scheduler should run; reads through the caller's session."""

    @abstractmethod
    def jobs_of(self, session: Session, workflow_id: str) -> tuple[Workflow | None, list[JobSpec]]:
        """The workflow (None when deleted) and the jobs it should have now."""

    @abstractmethod
    def all_jobs(self, session: Session) -> dict[str, tuple[Workflow, list[JobSpec]]]:
        """Every workflow that should have jobs now, with them."""

    @abstractmethod
    def registered(self, session: Session) -> list[Workflow]:
        """Every workflow whose eventId says it is registered."""


class PublishedSchedules(JobSource):
    """Jobs of the published versions of active workflows (DESIGN §4, spec §7.4)."""

    def jobs_of(self, session: Session, workflow_id: str) -> tuple[Workflow | None, list[JobSpec]]:
        workflow = session.get(Workflow, workflow_id, populate_existing=True)
        if workflow is None or not workflow.active:
            return workflow, []
        version = session.exec(select(WorkflowVersion).where(
            WorkflowVersion.workflow_id == workflow_id, WorkflowVersion.status == version_lifecycle.PUBLISHED)).first()
        if version is None:
            return workflow, []
        return workflow, specs_of(workflow.id, version.id, version.graph, version.published_at)

    def all_jobs(self, session: Session) -> dict[str, tuple[Workflow, list[JobSpec]]]:
        query = (
            select(Workflow, WorkflowVersion.id, WorkflowVersion.graph, WorkflowVersion.published_at)
            .join(WorkflowVersion, and_(WorkflowVersion.workflow_id == Workflow.id,
                                        WorkflowVersion.status == version_lifecycle.PUBLISHED))
            .where(Workflow.active.is_(True), cast(WorkflowVersion.graph, Text).contains(SCHEDULE_TYPE))
        )
        found: dict[str, tuple[Workflow, list[JobSpec]]] = {}
        for workflow, version_id, graph, published_at in session.exec(query).all():
            specs = specs_of(workflow.id, version_id, graph, published_at)
            if specs:
                found[workflow.id] = (workflow, specs)
        return found

    def registered(self, session: Session) -> list[Workflow]:
        return list(session.exec(select(Workflow).where(Workflow.event_id.is_not(None))).all())
