"""Which edges may be drawn: one set of rules for the editor canvas and the agent's workflow toolbox.

`connection_error` answers, before an edge is added, why it may not be (or None): the rules are
those of DESIGN §4 as backend/workflows/validation.py checks them for a whole graph (known
nodes, a handle the source has, nothing into a trigger, no duplicate, no cycle but a loop body
returning into its flow.loop), plus no edge from a node to itself. `handles_of` lists a node's
output handles, for drawing them.
"""

from __future__ import annotations

from typing import Any

from backend.workflows.node_types import DEFAULT_HANDLE, NodeType, node_type
from backend.workflows.validation import cycle_errors


def _nodes(graph: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """Nodes by id; the first of duplicated ids (validate reports the duplicate)."""
    nodes: dict[str, dict[str, Any]] = {}
    for node in graph.get("nodes") or []:
        if isinstance(node, dict) and isinstance(node.get("id"), str):
            nodes.setdefault(node["id"], node)
    return nodes


def edge_handle(edge: dict[str, Any]) -> str:
    """The handle an edge leaves by: its sourceHandle, `out` when missing."""
    handle = edge.get("sourceHandle")
    return handle if isinstance(handle, str) else DEFAULT_HANDLE


def make_edge(source: str, source_handle: str | None, target: str) -> dict[str, Any]:
    """The edge as the graph stores it: sourceHandle only when it is not `out`."""
    edge: dict[str, Any] = {"source": source, "target": target}
    if source_handle and source_handle != DEFAULT_HANDLE:
        edge["sourceHandle"] = source_handle
    return edge


def _handles(node: dict[str, Any], node_type: NodeType) -> list[str]:
    return list(dict.fromkeys(node_type.output_handles(node.get("parameters"), node.get("onError"))))


def handles_of(node: dict[str, Any]) -> list[str]:
    """The output handles of `node` (switch cases and ai.decide options from its parameters, `error`
    when onError is "route"); ["out"] for a type that is not in the palette."""
    found = node_type(node.get("type"))
    return _handles(node, found) if found is not None else [DEFAULT_HANDLE]


def _cycle_messages(nodes: dict[str, dict[str, Any]], edges: list[Any], types: dict[str, NodeType | None]) -> set[str]:
    usable = [(index, edge["source"], edge_handle(edge), edge["target"]) for index, edge in enumerate(edges)
              if isinstance(edge, dict) and edge.get("source") in nodes and edge.get("target") in nodes]
    return {error.message for error in cycle_errors(list(nodes), usable, types)}


def connection_error(graph: dict[str, Any], source: str, source_handle: str | None, target: str) -> str | None:
    """Why the edge `source`.`source_handle` → `target` may not be added to `graph`, or None when it may.

    A missing handle means `out`. The reasons name the nodes and, for a wrong handle, the
    handles the source has.
    """
    nodes = _nodes(graph)
    for role, node_id in (("source", source), ("target", target)):
        if node_id not in nodes:
            return f"{role} '{node_id}' is not in the graph; its nodes are: {', '.join(nodes) or 'none'}"
    if source == target:
        return f"'{source}' cannot connect to itself: that would be a cycle"
    types = {node_id: node_type(node.get("type")) for node_id, node in nodes.items()}
    handle = source_handle or DEFAULT_HANDLE
    source_type = types[source]
    if source_type is not None:
        handles = _handles(nodes[source], source_type)
        if handle not in handles:
            expected = (f"its handles are: {', '.join(handles)}" if handles
                        else "it has no output handles, so no edge may leave it")
            return f"node '{source}' ({source_type.type}) has no handle '{handle}'; {expected}"
    target_type = types[target]
    if target_type is not None and target_type.is_trigger:
        return (f"node '{target}' is a trigger ({target_type.type}): triggers start a workflow; "
                f"nothing can connect into '{target}'")
    edges = [e for e in graph.get("edges") or [] if isinstance(e, dict)]
    if any(e.get("source") == source and e.get("target") == target and edge_handle(e) == handle for e in edges):
        return f"the edge {source}.{handle} → {target} already exists"
    before = _cycle_messages(nodes, edges, types)
    new_cycles = _cycle_messages(nodes, [*edges, make_edge(source, handle, target)], types) - before
    if new_cycles:
        return sorted(new_cycles)[0]
    return None
