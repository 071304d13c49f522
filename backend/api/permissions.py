"""Every route declares the permission it relies on; the meta-tests refuse routes without one.

A route that calls a door method (``backend.rbac.door.guarded``) takes the declaration from
that method with :func:`declared_by`, so the item is spelled once, where it is enforced. Routes
that need no item (public, authenticated, sysadmin) declare their kind with :func:`permission`.
The declaration appears in the OpenAPI document as `x-permission` (the first one) and
`x-permissions` (all of them), where the isolation and enforcement walks read it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from backend.rbac.door import KINDS, Permission, permissions_of

__all__ = ["KINDS", "declared_by", "permission"]


def _extra(permissions: tuple[Permission, ...]) -> dict[str, Any]:
    return {"openapi_extra": {"x-permission": permissions[0].as_dict(),
                              "x-permissions": [p.as_dict() for p in permissions]}}


def permission(kind: str, item: str | None = None, operation: str | None = None) -> dict[str, Any]:
    """Keyword arguments for a route decorator declaring its permission.

    Args:
        kind: public (no token), authenticated (any signed-in user, own data only),
            sysadmin, or an AccessRule context (UI, RESOURCE, DATA).
        item: the AccessRule item checked (for UI/RESOURCE/DATA): prefer :func:`declared_by`.
        operation: read/create/update/delete for DATA.
    """
    return _extra((Permission(kind, item, operation),))


def declared_by(*methods: Callable[..., Any]) -> dict[str, Any]:
    """Keyword arguments for a route decorator: the permissions the door `methods` enforce."""
    permissions = tuple(p for method in methods for p in permissions_of(method))
    if not permissions:
        names = ", ".join(getattr(m, "__qualname__", repr(m)) for m in methods)
        raise ValueError(f"{names} declares no permission (mark it with backend.rbac.door.guarded)")
    return _extra(permissions)
