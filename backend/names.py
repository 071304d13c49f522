"""What a name may hold (issue 15): one rule for workflows, mandates, feature instances, files,
folders and agent chats, applied by their services so REST and the UI refuse the same names.

A name is text without control characters: C0 (U+0000-U+001F, so also newline and tab),
DEL (U+007F) and C1 (U+0080-U+009F), the line and paragraph separators U+2028/U+2029, the
bidirectional embedding, override and isolate controls (U+202A-U+202E, U+2066-U+2069: they
make a name display as something else) and lone UTF-16 surrogates (not text at all). A service
may pass the longest length its column holds; emptiness rules stay with each service.
"""

from __future__ import annotations

import re
from typing import Any

from backend.errors import FieldError, InvalidInput

_FORBIDDEN = re.compile("[\x00-\x1f\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069\ud800-\udfff]")


def _describe(char: str) -> str:
    return "lone UTF-16 surrogates" if 0xD800 <= ord(char) <= 0xDFFF else "control characters"


def name_problem(value: str) -> str | None:
    """Why `value` cannot be a name ("must not contain …"), or None when its characters are fine."""
    match = _FORBIDDEN.search(value)
    if match is None:
        return None
    char = match.group()
    return f"must not contain {_describe(char)} (U+{ord(char):04X} at position {match.start() + 1})"


def clean_name(value: Any, field: str = "name", max_length: int | None = None) -> str:
    """`value` stripped of surrounding spaces, once it is text whose characters a name may hold.

    Args:
        value: The name as given.
        field: The field to name in the refusal.
        max_length: The longest name the column holds, or None when the service checks it.

    Raises:
        InvalidInput: naming `field` when `value` is not text, holds a forbidden character or is
            longer than `max_length`.
    """
    if not isinstance(value, str):
        raise InvalidInput([FieldError(field, "must be text")])
    problem = name_problem(value)
    if problem is not None:
        raise InvalidInput([FieldError(field, problem)])
    value = value.strip()
    if max_length is not None and len(value) > max_length:
        raise InvalidInput([FieldError(field, f"must be at most {max_length} characters")])
    return value
