"""The editor's test runner (UC-5): test runs and step-by-step runs of the draft, watched live.

A run is started without waiting for it; a background handler then reads its steps every
POLL_SECONDS until it comes to rest, colouring the canvas's nodes and filling the trace.
"""

from __future__ import annotations

import asyncio
import json
import re
import time
import uuid
from typing import Any, TypedDict

import reflex as rx

from backend import auth
from backend.db import session_scope
from backend.db.models import WorkflowRun
from backend.engine.steps import split_error
from backend.errors import DomainError, FieldError, InvalidInput
from backend.features.graphical_editor.interface import GraphicalEditorInterface as Door
from backend.statemachines import ConcurrentTransition, IllegalTransition
from backend.workflows.node_types import node_type
from state.auth import NotSignedIn
from state.page import user_message
from state.permissions import requires, requires_door

POLL_SECONDS = 0.25
WATCH_LIMIT_SECONDS = 600
SHOWN_CHARS = 4000
# A step's status → the node's colour on the canvas.
NODE_STATUS = {"running": "running", "completed": "completed", "failed": "failed", "waiting": "paused",
               "cancelled": "skipped"}


class TraceRow(TypedDict):
    key: str
    node_id: str
    label: str  # the node's label on the canvas (its type's when it has none)
    node_type: str
    status: str
    attempt: int
    duration: str
    started: str
    input: str
    output: str
    error: str


def _shown(value: Any) -> str:
    if value is None:
        return ""
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, indent=2, default=str)
    return text if len(text) <= SHOWN_CHARS else text[:SHOWN_CHARS] + f"\n… ({len(text):,} characters)"


def _duration(milliseconds: int | None) -> str:
    if milliseconds is None:
        return ""
    return f"{milliseconds} ms" if milliseconds < 1000 else f"{milliseconds / 1000:.1f} s"


def node_labels(graph: dict[str, Any]) -> dict[str, str]:
    """Node id → the label the canvas shows (the node's own, else its type's, else the id)."""
    labels = {}
    for node in graph.get("nodes") or []:
        if isinstance(node, dict) and isinstance(node.get("id"), str):
            known = node_type(node.get("type"))
            labels[node["id"]] = str(node.get("label") or (known.label if known else node["id"]))
    return labels


def without_node(message: str, node_id: str) -> str:
    """`message` without the leading mentions of its own node ("node 'x' failed: ", "node 'x', ",
    "node 'x': "): where it is shown, the node is named already."""
    prefix = re.compile(r"node '" + re.escape(node_id) + r"'(?: failed)?(?::|,)\s*")
    while (found := prefix.match(message)) and found.end() < len(message):
        message = message[found.end():]
    return message


def named_once(exc: Exception) -> Exception:
    """`exc`, its problems naming each node once: a problem whose message names its node already
    ("node 'x' (flow.ifElse) has no handle 'y'") loses the "node 'x', " that would repeat it."""
    if not isinstance(exc, InvalidInput):
        return exc
    return InvalidInput([FieldError(e.field, e.message) if e.node_id and f"node '{e.node_id}'" in e.message else e
                         for e in exc.errors])


def run_error_text(error: str, labels: dict[str, str]) -> str:
    """A run's error naming its failed node once, by label and id ("Divide (divide) failed: …")."""
    found = _FAILED_NODE.match(error)
    if not found:
        return error
    node_id = found.group(1)
    label = labels.get(node_id, node_id)
    named = f"node '{node_id}'" if label == node_id else f"{label} ({node_id})"
    return f"{named} failed: {without_node(error, node_id)}"


_FAILED_NODE = re.compile(r"node '([^']+)' failed: ")


def trace_rows(steps: list[Any], labels: dict[str, str] | None = None) -> list[TraceRow]:
    """The trace's rows: one per step, its node named by label (`labels`, node id → label) and id
    in the row, so its error does not repeat the node."""
    labels = labels or {}
    rows = []
    for step in steps:
        message, _stack = split_error(step.error)
        rows.append(TraceRow(
            key=step.id, node_id=step.node_id, label=labels.get(step.node_id, step.node_id),
            node_type=step.node_type, status=step.status, attempt=step.attempt,
            duration=_duration(step.duration_ms), started=step.started_at.strftime("%H:%M:%S"),
            input=_shown(step.input), output=_shown(step.output),
            error=without_node(message, step.node_id) if message else ""))
    return rows


def node_statuses(run: WorkflowRun, steps: list[Any], node_ids: list[str]) -> dict[str, str]:
    """Each node's colour: its last step's status (completed for an output a retry reused); pending
    while the run may still reach it, skipped after."""
    # A retry reuses the outputs of the nodes that completed before: they count as completed.
    reused = (run.context or {}).get("outputs") or {}
    statuses: dict[str, str] = {node_id: "completed" for node_id in reused}
    for step in steps:  # in order: the last attempt wins
        statuses[step.node_id] = NODE_STATUS.get(step.status, step.status)
    if run.status in ("running", "paused"):
        resting = "pending"
    else:  # a run that ended before any node ran (it failed as it started) skipped nothing: no colour
        resting = "skipped" if statuses else ""
    return {node_id: statuses.get(node_id, resting) for node_id in node_ids}


def run_version(base_status: str) -> str | None:
    """Which version a Test run runs: the one on the canvas. That is the draft while there is one,
    and the published version right after publishing (until the next edit creates a draft);
    None (draft, else published) before the page knows."""
    return base_status if base_status in ("draft", "published") else None


def read_run(token: str, workflow_id: str, run_id: str) -> tuple[WorkflowRun, list[Any]]:
    """The run and its steps, read as the token's user (detached from the session)."""
    from state.editor import editor_interface

    with session_scope() as session:
        user = auth.user_for_token(session, token)
        if user is None:
            raise NotSignedIn()
        iface, _workflow = editor_interface(session, user, workflow_id)
        run = iface.get_run(run_id)
        steps = iface.run_steps(run)
        session.expunge_all()
        return run, steps


class EditorRunsMixin(rx.State, mixin=True):
    """Test run, step mode, live node colours and the trace panel."""

    can_execute: bool = False
    run_input: str = ""
    run_input_error: str = ""
    run_id: str = ""
    run_status: str = ""
    run_pause_reason: str = ""
    run_error: str = ""
    run_mode: str = ""
    watching: bool = False
    node_statuses: dict[str, str] = {}
    trace: list[TraceRow] = []
    _watch_key: str = ""
    _test_input_of: str = ""  # the workflow whose stored test input the box was filled with

    @rx.var
    def failed_node(self) -> str:
        return next((row["node_id"] for row in reversed(self.trace) if row["status"] == "failed"), "")

    @rx.var
    def selected_steps(self) -> list[TraceRow]:
        """The selected node's steps in the last run, last attempt first."""
        node = self.selected_ids[0] if len(self.selected_ids) == 1 else ""
        return [row for row in reversed(self.trace) if row["node_id"] == node]

    @rx.var
    def run_summary(self) -> str:
        if not self.run_id:
            return ""
        text = f"Run {self.run_id[:8]}: {self.run_status}"
        if self.run_pause_reason:
            text += {"step": " (step mode: press Next step)", "humanTask": " (waiting for a person: see the Inbox)",
                     "wait": " (waiting for its time)", "email": " (waiting for an e-mail)"}.get(
                self.run_pause_reason, f" ({self.run_pause_reason})")
        return text

    def _clear_run(self) -> None:
        """Forget the run shown (the page opens a workflow): its colours, trace and test input box."""
        self._test_input_of = ""
        self.run_id = self.run_status = self.run_pause_reason = self.run_error = self.run_mode = ""
        self.node_statuses, self.trace, self.watching, self._watch_key = {}, [], False, ""

    def _show_run(self, run: WorkflowRun, steps: list[Any]) -> None:
        node_ids = [n.get("id") for n in self._graph.get("nodes", [])]
        self.run_id, self.run_status = run.id, run.status
        self.run_pause_reason = run.pause_reason or ""
        labels = node_labels(self._graph)
        self.run_error = run_error_text(split_error(run.error)[0] or "", labels)
        self.node_statuses = node_statuses(run, steps, node_ids)
        self.trace = trace_rows(steps, labels)
        self._publish()

    def _read_run(self, run_id: str) -> tuple[WorkflowRun, list[Any]]:
        return read_run(self.token, self.workflow_id, run_id)

    def _launch(self, start) -> Any:
        """Run `start(iface, workflow) -> run` (which must not wait), show it and watch it."""
        from state.editor import editor_interface

        self.error = self.notice = ""
        try:
            with self._user_session() as (session, user):
                iface, workflow = editor_interface(session, user, self.workflow_id)
                run = start(iface, workflow)
                run_id = run.id
        except NotSignedIn:
            return self._signed_out()
        except (DomainError, ConcurrentTransition, IllegalTransition) as exc:
            self.error = user_message(named_once(exc))
            return None
        run, steps = self._read_run(run_id)
        self._show_run(run, steps)
        self.panel_tab = "trace"
        self._watch_key = uuid.uuid4().hex
        self.watching = True
        return type(self).watch_run

    def _load_test_input(self, workflow) -> None:
        """Show the workflow's stored test input (a template's sample input to begin with) when
        the page opens it; reloads after publishing and the like keep what was typed since."""
        if self._test_input_of == workflow.id:
            return
        self._test_input_of = workflow.id
        stored = workflow.test_input
        self.run_input = "" if stored is None else json.dumps(stored, ensure_ascii=False, indent=2)
        self.run_input_error = ""

    def _parsed_input(self) -> tuple[bool, Any]:
        text = self.run_input.strip()
        if not text:
            return True, None
        try:
            return True, json.loads(text)
        except json.JSONDecodeError as exc:
            self.run_input_error = f"Test input is not valid JSON: {exc.msg} at line {exc.lineno}, column {exc.colno}"
            return False, None

    @rx.event
    @requires("ui")
    def set_run_input(self, text: str):
        self.run_input = text
        self.run_input_error = ""

    def _start(self, mode: str):
        if self.watching:
            self.error = "A test run is still running: wait for it or cancel it first."
            return None
        ok, value = self._parsed_input()
        if not ok:
            return None
        self.run_mode = mode
        keep = self.can_edit

        def start(iface, workflow):
            if keep and workflow.test_input != value:  # the test input is kept with the workflow
                iface.update_workflow(workflow, test_input=value)
            return iface.start_run(workflow, value, run_version(self._base_status), mode, wait_seconds=0)

        return self._launch(start)

    @rx.event
    @requires_door(Door.start_run)
    def test_run(self):
        """Run the draft from its trigger with the test input, watching every node."""
        return self._start("full")

    @rx.event
    @requires_door(Door.start_run)
    def step_run(self):
        """Run the draft one node at a time: it pauses after each node until Next step."""
        return self._start("step")

    @rx.event
    @requires_door(Door.continue_run)
    def next_step(self):
        """Step mode: execute the next node."""
        run_id = self.run_id
        return self._launch(lambda iface, _workflow: iface.continue_run(iface.get_run(run_id), wait_seconds=0))

    @rx.event
    @requires_door(Door.retry_run)
    def retry_failed(self):
        """Retry the failed run from its failed node (completed steps are reused)."""
        run_id = self.run_id
        return self._launch(lambda iface, _workflow: iface.retry_run(iface.get_run(run_id), wait_seconds=0))

    @rx.event
    @requires_door(Door.cancel_run)
    def cancel_test_run(self):
        from state.editor import editor_interface

        try:
            with self._user_session() as (session, user):
                iface, _workflow = editor_interface(session, user, self.workflow_id)
                iface.cancel_run(iface.get_run(self.run_id))
        except NotSignedIn:
            return self._signed_out()
        except (DomainError, ConcurrentTransition, IllegalTransition) as exc:
            self.error = user_message(exc)
            return None
        return type(self).refresh_run

    def _open_run(self, run_id: str) -> None:
        """Show a run of this workflow (colours and trace), e.g. one the Monitor links to."""
        try:
            run, steps = self._read_run(run_id)
        except (NotSignedIn, DomainError) as exc:
            self.error = "Not signed in." if isinstance(exc, NotSignedIn) else user_message(exc)
            return
        if run.workflow_id != self.workflow_id:
            self.error = f"run {run_id} not found"
            return
        self._show_run(run, steps)
        self.run_mode = run.mode or ""
        self.panel_tab = "trace"

    @rx.event
    @requires_door(Door.get_run)
    def refresh_run(self):
        """Read the run again (e.g. after its human task was completed elsewhere)."""
        if not self.run_id:
            return None
        try:
            run, steps = self._read_run(self.run_id)
        except NotSignedIn:
            return self._signed_out()
        except DomainError as exc:
            self.error = user_message(exc)
            return None
        self._show_run(run, steps)
        if run.status == "running" and not self.watching:
            self._watch_key = uuid.uuid4().hex
            self.watching = True
            return type(self).watch_run
        return None

    @rx.event(background=True)
    @requires_door(Door.get_run)
    async def watch_run(self):
        """Poll the run until it comes to rest, updating colours and trace as steps finish."""
        async with self:
            key, run_id, token, workflow_id = self._watch_key, self.run_id, self.token, self.workflow_id
        deadline = time.monotonic() + WATCH_LIMIT_SECONDS
        seen = None
        while time.monotonic() < deadline:
            try:
                run, steps = await asyncio.to_thread(read_run, token, workflow_id, run_id)
            except Exception as exc:  # noqa: BLE001 - shown on the page, the watch ends
                async with self:
                    if self._watch_key == key:
                        self.error = f"Watching the run stopped: {user_message(exc)}"
                        self.watching = False
                return
            fingerprint = (run.status, run.pause_reason, tuple((s.id, s.status) for s in steps))
            async with self:
                if self._watch_key != key:
                    return
                if fingerprint != seen:
                    self._show_run(run, steps)
                    seen = fingerprint
                if run.status != "running":
                    self.watching = False
                    return
            await asyncio.sleep(POLL_SECONDS)
        async with self:
            if self._watch_key == key:
                self.watching = False

    @rx.event
    @requires("ui")
    def show_step(self, node_id: str):
        """A trace row was clicked: select its node on the canvas and show its step."""
        self.selected_ids = [node_id]
        self._show_selected()

    @rx.event
    @requires_door(Door.prepare_agent_run)
    def ask_ai_about_error(self):
        """Put the failed step's log into the AI chat and ask what went wrong."""
        row = next((r for r in reversed(self.trace) if r["status"] == "failed"), None)
        if row is None:
            self.error = "The last run has no failed step to ask about."
            return None
        prompt = (f"The test run of this workflow failed at node '{row['node_id']}' ({row['node_type']}), "
                  f"attempt {row['attempt']}.\nError: {row['error']}\nInput of the step:\n{row['input'] or '(none)'}\n"
                  "What went wrong, and how do I fix the workflow?")
        return self._ask_ai(prompt)
