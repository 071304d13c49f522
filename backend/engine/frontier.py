"""The run's frontier: which nodes may run next, in the manner of stdlib graphlib.

Like ``graphlib.TopologicalSorter`` the frontier is driven by ``prepare`` / ``get_ready`` /
``done``; unlike it, ``done`` names the output handles a node took, so edges leaving by other
handles become *dead*. Dead-ness propagates: a node whose every incoming edge is dead never
runs and kills its own outgoing edges. A node is ready once every incoming edge is decided
(fired or dead) and at least one fired — which is exactly how flow.merge waits only for the
branches that are still live. Every node handed out by ``get_ready`` at the same time is
independent of the others, so a runner may execute them concurrently.

Loops. The edges from a loop body back into its flow.loop are *return edges*: they do not count
for the loop's first entry. When every return edge of the current iteration is decided and no
body node is still ready, the loop node is handed out again; the runner then calls
``restart_body`` for the next item or ``done(loop, ["done"])`` after the last.

The whole state is plain JSON (``to_state`` / ``from_state``) so it is persisted after every step.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Collection
from typing import Any

from backend.workflows.node_types import DEFAULT_HANDLE, NodeType, node_type


def _kind(node: dict[str, Any]) -> NodeType | None:
    """The registry entry of the node's type (None for an unknown type)."""
    return node_type(node.get("type"))


class Graph:
    """An indexed view of a DESIGN §4 graph: nodes by id, edges by index, loop bodies.

    Args:
        graph: The graph JSON (``nodes`` and ``edges``).
    """

    def __init__(self, graph: dict[str, Any]):
        self.nodes: dict[str, dict[str, Any]] = {n["id"]: n for n in graph.get("nodes", [])}
        self.edges: list[dict[str, Any]] = list(graph.get("edges", []))
        self.outgoing: dict[str, list[int]] = defaultdict(list)
        self.incoming: dict[str, list[int]] = defaultdict(list)
        for index, edge in enumerate(self.edges):
            self.outgoing[edge["source"]].append(index)
            self.incoming[edge["target"]].append(index)
        self.body: dict[str, set[str]] = {}
        self.loop_of: dict[str, str] = {}
        for node_id, node in self.nodes.items():
            if (kind := _kind(node)) is not None and kind.is_loop:
                self.body[node_id] = self._reachable_from(node_id, "each")
        # The innermost loop of a node is the loop with the smallest body containing it.
        for loop_id, members in sorted(self.body.items(), key=lambda item: -len(item[1])):
            for member in members:
                self.loop_of[member] = loop_id
        self.return_edges: set[int] = {
            index for loop_id, members in self.body.items()
            for index in self.incoming[loop_id] if self.edges[index]["source"] in members
        }

    def is_loop(self, node_id: str) -> bool:
        """Whether the node is a loop (its type's `is_loop`): it has a body."""
        return node_id in self.body

    def handle(self, index: int) -> str:
        """The source handle of an edge; a missing one means `out` (DESIGN §4)."""
        return self.edges[index].get("sourceHandle") or DEFAULT_HANDLE

    def _reachable_from(self, loop_id: str, handle: str) -> set[str]:
        seen: set[str] = set()
        stack = [self.edges[i]["target"] for i in self.outgoing[loop_id] if self.handle(i) == handle]
        while stack:
            node_id = stack.pop()
            if node_id == loop_id or node_id in seen:
                continue
            seen.add(node_id)
            stack.extend(self.edges[i]["target"] for i in self.outgoing[node_id])
        return seen


class Frontier:
    """Ready nodes, fired and dead edges, finished nodes and loops waiting for their body.

    Args:
        graph: The indexed graph.
        state: A state saved by ``to_state``; None starts empty (call ``prepare``).
    """

    def __init__(self, graph: Graph, state: dict[str, Any] | None = None):
        self.graph = graph
        state = state or {}
        self.ready: list[str] = list(state.get("ready", []))
        self.fired: set[int] = set(state.get("fired", []))
        self.dead: set[int] = set(state.get("dead", []))
        self.finished: set[str] = set(state.get("finished", []))
        self.waiting: set[str] = set(state.get("waiting", []))

    def to_state(self) -> dict[str, Any]:
        """The frontier as JSON for the run's context."""
        return {"ready": list(self.ready), "fired": sorted(self.fired), "dead": sorted(self.dead),
                "finished": sorted(self.finished), "waiting": sorted(self.waiting)}

    # --- graphlib-like API ------------------------------------------------------------------

    def prepare(self, start: str) -> None:
        """Start at the trigger `start`; every other trigger's edges are dead (it did not fire)."""
        self.ready = [start]
        for node_id, node in self.graph.nodes.items():
            if node_id != start and not self.graph.incoming[node_id] and (kind := _kind(node)) and kind.is_trigger:
                self.finished.add(node_id)
                self._kill(self.graph.outgoing[node_id])

    def is_active(self) -> bool:
        """True while some node is ready or a loop is due for its next iteration."""
        return bool(self.get_ready())

    def get_ready(self) -> tuple[str, ...]:
        """Every node that may run now; they do not depend on each other.

        A waiting loop is due again once every return edge of its body is decided and no node
        of its body is ready, so an iteration is complete before the next one starts.
        """
        graph = self.graph
        for loop_id in sorted(self.waiting):
            if loop_id in self.ready:
                continue
            body_busy = any(n in graph.body[loop_id] for n in self.ready)
            returns = [i for i in graph.incoming[loop_id] if i in graph.return_edges]
            if not body_busy and all(i in self.fired or i in self.dead for i in returns):
                self.ready.append(loop_id)
        return tuple(n for n in self.ready
                     if not (n in self.waiting and any(m in graph.body[n] for m in self.ready)))

    def take(self, node_id: str) -> None:
        """Remove `node_id` from the ready set (it is about to run)."""
        self.ready.remove(node_id)

    def done(self, node_id: str, handles: Collection[str]) -> list[int]:
        """Mark `node_id` done, firing its edges that leave by `handles`; the others die.

        A flow.loop that takes `each` is not finished: it waits for its body to return. Returns
        the indexes of the fired edges.
        """
        graph = self.graph
        fired: list[int] = []
        dying: list[int] = []
        for index in graph.outgoing[node_id]:
            (fired if graph.handle(index) in handles else dying).append(index)
        if graph.is_loop(node_id) and "each" in handles:
            self.waiting.add(node_id)
            # `done` stays undecided until the last iteration: it must neither fire nor die.
            dying = [i for i in dying if graph.handle(i) != "done"]
        else:
            self.waiting.discard(node_id)
            self.finished.add(node_id)
        for index in fired:
            self.fired.add(index)
            self._check(graph.edges[index]["target"])
        self._kill(dying)
        return fired

    def restart_body(self, loop_id: str) -> None:
        """Forget the previous iteration of a loop body so that it runs again."""
        members = self.graph.body[loop_id]
        for member in members:
            self.finished.discard(member)
            self.waiting.discard(member)
            for index in self.graph.outgoing[member]:
                self.fired.discard(index)
                self.dead.discard(index)
        self.ready = [n for n in self.ready if n not in members and n != loop_id]
        for index in self.graph.outgoing[loop_id]:
            if self.graph.handle(index) == "each":
                self.fired.discard(index)

    # --- propagation ------------------------------------------------------------------------

    def _kill(self, edges: list[int]) -> None:
        stack = list(edges)
        while stack:
            index = stack.pop()
            if index in self.dead or index in self.fired:
                continue
            self.dead.add(index)
            target = self.graph.edges[index]["target"]
            if self._check(target) == "dead":
                stack.extend(self.graph.outgoing[target])

    def _check(self, node_id: str) -> str | None:
        """Make `node_id` ready when all its incoming edges are decided; "dead" if none fired."""
        graph = self.graph
        # A waiting loop is re-entered by get_ready, never by an edge arriving.
        if node_id in self.waiting or node_id in self.finished or node_id in self.ready:
            return None
        entries = [i for i in graph.incoming[node_id] if i not in graph.return_edges]
        if not all(i in self.fired or i in self.dead for i in entries):
            return None
        if any(i in self.fired for i in entries):
            self.ready.append(node_id)
            return "ready"
        self.finished.add(node_id)
        return "dead"
