"""The editor's parameter form, generated from a node type's JSON Schema (pure Python, no Reflex).

`fields_of` turns the schema and the node's parameters into rows the page renders; `parse_value`
turns what a person typed back into the value stored in the graph, or says what is wrong.
"""

from __future__ import annotations

import json
import re
from typing import Any, TypedDict

LONG_TEXT_NAMES = {"prompt", "systemPrompt", "code", "message", "text", "body", "question", "content", "query"}
EXPRESSION = re.compile(r"\{\{.*\}\}", re.S)


class ParamField(TypedDict):
    name: str
    title: str
    kind: str  # text · textarea · number · boolean · select · json · any
    value: str
    checked: bool
    options: list[str]
    required: bool
    description: str
    placeholder: str


def _title(name: str, schema: dict[str, Any]) -> str:
    title = schema.get("title")
    generated = name[:1].upper() + name[1:].lower()
    if not title or title == generated:
        words = re.sub(r"(?<=[a-z0-9])(?=[A-Z])", " ", name).lower()
        return words[:1].upper() + words[1:]
    return str(title)


def _resolve(schema: dict[str, Any], defs: dict[str, Any]) -> tuple[dict[str, Any], bool]:
    """The property's schema without null alternatives and $refs; and whether null is allowed."""
    nullable = False
    options = schema.get("anyOf") or schema.get("oneOf")
    if options:
        rest = [o for o in options if o.get("type") != "null"]
        nullable = len(rest) < len(options)
        if len(rest) == 1:
            schema = {**{k: v for k, v in schema.items() if k not in ("anyOf", "oneOf")}, **rest[0]}
    ref = schema.get("$ref")
    if isinstance(ref, str) and ref.startswith("#/$defs/"):
        schema = {**defs.get(ref.rsplit("/", 1)[-1], {}), **{k: v for k, v in schema.items() if k != "$ref"}}
    return schema, nullable


def kind_of(name: str, schema: dict[str, Any]) -> str:
    if "enum" in schema:
        return "select"
    kind = schema.get("type")
    if kind == "string":
        long = name in LONG_TEXT_NAMES or (schema.get("maxLength") or 0) > 300 or schema.get("format") == "textarea"
        return "textarea" if long else "text"
    if kind in ("integer", "number"):
        return "number"
    if kind == "boolean":
        return "boolean"
    if kind in ("object", "array") or "anyOf" in schema or "properties" in schema:
        return "json"
    return "any"


def shown_value(kind: str, value: Any) -> str:
    """The text a field shows for a stored value."""
    if value is None:
        return ""
    if kind == "json" or (kind == "any" and not isinstance(value, str)):
        return json.dumps(value, ensure_ascii=False, indent=2 if kind == "json" else None)
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def fields_of(schema: dict[str, Any], parameters: dict[str, Any] | None) -> list[ParamField]:
    """One row per schema property, in the schema's order, showing the node's current value."""
    parameters = parameters if isinstance(parameters, dict) else {}
    defs = schema.get("$defs", {})
    required = set(schema.get("required", []))
    rows: list[ParamField] = []
    for name, raw in (schema.get("properties") or {}).items():
        resolved, _nullable = _resolve(raw, defs)
        kind = kind_of(name, resolved)
        value = parameters.get(name)
        default = resolved.get("default", raw.get("default"))
        if kind == "select":
            options = [str(o) for o in resolved["enum"]]
            value = value if value is not None else default
        else:
            options = []
        placeholder = "" if default in (None, [], {}) else f"default: {shown_value(kind, default)}"
        if kind == "json" and not placeholder:
            placeholder = "JSON, e.g. " + ('{"role": "graphicalEditor-admin"}' if name == "assignee" else "[]")
        rows.append(ParamField(
            name=name, title=_title(name, raw), kind=kind, value=shown_value(kind, value),
            checked=bool(value if value is not None else default), options=options, required=name in required,
            description=str(resolved.get("description") or raw.get("description") or ""), placeholder=placeholder,
        ))
    return rows


def parse_value(kind: str, text: str) -> tuple[Any, str]:
    """(stored value, "") or (None, what is wrong). An empty field is stored as absent (None).

    A `{{ … }}` expression is accepted in any field: it is checked by validate, evaluated at run time.
    """
    stripped = text.strip()
    if stripped == "":
        return None, ""
    if EXPRESSION.fullmatch(stripped):
        return stripped, ""
    if kind == "number":
        try:
            return (int(stripped) if re.fullmatch(r"[+-]?\d+", stripped) else float(stripped)), ""
        except ValueError:
            return None, f"'{stripped}' is not a number (or a {{{{ … }}}} expression)"
    if kind == "boolean":
        if stripped.lower() in ("true", "false"):
            return stripped.lower() == "true", ""
        return None, "must be true or false"
    if kind == "json":
        try:
            return json.loads(stripped), ""
        except json.JSONDecodeError as exc:
            return None, f"not valid JSON: {exc.msg} at line {exc.lineno}, column {exc.colno}"
    if kind == "any":
        try:
            return json.loads(stripped), ""
        except json.JSONDecodeError:
            return text, ""
    return text, ""
