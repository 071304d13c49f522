"""Deterministic data transforms without AI (context.transform): sandboxed templates and field maps.

- A template is Jinja2 text rendered in an immutable sandbox with `data` (and, for a dict, its
  keys as names). Undefined names are errors, not empty strings.
- A mapping builds a new object: each target field takes a path into the data
  (`customer.name`, `items.0.price`, `items[0].price`) or one sandboxed expression
  (`{{ data.amount * 1.081 }}`), which yields the native value (text with expressions around
  renders to a string, as in workflow parameters).

The sandbox, its limits and filters are backend.templating's, shared with workflow expressions.
Compiled templates are cached, so a transform in a loop costs the rendering only.
"""

from __future__ import annotations

import re
from typing import Any

from backend import templating

#: what one template or mapping may build and render, and for how long (see backend.templating)
LIMITS = templating.Limits(max_size=2_000_000, max_work=20_000_000, max_seconds=5.0)


class TransformError(ValueError):
    """A template or mapping that cannot be applied; the message says where."""


def _scope(data: Any) -> dict[str, Any]:
    scope = {k: v for k, v in data.items() if isinstance(k, str) and k.isidentifier()} if isinstance(data, dict) \
        else {}
    scope["data"] = data
    return scope


def render_template(source: str, data: Any) -> str:
    """Render a sandboxed Jinja2 template over `data`."""
    try:
        return templating.render_template(source, _scope(data), LIMITS)
    except templating.TemplatingError as exc:
        raise TransformError(f"template: {exc.message}") from None


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
    """One mapping source: `{{ expression }}` (native value), text with expressions (a string), or
    a path (MISSING when absent)."""
    if "{{" in source:
        try:
            return templating.evaluate_text(source, _scope(data), LIMITS)
        except templating.TemplatingError as exc:
            raise TransformError(f"expression '{source.strip()}': {exc.message}") from None
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
