"""The built-in node types of DESIGN §4 and the palette: built-ins plus every node action.

A node type names its parameters (a pydantic model, published as JSON Schema) and its
output handles. Handles that depend on parameters (switch cases, ai.decide options) are
declared as `dynamic_handles` naming the parameter they come from.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator
from pydantic.alias_generators import to_camel

from backend.actions.registry import get_registry
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
                                                 "webhook accepts no call")

    @field_validator("secret")
    @classmethod
    def _usable_secret(cls, value: str | None) -> str | None:
        # Read when a call arrives, before any run exists: written out, a key Standard Webhooks can
        # use. The value is never repeated in the message.
        if value is not None:
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
    """Who may complete a human task: a user id or a role label (DESIGN §4, input.*)."""

    model_config = ConfigDict(extra="forbid")

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


def switch_case_handle(case: Any) -> str | None:
    """The handle of one flow.switch case: its `handle`, else its value as text (JSON for non-strings)."""
    if not isinstance(case, dict):
        return None
    if case.get("handle") is not None:
        return str(case["handle"])
    value = case.get("value")
    return value if isinstance(value, str) else json.dumps(value, separators=(",", ":"))


@dataclass(frozen=True)
class NodeType:
    """One entry of the palette."""

    type: str
    label: str
    category: str
    description: str
    params_model: type[BaseModel]
    handles: tuple[str, ...] = ("out",)
    dynamic_handles: str | None = None
    is_trigger: bool = False
    toolbox: str | None = None

    def output_handles(self, parameters: Any = None, on_error: Any = None) -> list[str]:
        """The handles of a node of this type: dynamic ones first (switch cases, ai.decide options),
        then the static ones, then `error` when onError is "route"."""
        dynamic: list[str] = []
        values = parameters.get(self.dynamic_handles) if self.dynamic_handles and isinstance(parameters, dict) else None
        if isinstance(values, list):
            if self.dynamic_handles == "cases":
                dynamic = [h for h in (switch_case_handle(case) for case in values) if h is not None]
            else:
                dynamic = [str(option) for option in values]
        handles = [*dynamic, *self.handles]
        if on_error == "route":
            handles.append(ERROR_HANDLE)
        return handles

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


BUILTIN_NODE_TYPES: tuple[NodeType, ...] = (
    NodeType("trigger.manual", "Manual start", "trigger", "Started by a person or the API", NoParams,
             is_trigger=True),
    NodeType("trigger.schedule", "Schedule", "trigger", "Runs on a cron schedule or at an interval",
             ScheduleParams, is_trigger=True),
    NodeType("trigger.webhook", "Webhook", "trigger", "Runs when a signed HTTP request arrives", WebhookParams,
             is_trigger=True),
    NodeType("trigger.form", "Form", "trigger", "Runs when someone submits a form", FormTriggerParams,
             is_trigger=True),
    NodeType("trigger.event", "Event", "trigger", "Runs when a platform event occurs", EventParams, is_trigger=True),
    NodeType("flow.ifElse", "If / else", "flow", "Branches on a condition", IfElseParams, ("true", "false")),
    NodeType("flow.switch", "Switch", "flow", "Branches on a value: one handle per case, plus default",
             SwitchParams, ("default",), dynamic_handles="cases"),
    NodeType("flow.loop", "Loop", "flow", "Runs its body once per item, then continues at done", LoopParams,
             ("each", "done")),
    NodeType("flow.merge", "Merge", "flow", "Waits for every branch that is still live", NoParams),
    NodeType("flow.wait", "Wait", "flow", "Pauses for a time or until a moment (survives restarts)", WaitParams),
    NodeType("flow.stop", "Stop", "flow", "Ends the run with a status", StopParams, ()),
    NodeType("input.form", "Form task", "human", "Asks a person to fill in a form", InputFormParams),
    NodeType("input.approval", "Approval", "human", "Asks a person to approve or reject", ApprovalParams,
             ("approved", "rejected")),
    NodeType("email.checkEmail", "Wait for e-mail", "email", "Pauses until a matching e-mail arrives",
             CheckEmailParams),
    NodeType("ai.prompt", "AI prompt", "ai", "Asks the AI model and returns its answer", PromptParams),
    NodeType("ai.decide", "AI decision", "ai", "Lets the AI pick one of the options: one handle per option",
             DecideParams, (), dynamic_handles="options"),
    NodeType("script.python", "Python script", "code", "Runs Python code in a sandbox", PythonParams),
)


def palette() -> list[NodeType]:
    """Every node type a graph may use: the built-ins and each action marked as node."""
    from_actions = [
        NodeType(a.id, a.label, a.toolbox, a.description, a.params_model, toolbox=a.toolbox)
        for a in get_registry().graph_nodes()
    ]
    builtin_ids = {n.type for n in BUILTIN_NODE_TYPES}
    clash = [n.type for n in from_actions if n.type in builtin_ids]
    if clash:
        raise ValueError(f"actions may not reuse built-in node types: {clash}")
    return [*BUILTIN_NODE_TYPES, *from_actions]


def node_type(type_id: str) -> NodeType | None:
    return next((n for n in palette() if n.type == type_id), None)
