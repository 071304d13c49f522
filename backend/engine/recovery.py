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
It assumes one application process per database (SQLite); on PostgreSQL the shared run queue
(backend/engine/queue.py) hands the runs of a stopped worker to another one instead.

Retry from the failed node (issue 5, item 9): :func:`retry_failed_run` creates a **new run**
of the same workflow version with the same input, mode and trigger, whose context is a copy of
the failed run's — completed outputs, frontier, loop positions, branch ends — with the failed
node made ready again. Like n8n, it runs either the version's graph as it is now (`current`,
the default: fix the failing node in the draft, then retry) or the failed run's own snapshot
(`original`). The new run keeps a snapshot of whichever graph it runs. The frontier refers to
edges by position, so for the current graph it is carried over edge by edge (source, handle,
target); a change around the part that already ran (the failed node or a node that ran or
waits removed, or an edge added out of a finished node) cannot be carried and is refused with
the nodes named. Completed nodes are therefore not executed again; only the failed node
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
from backend.db.models import RunStepLog, User, WorkflowRun, WorkflowVersion
from backend.engine import queue as run_queue
from backend.engine import worker
from backend.engine.executor import run_graph, store_graph
from backend.engine.frontier import Frontier, Graph
from backend.errors import Conflict
from backend.statemachines import workflow_run as lifecycle

log = logging.getLogger(__name__)


def recover_runs() -> list[str]:
    """Continue every run left in `running` by a stopped process (SQLite); returns their ids once
    each came to rest.

    Each run goes to the run threads like any other (one execution per run at a time) and is
    executed from its persisted context to its next resting state, in its own session; one
    run's trouble does not stop the others. (On PostgreSQL the shared queue's workers take over
    the runs of a stopped process instead: backend/engine/queue.py.)
    """
    with session_scope() as session:
        run_ids = list(session.exec(select(WorkflowRun.id).where(WorkflowRun.status == lifecycle.RUNNING)).all())
    executions = [(run_id, worker.submit(run_id)) for run_id in run_ids]
    for run_id, execution in executions:
        try:
            execution.result()
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


RETRY_GRAPHS = ("current", "original")


def _edge_key(edge: dict) -> tuple[str, str, str]:
    return edge["source"], edge.get("sourceHandle") or "out", edge["target"]


def carry_frontier(old: dict, new: dict, state: dict, failed: str) -> dict:
    """The frontier `state` of graph `old` expressed over graph `new` (edges are kept by position).

    Raises:
        Conflict: naming what cannot be carried: the `failed` node or a node that ran, waits or
            is ready but is gone from `new`, or an edge of `new` out of a finished node that
            `old` did not have (whether it fired is unknown).
    """
    new_nodes = {n["id"] for n in new.get("nodes", [])}
    kept = {failed, *(n for key in ("ready", "finished", "waiting") for n in state.get(key, []))}
    gone = sorted(n for n in kept if n not in new_nodes)
    old_edges = [_edge_key(e) for e in old.get("edges", [])]
    new_index = {_edge_key(e): i for i, e in enumerate(new.get("edges", []))}
    finished = set(state.get("finished", []))
    unknown = sorted(f"{s} -> {t}" for (s, _h, t) in set(new_index) - set(old_edges) if s in finished)
    if gone or unknown:
        reasons = ([f"nodes {', '.join(gone)} are no longer in the workflow"] if gone else []) + (
            [f"new connections out of nodes that already ran: {', '.join(unknown)}"] if unknown else [])
        raise Conflict("the workflow changed around the part of the run that already ran ("
                       + "; ".join(reasons) + "); retry with the original graph or start a new run")

    def carried(indexes: list[int]) -> list[int]:
        return sorted(new_index[old_edges[i]] for i in indexes if i < len(old_edges) and old_edges[i] in new_index)

    return {**state, "fired": carried(state.get("fired", [])), "dead": carried(state.get("dead", []))}


def _retry_graph(session: Session, run: WorkflowRun, which: str) -> dict:
    """The graph a retry runs: its version's graph now (`current`) or the run's snapshot (`original`)."""
    if which not in RETRY_GRAPHS:
        raise Conflict(f"graph must be one of {', '.join(RETRY_GRAPHS)}")
    version = session.get(WorkflowVersion, run.version_id) if which == "current" else None
    return version.graph if version is not None else run_graph(session, run)


def _refuse_second_retry(session: Session, run: WorkflowRun) -> None:
    """Conflict when a retry of `run` is under way or done: retrying again would run its later
    steps (and ask its people) twice. A retry that failed or was cancelled may be retried itself."""
    earlier = session.exec(select(WorkflowRun).where(
        WorkflowRun.retry_of == run.id,
        WorkflowRun.status.not_in((lifecycle.FAILED, lifecycle.CANCELLED)))).first()
    if earlier is not None:
        raise Conflict(f"run {run.id} was already retried by run {earlier.id} ({earlier.status}); "
                       "open that run instead")


def retry_failed_run(session: Session, user: User, run: WorkflowRun, graph: str = "current") -> WorkflowRun:
    """A new run that continues `run` from its failed node, reusing every completed output.

    The new run is added, flushed and handed to the run queue; it executes once the caller commits.

    Args:
        session: The open transaction.
        user: Who retries (the new run's starter).
        run: The failed run.
        graph: `current` (its version's graph now, e.g. the fixed draft) or `original` (the
            failed run's own snapshot).

    Raises:
        Conflict: `run` has not failed, or no failed node is recorded (e.g. a flow.stop ended
            it, or it failed before its first step), or a branch of it was waiting for a person,
            or the current graph changed around what already ran (see :func:`carry_frontier`).
    """
    if run.status != lifecycle.FAILED:
        raise Conflict(f"run {run.id} is {run.status}; only a failed run can be retried")
    _refuse_second_retry(session, run)
    node_id = failed_node(session, run)
    context = copy.deepcopy(run.context or {})
    if node_id is None:
        raise Conflict(f"run {run.id} has no failed node to retry from")
    if context.get("suspended"):
        raise Conflict(f"run {run.id} was also waiting for a person; start a new run instead")
    original = run_graph(session, run)
    chosen = _retry_graph(session, run, graph)
    if chosen != original:
        context["frontier"] = carry_frontier(original, chosen, context.get("frontier") or {}, node_id)
    graph_id = store_graph(session, run.workflow_id, chosen)
    frontier = Frontier(Graph(chosen), context.get("frontier"))
    if node_id not in frontier.ready and node_id not in frontier.finished:
        frontier.ready.append(node_id)
    context["frontier"] = frontier.to_state()
    context.setdefault("outputs", {}).pop(node_id, None)
    for key in ("loops", "ends", "suspended"):
        context.setdefault(key, {})
    retry = WorkflowRun(workflow_id=run.workflow_id, version_id=run.version_id, mandate_id=run.mandate_id,
                        feature_instance_id=run.feature_instance_id, status=lifecycle.RUNNING, mode=run.mode,
                        trigger=run.trigger, input=copy.deepcopy(run.input), sys_created_by=user.id,
                        test=run.test, graph_id=graph_id, retry_of=run.id, context=context)
    session.add(retry)
    session.flush()
    run_queue.enqueue(session, retry.id, new=True)
    return retry
