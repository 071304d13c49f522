"""Continuing runs after a process stop, and retrying a failed run from its failed node.

Recovery (issue 5, item 7). The engine commits a run's context — completed node outputs, the
frontier, loop positions, branch ends — together with the step row after every step, so a run
left in `running` by a killed process can simply be executed again from its context:

- a node whose step was committed has its output in the context and is finished in the
  frontier: it is not executed again;
- a node that was executing when the process died is still ready in the persisted frontier and
  runs again; its step rows are written with the context, so the lost execution left none
  (a retry that was waiting after a failed attempt goes on with the next attempt number);
- paused runs (human task, e-mail, wait, step debugger) and their tasks are not touched.

:func:`recover_runs` is called once per process start, in a background thread
(:func:`start_recovery_thread`, from :func:`backend.runtime.start_background_services`, which the
Reflex lifespan calls).
It assumes one application process per database: a second process started while the first
is executing runs would continue them too.

Retry from the failed node (issue 5, item 9): :func:`retry_failed_run` creates a **new run**
of the same workflow version with the same input, mode and trigger, executing the same graph
(the failed run's snapshot, not what the draft holds now: its context only fits that graph),
whose context is a copy of the failed run's — completed outputs, frontier, loop positions, branch ends — with the failed
node made ready again. Completed nodes are therefore not executed again; only the failed node
and what follows it run (and appear in the new run's step log). The failed run stays `failed`
(a finished run never changes state, DESIGN §5), and DESIGN §6 has no field linking the two
runs: the new run's id is the answer of the retry request.
"""

from __future__ import annotations

import copy
import logging
import threading

from sqlmodel import Session, select

from backend.db import session_scope
from backend.db.models import RunStepLog, User, WorkflowRun
from backend.engine.executor import execute_run, run_graph, store_graph
from backend.engine.frontier import Frontier, Graph
from backend.errors import Conflict
from backend.statemachines import workflow_run as lifecycle

log = logging.getLogger(__name__)


def recover_runs() -> list[str]:
    """Continue every run left in `running` by a stopped process; returns their ids.

    Each run is executed from its persisted context to its next resting state, in its own
    session; one run's trouble does not stop the others.
    """
    with session_scope() as session:
        run_ids = list(session.exec(select(WorkflowRun.id).where(WorkflowRun.status == lifecycle.RUNNING)).all())
    for run_id in run_ids:
        try:
            execute_run(run_id)
        except Exception:  # noqa: BLE001 - recovery of the other runs must go on
            log.exception("recovery of run %s failed", run_id)
    if run_ids:
        log.info("recovered %d running run(s)", len(run_ids))
    return run_ids


def start_recovery_thread() -> threading.Thread:
    """Run :func:`recover_runs` in a daemon thread so the application start is not held up."""
    thread = threading.Thread(target=_recover_quietly, name="poweron-run-recovery", daemon=True)
    thread.start()
    return thread


def _recover_quietly() -> None:
    try:
        recover_runs()
    except Exception:  # noqa: BLE001 - a recovery problem must not take the application down
        log.exception("run recovery failed")


def failed_node(session: Session, run: WorkflowRun) -> str | None:
    """The node whose failure ended `run`: the node of its last failed step."""
    query = (select(RunStepLog).where(RunStepLog.run_id == run.id, RunStepLog.status == "failed")
             .order_by(RunStepLog.started_at.desc(), RunStepLog.attempt.desc()))
    step = session.exec(query).first()
    return step.node_id if step is not None else None


def retry_failed_run(session: Session, user: User, run: WorkflowRun) -> WorkflowRun:
    """A new run that continues `run` from its failed node, reusing every completed output.

    The new run is added and flushed, not executed; the caller commits and executes it.

    Raises:
        Conflict: `run` has not failed, or no failed node is recorded (e.g. a flow.stop ended
            it, or it failed before its first step), or a branch of it was waiting for a person.
    """
    if run.status != lifecycle.FAILED:
        raise Conflict(f"run {run.id} is {run.status}; only a failed run can be retried")
    node_id = failed_node(session, run)
    context = copy.deepcopy(run.context or {})
    if node_id is None:
        raise Conflict(f"run {run.id} has no failed node to retry from")
    if context.get("suspended"):
        raise Conflict(f"run {run.id} was also waiting for a person; start a new run instead")
    graph = run_graph(session, run)
    # A run from before migration 0009 has no snapshot: its retry keeps its version's graph.
    graph_id = run.graph_id or store_graph(session, run.workflow_id, graph)
    frontier = Frontier(Graph(graph), context.get("frontier"))
    if node_id not in frontier.ready and node_id not in frontier.finished:
        frontier.ready.append(node_id)
    context["frontier"] = frontier.to_state()
    context.setdefault("outputs", {}).pop(node_id, None)
    for key in ("loops", "ends", "suspended"):
        context.setdefault(key, {})
    retry = WorkflowRun(workflow_id=run.workflow_id, version_id=run.version_id, mandate_id=run.mandate_id,
                        feature_instance_id=run.feature_instance_id, status=lifecycle.RUNNING, mode=run.mode,
                        trigger=run.trigger, input=copy.deepcopy(run.input), sys_created_by=user.id,
                        graph_id=graph_id, context=context)
    session.add(retry)
    session.flush()
    return retry
