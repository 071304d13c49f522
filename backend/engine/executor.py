"""The run engine: an explicit state machine over a run's frontier (DESIGN §4–5).

The engine is written as small named handlers, as Prefect's task engine is:

- ``begin_run`` (via :func:`start_run`) checks the graph, creates the WorkflowRun in `running`
  and prepares the frontier at the starting trigger;
- ``attempt_node`` evaluates a node's parameters and runs its handler, once per attempt (retry),
  and ``apply`` hands the result to the handlers below;
- ``on_node_success`` stores the output and tells the frontier which handles were taken;
- ``on_node_failure`` applies onError: fail the run, continue with output None, or route to `error`;
- ``next_iteration`` collects a loop body's result and starts the next item or leaves by `done`;
- ``pause`` (step-by-step mode), ``complete``, ``fail``, ``stop`` end or suspend the run through
  the WorkflowRun transition functions;
- ``crash`` turns anything unexpected into a failed run, so no run is left without a final or
  paused state.

Durability: after every step the run's context JSON holds the completed node outputs, the
frontier (ready nodes, fired and dead edges, finished nodes, waiting loops), the loop positions
and the branch ends, and the transaction is committed; a run can therefore be continued from
its context. Nodes that ``get_ready`` hands out together are independent: slow ones (actions,
AI, scripts) run at the same time on branch threads, and each one's step is committed as soon
as it finished, the others kept ready in the stored frontier (:meth:`RunEngine.run_concurrently`).
A run executes the graph it started with (``WorkflowRun.graph_id``, see :func:`run_graph`).
"""

from __future__ import annotations

import hashlib
import json
import logging
import threading
import time
import traceback
import uuid
from collections import OrderedDict
from collections.abc import Collection
from concurrent.futures import ThreadPoolExecutor, as_completed
from contextlib import nullcontext
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import bindparam, update
from sqlalchemy.dialects.postgresql import insert as postgresql_insert
from sqlalchemy.dialects.sqlite import insert as sqlite_insert
from sqlalchemy.orm.attributes import set_committed_value
from sqlmodel import Session, select

from backend.actions.catalogue import current_registry, in_mandate, using
from backend.ai.usage import usage_meter
from backend.db import get_engine, session_scope
from backend.db.engine import write_gate
from backend.db.models import (
    RunStepLog,
    User,
    Workflow,
    WorkflowGraphSnapshot,
    WorkflowRun,
    WorkflowVersion,
    utcnow,
)
from backend.engine import crashpoints, events, steps
from backend.engine import queue as run_queue
from backend.engine.expressions import ExpressionError, ExpressionScope, evaluate_parameters
from backend.engine.frontier import Frontier, Graph
from backend.engine.nodes import NodeCall, Outcome, StepError, runs_concurrently
from backend.errors import Conflict, FieldError, InvalidInput
from backend.json_limits import check_json
from backend.statemachines import workflow_run as lifecycle
from backend.statemachines import workflow_version as version_lifecycle
from backend.workflows import requirements
from backend.workflows.node_types import DEFAULT_HANDLE, ERROR_HANDLE, RetryPolicy, node_type
from backend.workflows.validation import validate_graph

log = logging.getLogger(__name__)

MODES = ("full", "step")
BRANCH_THREADS = 8
CANCEL_CHECK_SECONDS = 0.05
_RUNS = WorkflowRun.__table__
_SNAPSHOTS = WorkflowGraphSnapshot.__table__
_UPDATE_CONTEXT = update(_RUNS).where(_RUNS.c.id == bindparam("run_id")).values(context=bindparam("context"))
_FENCED_CONTEXT = (update(_RUNS).where(_RUNS.c.id == bindparam("run_id"), _RUNS.c.execution == bindparam("token"))
                   .values(context=bindparam("context")))
_CLAIM = update(_RUNS).where(_RUNS.c.id == bindparam("run_id")).values(execution=bindparam("token"))


class Superseded(Exception):
    """Another execution of the run started after this one: this one stops without writing its step."""

_pool_lock = threading.Lock()
_pool: ThreadPoolExecutor | None = None


def _branch_pool() -> ThreadPoolExecutor:
    """The threads independent branches run on (shared by all runs of the process)."""
    global _pool
    with _pool_lock:
        if _pool is None:
            _pool = ThreadPoolExecutor(BRANCH_THREADS, thread_name_prefix="poweron-branch")
        return _pool


@dataclass(frozen=True)
class NodeResult:
    """How a node's attempts ended: an outcome (with its step row) or the last error."""

    outcome: Outcome | None = None
    step_id: str | None = None
    error: str | None = None
    rows: list[dict[str, Any]] = field(default_factory=list)


class NodeOutputs(dict):
    """Completed node outputs, plus the `nodes` mapping expressions read, kept in step.

    Building `{id: {"output": …}}` anew for every node made a long chain quadratic.
    """

    def __init__(self, outputs: dict[str, Any]):
        super().__init__(outputs)
        self.scope: dict[str, dict[str, Any]] = {key: {"output": value} for key, value in outputs.items()}

    def __setitem__(self, key: str, value: Any) -> None:
        super().__setitem__(key, value)
        self.scope[key] = {"output": value}

    def pop(self, key: str, *default: Any) -> Any:
        self.scope.pop(key, None)
        return super().pop(key, *default)


def _aware(moment: datetime) -> datetime:
    """SQLite hands back naive datetimes; they are UTC."""
    return moment if moment.tzinfo else moment.replace(tzinfo=UTC)


def _start_trigger(graph: Graph, trigger: str) -> str:
    """The trigger the run starts at: the first of the run's kind (manual, webhook, …), else the first."""
    triggers = [n for n in graph.nodes if _is_trigger(graph, n)]
    return next((n for n in triggers if node_type(graph.nodes[n]["type"]).run_trigger == trigger), triggers[0])


def _is_trigger(graph: Graph, node_id: str) -> bool:
    """Whether `node_id` is a trigger node of the graph (its type's `is_trigger`)."""
    kind = node_type(graph.nodes.get(node_id, {}).get("type"))
    return kind is not None and kind.is_trigger


_checked_versions: OrderedDict[tuple[str, int, tuple[str, ...]], list[FieldError]] = OrderedDict()
_CHECKED_VERSIONS_KEPT = 256


def _validation_of(version: WorkflowVersion) -> list[FieldError]:
    """validate_graph of `version`, remembered per (id, lock_version): every edit of a draft bumps
    its lock_version, and a version's graph means the same as long as that is unchanged (and the
    mandate's MCP toolboxes in force are the same)."""
    key = (version.id, version.lock_version, tuple(box.id for box in current_registry().extra_toolboxes))
    with _pool_lock:
        if key in _checked_versions:
            _checked_versions.move_to_end(key)
            return _checked_versions[key]
    errors = validate_graph(version.graph)
    with _pool_lock:
        _checked_versions[key] = errors
        while len(_checked_versions) > _CHECKED_VERSIONS_KEPT:
            _checked_versions.popitem(last=False)
    return errors


def store_graph(session: Session, workflow_id: str, graph: dict[str, Any]) -> str:
    """Store `graph` as an immutable snapshot of `workflow_id` (once per distinct content); returns its id.

    The id is the SHA-256 of the workflow id and the canonical JSON, so the same content always
    has the same id and an existing row is never written again (INSERT … ON CONFLICT DO NOTHING).
    """
    canonical = json.dumps(graph, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    graph_id = hashlib.sha256(f"{workflow_id}\n{canonical}".encode()).hexdigest()
    insert = sqlite_insert if session.get_bind().dialect.name == "sqlite" else postgresql_insert
    session.execute(insert(_SNAPSHOTS).values(id=graph_id, workflow_id=workflow_id, graph=graph,
                                              sys_created_at=utcnow())
                    .on_conflict_do_nothing(index_elements=["id"]))
    return graph_id


def run_graph(session: Session, run: WorkflowRun) -> dict[str, Any]:
    """The graph `run` executes: the snapshot stored when it started (WorkflowRun.graph_id).

    Every place that executes, resumes, recovers or retries a run reads its graph here, so an
    edit of the draft after the start never changes a run under way. Runs from before that
    snapshot existed (migration 0009) have none and read their version's graph.
    """
    if run.graph_id is not None:
        return session.get(WorkflowGraphSnapshot, run.graph_id).graph
    version = session.get(WorkflowVersion, run.version_id)
    return version.graph if version is not None else {}


def start_run(session: Session, user: User, workflow: Workflow, version: WorkflowVersion, input: Any = None,  # noqa: A002
              mode: str = "full", trigger: str = "manual", start_node: str | None = None) -> WorkflowRun:
    """begin_run: create a run of `version` in `running`, its frontier at the starting trigger:
    `start_node` (the trigger node that fired: a schedule, the webhook whose path was called),
    else the first trigger of the run's kind.

    The run keeps a snapshot of the version's graph (WorkflowRun.graph_id, :func:`store_graph`)
    and executes that to its end, whatever later saves of the draft change.

    A run whose nodes (those reachable from its trigger) need what this installation does not
    have (backend/workflows/requirements.py: an AI provider, web search, a mail connection, the
    sandbox) is created failed at once, its error naming what is missing, for which nodes and how
    to fix it, rather than waiting or failing halfway; like every failed run it notifies its owner.

    Raises:
        InvalidInput: the graph is not valid (every problem listed), the mode is unknown,
            `start_node` is no trigger of the graph, or `input` breaks the JSON limits
            (backend/json_limits.py: whatever the entry point, nothing unreadable is stored).
    """
    check_json(input, "input")
    if mode not in MODES:
        raise InvalidInput([FieldError("mode", f"must be one of {', '.join(MODES)}")])
    with in_mandate(session, workflow.mandate_id):  # its MCP tools are node types there
        return _start_run(session, user, workflow, version, input, mode, trigger, start_node)


def _start_run(session: Session, user: User, workflow: Workflow, version: WorkflowVersion, input: Any,  # noqa: A002
               mode: str, trigger: str, start_node: str | None) -> WorkflowRun:
    errors = _validation_of(version)
    if errors:
        raise InvalidInput(errors)
    graph = Graph(version.graph)
    if start_node is not None and not _is_trigger(graph, start_node):
        raise InvalidInput([FieldError("startNode", f"'{start_node}' is no trigger node of this workflow")])
    start = start_node or _start_trigger(graph, trigger)
    frontier = Frontier(graph)
    frontier.prepare(start)
    run = WorkflowRun(workflow_id=workflow.id, version_id=version.id, mandate_id=workflow.mandate_id,
                      feature_instance_id=workflow.feature_instance_id, status=lifecycle.RUNNING, mode=mode,
                      trigger=trigger, input=input, sys_created_by=user.id,
                      test=version.status == version_lifecycle.DRAFT,
                      graph_id=store_graph(session, workflow.id, version.graph),
                      context={"outputs": {}, "frontier": frontier.to_state(), "loops": {}, "ends": {},
                               "suspended": {}})
    session.add(run)
    session.flush()
    events.publish_on_commit(session, events.RUN_STARTED, run.id, run.workflow_id, versionId=version.id,
                             mode=mode, trigger=trigger)
    missing = requirements.unmet(version.graph, start)
    if missing:
        lifecycle.fail(session, run, requirements.unmet_message(missing))
    else:
        run_queue.enqueue(session, run.id, new=True)
    return run


def execute_run(run_id: str, session: Session | None = None) -> WorkflowRun:
    """Run `run_id` until it completes, fails, is cancelled or pauses; returns the run.

    Each step is committed on its own. Without a session one is opened for the whole run.
    """
    if session is None:
        with session_scope() as own:
            return RunEngine(own, own.get(WorkflowRun, run_id)).execute()
    return RunEngine(session, session.get(WorkflowRun, run_id)).execute()


def continue_run(session: Session, run: WorkflowRun) -> WorkflowRun:
    """Resume a run paused by the step debugger and hand it on to execute its next node (committed)."""
    if run.status == lifecycle.PAUSED and run.pause_reason != "step":
        raise Conflict(f"run {run.id} waits for {run.pause_reason}, not for the step debugger")
    lifecycle.resume(session, run)
    run_queue.enqueue(session, run.id)
    session.commit()
    return run


def _without_node(message: str, node_id: str) -> str:
    """A step's error without its leading "node 'x', " / "node 'x': ": the run's error names the node once."""
    for prefix in (f"node '{node_id}', ", f"node '{node_id}': "):
        if message.startswith(prefix):
            return message[len(prefix):]
    return message


class RunEngine:
    """Drives one run from its persisted context to its next resting state."""

    def __init__(self, session: Session, run: WorkflowRun):
        self.session = session
        self.run = run
        self.workflow = session.get(Workflow, run.workflow_id)
        self.user = session.get(User, run.sys_created_by)
        self.graph = Graph(run_graph(session, run))
        context = dict(run.context or {})
        self.outputs = NodeOutputs(context.get("outputs", {}))
        self.loops: dict[str, dict[str, Any]] = dict(context.get("loops", {}))
        self.ends: dict[str, Any] = dict(context.get("ends", {}))
        self.suspended: dict[str, dict[str, Any]] = dict(context.get("suspended", {}))
        self.frontier = Frontier(self.graph, context.get("frontier"))
        # Test seam (POWERON_ENGINE_CRASH_AT), read once per run: see backend/engine/crashpoints.py.
        self.crash_at = crashpoints.configured()
        # Only a run that got somewhere can have been interrupted.
        self.attempt_base = self._interrupted_attempts() if self.outputs else {}
        self.status_checked_at = float("-inf")
        self.execution: str | None = None  # this execution's token once execute() claimed the run
        self.catalogue = current_registry()  # execute() puts the run's mandate's catalogue here

    def _interrupted_attempts(self) -> dict[str, int]:
        """Per ready node whose last logged attempt failed (a stopped process was waiting to
        retry it), that attempt's number: the node's next execution is the next attempt rather
        than attempt 1 again."""
        if not self.frontier.ready:
            return {}
        query = (select(RunStepLog.node_id, RunStepLog.attempt, RunStepLog.status)
                 .where(RunStepLog.run_id == self.run.id, RunStepLog.node_id.in_(self.frontier.ready))
                 .order_by(RunStepLog.started_at, RunStepLog.attempt))
        last = {node_id: (attempt, status) for node_id, attempt, status in self.session.exec(query).all()}
        return {node_id: attempt for node_id, (attempt, status) in last.items() if status == "failed"}

    # --- the loop ---------------------------------------------------------------------------

    def execute(self) -> WorkflowRun:
        """Run ready nodes until none is left or the run leaves `running`, in the catalogue of the
        run's mandate (its MCP tools are node types there)."""
        with in_mandate(self.session, self.run.mandate_id) as catalogue:
            self.catalogue = catalogue
            return self._execute()

    def _execute(self) -> WorkflowRun:
        try:
            if self.run.status == lifecycle.RUNNING:
                self.claim()
            while self.run.status == lifecycle.RUNNING:
                ready = self.frontier.get_ready()
                if not ready and self.suspended:
                    # Other branches ran as far as they could; now the run waits for people.
                    self.pause(next(iter(self.suspended.values()))["reason"])
                    break
                if not ready:
                    self.complete()
                    break
                if not self._still_running():
                    break
                if run_queue.draining():
                    self.hand_back()
                    break
                # Nodes handed out together are independent: slow ones (actions, AI, scripts) run
                # at the same time; quick flow nodes run one at a time, as a step may change the
                # frontier. The step debugger always goes one node at a time.
                batch = [n for n in ready if n not in self.frontier.waiting and runs_concurrently(self.node_type_of(n))]
                if len(batch) > 1 and self.run.mode != "step":
                    self.run_concurrently(batch)
                else:
                    node_id = ready[0]
                    self.frontier.take(node_id)
                    crashpoints.reach(self.crash_at, "node_started", node_id)
                    # A node that writes in its own work holds the gate from its start (see write_gate).
                    with write_gate() if self.writes(node_id) else nullcontext():
                        result = None if node_id in self.frontier.waiting else self.attempt_node(self.session,
                                                                                                 node_id)
                        with write_gate():
                            if result is None:
                                self.next_iteration(node_id)
                            else:
                                self.apply(node_id, result)
                            crashpoints.reach(self.crash_at, "before_step_commit", node_id)
                            self.persist()
                    crashpoints.reach(self.crash_at, "after_step_commit", node_id)
                if self.run.status == lifecycle.RUNNING and self.run.mode == "step" and self.frontier.is_active():
                    self.pause("step")
        except Superseded:
            self.session.rollback()
            log.warning("run %s: a later execution took it over; this one stopped before writing its step",
                        self.run.id)
        except Exception as exc:  # noqa: BLE001 - the engine must leave every run in a final state
            self.crash(exc)
        return self.run

    def claim(self) -> None:
        """Fence out any earlier execution of this run: from now on only this one's steps are written."""
        self.execution = uuid.uuid4().hex
        with write_gate():
            self.session.execute(_CLAIM, {"run_id": self.run.id, "token": self.execution})
            set_committed_value(self.run, "execution", self.execution)
            self.session.commit()

    def hand_back(self) -> None:
        """This process stops taking runs: the run, persisted after its last step, goes back to the
        queue for another worker, which continues from the persisted frontier."""
        with write_gate():
            run_queue.enqueue(self.session, self.run.id)
            self.session.commit()
        log.info("run %s handed back to the queue: this process is stopping", self.run.id)

    def _still_running(self) -> bool:
        """A safe point: a cancel from elsewhere is seen before the next node starts.

        Only the status column is read, and at most every CANCEL_CHECK_SECONDS, so quick nodes
        do not pay a query each; the run (with its large context) is reloaded only when
        something else changed it. A transition racing with a cancel fails on the run's
        lock_version, so a cancelled run is never completed behind the user's back.
        """
        now = time.monotonic()
        if now - self.status_checked_at < CANCEL_CHECK_SECONDS:
            return True
        self.status_checked_at = now
        status = self.session.exec(select(WorkflowRun.status).where(WorkflowRun.id == self.run.id)).one()
        if status != lifecycle.RUNNING:
            self.session.refresh(self.run)
            self._release_if_finished()
        return status == lifecycle.RUNNING

    def _release_if_finished(self) -> None:
        """Someone else finished the run (a cancel) while a step of it was being committed: what
        that step left waiting is released as the cancel would have done."""
        if self.run.status in lifecycle.FINISHED:
            with write_gate():
                lifecycle.release_waiting(self.session, self.run, self.run.error)
                self.session.commit()

    def persist(self, running: Collection[str] = ()) -> None:
        """Write the context and commit: the step is durable before the next one starts.

        `running`: nodes of a concurrent batch still executing; they are stored as ready, so a
        restarted process runs them again. A Core UPDATE of the one column (the ORM's change
        tracking of a large JSON value cost more than the write); the loaded run is told the new
        value without becoming dirty.
        """
        frontier = self.frontier.to_state()
        if running:
            frontier["ready"] = [*running, *frontier["ready"]]
        context = {"outputs": dict(self.outputs), "frontier": frontier,
                   "loops": dict(self.loops), "ends": dict(self.ends), "suspended": dict(self.suspended)}
        if self.execution is None:  # a resume or a failure outside an execution (a task, a timer)
            self.session.execute(_UPDATE_CONTEXT, {"run_id": self.run.id, "context": context})
        elif self.session.execute(_FENCED_CONTEXT, {"run_id": self.run.id, "token": self.execution,
                                                    "context": context}).rowcount == 0:
            raise Superseded(self.run.id)
        set_committed_value(self.run, "context", context)
        self.session.commit()

    # --- nodes ------------------------------------------------------------------------------

    def scope_for(self, node_id: str, nodes: dict[str, Any] | None = None) -> ExpressionScope:
        """What the node's expressions see; `item`/`index` of its innermost loop. `nodes`: the
        outputs to show instead of the current ones (a branch thread's copy)."""
        scope = ExpressionScope(
            input=self.run.input,
            nodes=self.outputs.scope if nodes is None else nodes,
            run={"id": self.run.id, "mode": self.run.mode, "trigger": self.run.trigger,
                 "startedAt": self.run.started_at.isoformat() if self.run.started_at else None},
            workflow={"id": self.workflow.id, "name": self.workflow.name},
        )
        loop_id = self.graph.loop_of.get(node_id)
        if loop_id and loop_id in self.loops:
            position = self.loops[loop_id]
            return scope.loop(position["items"][position["index"]], position["index"])
        return scope

    def node_type_of(self, node_id: str) -> str:
        return self.graph.nodes[node_id].get("type", "")

    def _incoming(self, node_id: str) -> dict[str, Any]:
        sources = [self.graph.edges[i]["source"] for i in self.graph.incoming[node_id] if i in self.frontier.fired]
        return {source: self.outputs.get(source) for source in sources}

    def writes(self, node_id: str) -> bool:
        """Whether the node's own work writes to the database (an action with the `write`
        capability): its transaction then begins inside the handler, not at apply."""
        found = current_registry().get(self.node_type_of(node_id))
        return found is not None and "write" in found.capabilities

    def run_concurrently(self, node_ids: list[str]) -> None:
        """Run independent nodes at the same time, each in a session of its own, and commit each
        node's step as soon as that node finished.

        The engine's session commits first (so it holds no write lock) and the branch threads
        commit the nodes' side effects. Each result is applied here, in the engine's thread, in
        the order the nodes finish; its step rows are written with the run's context, which
        keeps the nodes still running ready: a process killed meanwhile runs again only those.
        The branch threads read a copy of the outputs as they were when the batch started.
        """
        for node_id in node_ids:
            self.frontier.take(node_id)
            crashpoints.reach(self.crash_at, "node_started", node_id)
        self.session.commit()
        nodes = dict(self.outputs.scope)
        pending = {_branch_pool().submit(self._attempt_in_own_session, node_id, nodes): node_id
                   for node_id in node_ids}
        for future in as_completed(list(pending)):
            node_id = pending.pop(future)
            result = future.result()
            with write_gate():
                self.apply(node_id, result)
                crashpoints.reach(self.crash_at, "before_step_commit", node_id)
                self.persist(running=[n for n in node_ids if n in pending.values()])
            crashpoints.reach(self.crash_at, "after_step_commit", node_id)

    def _attempt_in_own_session(self, node_id: str, nodes: dict[str, Any]) -> NodeResult:
        with Session(get_engine(), expire_on_commit=False) as session, using(self.catalogue):
            try:
                result = self.attempt_node(session, node_id, nodes)
                session.commit()
                crashpoints.reach(self.crash_at, "branch_finished", node_id)
            except BaseException:
                session.rollback()
                raise
            return result

    def attempt_node(self, session: Session, node_id: str, nodes: dict[str, Any] | None = None) -> NodeResult:
        """Every attempt the node's retry policy allows, each logged; reads but never changes the
        engine's state, so independent nodes may be attempted in parallel threads (`nodes`: the
        outputs their expressions see, a copy the engine's thread does not change)."""
        node = self.graph.nodes[node_id]
        policy = RetryPolicy.model_validate(node.get("retry") or {})
        kind = node_type(node.get("type", ""))
        handler = kind.handler if kind is not None else None
        error = StepError(f"node '{node_id}': unknown node type '{node.get('type')}'")
        first = self.attempt_base.pop(node_id, 0)
        rows: list[dict[str, Any]] = []
        for attempt in range(first + 1, first + policy.max_attempts + 1):
            step = steps.start_step(self.run, node, attempt)
            parameters: Any = node.get("parameters") or {}
            # The attempt's AI cost: opened here, in the thread that runs the node (a branch-pool
            # thread for concurrent nodes), as the meter lives in a context variable.
            with usage_meter() as meter:
                try:
                    if handler is None:
                        raise error
                    scope = self.scope_for(node_id, nodes)
                    parameters = evaluate_parameters(parameters, scope, node_id,
                                                     raw=kind.raw_parameters)
                    outcome = handler(NodeCall(node, parameters, scope, session, session.get(User, self.user.id),
                                               self.run, self._incoming(node_id)))
                except ExpressionError as exc:
                    # An expression fails the same way every time: no retry.
                    rows.append(steps.finish_step(step, "failed", parameters, error=str(exc),
                                                  cost_chf=meter.recorded_cost))
                    return NodeResult(error=str(exc), rows=rows)
                except StepError as exc:
                    error = exc
                    rows.append(steps.finish_step(step, "failed", parameters, exc.output, exc.message, exc.stack,
                                                  cost_chf=meter.recorded_cost))
                except Exception as exc:  # noqa: BLE001 - a node's bug is that node's error, not the engine's
                    error = StepError(f"{type(exc).__name__}: {exc}", traceback.format_exc())
                    rows.append(steps.finish_step(step, "failed", parameters, None, error.message, error.stack,
                                                  cost_chf=meter.recorded_cost))
                else:
                    status = "waiting" if outcome.suspend else "completed"
                    rows.append(steps.finish_step(step, status, parameters, outcome.output,
                                                  cost_chf=meter.recorded_cost))
                    return NodeResult(outcome=outcome, step_id=step.id, rows=rows)
            if attempt < first + policy.max_attempts:
                # The failed attempt is visible while we wait for the next one. (End what the
                # attempt began first: the gate is never awaited inside a write transaction.)
                session.commit()
                with write_gate():
                    steps.write_steps(session, rows)
                    session.commit()
                rows = []
                crashpoints.reach(self.crash_at, "retry_wait", node_id)
                factor = 2 ** (attempt - first - 1) if policy.backoff == "exponential" else 1
                time.sleep(policy.delay_seconds * factor)
        return NodeResult(error=error.message, rows=rows)

    def apply(self, node_id: str, result: NodeResult) -> None:
        """The engine's side of a finished node: success, suspension or onError."""
        # Into the step's transaction now, so node.finished is published before the run's own event.
        steps.write_steps(self.session, result.rows)
        if result.outcome is None:
            return self.on_node_failure(node_id, result.error or "failed")
        if result.outcome.suspend:
            return self.suspend(node_id, result.outcome, result.step_id)
        return self.on_node_success(node_id, result.outcome)

    def on_node_success(self, node_id: str, outcome: Outcome) -> None:
        """Store the output and follow the handles taken (or end the run for flow.stop)."""
        self.outputs[node_id] = outcome.output
        if outcome.stop is not None:
            return self.stop(outcome.stop, outcome.message)
        is_loop = self.graph.is_loop(node_id)
        if is_loop and "each" in outcome.handles:
            self.loops[node_id] = {"items": outcome.output, "index": 0, "results": []}
        fired = self.frontier.done(node_id, outcome.handles)
        if not fired and not (is_loop and "each" in outcome.handles):
            self.ends[node_id] = outcome.output
        return None

    def suspend(self, node_id: str, outcome: Outcome, step_id: str) -> None:
        """The node waits for something outside the run (a person); other branches go on."""
        self.outputs[node_id] = outcome.output
        self.suspended[node_id] = {"reason": outcome.suspend, "stepId": step_id, "output": outcome.output}

    def is_waiting_at(self, node_id: str) -> bool:
        """Whether `node_id` is suspended, waiting to be resumed from outside."""
        return node_id in self.suspended

    def resume_node(self, node_id: str, output: Any, handles: tuple[str, ...]) -> None:
        """Finish a suspended node with what came from outside, then follow `handles`.

        The node's waiting step row becomes completed, its duration covering the wait.
        """
        waiting = self.suspended.pop(node_id)
        step = self.session.get(RunStepLog, waiting["stepId"])
        if step is not None:
            step.status = "completed"
            step.output = steps.cap_output(steps.mask_secrets(output))
            step.finished_at = utcnow()
            step.duration_ms = int((step.finished_at - _aware(step.started_at)).total_seconds() * 1000)
            self.session.add(step)
            steps.publish_finished(self.session, step, self.run.workflow_id)
        self.on_node_success(node_id, Outcome(output=output, handles=handles))

    def on_node_failure(self, node_id: str, message: str) -> None:
        """onError: `fail` ends the run, `continue` goes on with output None, `route` takes `error`."""
        node = self.graph.nodes[node_id]
        on_error = node.get("onError") or "fail"
        if on_error == "continue":
            kind = node_type(node.get("type", ""))
            available = kind.output_handles(node.get("parameters"), None) if kind else []
            self.outputs[node_id] = None
            self.frontier.done(node_id, [DEFAULT_HANDLE] if DEFAULT_HANDLE in available else [])
        elif on_error == "route":
            self.outputs[node_id] = {"error": message}
            self.frontier.done(node_id, [ERROR_HANDLE])
        else:
            self.fail(f"node '{node_id}' failed: {_without_node(message, node_id)}")

    def next_iteration(self, loop_id: str) -> None:
        """A loop body returned: keep its result, then run the next item or leave by `done`."""
        position = self.loops[loop_id]
        returning = [self.graph.edges[i]["source"] for i in self.graph.incoming[loop_id]
                     if i in self.graph.return_edges and i in self.frontier.fired]
        if len(returning) == 1:
            result = self.outputs.get(returning[0])
        else:
            result = {source: self.outputs.get(source) for source in returning} or None
        position["results"].append(result)
        position["index"] += 1
        self.frontier.restart_body(loop_id)
        if position["index"] < len(position["items"]):
            self.frontier.done(loop_id, ["each"])
            return
        del self.loops[loop_id]
        self.outputs[loop_id] = position["results"]
        if not self.frontier.done(loop_id, ["done"]):
            self.ends[loop_id] = position["results"]

    # --- run states -------------------------------------------------------------------------

    def pause(self, reason: str) -> None:
        with write_gate():
            lifecycle.pause(self.session, self.run, reason)
            self.session.commit()

    def complete(self) -> None:
        with write_gate():
            lifecycle.complete(self.session, self.run, output=dict(self.ends))
            self.session.commit()

    def fail(self, message: str) -> None:
        lifecycle.fail(self.session, self.run, message)

    def stop(self, status: str, message: str | None) -> None:
        """flow.stop: end the run now with the node's status, whatever else is pending."""
        if status == lifecycle.FAILED:
            lifecycle.fail(self.session, self.run, message or "stopped by a flow.stop node")
        elif status == lifecycle.CANCELLED:
            lifecycle.cancel(self.session, self.run, message)
        else:
            lifecycle.complete(self.session, self.run, output=message if message is not None else dict(self.ends))

    def crash(self, exc: BaseException) -> None:
        """Anything unexpected: roll back the step and fail the run with the reason."""
        self.session.rollback()
        self.session.refresh(self.run)
        self._release_if_finished()
        if self.run.status in (lifecycle.RUNNING, lifecycle.PAUSED):
            with write_gate():
                if self.run.status == lifecycle.PAUSED:
                    lifecycle.cancel(self.session, self.run, f"engine error: {type(exc).__name__}: {exc}")
                else:
                    lifecycle.fail(self.session, self.run, f"engine error: {type(exc).__name__}: {exc}")
                self.session.commit()
