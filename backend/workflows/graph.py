"""Structural validation of the graph JSON of DESIGN §4.

This checks the shape every graph must have (nodes, ids, edges between existing nodes).
Checks that need the node-type registry (known types, parameter schemas, handles, triggers,
cycles) are added by the engine on top of this.
"""

from __future__ import annotations

from typing import Any

from backend.errors import FieldError, InvalidInput

NODE_KEYS = {"id", "type", "label", "parameters", "position", "retry", "onError", "disabled", "notes"}
EDGE_KEYS = {"id", "source", "target", "sourceHandle", "targetHandle"}


def default_graph() -> dict[str, Any]:
    """The graph of a new workflow: a single manual trigger."""
    return {
        "nodes": [
            {"id": "start", "type": "trigger.manual", "label": "Start", "parameters": {},
             "position": {"x": 0, "y": 0}}
        ],
        "edges": [],
    }


def _check_node(index: int, node: Any, errors: list[FieldError], seen: set[str]) -> None:
    path = f"nodes[{index}]"
    if not isinstance(node, dict):
        errors.append(FieldError(path, "must be an object with id and type"))
        return
    node_id = node.get("id")
    if not isinstance(node_id, str) or not node_id.strip():
        errors.append(FieldError(f"{path}.id", "must be a non-empty string"))
        node_id = None
    elif node_id in seen:
        errors.append(FieldError(f"{path}.id", f"duplicate node id '{node_id}'", node_id))
    else:
        seen.add(node_id)
    if not isinstance(node.get("type"), str) or not node["type"].strip():
        errors.append(FieldError(f"{path}.type", "must be a non-empty string such as 'trigger.manual'", node_id))
    if "parameters" in node and not isinstance(node["parameters"], dict):
        errors.append(FieldError(f"{path}.parameters", "must be an object", node_id))
    position = node.get("position")
    if position is not None and not (
        isinstance(position, dict)
        and all(isinstance(position.get(axis), (int, float)) for axis in ("x", "y"))
    ):
        errors.append(FieldError(f"{path}.position", "must be an object with numeric x and y", node_id))
    unknown = set(node) - NODE_KEYS
    if unknown:
        errors.append(FieldError(f"{path}", f"unknown keys: {', '.join(sorted(unknown))}", node_id))


def _check_edge(index: int, edge: Any, node_ids: set[str], errors: list[FieldError]) -> None:
    path = f"edges[{index}]"
    if not isinstance(edge, dict):
        errors.append(FieldError(path, "must be an object with source and target"))
        return
    for end in ("source", "target"):
        value = edge.get(end)
        if not isinstance(value, str) or not value:
            errors.append(FieldError(f"{path}.{end}", "must be a node id"))
        elif value not in node_ids:
            errors.append(FieldError(f"{path}.{end}", f"refers to unknown node '{value}'", value))
    for handle in ("sourceHandle", "targetHandle"):
        if handle in edge and edge[handle] is not None and not isinstance(edge[handle], str):
            errors.append(FieldError(f"{path}.{handle}", "must be a string"))
    unknown = set(edge) - EDGE_KEYS
    if unknown:
        errors.append(FieldError(path, f"unknown keys: {', '.join(sorted(unknown))}"))


def structural_errors(graph: Any) -> list[FieldError]:
    """Every structural problem of `graph`, each naming its path (and node id if known)."""
    if not isinstance(graph, dict):
        return [FieldError("graph", "must be an object with 'nodes' and 'edges'")]
    errors: list[FieldError] = []
    unknown = set(graph) - {"nodes", "edges", "viewport"}
    if unknown:
        errors.append(FieldError("graph", f"unknown keys: {', '.join(sorted(unknown))}"))
    nodes, edges = graph.get("nodes"), graph.get("edges", [])
    if not isinstance(nodes, list):
        errors.append(FieldError("nodes", "must be a list"))
        nodes = []
    if not isinstance(edges, list):
        errors.append(FieldError("edges", "must be a list"))
        edges = []
    seen: set[str] = set()
    for index, node in enumerate(nodes):
        _check_node(index, node, errors, seen)
    for index, edge in enumerate(edges):
        _check_edge(index, edge, seen, errors)
    return errors


def require_valid_structure(graph: Any) -> dict[str, Any]:
    """Return `graph` normalised (edges defaulted), or raise InvalidInput naming each problem."""
    errors = structural_errors(graph)
    if errors:
        raise InvalidInput(errors)
    return {**graph, "edges": graph.get("edges", [])}
