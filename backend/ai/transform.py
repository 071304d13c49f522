"""Deterministic data transforms without AI (context.transform): sandboxed templates and field maps.

- A template is Jinja2 text rendered in an immutable sandbox with `data` (and, for a dict, its
  keys as names). Undefined names are errors, not empty strings.
- A mapping builds a new object: each target field takes a path into the data
  (`customer.name`, `items.0.price`, `items[0].price`) or one sandboxed expression
  (`{{ data.amount * 1.081 }}`), which yields the native value.

Compiled templates are cached, so a transform in a loop costs the rendering only.
"""

from __future__ import annotations

import functools
import json
import operator
import re
from typing import Any

from jinja2 import StrictUndefined, TemplateError, Undefined
from jinja2.exceptions import SecurityError
from jinja2.sandbox import ImmutableSandboxedEnvironment

MAX_REPEAT = 100_000  # longest string or list a template may build with `*`
MAX_OUTPUT = 2_000_000  # characters a template may render


class TransformError(ValueError):
    """A template or mapping that cannot be applied; the message says where."""


class _Sandbox(ImmutableSandboxedEnvironment):
    """The immutable sandbox, with `*` and `**` capped so a template cannot exhaust memory."""

    intercepted_binops = frozenset({"*", "**"})

    def call_binop(self, context: Any, op: str, left: Any, right: Any) -> Any:
        if op == "**":
            if isinstance(right, int | float) and abs(right) > 100:
                raise SecurityError("exponents above 100 are not allowed in templates")
            return operator.pow(left, right)
        for sequence, count in ((left, right), (right, left)):
            if isinstance(sequence, str | list | tuple) and isinstance(count, int) and count > MAX_REPEAT:
                raise SecurityError(f"repeating a sequence more than {MAX_REPEAT:,} times is not allowed")
        return operator.mul(left, right)


@functools.cache
def _environment() -> _Sandbox:
    env = _Sandbox(undefined=StrictUndefined, autoescape=False, keep_trailing_newline=True)
    env.filters["json"] = lambda value, indent=None: json.dumps(value, ensure_ascii=False, indent=indent,
                                                                default=str)
    return env


@functools.lru_cache(maxsize=512)
def _template(source: str) -> Any:
    try:
        return _environment().from_string(source)
    except TemplateError as exc:
        raise TransformError(f"template: {exc}") from None


@functools.lru_cache(maxsize=1024)
def _expression(source: str) -> Any:
    try:
        return _environment().compile_expression(source, undefined_to_none=False)
    except TemplateError as exc:
        raise TransformError(f"expression '{source}': {exc}") from None


def _scope(data: Any) -> dict[str, Any]:
    scope = {k: v for k, v in data.items() if isinstance(k, str) and k.isidentifier()} if isinstance(data, dict) \
        else {}
    scope["data"] = data
    return scope


def render_template(source: str, data: Any) -> str:
    """Render a sandboxed Jinja2 template over `data`."""
    try:
        text = _template(source).render(_scope(data))
    except TransformError:
        raise
    except (TemplateError, SecurityError) as exc:
        raise TransformError(f"template: {exc}") from None
    except Exception as exc:  # noqa: BLE001 - e.g. a division by zero inside the template
        raise TransformError(f"template: {type(exc).__name__}: {exc}") from None
    if len(text) > MAX_OUTPUT:
        raise TransformError(f"template output is longer than {MAX_OUTPUT:,} characters")
    return text


_WHOLE_EXPRESSION = re.compile(r"^\s*\{\{(.*)\}\}\s*$", re.DOTALL)
_PATH_PART = re.compile(r"[^.\[\]]+|\[\d+\]")


class _Missing:
    pass


MISSING = _Missing()


def lookup(data: Any, path: str) -> Any:
    """The value at a dotted path (`a.b.0.c` or `a.b[0].c`), or MISSING."""
    current = data
    for raw in _PATH_PART.findall(path.strip()):
        part = raw.strip("[]") if raw.startswith("[") else raw
        if isinstance(current, dict) and part in current:
            current = current[part]
        elif isinstance(current, list | tuple) and re.fullmatch(r"-?\d+", part) and -len(current) <= int(part) \
                < len(current):
            current = current[int(part)]
        else:
            return MISSING
    return current


def evaluate(source: str, data: Any) -> Any:
    """One mapping source: `{{ expression }}` (native value) or a path (MISSING when absent)."""
    whole = _WHOLE_EXPRESSION.match(source)
    if whole:
        try:
            value = _expression(whole.group(1).strip())(**_scope(data))
            if isinstance(value, Undefined):
                str(value)  # StrictUndefined raises, naming what is undefined
            return value
        except TransformError:
            raise
        except Exception as exc:  # noqa: BLE001 - undefined names, type errors, sandbox refusals
            raise TransformError(f"expression '{source.strip()}': {type(exc).__name__}: {exc}") from None
    return lookup(data, source)


def apply_mapping(data: Any, mapping: dict[str, str], defaults: dict[str, Any] | None = None
                  ) -> tuple[dict[str, Any], list[str]]:
    """Build `{target: value}`; targets whose path is absent get their default or None.

    Returns the object and the targets that were missing (and had no default).
    """
    result: dict[str, Any] = {}
    missing: list[str] = []
    defaults = defaults or {}
    for target, source in mapping.items():
        if not isinstance(source, str):
            result[target] = source  # a literal
            continue
        try:
            value = evaluate(source, data)
        except TransformError as exc:
            raise TransformError(f"mapping '{target}': {exc}") from None
        if value is MISSING:
            if target in defaults:
                value = defaults[target]
            else:
                missing.append(target)
                value = None
        result[target] = value
    return result, missing
