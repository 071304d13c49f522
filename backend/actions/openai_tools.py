"""Actions as OpenAI tool definitions (strict function calling) and tool calls back to actions."""

from __future__ import annotations

import copy
import functools
import hashlib
import json
import re
from typing import Any

from backend.actions.base import Action, ActionContext, ActionResult
from backend.actions.executor import execute_action
from backend.actions.registry import ActionRegistry, get_registry
from backend.actions.toolboxes import MCP_TOOLBOX_PREFIX

TOOL_NAME = re.compile(r"^[a-zA-Z0-9_-]{1,64}$")
TOOL_RESULT_LIMIT = 12_000
# Keywords strict mode does not accept; their meaning is kept in the description where useful.
_UNSUPPORTED = ("default", "title", "format", "minLength", "maxLength", "minimum", "maximum",
                "exclusiveMinimum", "exclusiveMaximum", "pattern", "minItems", "maxItems", "examples")


def tool_name(action_id: str) -> str:
    """`outlook.readEmails` → `outlook_readEmails` (OpenAI allows ^[a-zA-Z0-9_-]{1,64}$).

    A tool of an external MCP server, `mcp:<server>.<tool>`, becomes `mcp_<server>_<tool>` (server
    names have no `_`); a tool name with other characters, or one too long, keeps what fits and
    ends in a hash of the action id, so that distinct tools keep distinct names.
    """
    if action_id.startswith(MCP_TOOLBOX_PREFIX):
        return _mcp_tool_name(action_id)
    name = action_id.replace(".", "_")
    if not TOOL_NAME.match(name):
        raise ValueError(f"action id '{action_id}' cannot be a tool name (got '{name}')")
    return name


def _mcp_tool_name(action_id: str) -> str:
    server, _, tool = action_id[len(MCP_TOOLBOX_PREFIX):].partition(".")
    wanted = f"mcp_{server}_{tool}"
    name = re.sub(r"[^a-zA-Z0-9_-]", "_", wanted)
    if name == wanted and len(name) <= 64:
        return name
    return f"{name[:55]}_{hashlib.sha256(action_id.encode()).hexdigest()[:8]}"


def _inline_refs(schema: dict[str, Any]) -> dict[str, Any]:
    definitions = schema.pop("$defs", {})

    def resolve(node: Any) -> Any:
        if isinstance(node, dict):
            if "$ref" in node:
                target = definitions[node["$ref"].rsplit("/", 1)[-1]]
                return resolve(copy.deepcopy(target))
            return {k: resolve(v) for k, v in node.items()}
        if isinstance(node, list):
            return [resolve(v) for v in node]
        return node

    return resolve(schema)


def _strict(node: Any) -> Any:
    """Make a JSON Schema acceptable to strict mode: every property required, optional ones
    nullable, no additional properties, no unsupported keywords."""
    if isinstance(node, list):
        return [_strict(v) for v in node]
    if not isinstance(node, dict):
        return node
    # Keywords are dropped from schemas, never from the `properties` map, whose keys are names.
    # Extensions ("x-options": the editor's pickers) mean nothing to a model.
    node = {k: (_strict(v) if k != "properties" else {name: _strict(p) for name, p in v.items()})
            for k, v in node.items() if k not in _UNSUPPORTED and not k.startswith("x-")}
    if node.get("type") == "object" or "properties" in node:
        properties = node.get("properties", {})
        required = set(node.get("required", ()))
        for name, prop in properties.items():
            if name not in required and not _allows_null(prop):
                properties[name] = _nullable(prop)
            elif "anyOf" in prop:
                properties[name] = _compact_null_union(prop)
        node["type"] = "object"
        node["properties"] = properties
        node["required"] = list(properties)
        node["additionalProperties"] = False
    return node


def _allows_null(prop: dict[str, Any]) -> bool:
    kind = prop.get("type")
    return kind == "null" or (isinstance(kind, list) and "null" in kind) or any(
        p.get("type") == "null" for p in prop.get("anyOf", ()))


_SCALARS = ("string", "integer", "number", "boolean")


def _nullable(prop: dict[str, Any]) -> dict[str, Any]:
    """`prop` or null, as compactly as strict mode allows: {"type": ["integer", "null"]} for a
    scalar (every tool definition is sent every round, so its tokens count), anyOf otherwise."""
    if prop.get("type") in _SCALARS and "enum" not in prop:
        return {**prop, "type": [prop["type"], "null"]}
    if "anyOf" in prop:
        return _compact_null_union({**prop, "anyOf": [*prop["anyOf"], {"type": "null"}]})
    return {"anyOf": [prop, {"type": "null"}]}


def _compact_null_union(prop: dict[str, Any]) -> dict[str, Any]:
    """anyOf [scalar, null] (pydantic's `x: int | None`) as {"type": [scalar, "null"]}."""
    options = prop["anyOf"]
    others = [o for o in options if o != {"type": "null"}]
    if len(options) == 2 and len(others) == 1 and others[0].get("type") in _SCALARS and "enum" not in others[0]:
        merged = {k: v for k, v in prop.items() if k != "anyOf"}
        return {**others[0], **merged, "type": [others[0]["type"], "null"]}
    return prop


def strict_parameters(action: Action) -> dict[str, Any]:
    """The action's parameter schema in the form strict function calling accepts."""
    return _strict(_inline_refs(action.parameters_schema()))


def to_tool_definition(action: Action) -> dict[str, Any]:
    """The Chat Completions `tools` entry of an action (a fresh copy; building it is cached)."""
    return copy.deepcopy(_tool_definition(action))


@functools.cache
def _tool_definition(action: Action) -> dict[str, Any]:
    # Actions are immutable and their schemas fixed; an agent asks for the same ones every round.
    return {
        "type": "function",
        "function": {
            "name": tool_name(action.id),
            "description": action.description,
            "parameters": strict_parameters(action),
            "strict": True,
        },
    }


def action_for_tool(name: str, registry: ActionRegistry | None = None) -> Action | None:
    """The action a tool name stands for (in `registry`, by default the static library)."""
    for candidate in (registry or get_registry()).actions.values():
        if tool_name(candidate.id) == name:
            return candidate
    return None


def execute_tool_call(name: str, arguments: str | dict[str, Any] | None, context: ActionContext,
                      registry: ActionRegistry | None = None) -> ActionResult:
    """Run the action behind a tool call (in `registry`, by default the static library);
    strict mode's explicit nulls mean "not given"."""
    found = action_for_tool(name, registry)
    if found is None:
        return ActionResult(name, False, error=f"unknown tool '{name}'", error_kind="unknown")
    try:
        parsed = json.loads(arguments) if isinstance(arguments, str) else dict(arguments or {})
    except json.JSONDecodeError as exc:
        return ActionResult(found.id, False, error=f"tool arguments are not valid JSON: {exc}", error_kind="invalid")
    if not isinstance(parsed, dict):
        return ActionResult(found.id, False, error="tool arguments must be a JSON object", error_kind="invalid")
    given = {k: v for k, v in parsed.items() if v is not None}
    return execute_action(found.id, given, context, registry)


def truncate_for_agent(text: str, limit: int = TOOL_RESULT_LIMIT) -> str:
    """Cut a tool result for the LLM, saying visibly that and how much was cut."""
    if len(text) <= limit:
        return text
    note = f"\n\n[… result cut: {len(text) - limit:,} of {len(text):,} characters omitted]"
    return text[: max(0, limit - len(note))] + note


def result_for_agent(result: ActionResult) -> str:
    """The text an agent sees for a tool result, at most TOOL_RESULT_LIMIT characters."""
    if result.ok:
        body = result.output if isinstance(result.output, str) else json.dumps(result.output, ensure_ascii=False)
    else:
        body = json.dumps({"error": result.error}, ensure_ascii=False)
    return truncate_for_agent(body)
