"""Choices for a node's parameter, fed by the connector (a ClickUp list, a Jira project …).

A parameter declares where its choices come from in its JSON Schema (pydantic
``json_schema_extra``)::

    "x-options": {"action": "clickup.listLists", "items": "lists", "value": "id", "label": "name",
                  "args": {"spaceId": "spaceId"}}

`action` is a listing action of the same toolbox; it runs with the node's `connectionId` and the
`args` taken from the node's other parameters (listing parameter → node parameter), as the user, in
the instance, through the same door as any direct action run (InstanceActions: rights, the
connection's owner or sharing, rate limits). `items` names the list in its output; `value` and
`label` the keys of each item.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from backend.actions.executor import InstanceActions
from backend.workflows.expression_syntax import looks_templated

OPTIONS_KEY = "x-options"
CONNECTION_FIELD = "connectionId"
MOST = 500


@dataclass(frozen=True)
class Choice:
    value: str
    label: str


@dataclass(frozen=True)
class Choices:
    """The choices found, or why there are none (`problem`, in words for the panel)."""

    items: tuple[Choice, ...] = ()
    problem: str = ""


def option_sources(schema: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """{parameter: its x-options} of a node type's parameter schema."""
    found = {}
    for name, prop in (schema.get("properties") or {}).items():
        source = prop.get(OPTIONS_KEY) if isinstance(prop, dict) else None
        if isinstance(source, dict) and isinstance(source.get("action"), str):
            found[name] = source
    return found


def _title(name: str) -> str:
    return "".join(" " + c.lower() if c.isupper() else c for c in name).strip()


def field_choices(actions: InstanceActions, schema: dict[str, Any], field: str, parameters: dict[str, Any]
                  ) -> Choices:
    """The choices of parameter `field` of a node whose parameters schema is `schema`.

    Args:
        actions: The user's door to run actions in the node's instance.
        parameters: The node's current parameters (the connection and what narrows the listing).
    """
    source = option_sources(schema).get(field)
    if source is None:
        return Choices(problem=f"{_title(field)} offers no choices")
    call: dict[str, Any] = {}
    needed = {CONNECTION_FIELD: CONNECTION_FIELD, **(source.get("args") or {})}
    for listing_param, node_param in needed.items():
        value = parameters.get(node_param)
        if looks_templated(value) or (node_param == CONNECTION_FIELD and value in (None, "")):
            return Choices(problem=f"choose the {_title(node_param)} first (not an expression)")
        if value not in (None, ""):  # an empty narrowing lists everything (e.g. the lists of every space)
            call[listing_param] = value
    result = actions.run(source["action"], call)
    if not result.ok:
        return Choices(problem=result.error or "the listing failed")
    items = (result.output or {}).get(source.get("items") or "items") if isinstance(result.output, dict) else None
    value_key, label_key = source.get("value") or "id", source.get("label") or "name"
    choices = [Choice(str(item.get(value_key)), str(item.get(label_key) or item.get(value_key)))
               for item in (items or [])[:MOST] if isinstance(item, dict) and item.get(value_key) not in (None, "")]
    if not choices:
        return Choices(problem="nothing to choose from")
    return Choices(items=tuple(choices))
