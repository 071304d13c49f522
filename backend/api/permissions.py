"""Every route declares the permission it checks; the meta-test refuses routes without one.

The declaration documents the check (it appears in the OpenAPI document as `x-permission`);
the check itself happens in the data interface or service the route calls.
"""

from __future__ import annotations

from typing import Any

KINDS = ("public", "authenticated", "sysadmin", "UI", "RESOURCE", "DATA")


def permission(kind: str, item: str | None = None, operation: str | None = None) -> dict[str, Any]:
    """Keyword arguments for a route decorator declaring its permission.

    Args:
        kind: public (no token), authenticated (any signed-in user, own data only),
            sysadmin, or an AccessRule context (UI, RESOURCE, DATA).
        item: the AccessRule item checked (for UI/RESOURCE/DATA).
        operation: read/create/update/delete for DATA.
    """
    if kind not in KINDS:
        raise ValueError(f"permission kind must be one of {', '.join(KINDS)}")
    declared = {"kind": kind}
    if item:
        declared["item"] = item
    if operation:
        declared["operation"] = operation
    return {"openapi_extra": {"x-permission": declared}}
