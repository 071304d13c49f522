"""What the MCP server at /mcp offers one caller and how a tool call runs (synchronous DB code).

The tools of a caller (a user, through a bearer token, in one feature instance) are exactly the
agent tools they may use there — :func:`backend.agent.toolset.usable_actions` over
``registry_for(session, mandate)``, every toolbox but ``featureData`` (the sub-agent's own tools)
— with the agent's tool names and JSON schemas (``strict_parameters``: optional parameters are
nullable, null means "not given"); a read-only token keeps only the actions whose capabilities
are exactly ``{read}``. Added to them: the published workflows exposed as MCP tools that the user
may run (backend/mcp/workflow_tools.py).

Every call is checked again against the caller's tool list of that moment (rights may have
changed since ``tools/list``); a name that is not on it executes nothing and leaves no trace. A
call that runs is traced like an agent's: one AgentRun with profile ``mcp`` per call, walking the
agent run state machine idle → thinking → executing_tools → thinking → completed (failed when the
tool failed), and one AgentStep ``tool_call`` with the arguments, the result the client got and
``detail.mcpClient`` (the client's name and version as it introduced itself).
"""

from __future__ import annotations

import hashlib
import json
import logging
import time
from dataclasses import dataclass, field
from typing import Any

from sqlmodel import Session

from backend.actions.base import Action, ActionContext
from backend.actions.catalogue import registry_for
from backend.actions.openai_tools import execute_tool_call, result_for_agent, strict_parameters, tool_name
from backend.actions.registry import ActionRegistry
from backend.agent.config import FEATURE_DATA_TOOLBOX
from backend.agent.toolset import usable_actions
from backend.db.models import AgentRun, AgentStep, FeatureInstance, User, utcnow
from backend.mcp import workflow_tools
from backend.rbac.access import AccessContext
from backend.statemachines import agent_run as states

log = logging.getLogger(__name__)

TRACE_PROFILE = "mcp"
READ_ONLY = frozenset({"read"})


class UnknownTool(LookupError):
    """A tool name the caller is not offered (unknown, or not theirs to use): nothing ran."""


@dataclass(frozen=True)
class Caller:
    """Who calls /mcp: the token's user in the chosen feature instance, with the token's narrowing."""

    user_id: str
    instance_id: str
    mandate_id: str
    read_only: bool = False
    scoped: bool = False  # the token is narrowed to this instance


@dataclass(frozen=True)
class Tool:
    """One offered tool: an action of the catalogue or an exposed workflow."""

    name: str
    description: str
    input_schema: dict[str, Any]
    read_only: bool
    action: Action | None = None
    workflow: workflow_tools.WorkflowTool | None = None

    def listing(self) -> dict[str, Any]:
        """The tool as `tools/list` shows it (wire names)."""
        return {"name": self.name, "description": self.description, "inputSchema": self.input_schema,
                "annotations": {"readOnlyHint": self.read_only}}


@dataclass
class Offer:
    """The caller's tools of this moment, with what running them needs."""

    user: User
    instance: FeatureInstance
    access: AccessContext
    registry: ActionRegistry
    tools: dict[str, Tool] = field(default_factory=dict)

    def fingerprint(self) -> str:
        """Changes exactly when the tool list a client sees changes."""
        listing = [tool.listing() for tool in self.tools.values()]
        return hashlib.sha256(json.dumps(listing, sort_keys=True).encode()).hexdigest()


def _action_tool(action: Action) -> Tool:
    return Tool(name=tool_name(action.id), description=action.description, input_schema=strict_parameters(action),
                read_only=action.capabilities == READ_ONLY, action=action)


def offer(session: Session, caller: Caller) -> Offer:
    """The tools `caller` may use now (see the module docstring)."""
    user = session.get(User, caller.user_id)
    instance = session.get(FeatureInstance, caller.instance_id)
    if user is None or instance is None:
        raise LookupError("the caller's user or instance is gone")
    access = AccessContext(session, user)
    registry = registry_for(session, instance.mandate_id)
    boxes = [box.id for box in registry.toolboxes() if box.id != FEATURE_DATA_TOOLBOX]
    found = Offer(user, instance, access, registry)
    for actions in usable_actions(access, instance, registry, boxes).values():
        for action in actions:
            if caller.read_only and action.capabilities != READ_ONLY:
                continue
            found.tools[tool_name(action.id)] = _action_tool(action)
    if not caller.read_only:  # a workflow may do anything: never offered to a read-only token
        for exposed in workflow_tools.exposed(access, instance, caller.scoped, set(found.tools)):
            found.tools[exposed.name] = Tool(name=exposed.name, description=exposed.description,
                                             input_schema=exposed.input_schema, read_only=False, workflow=exposed)
    return found


def listing(session: Session, caller: Caller) -> tuple[list[dict[str, Any]], str]:
    """The `tools/list` entries of `caller` and their fingerprint."""
    found = offer(session, caller)
    return [tool.listing() for tool in found.tools.values()], found.fingerprint()


def fingerprint(session: Session, caller: Caller) -> str:
    """The fingerprint of `caller`'s tool list now (the list-changed watchers compare it)."""
    return offer(session, caller).fingerprint()


@dataclass(frozen=True)
class CallOutcome:
    """What a tool call answers: the result text (at most 12,000 characters) and whether it worked."""

    ok: bool
    text: str
    trace_run_id: str


def call(session: Session, caller: Caller, name: str, arguments: dict[str, Any] | None,
         client: dict[str, Any], request_id: str | None = None) -> CallOutcome:
    """Run tool `name` as the caller, traced (see the module docstring).

    Raises:
        UnknownTool: `name` is not among the caller's tools now; nothing ran, nothing was traced.
    """
    found = offer(session, caller)
    tool = found.tools.get(name)
    if tool is None:
        raise UnknownTool(name)
    trace = _Trace.begin(session, found, tool, arguments, client)
    started = time.monotonic()
    detail: dict[str, Any] = {"mcpClient": client}
    if tool.action is not None:
        context = ActionContext(session, found.user, found.instance.mandate_id, found.instance.id)
        result = execute_tool_call(name, arguments, context, found.registry)
        ok, text = result.ok, result_for_agent(result)
    else:
        assert tool.workflow is not None
        ok, text, run_id = workflow_tools.run(found.access, tool.workflow, arguments)
        detail["workflowRunId"] = run_id
    trace.finish(name, request_id, arguments, ok, text, detail, int((time.monotonic() - started) * 1000))
    return CallOutcome(ok, text, trace.run.id)


@dataclass
class _Trace:
    """The AgentRun of one MCP tool call and its state transitions (each committed)."""

    session: Session
    run: AgentRun

    @classmethod
    def begin(cls, session: Session, found: Offer, tool: Tool, arguments: Any, client: dict[str, Any]) -> _Trace:
        who = " ".join(str(client.get(k)) for k in ("name", "version") if client.get(k)) or "an MCP client"
        run = AgentRun(mandate_id=found.instance.mandate_id, feature_instance_id=found.instance.id,
                       profile=TRACE_PROFILE, prompt=f"{who}: tools/call {tool.name}", status=states.IDLE,
                       sys_created_by=found.user.id, config={"mcpClient": client},
                       toolboxes=[tool.action.toolbox] if tool.action else ["workflow"])
        session.add(run)
        session.commit()
        trace = cls(session, run)
        trace.fire("start")
        trace.fire("call_tools")
        return trace

    def fire(self, event: str, **changes: Any) -> None:
        states.MACHINE.apply(self.session, self.run, event, **changes)
        self.session.commit()

    def finish(self, name: str, request_id: str | None, arguments: Any, ok: bool, text: str,
               detail: dict[str, Any], duration_ms: int) -> None:
        """Record the tool_call step and end the run: completed, or failed with the tool's error."""
        self.session.add(AgentStep(run_id=self.run.id, seq=1, round=1, kind="tool_call", name=name,
                                   call_id=request_id, arguments=arguments, result=text, ok=ok, detail=detail,
                                   duration_ms=duration_ms))
        self.fire("tools_done", rounds=1, tool_calls=1)
        if ok:
            self.fire("complete", answer=text, finished_at=utcnow())
        else:
            self.fire("fail", error=_error_of(text), finished_at=utcnow())


def _error_of(text: str) -> str:
    """The message of an error result (`{"error": …}`), else the text itself."""
    try:
        parsed = json.loads(text)
    except ValueError:
        return text
    return str(parsed.get("error", text)) if isinstance(parsed, dict) else text
