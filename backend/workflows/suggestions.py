"""Expression autocomplete for the editor: which `{{ … }}` a node's parameters can use.

A node can read the run input, the outputs of the nodes upstream of it (ancestors along the
edges; a loop body's way back into its flow.loop does not count), `item` and `index` inside a
loop body, and `run`, `workflow`, `now` (DESIGN §4). Paths into outputs come from the outputs
of the workflow's newest run (`last_step_outputs`), so the editor can offer
`{{ nodes.fetch.output.body.title }}` once the workflow ran.
"""

from __future__ import annotations

import re
from collections import deque
from typing import Any

from sqlmodel import Session, select

from backend.db.models import RunStepLog, WorkflowRun
from backend.workflows.connections import edge_handle
from backend.workflows.node_types import NodeType, node_type

MAX_SUGGESTIONS = 200
MAX_DEPTH = 3
_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_GLOBALS = ("{{ run.id }}", "{{ workflow.name }}", "{{ now }}")


def _key(path: str, key: Any) -> str:
    key = str(key)
    return f"{path}.{key}" if _NAME.match(key) else f"{path}[{key!r}]"


def _node_ref(node_id: str) -> str:
    return f"nodes.{node_id}" if _NAME.match(node_id) else f"nodes[{node_id!r}]"


def _paths(value: Any, path: str, depth: int = 0) -> list[str]:
    """Paths into `value` below `path`: object keys and a list's first element, MAX_DEPTH levels deep."""
    if depth >= MAX_DEPTH:
        return []
    found: list[str] = []
    if isinstance(value, dict):
        for key, child in value.items():
            child_path = _key(path, key)
            found.append(child_path)
            found += _paths(child, child_path, depth + 1)
    elif isinstance(value, list) and value:
        child_path = f"{path}[0]"
        found.append(child_path)
        found += _paths(value[0], child_path, depth + 1)
    return found


def _graph_parts(graph: dict[str, Any]) -> tuple[dict[str, dict[str, Any]], list[tuple[str, str, str]]]:
    nodes = {n["id"]: n for n in graph.get("nodes") or [] if isinstance(n, dict) and isinstance(n.get("id"), str)}
    edges = []
    for edge in graph.get("edges") or []:
        if isinstance(edge, dict) and edge.get("source") in nodes and edge.get("target") in nodes:
            edges.append((edge["source"], edge_handle(edge), edge["target"]))
    return nodes, edges


def _kind(node: dict[str, Any]) -> NodeType | None:
    return node_type(node.get("type"))


def _loop_bodies(nodes: dict[str, dict[str, Any]], edges: list[tuple[str, str, str]]) -> dict[str, set[str]]:
    """For each flow.loop, the nodes of its body: reachable from its `each` handle without passing the loop."""
    bodies: dict[str, set[str]] = {}
    for loop_id, node in nodes.items():
        kind = _kind(node)
        if kind is None or not kind.is_loop:
            continue
        body: set[str] = set()
        queue = deque(t for s, h, t in edges if s == loop_id and h == "each" and t != loop_id)
        while queue:
            current = queue.popleft()
            if current in body or current == loop_id:
                continue
            body.add(current)
            queue.extend(t for s, _, t in edges if s == current)
        bodies[loop_id] = body
    return bodies


def _ancestors(node_id: str, edges: list[tuple[str, str, str]], bodies: dict[str, set[str]],
               order: dict[str, int]) -> list[str]:
    """Nodes upstream of `node_id`, nearest first (ties in graph order); loop-back edges left out."""
    predecessors: dict[str, list[str]] = {}
    for source, _, target in edges:
        if source in bodies.get(target, ()):
            continue  # a loop body returning into its loop
        predecessors.setdefault(target, []).append(source)
    found: list[str] = []
    seen = {node_id}
    level = [node_id]
    while level:
        following = sorted({p for n in level for p in predecessors.get(n, []) if p not in seen}, key=order.__getitem__)
        seen.update(following)
        found += following
        level = following
    return found


def expression_suggestions(graph: dict[str, Any], node_id: str,
                           last_steps: dict[str, Any] | None = None) -> list[str]:
    """Ready-to-insert expressions for a parameter of `node_id` (at most MAX_SUGGESTIONS).

    Order: `item` and `index` (inside a loop body), the run input and the paths into it, each
    upstream node's output nearest first with the paths into its output in `last_steps` (node id
    → that node's last output), then run.id, workflow.name and now.
    """
    nodes, edges = _graph_parts(graph)
    last_steps = last_steps or {}
    bodies = _loop_bodies(nodes, edges)
    order = {n: i for i, n in enumerate(nodes)}
    ancestors = _ancestors(node_id, edges, bodies, order) if node_id in nodes else []
    found: list[str] = []
    if any(node_id in body for body in bodies.values()):
        found += ["item", "index"]
    found.append("input")
    trigger = next((a for a in ancestors if (kind := _kind(nodes[a])) is not None and kind.is_trigger
                    and a in last_steps), None)
    if trigger is not None:
        found += _paths(last_steps[trigger], "input")
    for ancestor in ancestors:
        output = f"{_node_ref(ancestor)}.output"
        found.append(output)
        if ancestor in last_steps:
            found += _paths(last_steps[ancestor], output)
    suggestions = list(dict.fromkeys(f"{{{{ {path} }}}}" for path in found))
    return [*suggestions[:MAX_SUGGESTIONS - len(_GLOBALS)], *_GLOBALS]


def last_step_outputs(session: Session, workflow_id: str, created_by: str | None = None) -> dict[str, Any]:
    """Node id → the output of its newest step in the workflow's newest run ({} before any run);
    with `created_by`, the newest run that user started.

    Of a node's attempts (and loop iterations) the newest with an output counts.
    """
    query = select(WorkflowRun.id).where(WorkflowRun.workflow_id == workflow_id)
    if created_by is not None:
        query = query.where(WorkflowRun.sys_created_by == created_by)
    run_id = session.exec(query.order_by(WorkflowRun.started_at.desc(), WorkflowRun.id.desc())).first()
    if run_id is None:
        return {}
    outputs: dict[str, Any] = {}
    steps = session.exec(
        select(RunStepLog.node_id, RunStepLog.output).where(RunStepLog.run_id == run_id)
        .order_by(RunStepLog.started_at, RunStepLog.attempt, RunStepLog.id)
    ).all()
    for step_node, output in steps:
        if output is not None:
            outputs[step_node] = output
    return outputs
