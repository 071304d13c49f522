"""Every event handler declares the permission it relies on (the meta-test checks that).

The declaration documents the check; the check itself happens in the backend service or data
interface that the handler calls, exactly as for REST routes (backend.api.permissions).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

from backend.api.permissions import KINDS

F = TypeVar("F", bound=Callable)
ATTRIBUTE = "_poweron_permission"


def requires(kind: str, item: str | None = None) -> Callable[[F], F]:
    """Mark an event handler with the permission it checks.

    Kinds: public (no sign-in needed), authenticated (signed in, own data), ui (the page's
    state only, no data), sysadmin, or an AccessRule context (UI, RESOURCE, DATA) with its item.
    Put it below `@rx.event` so it marks the plain function.
    """
    if kind not in (*KINDS, "ui"):
        raise ValueError(f"permission kind must be one of {', '.join((*KINDS, 'ui'))}")

    def mark(fn: F) -> F:
        setattr(fn, ATTRIBUTE, {"kind": kind, "item": item})
        return fn

    return mark
