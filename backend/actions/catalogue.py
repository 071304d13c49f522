"""The action catalogue of one mandate: the action library and what is known only at run time.

:func:`registry_for` is what every caller that works *in a mandate* asks (the agent's toolset,
tool calls, the MCP server, the editor's palette and the engine's action nodes): the static
library of ``backend/actions/methods`` plus the tools of the mandate's external MCP servers,
each server a toolbox ``mcp:<name>`` (``backend/mcp/``).
"""

from __future__ import annotations

from sqlmodel import Session

from backend.actions.registry import ActionRegistry, get_registry


def registry_for(session: Session, mandate_id: str | None) -> ActionRegistry:
    """The actions and toolboxes callable in `mandate_id` (the static library when None)."""
    registry = get_registry()
    if mandate_id is None:
        return registry
    from backend.mcp.toolboxes import mandate_toolboxes  # the MCP client side (issue 19)

    actions, toolboxes = mandate_toolboxes(session, mandate_id)
    return registry.with_extra(actions, toolboxes)
