"""What an action is, the context it runs in, and how it reports success or failure."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from pydantic import BaseModel, ConfigDict
from pydantic.alias_generators import to_camel
from sqlmodel import Session

from backend.db.models import User
from backend.rbac.access import AccessContext

CAPABILITIES = frozenset({"read", "write", "externalSend", "codeExec"})
# What calling an action does that a person may want to approve first in agent runs (issue 21):
# send (a message leaves for people: mail), write (data of this platform changes), delete (data
# is removed), external (data in an outside system changes).
CONSEQUENCES = ("send", "write", "delete", "external")


def derived_consequences(capabilities: frozenset[str] | tuple[str, ...]) -> frozenset[str]:
    """The consequences an action has by its capabilities when it declares none: write → write,
    externalSend → external."""
    found = set()
    if "write" in capabilities:
        found.add("write")
    if "externalSend" in capabilities:
        found.add("external")
    return frozenset(found)


class ActionError(Exception):
    """A failure an action reports to its caller in plain words (no traceback)."""


class ActionParams(BaseModel):
    """Base of action parameters: snake_case in Python, camelCase in JSON and tool calls."""

    model_config = ConfigDict(extra="forbid", alias_generator=to_camel, populate_by_name=True)


class NoParameters(ActionParams):
    """Parameters of an action that takes none."""


@dataclass(frozen=True)
class Action:
    """One capability of the library.

    Attributes:
        id: `method.action`-style id (e.g. `core.readFile`, `outlook.readEmails`).
        toolbox: id of the toolbox it belongs to.
        label: short human name.
        description: one or two sentences for people and for the LLM.
        params_model: pydantic model of the parameters (its JSON Schema is published).
        output_model: pydantic model of the result, or None for free-form JSON.
        fn: `fn(params, context) -> output`.
        agent_tool: offered to agents (the spec's dynamicMode).
        graph_node: offered as a node type in the editor palette.
        capabilities: read, write, externalSend, codeExec.
        consequences: what calling it does that may need a person's approval in agent runs
            (CONSEQUENCES: send, write, delete, external); derived from `capabilities` unless
            declared (:func:`derived_consequences`).
        connection_type: the kind of connection it needs (e.g. "msft"), if any; for an action
            that works with several kinds, the first of `connection_types`.
        connection_types: every kind of connection it works with (e.g. ("imap", "msft") for
            email.sendMail); empty: it needs none. It is offered to agents only with an active
            connection of one of them (:meth:`usable_with`).
        cost_chf: typical cost of one call, if known.
        instance_table: a DATA table the calling feature instance must have for the action to
            work there (e.g. "file": the instance's file store); agents are offered it only in
            instances of features that have it.
        raw_parameters: parameters with a `{{ }}` language of their own (templates): as a graph
            node, they reach the action as written, not evaluated as workflow expressions.
        needs: what it needs beyond the embedded default installation, as ids of
            backend/workflows/requirements.py (e.g. "ai": an AI provider; "webSearch").
        input_schema_json: for an action known only at run time (a tool of an external MCP
            server, a workflow exposed as a tool): its parameters' JSON Schema as canonical JSON
            text. When set, `params_model` is not used: the parameters are checked against this
            schema (jsonschema) and reach `fn` as a dict.
    """

    id: str
    toolbox: str
    label: str
    description: str
    params_model: type[BaseModel]
    fn: Callable[[Any, ActionContext], Any]
    output_model: type[BaseModel] | None = None
    agent_tool: bool = True
    graph_node: bool = False
    capabilities: frozenset[str] = frozenset({"read"})
    connection_type: str | None = None
    cost_chf: float | None = None
    instance_table: str | None = None
    raw_parameters: frozenset[str] = frozenset()
    needs: tuple[str, ...] = ()
    connection_types: tuple[str, ...] = ()
    input_schema_json: str | None = None
    consequences: frozenset[str] | None = None

    def __post_init__(self) -> None:
        if self.connection_type and not self.connection_types:
            object.__setattr__(self, "connection_types", (self.connection_type,))
        if self.consequences is None:
            object.__setattr__(self, "consequences", derived_consequences(self.capabilities))

    def usable_with(self, active_types: set[str] | frozenset[str]) -> bool:
        """Whether a user holding active connections of `active_types` can use it (spec §5.3)."""
        return not self.connection_types or any(t in active_types for t in self.connection_types)

    @property
    def resource_item(self) -> str:
        """The RESOURCE item that allows calling it; `resource.toolbox.<toolbox>.*` allows the box."""
        return f"resource.toolbox.{self.toolbox}.{self.id}"

    def parameters_schema(self) -> dict[str, Any]:
        if self.input_schema_json is not None:
            return json.loads(self.input_schema_json)
        return self.params_model.model_json_schema()

    def output_schema(self) -> dict[str, Any] | None:
        return self.output_model.model_json_schema() if self.output_model else None


@dataclass
class ActionContext:
    """Who calls an action, for which mandate and feature instance, within which transaction."""

    session: Session
    user: User
    mandate_id: str
    feature_instance_id: str | None = None
    run_id: str | None = None
    node_id: str | None = None
    access: AccessContext = field(init=False)
    extras: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.access = AccessContext(self.session, self.user)


@dataclass(frozen=True)
class ActionResult:
    """The outcome of `execute_action`: output on success, a clear message on failure."""

    action_id: str
    ok: bool
    output: Any = None
    error: str | None = None
    error_kind: str | None = None

    def as_dict(self) -> dict[str, Any]:
        return {"actionId": self.action_id, "ok": self.ok, "output": self.output, "error": self.error,
                "errorKind": self.error_kind}


ACTION_ATTRIBUTE = "__poweron_action__"


def declared_action(fn: Callable) -> Action | None:
    """The Action a function was declared as, if any."""
    return getattr(fn, ACTION_ATTRIBUTE, None)


def action(
    id: str,  # noqa: A002 - the spec's name for it
    *,
    toolbox: str,
    label: str,
    description: str,
    params: type[BaseModel] = NoParameters,
    output: type[BaseModel] | None = None,
    agent_tool: bool = True,
    graph_node: bool = False,
    capabilities: tuple[str, ...] = ("read",),
    connection_type: str | None = None,
    cost_chf: float | None = None,
    instance_table: str | None = None,
    raw_parameters: tuple[str, ...] = (),
    needs: tuple[str, ...] = (),
    connection_types: tuple[str, ...] = (),
    consequences: tuple[str, ...] | None = None,
) -> Callable[[Callable], Callable]:
    """Declare a function `fn(params, context)` as an action of the library.

    `connection_type="msft"` for an action of one kind of connection, `connection_types=("imap",
    "msft")` for one that works with any of several. `consequences` (of CONSEQUENCES) when they are
    not what the capabilities imply, e.g. ("send",) for sending mail, ("delete",) for deleting.
    """
    unknown = set(capabilities) - CAPABILITIES
    if unknown:
        raise ValueError(f"action {id}: unknown capabilities {sorted(unknown)}")
    if consequences is not None and set(consequences) - set(CONSEQUENCES):
        raise ValueError(f"action {id}: unknown consequences {sorted(set(consequences) - set(CONSEQUENCES))}")
    if connection_type and connection_types and connection_types[0] != connection_type:
        raise ValueError(f"action {id}: connection_type must be the first of connection_types")
    kinds = tuple(connection_types) or ((connection_type,) if connection_type else ())

    def register(fn: Callable) -> Callable:
        # The registry finds the declaration on the function when it scans the module.
        setattr(fn, ACTION_ATTRIBUTE, Action(
            id=id, toolbox=toolbox, label=label, description=description, params_model=params,
            output_model=output, fn=fn, agent_tool=agent_tool, graph_node=graph_node,
            capabilities=frozenset(capabilities), connection_type=kinds[0] if kinds else None, cost_chf=cost_chf,
            instance_table=instance_table, raw_parameters=frozenset(raw_parameters), needs=tuple(needs),
            connection_types=kinds, consequences=None if consequences is None else frozenset(consequences),
        ))
        return fn

    return register
