"""Limits every JSON value taken from outside must keep (issue 15).

A value is refused when it nests deeper than MAX_DEPTH containers (objects and arrays), when
one of its texts (values or keys) holds a lone UTF-16 surrogate (a JSON ``"\\ud800"`` escape with
no partner: such a text cannot be encoded as UTF-8), or when it holds NaN or Infinity (which
Python's parser accepts but JSON has not): once stored, every answer showing such a value
would fail. ``check_json`` names the first offending place as a dotted path
(``input.items.3.note``), as the REST API names fields.

The REST guard (backend/api/input_guard.py) applies it to every JSON request body; the
workflow service and graph import apply it to graphs, whatever their origin (editor, agent
tools, files); webhooks to their body after the signature check. ``loads`` first takes a
C-speed look at the raw text (surely_within_limits) and walks the parsed value only when that
look cannot rule a problem out; the walk is iterative (no recursion, whatever the depth).
"""

from __future__ import annotations

import json
import math
import re
from typing import Any

from backend.errors import FieldError, InvalidInput

MAX_DEPTH = 64
_SURROGATE = re.compile("[\ud800-\udfff]")
# A \uD800-\uDFFF escape, or a surrogate itself (UTF-8-encoded with "surrogatepass").
_SURROGATE_BYTES = re.compile(rb"\\u[dD][89a-fA-F]|\xed[\xa0-\xbf]")
_NOT_STRUCTURE = bytes(b for b in range(256) if b not in b'"[]{}')
_PARENS = bytes.maketrans(b"[]{}", b"()()")
TOO_DEEP = f"nests deeper than {MAX_DEPTH} levels of objects and arrays"
NOT_FINITE = "is NaN or Infinity, which JSON has no number for"
LONE_SURROGATE = "holds a lone UTF-16 surrogate (an unpaired \\ud800-\\udfff escape), which is not text"


def has_lone_surrogate(text: str) -> bool:
    """Whether `text` holds a surrogate code point (json.loads joins valid pairs, so any left is lone)."""
    return not text.isascii() and _SURROGATE.search(text) is not None


def _path(parts: tuple, field: str) -> str:
    names = [field] if field else []
    names += [str(p) for p in parts]
    return ".".join(names) or "body"


def _children(node: dict | list):
    return node.items() if isinstance(node, dict) else enumerate(node)


def json_problem(value: Any, field: str = "") -> FieldError | None:
    """The first place where `value` breaks the limits, or None.

    Args:
        value: a parsed JSON value (dicts, lists, texts, numbers, booleans, None).
        field: the name of `value` itself, prefixed to every path ("" for a request body,
            whose top level is then called "body").
    """
    if isinstance(value, str):
        return FieldError(_path((), field), LONE_SURROGATE) if has_lone_surrogate(value) else None
    if isinstance(value, float) and not math.isfinite(value):
        return FieldError(_path((), field), NOT_FINITE)
    if not isinstance(value, (dict, list)):
        return None
    stack: list[tuple[dict | list, int, tuple]] = [(value, 1, ())]
    while stack:
        node, depth, parts = stack.pop()
        if depth > MAX_DEPTH:
            return FieldError(_path(parts, field), TOO_DEEP)
        for key, item in _children(node):
            if isinstance(key, str) and has_lone_surrogate(key):
                return FieldError(_path(parts, field), f"has a key that {LONE_SURROGATE}")
            if isinstance(item, str):
                if has_lone_surrogate(item):
                    return FieldError(_path((*parts, key), field), LONE_SURROGATE)
            elif isinstance(item, (dict, list)):
                stack.append((item, depth + 1, (*parts, key)))
            elif isinstance(item, float) and not math.isfinite(item):
                return FieldError(_path((*parts, key), field), NOT_FINITE)
    return None


def check_json(value: Any, field: str = "") -> None:
    """Refuse `value` when it nests deeper than MAX_DEPTH, holds a lone surrogate, NaN or Infinity.

    Raises:
        InvalidInput: with one FieldError naming the offending path (see json_problem).
    """
    problem = json_problem(value, field)
    if problem is not None:
        raise InvalidInput([problem])


def _depth_at_most(raw: bytes, limit: int) -> bool:
    """Whether the JSON text `raw` (known to parse) nests at most `limit` levels, in C-speed steps.

    Escaped backslashes and quotes go first, then everything but quotes and brackets, then
    adjacent quote pairs (strings without brackets; dropping two neighbouring quotes leaves every
    other character on its side of the strings); the brackets still between quotes were inside
    strings. Each pass over the rest removes every innermost pair, so the text is empty after
    exactly as many passes as it is deep.
    """
    if b"\\" in raw:
        raw = raw.replace(b"\\\\", b"").replace(b'\\"', b"")
    kept = raw.translate(None, _NOT_STRUCTURE).replace(b'""', b"")
    if b'"' in kept:
        kept = b"".join(kept.split(b'"')[0::2])
    outside = kept.translate(_PARENS)
    for _ in range(limit):
        outside = outside.replace(b"()", b"")
        if not outside:
            return True
    return False


def surely_within_limits(raw: bytes) -> bool:
    """A fast look at JSON text that parsed: True when its value surely keeps the limits.

    False (a surrogate escape or NaN/Infinity somewhere, maybe inside a string, or deeper than
    MAX_DEPTH) only means the value has to be walked (json_problem) to know and to find the path.
    """
    if b"NaN" in raw or b"Infinity" in raw:
        return False
    if (b"\\u" in raw or b"\xed" in raw) and _SURROGATE_BYTES.search(raw):
        return False
    return raw.count(b"[") + raw.count(b"{") <= MAX_DEPTH or _depth_at_most(raw, MAX_DEPTH)


def loads(text: str | bytes, field: str = "") -> Any:
    """json.loads of UTF-8 JSON text (a byte order mark is tolerated), then the limits.

    Nesting too deep for the parser itself is refused like any nesting beyond MAX_DEPTH.

    Raises:
        UnicodeDecodeError: bytes that are not UTF-8 (a ValueError, like the next one).
        json.JSONDecodeError: the text is not JSON (left to the caller, which knows what to say).
        InvalidInput: the value breaks the limits (see json_problem).
    """
    if isinstance(text, str):
        raw = text.encode("utf-8", "surrogatepass")
    else:
        raw = bytes(text)
        text = raw.decode("utf-8")
    text = text.removeprefix("\ufeff")
    try:
        value = json.loads(text)
    except RecursionError:
        raise InvalidInput([FieldError(field or "body", TOO_DEEP)]) from None
    if not surely_within_limits(raw):
        check_json(value, field)
    return value
