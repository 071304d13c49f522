"""External MCP servers as toolboxes `mcp:<name>` of a mandate's action catalogue."""

from __future__ import annotations

from sqlmodel import Session

from backend.actions.base import Action
from backend.actions.toolboxes import Toolbox


def mandate_toolboxes(session: Session, mandate_id: str) -> tuple[list[Action], list[Toolbox]]:
    """The actions and toolboxes of the mandate's registered MCP servers."""
    return [], []
