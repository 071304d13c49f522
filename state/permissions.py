"""Every event handler declares the permission it relies on (the meta-tests check that, and
that a user without it is refused).

A handler that calls a door method takes the declaration from it with :func:`requires_door`,
so no item string is spelled again here; the check itself happens in that method
(``backend.rbac.door.guarded``), exactly as for REST routes (``backend.api.permissions``).
Handlers that touch no guarded data declare their kind with :func:`requires`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

from backend.api.permissions import KINDS
from backend.rbac.door import Permission, permissions_of

F = TypeVar("F", bound=Callable)
ATTRIBUTE = "_poweron_permission"


def _mark(permissions: tuple[Permission, ...]) -> Callable[[F], F]:
    def mark(fn: F) -> F:
        first = permissions[0]
        setattr(fn, ATTRIBUTE, {"kind": first.kind, "item": first.item,
                                "all": [p.as_dict() for p in permissions]})
        return fn

    return mark


def requires(kind: str, item: str | None = None) -> Callable[[F], F]:
    """Mark an event handler with the permission it checks.

    Kinds: public (no sign-in needed), authenticated (signed in, own data), ui (the page's
    state only, no data), sysadmin, or an AccessRule context (UI, RESOURCE, DATA) with its item
    (prefer :func:`requires_door` for those). Put it below `@rx.event` so it marks the plain function.
    """
    if kind not in (*KINDS, "ui"):
        raise ValueError(f"permission kind must be one of {', '.join((*KINDS, 'ui'))}")
    if kind == "ui":
        def mark(fn: F) -> F:
            setattr(fn, ATTRIBUTE, {"kind": "ui", "item": None, "all": []})
            return fn

        return mark
    operation = "read" if kind == "DATA" else None
    return _mark((Permission(kind, item, operation),))


def requires_door(*methods: Callable[..., Any]) -> Callable[[F], F]:
    """Mark an event handler with the permissions of the door `methods` it calls."""
    permissions = tuple(p for method in methods for p in permissions_of(method))
    if not permissions:
        names = ", ".join(getattr(m, "__qualname__", repr(m)) for m in methods)
        raise ValueError(f"{names} declares no permission (mark it with backend.rbac.door.guarded)")
    return _mark(permissions)
