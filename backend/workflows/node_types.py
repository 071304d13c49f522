"""The one registry of node types: the built-ins of DESIGN §4 and every action marked as node.

A :class:`NodeType` holds every fact about its type: its parameters (a pydantic model, published
as JSON Schema), its output handles (static ones, and dynamic ones taken from a parameter:
switch cases, ai.decide options; onError "route" adds `error`), the engine function that runs
it (backend/engine/nodes.py), the parameters the engine hands over unevaluated, how it behaves
(trigger, loop, merge, human step, concurrent) and its palette group, label and description.
The engine, validation, suggestions, the editor and the agent read these entries; no other
module keeps a table of node types.
"""

from __future__ import annotations

import functools
import importlib
import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator
from pydantic.alias_generators import to_camel

from backend.actions.base import Action
from backend.actions.catalogue import current_registry
from backend.scheduler.cron import parse_cron, parse_timezone
from backend.workflows.expression_syntax import looks_templated


class _Params(BaseModel):
    """Node parameters: snake_case in Python, camelCase in the graph JSON (DESIGN §4)."""

    model_config = ConfigDict(extra="forbid", alias_generator=to_camel, populate_by_name=True)


class NoParams(_Params):
    pass


class ScheduleParams(_Params):
    cron: str | None = Field(None, description="5 cron fields (minute hour day-of-month month day-of-week; "
                                               "0 and 7 = Sunday) or 6 with seconds first")
    interval_seconds: int | None = Field(None, ge=1)
    timezone: str = Field("UTC", description="IANA time zone, e.g. Europe/Zurich")

    # Strict checks of backend/scheduler/cron.py (expressions are refused by validation.py:
    # the scheduler reads the schedule when the workflow is published, before any run exists).
    @field_validator("cron")
    @classmethod
    def _strict_cron(cls, value: str | None) -> str | None:
        if value is not None and not looks_templated(value):
            parse_cron(value)
        return value

    @field_validator("timezone")
    @classmethod
    def _known_timezone(cls, value: str) -> str:
        if not looks_templated(value):
            parse_timezone(value)
        return value

    @model_validator(mode="after")
    def _cron_or_interval(self) -> ScheduleParams:
        if (self.cron is None) == (self.interval_seconds is None):
            raise ValueError("give exactly one of cron and intervalSeconds")
        return self


class WebhookParams(_Params):
    path: str = Field(..., min_length=1)
    method: Literal["GET", "POST", "PUT", "PATCH", "DELETE"] = "POST"
    secret: str | None = Field(None, description="whsec_<base64> Standard Webhooks secret; without one the "
                                                 "webhook accepts no call",
                               json_schema_extra={"format": "password", "writeOnly": True})

    @field_validator("secret")
    @classmethod
    def _usable_secret(cls, value: str | None) -> str | None:
        # Read when a call arrives, before any run exists: written out, a key Standard Webhooks can
        # use. The value is never repeated in the message. The mask stands for the stored secret
        # (checked when it was stored; backend/triggers/secrets.py).
        if value is not None and value != "********":
            from standardwebhooks.webhooks import Webhook

            from backend.crypto import unseal  # stored graphs hold the secret sealed

            try:
                Webhook(unseal(value))
            except Exception:  # noqa: BLE001 - bad base64, empty key
                raise ValueError("must be a Standard Webhooks secret: whsec_ followed by base64") from None
        return value


class FormField(BaseModel):
    name: str = Field(..., min_length=1)
    label: str | None = None
    type: Literal["text", "number", "boolean", "date", "select", "textarea", "file"] = "text"
    required: bool = False
    options: list[str] | None = None
    default: Any = None


class FormTriggerParams(_Params):
    fields: list[FormField] = []


class EventParams(_Params):
    event_type: str = Field(..., min_length=1)
    filter: dict[str, Any] | str | None = None


class IfElseParams(_Params):
    condition: Any = Field(..., description="expression, e.g. {{ input.amount > 1000 }}")


class SwitchCase(BaseModel):
    value: Any
    handle: str | None = None


class SwitchParams(_Params):
    value: Any
    cases: list[SwitchCase] = []


class LoopParams(_Params):
    items: Any = Field(..., description="expression yielding a list")


class WaitParams(_Params):
    seconds: float | None = Field(None, ge=0)
    until: str | None = Field(None, description="ISO date-time or expression")

    @model_validator(mode="after")
    def _seconds_or_until(self) -> WaitParams:
        if (self.seconds is None) == (self.until is None):
            raise ValueError("give exactly one of seconds and until")
        return self


class StopParams(_Params):
    status: Literal["completed", "failed", "cancelled"] = "completed"
    message: str | None = None


class Assignee(BaseModel):
    """Who may complete the task: one user, or everyone holding a role (none: anyone who may update tasks)."""

    model_config = ConfigDict(extra="forbid", json_schema_extra={"x-picker": "assignee"})

    user: str | None = None
    role: str | None = None

    @model_validator(mode="after")
    def _user_or_role(self) -> Assignee:
        if not self.user and not self.role:
            raise ValueError("give a user or a role")
        return self


class InputFormParams(_Params):
    title: str
    fields: list[FormField] = []
    assignee: Assignee | None = None
    timeout_seconds: int | None = Field(None, ge=1)
    on_timeout: Literal["cancel", "default"] = "cancel"


class ApprovalParams(_Params):
    title: str
    message: str | None = None
    assignee: Assignee | None = None
    timeout_seconds: int | None = Field(None, ge=1)
    on_timeout: Literal["cancel", "default"] = "cancel"


class CheckEmailParams(_Params):
    connection_id: str
    folder: str = "Inbox"
    filter: dict[str, Any] | str | None = None


class PromptParams(_Params):
    prompt: str
    system_prompt: str | None = None
    model: str | None = None
    response_format: Literal["text", "json"] = "text"


class DecideParams(_Params):
    question: str
    options: list[str] = Field(..., min_length=2)


class PythonParams(_Params):
    code: str
    timeout_seconds: int = Field(10, ge=1, le=300)


class RetryPolicy(BaseModel):
    """A node's `retry` (DESIGN §4): attempts in all, and the pause between them."""

    model_config = ConfigDict(extra="forbid", alias_generator=to_camel, populate_by_name=True)

    max_attempts: int = Field(1, ge=1, description="attempts in all, the first one included")
    backoff: Literal["fixed", "exponential"] = "fixed"
    delay_seconds: float = Field(0, ge=0, description="pause before the second attempt; doubles when exponential")


ON_ERROR = ("fail", "continue", "route")
ERROR_HANDLE = "error"
DEFAULT_HANDLE = "out"
# The module whose functions run the nodes; a NodeType names its handler there (see NodeType.handler).
HANDLER_MODULE = "backend.engine.nodes"
ACTION_HANDLER = "run_action"
# Palette group of each category of built-ins; node actions are grouped by toolbox.
CATEGORY_GROUPS = {"trigger": "Triggers", "flow": "Flow", "human": "People", "ai": "AI", "code": "Code",
                   "email": "E-mail"}


def switch_case_handle(case: Any) -> str | None:
    """The handle of one flow.switch case: its `handle`, else its value as text (JSON for non-strings)."""
    if not isinstance(case, dict):
        return None
    if case.get("handle") is not None:
        return str(case["handle"])
    value = case.get("value")
    return value if isinstance(value, str) else json.dumps(value, separators=(",", ":"))


@dataclass(frozen=True)
class DynamicHandles:
    """Output handles a node takes from one of its parameters, one per item of a written-out list.

    Attributes:
        parameter: The parameter holding the list (e.g. "cases").
        item: What one item is called in messages (e.g. "case").
        handle_of: The handle of one item, or None when the item names none.
    """

    parameter: str
    item: str
    handle_of: Callable[[Any], str | None]

    def of(self, parameters: Any) -> list[str]:
        """The handles the node's `parameters` give (none while the list is not written out)."""
        values = parameters.get(self.parameter) if isinstance(parameters, dict) else None
        if not isinstance(values, list):
            return []
        return [handle for handle in map(self.handle_of, values) if handle is not None]


SWITCH_CASES = DynamicHandles("cases", "case", switch_case_handle)
DECIDE_OPTIONS = DynamicHandles("options", "option", str)


@functools.cache
def _handler_named(name: str) -> Callable[..., Any]:
    # Imported when first used: the engine imports this module, not the other way round.
    return getattr(importlib.import_module(HANDLER_MODULE), name)


@dataclass(frozen=True)
class NodeType:
    """One node type: everything the engine, validation, the editor and the agent know about it.

    Attributes:
        type: The type id of the graph JSON (e.g. "flow.loop", or an action id).
        label: Short name in the palette.
        category: Kind of node (trigger, flow, human, …; a node action's toolbox).
        description: One sentence for the palette and the agent.
        params_model: Pydantic model of the parameters (published as JSON Schema).
        handles: Static output handles.
        dynamic: Handles taken from a parameter (switch cases, ai.decide options), before the static ones.
        handler_name: The function of HANDLER_MODULE that runs a node of this type.
        raw_parameters: Top-level parameters with a `{{ }}` language of their own (code, templates):
            handed to the handler as written, not evaluated as workflow expressions.
        run_trigger: For a trigger: the kind of run it starts (WorkflowRun.trigger: manual, webhook, …).
        is_loop: Runs the body behind its `each` handle once per item, the body returning into it, then `done`.
        waits_for_live_branches: Runs once every branch into it that is still live has arrived and
            gets their outputs (flow.merge).
        human_task: The kind of HumanTask a node of this type waits for (form, approval), if any.
        concurrent: Independent nodes of this type run at the same time (slow work: models, scripts, actions).
        literal_parameters: Parameters read before any run exists: expressions are refused.
        literal_reader: Who reads them then, for the message (e.g. "the scheduler").
        toolbox: For a node action: its toolbox.
        needs: What a node of this type needs beyond the embedded default installation: ids of
            backend/workflows/requirements.py ("ai", "webSearch", "mail", "sandbox"); a template's
            and a run's requirements are derived from them.
        new_parameters: The parameters a node of this type starts with when it is added to a graph
            (a palette drop, the agent's addNode), given the user's IANA time zone; None: empty.
            They make the new node valid where a sensible default exists (a schedule: every day
            at 08:00 in that time zone).
    """

    type: str
    label: str
    category: str
    description: str
    params_model: type[BaseModel]
    handles: tuple[str, ...] = (DEFAULT_HANDLE,)
    dynamic: DynamicHandles | None = None
    handler_name: str = ACTION_HANDLER
    raw_parameters: frozenset[str] = frozenset()
    run_trigger: str | None = None
    is_loop: bool = False
    waits_for_live_branches: bool = False
    human_task: str | None = None
    concurrent: bool = False
    literal_parameters: tuple[str, ...] = ()
    literal_reader: str = ""
    toolbox: str | None = None
    needs: tuple[str, ...] = ()
    new_parameters: Callable[[str], dict[str, Any]] | None = None

    @property
    def is_trigger(self) -> bool:
        """Whether the node starts runs (takes no incoming edge)."""
        return self.run_trigger is not None

    @property
    def is_human(self) -> bool:
        """Whether the node waits for a person (a HumanTask)."""
        return self.human_task is not None

    @property
    def handler(self) -> Callable[..., Any]:
        """The engine function that runs a node of this type (backend.engine.nodes)."""
        return _handler_named(self.handler_name)

    @property
    def dynamic_handles(self) -> str | None:
        """The parameter that gives handles (as published: `dynamicHandles`), if any."""
        return self.dynamic.parameter if self.dynamic else None

    @property
    def group(self) -> str:
        """The palette group: a toolbox for node actions, else the category's group."""
        if self.toolbox:
            return f"Toolbox: {self.toolbox}"
        return CATEGORY_GROUPS.get(self.category, self.category.capitalize())

    def output_handles(self, parameters: Any = None, on_error: Any = None) -> list[str]:
        """The handles of a node of this type: dynamic ones first (switch cases, ai.decide options),
        then the static ones, then `error` when onError is "route"."""
        dynamic = self.dynamic.of(parameters) if self.dynamic else []
        handles = [*dynamic, *self.handles]
        if on_error == "route":
            handles.append(ERROR_HANDLE)
        return handles

    def described_handles(self) -> list[str]:
        """The handles in words, for a type rather than a node: "<one per case>" for dynamic ones."""
        dynamic = [f"<one per {self.dynamic.item}>"] if self.dynamic else []
        return [*dynamic, *self.handles]

    def as_dict(self) -> dict[str, Any]:
        return {
            "type": self.type,
            "label": self.label,
            "category": self.category,
            "description": self.description,
            "toolbox": self.toolbox,
            "isTrigger": self.is_trigger,
            "parameters": self.params_model.model_json_schema(),
            "handles": list(self.handles),
            "dynamicHandles": self.dynamic_handles,
        }


def _trigger(type_id: str, label: str, description: str, params: type[BaseModel], **facts: Any) -> NodeType:
    """A trigger: it starts runs of the kind named by its type (trigger.webhook → webhook)."""
    return NodeType(type_id, label, "trigger", description, params, handler_name="trigger",
                    run_trigger=type_id.removeprefix("trigger."), **facts)


def _human(type_id: str, label: str, description: str, params: type[BaseModel], task: str,
           handles: tuple[str, ...], **facts: Any) -> NodeType:
    """A step that waits for a person: the handler creates a HumanTask of kind `task`."""
    return NodeType(type_id, label, "human", description, params, handles, handler_name="human_task",
                    human_task=task, **facts)


def _daily_at_eight(time_zone: str) -> dict[str, Any]:
    """A new schedule: every day at 08:00 in the user's time zone."""
    return {"cron": "0 8 * * *", "timezone": time_zone}


def _one_minute(_time_zone: str) -> dict[str, Any]:
    """A new wait: one minute."""
    return {"seconds": 60}


def _incoming_webhook(_time_zone: str) -> dict[str, Any]:
    """A new webhook: POST on the path "incoming" (its secret is set or generated in the panel)."""
    return {"path": "incoming", "method": "POST"}


def _titled(title: str) -> Callable[[str], dict[str, Any]]:
    """A new human step with a title a person can replace."""
    return lambda _time_zone: {"title": title}


def _script_skeleton(_time_zone: str) -> dict[str, Any]:
    """A new script: main(input) returning what the next nodes see as its output."""
    return {"code": "def main(input):\n    # input['input'] is the run input, input['nodes'][<id>] earlier outputs\n"
                    "    return {\"result\": input['input']}\n"}


BUILTIN_NODE_TYPES: tuple[NodeType, ...] = (
    _trigger("trigger.manual", "Manual start", "Started by a person or the API", NoParams),
    _trigger("trigger.schedule", "Schedule", "Runs on a cron schedule or at an interval", ScheduleParams,
             literal_parameters=("cron", "intervalSeconds", "timezone"), literal_reader="the scheduler",
             new_parameters=_daily_at_eight),
    _trigger("trigger.webhook", "Webhook", "Runs when a signed HTTP request arrives", WebhookParams,
             new_parameters=_incoming_webhook),
    _trigger("trigger.form", "Form", "Runs when someone submits a form", FormTriggerParams),
    _trigger("trigger.event", "Event", "Runs when a platform event occurs", EventParams),
    NodeType("flow.ifElse", "If / else", "flow", "Branches on a condition", IfElseParams, ("true", "false"),
             handler_name="if_else"),
    NodeType("flow.switch", "Switch", "flow", "Branches on a value: one handle per case, plus default",
             SwitchParams, ("default",), dynamic=SWITCH_CASES, handler_name="switch"),
    NodeType("flow.loop", "Loop", "flow", "Runs its body once per item, then continues at done", LoopParams,
             ("each", "done"), handler_name="loop", is_loop=True),
    NodeType("flow.merge", "Merge", "flow", "Waits for every branch that is still live", NoParams,
             handler_name="merge", waits_for_live_branches=True),
    NodeType("flow.wait", "Wait", "flow", "Pauses for a time or until a moment (survives restarts)", WaitParams,
             handler_name="wait", new_parameters=_one_minute),
    NodeType("flow.stop", "Stop", "flow", "Ends the run with a status", StopParams, (), handler_name="stop"),
    _human("input.form", "Form task", "Asks a person to fill in a form", InputFormParams, "form",
           (DEFAULT_HANDLE,), new_parameters=_titled("Please fill in this form")),
    _human("input.approval", "Approval", "Asks a person to approve or reject", ApprovalParams, "approval",
           ("approved", "rejected"), new_parameters=_titled("Please approve")),
    NodeType("email.checkEmail", "Wait for e-mail", "email", "Pauses until a matching e-mail arrives",
             CheckEmailParams, handler_name="check_email", needs=("mail",)),
    NodeType("ai.prompt", "AI prompt", "ai", "Asks the AI model and returns its answer", PromptParams,
             handler_name="ai_prompt", concurrent=True, needs=("ai",)),
    NodeType("ai.decide", "AI decision", "ai", "Lets the AI pick one of the options: one handle per option",
             DecideParams, (), dynamic=DECIDE_OPTIONS, handler_name="ai_decide", concurrent=True, needs=("ai",)),
    NodeType("script.python", "Python script", "code", "Runs Python code in a sandbox", PythonParams,
             handler_name="script_python", raw_parameters=frozenset({"code"}), concurrent=True,
             needs=("sandbox",), new_parameters=_script_skeleton),
)
# An index of the tuple above, for lookups by type id (not a second list).
_BUILTINS: dict[str, NodeType] = {n.type: n for n in BUILTIN_NODE_TYPES}


def remote_trigger_type(type_id: str, kind: Any) -> NodeType:
    """The trigger node of a connection type whose system has webhooks (backend/triggers/remote.py):
    its parameters are read when the workflow is published (the registration), so they are literal."""
    model = kind.webhooks.params_model
    names = tuple(field.alias or name for name, field in model.model_fields.items())
    return _trigger(type_id, f"{kind.label} event", f"Runs when {kind.label} reports an event (the webhook is "
                    "registered when the workflow is published)", model, literal_parameters=names,
                    literal_reader="the webhook registration on publish")


def _remote_triggers() -> tuple[NodeType, ...]:
    from backend.triggers.remote import remote_node_types

    return remote_node_types()


@functools.lru_cache(maxsize=4096)  # a mandate's MCP tools are rebuilt when its servers change
def _action_node_type(action: Action) -> NodeType:
    """The node type of an action marked as node: it runs through execute_action, concurrently."""
    return NodeType(action.id, action.label, action.toolbox, action.description, action.params_model,
                    raw_parameters=action.raw_parameters, concurrent=True, toolbox=action.toolbox,
                    needs=action.needs)


def palette() -> list[NodeType]:
    """Every node type a graph may use: the built-ins and each action marked as node (of the
    catalogue in force: with a mandate's, its MCP tools too; backend/actions/catalogue.py)."""
    from_actions = [_action_node_type(a) for a in current_registry().graph_nodes()]
    clash = [n.type for n in from_actions if n.type in _BUILTINS]
    if clash:
        raise ValueError(f"actions may not reuse built-in node types: {clash}")
    return [*BUILTIN_NODE_TYPES, *_remote_triggers(), *from_actions]


def node_type(type_id: Any) -> NodeType | None:
    """The node type of that id: a built-in, else the action of that id marked as node (in the
    catalogue in force), else None."""
    if not isinstance(type_id, str):
        return None
    found = _BUILTINS.get(type_id)
    if found is not None:
        return found
    if type_id.startswith("trigger."):
        return next((n for n in _remote_triggers() if n.type == type_id), None)
    action = current_registry().get(type_id)
    return _action_node_type(action) if action is not None and action.graph_node else None
