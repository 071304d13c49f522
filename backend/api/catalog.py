"""The catalogue routes: toolboxes with their actions, and the node-type palette."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Query

from backend.actions.catalogue import in_mandate
from backend.actions.openai_tools import tool_name
from backend.actions.registry import get_registry
from backend.api.deps import CurrentUser, DbSession
from backend.api.permissions import permission
from backend.rbac.access import AccessContext
from backend.workflows.node_types import palette

router = APIRouter(prefix="/api", tags=["catalogue"])


@router.get("/toolboxes", **permission("authenticated"))
def toolboxes(user: CurrentUser) -> list[dict[str, Any]]:
    """Toolboxes that have actions, each with its actions and their schemas."""
    registry = get_registry()
    return [
        {
            "id": box.id,
            "label": box.label,
            "description": box.description,
            "actions": [
                {
                    "id": a.id,
                    "label": a.label,
                    "description": a.description,
                    "toolName": tool_name(a.id),
                    "agentTool": a.agent_tool,
                    "graphNode": a.graph_node,
                    "capabilities": sorted(a.capabilities),
                    "connectionType": a.connection_type,
                    "costChf": a.cost_chf,
                    "parameters": a.parameters_schema(),
                    "output": a.output_schema(),
                }
                for a in registry.in_toolbox(box.id)
            ],
        }
        for box in registry.toolboxes()
    ]


@router.get("/node-types", **permission("authenticated"))
def node_types(user: CurrentUser, session: DbSession,
               instance_id: Annotated[str | None, Query(alias="instanceId", max_length=32)] = None
               ) -> list[dict[str, Any]]:
    """The editor palette: built-in node types and every node-exposed action; with `instanceId`
    (an instance the caller may open, else 404) also the tools of its mandate's MCP servers."""
    if instance_id is None:
        return [n.as_dict() for n in palette()]
    instance = AccessContext(session, user).require_instance(instance_id)
    with in_mandate(session, instance.mandate_id):
        return [n.as_dict() for n in palette()]
