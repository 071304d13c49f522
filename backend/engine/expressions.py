"""Workflow expressions (DESIGN §4): `{{ … }}` in node parameters, evaluated in the sandbox of
backend.templating (shared with context.transform).

- Names: `input` (run input / trigger payload), `nodes.<id>.output` (`nodes['send-mail'].output`
  for ids that are not names), `item` and `index` inside a loop body, `run`, `workflow`, `now`
  (timezone-aware UTC datetime).
- A string that is exactly one `{{ … }}` (whitespace around allowed) yields the native value as
  plain JSON data: numbers, booleans, null, lists (also from generators such as `map`), objects;
  dates become ISO 8601 text, durations seconds.
- Any other string with `{{ … }}` is text: each expression is inserted as text as is, null as
  nothing, booleans as true/false, dates as ISO 8601, lists and objects as JSON.
- Only `{{ … }}`: no `{% … %}` statements (`{%` and `{#` stay plain text), so no loops or
  assignments — use filters and `a if cond else b`. A literal `{{` is written `{{ '{{' }}`;
  an unclosed `{{` is an error.
- Dicts and lists are walked; keys and non-string values stay as they are.
- `.name` on an object is its field first (`input.items` is the field, not a method).
- Undefined names, fields and indexes are errors that say what is missing; `x is defined`,
  `x | default(…)` and `nodes.get('id')` test for it.
- Filters: Jinja's built-ins (default, length, sum, min, max, round, lower, upper, replace, join,
  map, select, selectattr, sort, unique, first, last, …) plus tojson (plain JSON), fromjson,
  isoformat and todatetime (ISO text or timestamp → aware datetime, for comparing with now).

Errors are ExpressionError: "node 'big', parameter 'condition': {{ input.amount > }}: unexpected
end of expression". Compiled expressions are cached; one evaluate_parameters call has one budget
from backend.templating (no value built above 1,000,000 characters or items — values merely passed
through, such as a large node output, are not limited; 10,000,000 built in all; 1 s).

`raw` leaves named top-level parameters alone (a script's code, a context.transform template);
check_parameters finds syntax errors without evaluating, for graph validation.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
from collections.abc import Collection, Mapping
from typing import Any

from jinja2.runtime import missing

from backend.templating import (
    EXPRESSION_LIMITS,
    Limits,
    MissingValue,
    TemplatingError,
    compile_text,
    describe_missing,
    limited,
    locate,
)

__all__ = ["ExpressionError", "ExpressionScope", "evaluate_parameters", "check_parameters"]

_NOT_IN_LOOP: Any = object()
_MAX_SHOWN = 200


def _utc_now() -> dt.datetime:
    return dt.datetime.now(dt.UTC)


@dataclasses.dataclass(frozen=True, slots=True)
class ExpressionScope:
    """What expressions of one step may read. `nodes` maps node id → {"output": …} for the nodes
    that have run; `run` (id, startedAt, …) and `workflow` (id, name, …) are plain mappings."""

    input: Any = None
    nodes: Mapping[str, Mapping[str, Any]] = dataclasses.field(default_factory=dict)
    run: Mapping[str, Any] = dataclasses.field(default_factory=dict)
    workflow: Mapping[str, Any] = dataclasses.field(default_factory=dict)
    now: dt.datetime = dataclasses.field(default_factory=_utc_now)
    item: Any = _NOT_IN_LOOP
    index: int | None = None

    @property
    def in_loop(self) -> bool:
        return self.item is not _NOT_IN_LOOP

    def loop(self, item: Any, index: int) -> ExpressionScope:
        """The scope of one loop-body iteration."""
        return dataclasses.replace(self, item=item, index=index)

    def names(self) -> dict[str, Any]:
        names = {"input": self.input, "nodes": self.nodes, "run": self.run, "workflow": self.workflow,
                 "now": self.now}
        if self.in_loop:
            names["item"] = self.item
            names["index"] = self.index
        return names


class ExpressionError(ValueError):
    """An expression in a node parameter that cannot be compiled or evaluated."""

    def __init__(self, node_id: str, parameter: str, expression: str, message: str) -> None:
        self.node_id = node_id
        self.parameter = parameter
        self.expression = expression
        self.message = message
        super().__init__(f"node '{node_id}', parameter '{parameter or '(value)'}': {_shown(expression)}: {message}")

    def __reduce__(self) -> tuple[Any, ...]:
        return type(self), (self.node_id, self.parameter, self.expression, self.message)


def _shown(expression: str) -> str:
    text = expression if expression.startswith("{{") else f"{{{{ {expression} }}}}"
    return text if len(text) <= _MAX_SHOWN else text[:_MAX_SHOWN] + "…"


def _missing_message(exc: MissingValue, names: Mapping[str, Any]) -> str:
    if exc.obj is missing:
        if exc.name in ("item", "index"):
            return f"'{exc.name}' is undefined — item and index exist only inside a loop body"
        return f"'{exc.name}' is undefined — the names are {', '.join(names)}"
    nodes = names.get("nodes")
    if nodes is not None and exc.obj is nodes:
        ran = ", ".join(list(nodes)[:20]) + (", …" if len(nodes) > 20 else "") if nodes else "none yet"
        key = f".{exc.name}" if isinstance(exc.name, str) and exc.name.isidentifier() else f"[{exc.name!r}]"
        return f"nodes{key} is undefined — no such node has run (nodes that have run: {ran})"
    if nodes is not None and isinstance(exc.obj, Mapping) and any(exc.obj is entry for entry in nodes.values()):
        path = locate({"nodes": nodes}, exc.obj) or "nodes.<id>"
        return f"{path}.{exc.name} is undefined — use {path}.output"
    return describe_missing(exc, names)


def _error(node_id: str, parameter: str, text: str, exc: TemplatingError, names: Mapping[str, Any]) -> ExpressionError:
    message = _missing_message(exc.cause, names) if isinstance(exc.cause, MissingValue) else exc.message
    expression = f"{{{{ {exc.expression} }}}}" if exc.expression and "{{" not in exc.expression else \
        exc.expression or text.strip()
    return ExpressionError(node_id, parameter, expression, message)


def _join(path: str, key: Any) -> str:
    if isinstance(key, int):
        return f"{path}[{key}]"
    return f"{path}.{key}" if path else str(key)


def _walk(value: Any, path: str, names: Mapping[str, Any], node_id: str) -> Any:
    if isinstance(value, str):
        if "{{" not in value:
            return value
        try:
            return compile_text(value).evaluate(names)
        except TemplatingError as exc:
            raise _error(node_id, path, value, exc, names) from None
    if isinstance(value, dict):
        return {key: _walk(child, _join(path, key), names, node_id) for key, child in value.items()}
    if isinstance(value, list | tuple):
        return [_walk(child, _join(path, index), names, node_id) for index, child in enumerate(value)]
    return value


def evaluate_parameters(parameters: Any, scope: ExpressionScope, node_id: str, *, raw: Collection[str] = (),
                        limits: Limits = EXPRESSION_LIMITS) -> Any:
    """Evaluate every `{{ … }}` in `parameters` (dicts and lists walked); raises ExpressionError.

    `raw` names top-level parameters that are left as they are (for example a script's code or a
    context.transform template, which have their own `{{ }}`). One call has one budget.
    """
    names = scope.names()
    with limited(limits):
        if isinstance(parameters, dict) and raw:
            return {key: value if key in raw else _walk(value, key, names, node_id)
                    for key, value in parameters.items()}
        return _walk(parameters, "", names, node_id)


def check_parameters(parameters: Any, node_id: str, *, raw: Collection[str] = ()) -> list[ExpressionError]:
    """Syntax errors of every `{{ … }}` in `parameters`, without evaluating (for graph validation)."""
    errors: list[ExpressionError] = []

    def visit(value: Any, path: str) -> None:
        if isinstance(value, str) and "{{" in value:
            try:
                compile_text(value)
            except TemplatingError as exc:
                errors.append(_error(node_id, path, value, exc, {}))
        elif isinstance(value, dict):
            for key, child in value.items():
                if not (path == "" and key in raw):
                    visit(child, _join(path, key))
        elif isinstance(value, list | tuple):
            for index, child in enumerate(value):
                visit(child, _join(path, index))

    visit(parameters, "")
    return errors
