"""The engine functions that run nodes: one per kind of built-in node (DESIGN §4) and
`run_action` for node actions, which go through execute_action. Which function runs which type
is a fact of the type's entry in backend.workflows.node_types (`NodeType.handler`).

A handler gets a :class:`NodeCall` (the node, its evaluated parameters, the expression scope and
the run's session and starter) and returns an :class:`Outcome`: the output and the handles the
run continues by. A failure is raised as :class:`StepError`; the executor applies retry and
onError. Flow control that needs the run's state (loop iterations, stop, merge inputs) is
computed here from the call and finished by the executor.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from sqlmodel import Session

from backend.actions import ActionContext, execute_action
from backend.db.models import HumanTask, User, WorkflowRun, utcnow
from backend.engine.expressions import ExpressionScope
from backend.notifications.service import notify_task_created
from backend.workflows.node_types import DEFAULT_HANDLE, node_type, switch_case_handle


class StepError(Exception):
    """A node failed; `message` is shown to people, `stack` kept in the step log."""

    def __init__(self, message: str, stack: str | None = None, output: Any = None):
        super().__init__(message)
        self.message = message
        self.stack = stack
        self.output = output


@dataclass
class NodeCall:
    """Everything a handler may use for one attempt of one node."""

    node: dict[str, Any]
    parameters: dict[str, Any]
    scope: ExpressionScope
    session: Session
    user: User
    run: WorkflowRun
    incoming: dict[str, Any] = field(default_factory=dict)

    @property
    def node_id(self) -> str:
        return self.node["id"]


@dataclass
class Outcome:
    """What a node produced and where the run goes next.

    Attributes:
        output: The node's output (`nodes.<id>.output` for later expressions).
        handles: The output handles to follow; edges by other handles die.
        stop: For flow.stop: the status the run ends with.
        message: For flow.stop: the message recorded with that status.
        suspend: Why the node waits (e.g. "humanTask"): it is finished later, from outside,
            by :meth:`backend.engine.executor.RunEngine.resume_node`.
    """

    output: Any = None
    handles: tuple[str, ...] = (DEFAULT_HANDLE,)
    stop: str | None = None
    message: str | None = None
    suspend: str | None = None


Handler = Callable[[NodeCall], Outcome]


def runs_concurrently(type_id: str) -> bool:
    """Whether independent nodes of this type run at the same time (`NodeType.concurrent`): node
    actions and the slow built-ins do; flow control, triggers and human steps run one at a time."""
    found = node_type(type_id)
    return found is not None and found.concurrent


# --- triggers and flow ----------------------------------------------------------------------


def trigger(call: NodeCall) -> Outcome:
    """A trigger's output is the run input (the trigger payload)."""
    return Outcome(output=call.scope.input)


def if_else(call: NodeCall) -> Outcome:
    result = bool(call.parameters.get("condition"))
    return Outcome(output={"result": result}, handles=("true" if result else "false",))


def switch(call: NodeCall) -> Outcome:
    """The first case whose (evaluated) value equals `value`; else `default`.

    Handle names come from the cases as written, because handles are fixed when the graph is saved.
    """
    value = call.parameters.get("value")
    written = call.node.get("parameters", {}).get("cases") or []
    for case, raw in zip(call.parameters.get("cases") or [], written, strict=False):
        if isinstance(case, dict) and case.get("value") == value:
            handle = switch_case_handle(raw)
            return Outcome(output={"value": value, "case": handle}, handles=(handle,))
    return Outcome(output={"value": value, "case": "default"}, handles=("default",))


def loop(call: NodeCall) -> Outcome:
    """Entering a loop: the items; the executor runs the body once per item."""
    items = call.parameters.get("items")
    if isinstance(items, dict):
        items = list(items.items())
    if not isinstance(items, list):
        raise StepError(f"node '{call.node_id}', parameter 'items': expected a list, got {type(items).__name__}")
    return Outcome(output=items, handles=("each",) if items else ("done",))


def merge(call: NodeCall) -> Outcome:
    """The outputs of the branches that arrived, by source node id."""
    return Outcome(output=dict(call.incoming))


def stop(call: NodeCall) -> Outcome:
    status = call.parameters.get("status") or "completed"
    message = call.parameters.get("message")
    return Outcome(output={"status": status, "message": message}, handles=(), stop=status, message=message)


def wait(call: NodeCall) -> Outcome:
    """Suspend the node until its wake-up time; backend.engine.timers.wake_due_runs resumes it.

    The wake-up time (`wakeAt`, ISO UTC) is the node's waiting output, kept in the run's context,
    so the timer survives a restart. `until` is an ISO date-time (naive means UTC).
    """
    p = call.parameters
    if p.get("until") not in (None, ""):
        try:
            wake_at = datetime.fromisoformat(str(p["until"]))
        except ValueError:
            raise StepError(f"node '{call.node_id}', parameter 'until': not an ISO date-time: {p['until']!r}") from None
        wake_at = wake_at if wake_at.tzinfo else wake_at.replace(tzinfo=UTC)
    else:
        try:
            seconds = float(p.get("seconds") or 0)
        except (TypeError, ValueError):
            raise StepError(f"node '{call.node_id}', parameter 'seconds': not a number: {p.get('seconds')!r}") from None
        wake_at = utcnow() + timedelta(seconds=seconds)
    return Outcome(output={"wakeAt": wake_at.astimezone(UTC).isoformat()}, handles=(), suspend="wait")


def check_email(call: NodeCall) -> Outcome:
    """Suspend the node until a matching mail arrives (backend.engine.mailbox): the connection is
    opened as the run's starter and the mailbox's cursor marking now is the node's waiting output,
    so only mails received from now on count; backend.engine.mailbox.poll_mailboxes resumes it
    with the mail (its attachments saved as files) as output.

    Without a usable mail connection nothing could ever resume it: it fails at once, saying why
    (none chosen, not found, expired or failing, the folder missing, a malformed filter).
    """
    from backend.connectors.types import ConnectionFailed
    from backend.engine.mailbox import start_waiting
    from backend.errors import DomainError
    from backend.workflows.requirements import node_problem

    problem = node_problem({**call.node, "parameters": call.parameters})
    if problem is not None:
        raise StepError(problem)
    try:
        waiting = start_waiting(call.session, call.user, call.parameters)
    except (ConnectionFailed, DomainError) as exc:
        raise StepError(str(exc)) from None
    return Outcome(output=waiting, handles=(), suspend="email")


# --- people -----------------------------------------------------------------------------------


def human_task(call: NodeCall) -> Outcome:
    """Create the HumanTask and suspend the node until a person completes it."""
    p = call.parameters
    timeout = p.get("timeoutSeconds")
    task = HumanTask(
        run_id=call.run.id, node_id=call.node_id, mandate_id=call.run.mandate_id,
        feature_instance_id=call.run.feature_instance_id,
        kind=node_type(call.node["type"]).human_task,
        title=str(p.get("title") or "")[:500], message=p.get("message"), fields=p.get("fields"),
        assignee=p.get("assignee"), due_at=utcnow() + timedelta(seconds=int(timeout)) if timeout else None,
        on_timeout=p.get("onTimeout") or "cancel",
    )
    # Written with the step (the engine's step transaction), not here: the id is already set.
    call.session.add(task)
    notify_task_created(call.session, task)  # its assignees are told, in the same transaction
    return Outcome(output={"taskId": task.id}, handles=(), suspend="humanTask")


# --- AI ---------------------------------------------------------------------------------------


def ai_prompt(call: NodeCall) -> Outcome:
    from backend.ai.client import AiError, get_ai_client

    p = call.parameters
    try:
        reply = get_ai_client().chat(str(p.get("prompt") or ""), model=p.get("model"),
                                     system=p.get("systemPrompt"), response_format=p.get("responseFormat") or "text")
        output: dict[str, Any] = {"text": reply.text, "model": reply.model, "usage": reply.usage}
        if p.get("responseFormat") == "json":
            output["json"] = reply.json()
    except AiError as exc:
        raise StepError(str(exc)) from None
    return Outcome(output=output)


def _normalise(text: str) -> str:
    return text.strip().strip("\"'`.").strip().casefold()


def ai_decide(call: NodeCall) -> Outcome:
    """The model picks one option; its handle is followed. Any other answer is a step error."""
    from backend.ai.client import AiError, get_ai_client

    options = [str(o) for o in call.parameters.get("options") or []]
    system = ("You decide. Answer with exactly one of these options and nothing else: "
              + json.dumps(options, ensure_ascii=False))
    try:
        reply = get_ai_client().chat(str(call.parameters.get("question") or ""), system=system)
    except AiError as exc:
        raise StepError(str(exc)) from None
    by_text = {_normalise(o): o for o in options}
    choice = by_text.get(_normalise(reply.text))
    if choice is None:
        raise StepError(f"node '{call.node_id}': the AI answered {reply.text[:200]!r}, which is none of the "
                        f"options {options}", output={"text": reply.text})
    return Outcome(output={"choice": choice, "text": reply.text}, handles=(choice,))


# --- code -------------------------------------------------------------------------------------


def script_python(call: NodeCall) -> Outcome:
    """Run the code in the sandbox; its `input` is the run input, node outputs and loop item."""
    from backend.sandbox import probe, run_python

    status = probe()
    if not status.available:
        raise StepError(f"script.python is disabled on this server: {status.reason}")
    scope = call.scope
    script_input: dict[str, Any] = {"input": scope.input, "nodes": {k: dict(v) for k, v in scope.nodes.items()}}
    if scope.in_loop:
        script_input.update(item=scope.item, index=scope.index)
    result = run_python(str(call.parameters.get("code") or ""), script_input,
                        float(call.parameters.get("timeoutSeconds") or 10))
    if not result.ok:
        raise StepError(result.error or "the script failed", stack=result.traceback,
                        output={"stdout": result.stdout, "stderr": result.stderr})
    return Outcome(output=result.output)


# --- actions ----------------------------------------------------------------------------------


def run_action(call: NodeCall) -> Outcome:
    """A node action, authorised as the run's starter with their current rights."""
    context = ActionContext(call.session, call.user, call.run.mandate_id, call.run.feature_instance_id,
                            run_id=call.run.id, node_id=call.node_id)
    result = execute_action(call.node["type"], call.parameters, context)
    if not result.ok:
        raise StepError(result.error or f"{call.node['type']} failed")
    return Outcome(output=result.output)
