"""RunStepLog writes: one row per attempt of a node, with masked input and capped output."""

from __future__ import annotations

import json
import re
import time
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import bindparam, func, insert, update
from sqlmodel import Session

from backend.db.models import RunStepLog, WorkflowRun, new_id, utcnow
from backend.engine import events

OUTPUT_LIMIT = 64 * 1024
MASK = "***"
# Keys whose values never reach the step log: the log is readable by everyone who may read runs.
SECRET_KEY = re.compile(r"password|passwd|secret|token|api[-_]?key|authorization|credential", re.IGNORECASE)
_INSERT_STEP = insert(RunStepLog.__table__)
_RUNS = WorkflowRun.__table__
_ADD_RUN_COST = (update(_RUNS).where(_RUNS.c.id == bindparam("run_id"))
                 .values(cost_chf=func.coalesce(_RUNS.c.cost_chf, 0.0) + bindparam("amount")))
STACK_SEPARATOR = "\n--- stack ---\n"


def mask_secrets(value: Any) -> Any:
    """A copy of `value` with the values of secret-looking keys replaced by ``***``."""
    if isinstance(value, dict):
        return {key: MASK if isinstance(key, str) and SECRET_KEY.search(key) else mask_secrets(item)
                for key, item in value.items()}
    if isinstance(value, list):
        return [mask_secrets(item) for item in value]
    return value


def cap_output(value: Any, limit: int = OUTPUT_LIMIT) -> Any:
    """`value` when its JSON fits in `limit` bytes, else a note with the beginning of it."""
    try:
        text = json.dumps(value, default=str)
    except (TypeError, ValueError):
        text = repr(value)
    if len(text.encode("utf-8")) <= limit:
        return value
    return {"truncated": True, "sizeBytes": len(text.encode("utf-8")),
            "note": f"output larger than {limit // 1024} KB; only its beginning is kept in the step log",
            "preview": text[: limit // 2]}


@dataclass(frozen=True)
class Attempt:
    """One attempt of a node while it runs; its log row is written when it ends."""

    id: str
    run_id: str
    workflow_id: str | None
    node_id: str
    node_type: str
    number: int
    started_at: datetime
    started: float  # monotonic, for the duration


def start_step(run: WorkflowRun, node: dict[str, Any], attempt: int) -> Attempt:
    """Begin an attempt and announce it (node.started); nothing is written yet."""
    begun = Attempt(id=new_id(), run_id=run.id, workflow_id=run.workflow_id, node_id=node["id"],
                    node_type=node.get("type", ""), number=attempt, started_at=utcnow(), started=time.monotonic())
    events.BUS.publish(events.NODE_STARTED, run.id, run.workflow_id, nodeId=begun.node_id,
                       nodeType=begun.node_type, attempt=attempt, status="running")
    return begun


def publish_finished(session: Session, step: RunStepLog, workflow_id: str | None) -> None:
    """node.finished for `step`, published when the session commits."""
    events.publish_on_commit(session, events.NODE_FINISHED, step.run_id, workflow_id,
                             nodeId=step.node_id, nodeType=step.node_type, attempt=step.attempt,
                             status=step.status, durationMs=step.duration_ms, error=split_error(step.error)[0])


def finish_step(attempt: Attempt, status: str, input: Any = None,  # noqa: A002
                output: Any = None, error: str | None = None, stack: str | None = None,
                cost_chf: float | None = None) -> dict[str, Any]:
    """The attempt's log row: status, masked input, capped output, error with stack, duration,
    and the AI cost of the attempt in CHF (None: no priced AI call; backend.ai.usage).

    Nothing is written here: the engine writes a node's rows with the run's context in one
    transaction (:func:`write_steps`), so a step is logged exactly when its result is durable.
    """
    return {"id": attempt.id, "run_id": attempt.run_id, "node_id": attempt.node_id, "node_type": attempt.node_type,
            "status": status, "attempt": attempt.number, "input": mask_secrets(input),
            "output": cap_output(mask_secrets(output)),
            "error": f"{error}{STACK_SEPARATOR}{stack}" if error and stack else error,
            "duration_ms": int((time.monotonic() - attempt.started) * 1000),
            "started_at": attempt.started_at, "finished_at": utcnow(), "cost_chf": cost_chf,
            "workflow_id": attempt.workflow_id}


def write_steps(session: Session, rows: list[dict[str, Any]]) -> None:
    """Insert step rows (one plain table INSERT: the ORM's per-object bookkeeping was most of a
    step's cost); node.finished is published for each when the session commits.

    The AI cost of the rows is added to their runs' cost_chf in the same transaction (an
    increment, so parallel branches add up; lock_version is left alone: no transition)."""
    if not rows:
        return
    session.execute(_INSERT_STEP, [{k: v for k, v in row.items() if k != "workflow_id"} for row in rows])
    spent: dict[str, float] = {}
    for row in rows:
        if row.get("cost_chf") is not None:
            spent[row["run_id"]] = spent.get(row["run_id"], 0.0) + row["cost_chf"]
    if spent:
        session.execute(_ADD_RUN_COST, [{"run_id": run_id, "amount": amount} for run_id, amount in spent.items()])
    for row in rows:
        events.publish_on_commit(session, events.NODE_FINISHED, row["run_id"], row["workflow_id"],
                                 nodeId=row["node_id"], nodeType=row["node_type"], attempt=row["attempt"],
                                 status=row["status"], durationMs=row["duration_ms"],
                                 error=split_error(row["error"])[0])


def split_error(text: str | None) -> tuple[str | None, str | None]:
    """(message, stack) of a stored step error."""
    if not text:
        return text, None
    message, _, stack = text.partition(STACK_SEPARATOR)
    return message, stack or None
