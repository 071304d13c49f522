"""The action catalogue of one mandate: the action library and what is known only at run time.

:func:`registry_for` is what every caller that works *in a mandate* asks (the agent's toolset,
tool calls, the MCP server, the editor's palette and the engine's action nodes): the static
library of ``backend/actions/methods`` plus the tools of the mandate's external MCP servers,
each server a toolbox ``mcp:<name>`` (``backend/mcp/``).

Code that looks node types up without a session at hand (graph validation, the engine's node
handlers, requirements) reads :func:`current_registry`: the catalogue a caller working in a
mandate put in force with :func:`in_mandate` (or :func:`using`) for the current thread or task,
else the static library — where a mandate's `mcp:` node type is unknown, as it must be elsewhere.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar

from sqlmodel import Session

from backend.actions.registry import ActionRegistry, get_registry

_in_force: ContextVar[ActionRegistry | None] = ContextVar("poweron_action_catalogue", default=None)


def registry_for(session: Session, mandate_id: str | None) -> ActionRegistry:
    """The actions and toolboxes callable in `mandate_id` (the static library when None)."""
    registry = get_registry()
    if mandate_id is None:
        return registry
    from backend.mcp.toolboxes import mandate_toolboxes  # the MCP client side (issue 19)

    actions, toolboxes = mandate_toolboxes(session, mandate_id)
    return registry.with_extra(actions, toolboxes)


def current_registry() -> ActionRegistry:
    """The catalogue in force here (see :func:`in_mandate`), else the static library."""
    return _in_force.get() or get_registry()


@contextmanager
def using(registry: ActionRegistry) -> Iterator[ActionRegistry]:
    """Put `registry` in force for the block (this thread or task only)."""
    token = _in_force.set(registry)
    try:
        yield registry
    finally:
        _in_force.reset(token)


@contextmanager
def in_mandate(session: Session, mandate_id: str | None) -> Iterator[ActionRegistry]:
    """Put the catalogue of `mandate_id` in force for the block: node-type lookups, graph
    validation and action nodes then know the mandate's MCP tools."""
    with using(registry_for(session, mandate_id)) as registry:
        yield registry


@contextmanager
def mandate_catalogue(mandate_id: str | None) -> Iterator[ActionRegistry]:
    """As :func:`in_mandate` for callers without a transaction at hand (the editor page derives
    its palette, validation and panel between requests): a short one of its own looks the
    mandate's catalogue up. Within a block that already has a catalogue in force, that one stays."""
    if _in_force.get() is not None:
        yield _in_force.get()
        return
    from backend.db import session_scope

    with session_scope() as session:
        registry = registry_for(session, mandate_id)
    with using(registry):
        yield registry
