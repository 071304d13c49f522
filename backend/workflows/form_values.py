"""What a person typed into a form field (trigger.form's public form, an input.form task), as
the field's type: one set of rules for both, so a value valid in one is valid in the other."""

from __future__ import annotations

import datetime as dt
from typing import Any

from backend.workflows.node_types import FormField

TRUE, FALSE = {"true", "on", "yes", "1"}, {"false", "off", "no", "0"}


def is_blank(value: Any) -> bool:
    return value is None or (isinstance(value, str) and not value.strip())


def convert(field: FormField, value: Any, *, files: bool) -> Any:
    """`value` as `field`'s type ("42" → 42 for a number); ValueError with the message otherwise.

    Args:
        files: whether a file field may be answered (with the path of a file in the instance's
            file store); the public form has no file store to put one in.
    """
    kind = field.type
    if kind == "number":
        if isinstance(value, int | float) and not isinstance(value, bool):
            return value
        if isinstance(value, str):
            for number in (int, float):
                try:
                    return number(value.strip())
                except ValueError:
                    pass
        raise ValueError(f"must be a number, not {str(value)[:40]!r}")
    if kind == "boolean":
        if isinstance(value, bool):
            return value
        if isinstance(value, str) and value.strip().lower() in TRUE | FALSE:
            return value.strip().lower() in TRUE
        raise ValueError("must be true or false")
    if kind == "date":
        text = value.strip() if isinstance(value, str) else ""
        try:
            (dt.date if len(text) == 10 else dt.datetime).fromisoformat(text)
        except ValueError:
            raise ValueError(f"must be a date YYYY-MM-DD, not {str(value)[:40]!r}") from None
        return text
    if kind == "file":
        if not files:
            raise ValueError("files cannot be submitted on the public form")
        if not isinstance(value, str):
            raise ValueError("must be the path of a file in the instance's file store")
        return value.strip()
    if isinstance(value, bool) or not isinstance(value, str | int | float):
        raise ValueError("must be text")
    text = str(value)
    if kind == "select" and field.options and text not in field.options:
        raise ValueError(f"must be one of: {', '.join(field.options)}")
    return text
