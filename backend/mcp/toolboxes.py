"""External MCP servers as toolboxes `mcp:<name>` of a mandate's action catalogue.

Every registered server of the mandate contributes its stored tools (listed at registration,
refreshed on demand, never per round) as actions `mcp:<name>.<tool>`: agent tools and graph nodes
whose parameters are the tool's JSON Schema (``Action.input_schema_json``), read-only when the
server says so (``readOnlyHint``), else write and external send. Calling one calls the tool on the
server through backend/mcp/client.py (timeout, size cap, credentials). A server that failed its
last test keeps its tools: a call then fails with the server's error, which the caller reads.

The actions of a mandate are built once per state of its servers (id, lock_version, refresh time),
and kept in memory; that state is looked at again at most every RECHECK_SECONDS (one small query),
at once after the door changed the mandate's servers in this process.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable
from typing import Any

from pydantic import BaseModel, ConfigDict
from sqlmodel import Session, select

from backend.actions.base import Action, ActionContext, ActionError
from backend.actions.toolboxes import MCP_TOOLBOX_PREFIX, Toolbox
from backend.db.models import McpServer
from backend.mcp.client import ServerAccess, access_of, call_tool

MAX_DESCRIPTION = 1000
# mandate -> (state of its servers, actions, toolboxes, when looked at: time.monotonic())
_cache: dict[str, tuple[tuple, list[Action], list[Toolbox], float]] = {}
RECHECK_SECONDS = 2.0
_cache_lock = threading.Lock()
_CACHE_MANDATES = 256


def forget(mandate_id: str) -> None:
    """Look the mandate's servers up again at the next call (this process changed them)."""
    with _cache_lock:
        _cache.pop(mandate_id, None)


def mandate_toolboxes(session: Session, mandate_id: str) -> tuple[list[Action], list[Toolbox]]:
    """The actions and toolboxes of the mandate's registered MCP servers.

    Within RECHECK_SECONDS of the last look the answer comes from memory (every run start and
    execution asks, and a run costs milliseconds); the door forgets a mandate it changes, so this
    process sees its own changes at once and others within RECHECK_SECONDS. Who may call a tool is
    not cached here: may_run checks the server's RESOURCE rules on every call.
    """
    now = time.monotonic()
    with _cache_lock:
        cached = _cache.get(mandate_id)
    if cached is not None and now - cached[3] < RECHECK_SECONDS:
        return cached[1], cached[2]
    state = tuple(session.exec(
        select(McpServer.id, McpServer.lock_version, McpServer.tools_refreshed_at)
        .where(McpServer.mandate_id == mandate_id).order_by(McpServer.name)).all())
    with _cache_lock:
        cached = _cache.get(mandate_id)
    if cached is not None and cached[0] == state:
        with _cache_lock:
            _cache[mandate_id] = (*cached[:3], now)
        return cached[1], cached[2]
    actions: list[Action] = []
    toolboxes: list[Toolbox] = []
    if state:
        rows = session.exec(select(McpServer).where(McpServer.mandate_id == mandate_id)
                            .order_by(McpServer.name)).all()
        for row in rows:
            box, tools = server_toolbox(row)
            toolboxes.append(box)
            actions.extend(tools)
    with _cache_lock:
        if len(_cache) >= _CACHE_MANDATES:
            _cache.pop(next(iter(_cache)))
        _cache[mandate_id] = (state, actions, toolboxes, now)
    return actions, toolboxes


def server_toolbox(row: McpServer) -> tuple[Toolbox, list[Action]]:
    """The toolbox of one server and an action per stored tool."""
    access = access_of(row)
    box_id = f"{MCP_TOOLBOX_PREFIX}{row.name}"
    tools = [t for t in row.tools or [] if isinstance(t, dict) and isinstance(t.get("name"), str) and t["name"]]
    names = ", ".join(t["name"] for t in tools[:8]) + (", …" if len(tools) > 8 else "")
    description = (row.description or f"Tools of the external MCP server '{row.name}'") + (
        f" ({names})" if names else "")
    box = Toolbox(box_id, row.name, description[:MAX_DESCRIPTION])
    seen: set[str] = set()
    actions = []
    for tool in tools:
        if tool["name"] in seen:
            continue
        seen.add(tool["name"])
        actions.append(tool_action(box_id, access, tool))
    return box, actions


def tool_action(box_id: str, access: ServerAccess, tool: dict[str, Any]) -> Action:
    """The action that calls `tool` of the server `access` reaches."""
    schema = canonical_schema(tool.get("inputSchema"))
    annotations = tool.get("annotations") or {}
    read_only = annotations.get("readOnlyHint") is True
    name = tool["name"]
    description = str(tool.get("description") or f"Tool '{name}' of the MCP server '{access.name}'")
    return Action(
        id=f"{box_id}.{name}", toolbox=box_id, label=str(annotations.get("title") or name)[:200],
        description=description[:MAX_DESCRIPTION], params_model=schema_model(schema),
        fn=_caller(access, name), agent_tool=True, graph_node=True,
        capabilities=frozenset({"read"} if read_only else {"write", "externalSend"}),
        input_schema_json=json.dumps(schema, sort_keys=True, separators=(",", ":"), ensure_ascii=False))


def canonical_schema(schema: Any) -> dict[str, Any]:
    """A tool's input schema as an object schema (an empty or broken one takes any object)."""
    if not isinstance(schema, dict):
        return {"type": "object", "properties": {}}
    schema = dict(schema)
    schema.setdefault("type", "object")
    if schema.get("type") != "object":
        return {"type": "object", "properties": {}}
    schema.setdefault("properties", {})
    return schema


def schema_model(schema: dict[str, Any]) -> type[BaseModel]:
    """A parameters model for the graph side (node types, the editor's panel, validation): it
    publishes the tool's own JSON Schema and lets any object through — the schema itself is
    checked by execute_action (jsonschema) when the node runs."""
    published = json.loads(json.dumps(schema))

    class McpToolParameters(BaseModel):
        model_config = ConfigDict(extra="allow")

        @classmethod
        def model_json_schema(cls, *args: Any, **kwargs: Any) -> dict[str, Any]:
            return json.loads(json.dumps(published))

    return McpToolParameters


def _caller(access: ServerAccess, tool: str) -> Callable[[Any, ActionContext], Any]:
    def call(params: Any, _context: ActionContext) -> Any:
        ok, result = call_tool(access, tool, params if isinstance(params, dict) else {})
        if not ok:
            raise ActionError(str(result))
        return result if isinstance(result, dict) else {"text": result}

    return call
