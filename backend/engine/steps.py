"""RunStepLog writes: one row per attempt of a node, with masked input and capped output."""

from __future__ import annotations

import json
import re
import time
from typing import Any

from sqlmodel import Session

from backend.db.models import RunStepLog, WorkflowRun, utcnow
from backend.engine import events

OUTPUT_LIMIT = 64 * 1024
MASK = "***"
# Keys whose values never reach the step log: the log is readable by everyone who may read runs.
SECRET_KEY = re.compile(r"password|passwd|secret|token|api[-_]?key|authorization|credential", re.IGNORECASE)
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


def start_step(session: Session, run_id: str, node: dict[str, Any], attempt: int) -> tuple[RunStepLog, float]:
    """Open the log row of one attempt; returns it with a monotonic start time."""
    step = RunStepLog(run_id=run_id, node_id=node["id"], node_type=node.get("type", ""), attempt=attempt,
                      status="running")
    session.add(step)
    events.BUS.publish(events.NODE_STARTED, run_id, _workflow_of(session, run_id), nodeId=step.node_id,
                       nodeType=step.node_type, attempt=attempt, status="running")
    return step, time.monotonic()


def _workflow_of(session: Session, run_id: str) -> str | None:
    """The run's workflow id (the run is in the session's identity map: no query)."""
    run = session.get(WorkflowRun, run_id)
    return run.workflow_id if run is not None else None


def publish_finished(session: Session, step: RunStepLog) -> None:
    """node.finished for `step`, published when the session commits."""
    events.publish_on_commit(session, events.NODE_FINISHED, step.run_id, _workflow_of(session, step.run_id),
                             nodeId=step.node_id, nodeType=step.node_type, attempt=step.attempt,
                             status=step.status, durationMs=step.duration_ms, error=split_error(step.error)[0])


def finish_step(session: Session, step: RunStepLog, started: float, status: str, input: Any = None,  # noqa: A002
                output: Any = None, error: str | None = None, stack: str | None = None) -> RunStepLog:
    """Close an attempt's row: status, masked input, capped output, error with stack, duration."""
    step.status = status
    step.input = mask_secrets(input)
    step.output = cap_output(mask_secrets(output))
    step.error = f"{error}{STACK_SEPARATOR}{stack}" if error and stack else error
    step.duration_ms = int((time.monotonic() - started) * 1000)
    step.finished_at = utcnow()
    session.add(step)
    publish_finished(session, step)
    return step


def split_error(text: str | None) -> tuple[str | None, str | None]:
    """(message, stack) of a stored step error."""
    if not text:
        return text, None
    message, _, stack = text.partition(STACK_SEPARATOR)
    return message, stack or None
