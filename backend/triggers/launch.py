"""What every outside trigger shares: the published trigger node, back-pressure, the durable start.

A run started by a webhook, an event or a form runs the workflow's PUBLISHED version as the
workflow's creator (sysCreatedBy) with their current rights: a creator who was disabled or lost
the execute right (or access to the instance) starts nothing, and the refusal is logged.
The run is handed to the run queue in the transaction that creates it (backend/engine/queue.py),
so a crash loses nothing: on PostgreSQL the job commits with the run, on SQLite recovery continues
runs left in `running` (backend/engine/recovery.py).
"""

from __future__ import annotations

import logging
import math
import threading
from dataclasses import dataclass
from typing import Any

from sqlmodel import Session, select

from backend.config import get_settings
from backend.db.models import User, Workflow, WorkflowRun, WorkflowVersion
from backend.engine import executor
from backend.engine import queue as run_queue
from backend.errors import Forbidden, NotFound
from backend.statemachines import workflow_version as version_lifecycle

log = logging.getLogger(__name__)

# How long a refused (429) caller is asked to wait before trying again.
RETRY_AFTER_SECONDS = 5
# Calls of outside triggers accepted at the same time. Each holds a pooled database connection and
# then waits for the SQLite write gate; unbounded, a burst of webhooks took every connection of the
# pool while a run thread that held the gate waited for one (30 s pool timeouts). Writes are one at
# a time on SQLite anyway, so a few slots cost no throughput; further calls wait here without a
# connection.
ACCEPT_SLOTS = 4
accepting = threading.BoundedSemaphore(ACCEPT_SLOTS)


class Overloaded(Exception):
    """Too many runs wait in the run queue: the call is refused with 429 and Retry-After."""

    def __init__(self, queued: int, limit: int):
        self.queued = queued
        self.limit = limit
        self.retry_after = RETRY_AFTER_SECONDS
        super().__init__(f"{queued} runs are waiting to start (limit {limit}, POWERON_MAX_QUEUED_RUNS); "
                         f"try again in {self.retry_after} s")


def check_capacity() -> None:
    """Raise Overloaded while POWERON_MAX_QUEUED_RUNS or more runs wait in the run queue (on
    PostgreSQL the queue every process shares, counted at most every half second).

    Checked before anything is written; concurrent calls may each pass and overshoot the limit by
    at most their number: everything accepted is run.
    """
    limit = get_settings().max_queued_runs
    waiting = run_queue.waiting()
    if waiting >= limit:
        raise Overloaded(waiting, limit)


@dataclass(frozen=True)
class Target:
    """An active workflow, its published version and the trigger node a call matched."""

    workflow: Workflow
    version: WorkflowVersion
    node: dict[str, Any]

    @property
    def parameters(self) -> dict[str, Any]:
        return self.node.get("parameters") or {}


def trigger_nodes(version: WorkflowVersion, node_type: str) -> list[dict[str, Any]]:
    """The nodes of `node_type` in the version's graph, in graph order."""
    return [n for n in (version.graph or {}).get("nodes", []) if isinstance(n, dict) and n.get("type") == node_type]


def published_triggers(session: Session, workflow_id: str, node_type: str) -> tuple[Workflow, WorkflowVersion,
                                                                                  list[dict[str, Any]]]:
    """The workflow, its published version and its trigger nodes of `node_type`.

    Raises:
        NotFound: unknown, inactive, unpublished, or no such trigger: one answer for all, so an
            outside caller learns nothing about which.
    """
    # One query for both (this runs for every webhook call).
    row = session.exec(
        select(Workflow, WorkflowVersion).join(WorkflowVersion, WorkflowVersion.workflow_id == Workflow.id)
        .where(Workflow.id == workflow_id, Workflow.active.is_(True),
               WorkflowVersion.status == version_lifecycle.PUBLISHED)
    ).first() if workflow_id else None
    workflow, version = row if row is not None else (None, None)
    nodes = trigger_nodes(version, node_type) if version is not None else []
    if not nodes:
        raise NotFound(f"workflow {workflow_id} not found")
    return workflow, version, nodes


def run_as_creator(session: Session, workflow: Workflow) -> tuple[User | None, str | None]:
    """The workflow's creator if they may still run it now (enabled, may open the instance, have
    the execute right and may create runs there), else (None, why not). Unattended runs —
    schedules, webhooks, events, forms — all run as the creator with their current rights."""
    from backend.features.graphical_editor.interface import get_interface  # the feature imports the engine

    creator = session.get(User, workflow.sys_created_by) if workflow.sys_created_by else None
    if creator is None:
        return None, "the workflow has no creator (sysCreatedBy) to run as"
    if creator.disabled:
        return None, f"its creator {creator.username} is disabled"
    try:
        get_interface(creator, None, workflow.feature_instance_id, session).check_may_run()
    except (NotFound, Forbidden):
        return None, f"its creator {creator.username} may no longer execute workflows in this instance"
    return creator, None


def creator_may_execute(session: Session, workflow: Workflow) -> User:
    """:func:`run_as_creator`, refusing with Forbidden (logged) when the creator may not."""
    creator, reason = run_as_creator(session, workflow)
    if creator is None:
        log.warning("trigger refused for workflow %s: %s", workflow.id, reason)
        raise Forbidden(f"workflow {workflow.id} cannot be started: {reason}")
    return creator


def start(session: Session, target: Target, input: Any, trigger: str) -> WorkflowRun:  # noqa: A002
    """Create the run of the published version as the creator (flushed, not committed)."""
    creator = creator_may_execute(session, target.workflow)
    return executor.start_run(session, creator, target.workflow, target.version, input, "full", trigger=trigger,
                              start_node=target.node.get("id"))


def retry_after_header(exc: Overloaded) -> dict[str, str]:
    return {"Retry-After": str(max(1, math.ceil(exc.retry_after)))}
