"""Small edits of a graph dict (DESIGN §4), shared by the editor canvas and the agent's workflow tools.

Each function changes the graph it is given in place and raises GraphEditError with a reason a
person understands; saving and validation are the caller's (the draft service, the tools' _mutate).
"""

from __future__ import annotations

import copy
import json
import re
from typing import Any

from backend.scheduler.cron import ScheduleError, parse_timezone
from backend.workflows.connections import edge_handle, make_edge
from backend.workflows.node_types import node_type

NODE_ID = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,63}$")
X_STEP, Y_STEP = 260, 160
DEFAULT_TIME_ZONE = "UTC"


class GraphEditError(ValueError):
    """An edit that cannot be applied; the message names the node and the reason."""


def nodes_by_id(graph: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {n["id"]: n for n in graph.get("nodes", []) if isinstance(n, dict) and isinstance(n.get("id"), str)}


def edge_key(edge: dict[str, Any]) -> str:
    """An edge's identity in the canvas: source, handle and target (a graph has each at most once)."""
    return f"{edge.get('source')}:{edge_handle(edge)}->{edge.get('target')}"


def position_of(node: dict[str, Any]) -> tuple[float, float] | None:
    position = node.get("position")
    if isinstance(position, dict) and all(isinstance(position.get(a), (int, float)) for a in ("x", "y")):
        return float(position["x"]), float(position["y"])
    return None


def free_spot(graph: dict[str, Any], x: float, y: float, skip: str | None = None) -> dict[str, float]:
    """(x, y), moved down until no other node sits there."""
    taken = [p for n in graph.get("nodes", []) if n.get("id") != skip and (p := position_of(n)) is not None]
    while any(abs(px - x) < X_STEP / 2 and abs(py - y) < Y_STEP / 2 for px, py in taken):
        y += Y_STEP
    return {"x": x, "y": y}


def next_spot(graph: dict[str, Any]) -> dict[str, float]:
    """Right of the rightmost node, on a free row: where a node added without a position goes."""
    rightmost = max((p for n in graph.get("nodes", []) if (p := position_of(n)) is not None), default=None)
    x, y = (rightmost[0] + X_STEP, rightmost[1]) if rightmost else (0.0, 0.0)
    return free_spot(graph, x, y)


def new_node_id(graph: dict[str, Any], type_id: str) -> str:
    """A free id derived from the type: `prompt`, `prompt2`, … (expressions say nodes.<id>.output)."""
    base = re.sub(r"[^A-Za-z0-9_]", "_", type_id.rsplit(".", 1)[-1]) or "node"
    if not base[0].isalpha() and base[0] != "_":
        base = "n_" + base
    taken = set(nodes_by_id(graph))
    if base not in taken:
        return base
    number = 2
    while f"{base}{number}" in taken:
        number += 1
    return f"{base}{number}"


def usable_time_zone(name: Any) -> str:
    """`name` when it is an IANA time zone the scheduler knows (a browser's report), else UTC."""
    try:
        parse_timezone(name)
    except ScheduleError:
        return DEFAULT_TIME_ZONE
    return str(name).strip()


def starting_parameters(type_id: str, time_zone: str = DEFAULT_TIME_ZONE) -> dict[str, Any]:
    """The parameters a new node of `type_id` starts with: its type's `new_parameters` (e.g. a
    schedule every day at 08:00 in `time_zone`), else none."""
    known = node_type(type_id)
    if known is None or known.new_parameters is None:
        return {}
    return copy.deepcopy(known.new_parameters(usable_time_zone(time_zone)))


def add_node(graph: dict[str, Any], type_id: str, position: dict[str, float] | None = None,
             node_id: str | None = None, label: str | None = None,
             parameters: dict[str, Any] | None = None, time_zone: str = DEFAULT_TIME_ZONE) -> dict[str, Any]:
    """Append a node of `type_id` (at `position`, else next to the others) and return it.

    Without `parameters` the node starts with its type's defaults (starting_parameters), so a
    node that has sensible ones is valid as soon as it is dropped."""
    node_id = node_id.strip() if node_id else new_node_id(graph, type_id)
    if not NODE_ID.match(node_id):
        raise GraphEditError(f"id '{node_id}' must start with a letter and hold only letters, digits and _ (at "
                             "most 64): expressions refer to it as nodes.<id>.output")
    if node_id in nodes_by_id(graph):
        raise GraphEditError(f"a node with id '{node_id}' already exists; choose another id or leave id empty")
    known = node_type(type_id)
    node: dict[str, Any] = {"id": node_id, "type": type_id, "label": label or (known.label if known else type_id),
                            "parameters": parameters if parameters is not None
                            else starting_parameters(type_id, time_zone),
                            "position": position if position is not None else next_spot(graph)}
    graph.setdefault("nodes", []).append(node)
    return node


def move_nodes(graph: dict[str, Any], moves: list[dict[str, Any]]) -> int:
    """Set the positions of [{id, x, y}]; unknown ids are skipped (deleted meanwhile). Returns the count moved."""
    nodes = nodes_by_id(graph)
    moved = 0
    for move in moves:
        node = nodes.get(str(move.get("id")))
        x, y = move.get("x"), move.get("y")
        if node is None or not isinstance(x, (int, float)) or not isinstance(y, (int, float)):
            continue
        node["position"] = {"x": round(float(x)), "y": round(float(y))}
        moved += 1
    return moved


def referring_nodes(graph: dict[str, Any], node_id: str) -> list[str]:
    """Ids of the nodes whose parameters mention nodes.<node_id>."""
    pattern = re.compile(r"nodes\s*(\.\s*" + re.escape(node_id) + r"\b|\[\s*['\"]" + re.escape(node_id) + r"['\"])")
    return [n["id"] for n in graph.get("nodes", []) if isinstance(n, dict) and n.get("id") != node_id
            and pattern.search(json.dumps(n.get("parameters") or {}, ensure_ascii=False))]


def remove_elements(graph: dict[str, Any], node_ids: list[str] = (), edge_keys: list[str] = ()
                    ) -> list[dict[str, Any]]:
    """Remove nodes (with their edges) and edges (by edge_key); returns the removed edges."""
    gone = set(node_ids)
    keys = set(edge_keys)
    graph["nodes"] = [n for n in graph.get("nodes", []) if not (isinstance(n, dict) and n.get("id") in gone)]
    kept, removed = [], []
    for edge in graph.get("edges", []):
        if isinstance(edge, dict) and (edge.get("source") in gone or edge.get("target") in gone
                                       or edge_key(edge) in keys):
            removed.append(edge)
        else:
            kept.append(edge)
    graph["edges"] = kept
    return removed


def add_edge(graph: dict[str, Any], source: str, handle: str | None, target: str) -> dict[str, Any]:
    """Append the edge source.handle → target (the caller checked it with connections.connection_error)."""
    edge = make_edge(source, handle, target)
    graph.setdefault("edges", []).append(edge)
    return edge
