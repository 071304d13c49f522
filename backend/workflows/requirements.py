"""What a workflow needs beyond the embedded default installation, derived from its graph.

A node type declares what its nodes need (`NodeType.needs`; a node action's come from
`@action(needs=…)`), by the ids of :data:`REQUIREMENTS`:

- ``ai``: an AI provider (OPENAI_API_KEY or POWERON_AI_PROVIDERS);
- ``webSearch``: a SearXNG-compatible search API (POWERON_SEARCH_URL);
- ``mail``: a mail connection (email.checkEmail, email.sendMail): one chosen in the node
  (`connectionId`) that exists; the step itself says, as the run's starter, when it is not theirs
  ("not found") or not active (its reason);
- ``sandbox``: the bubblewrap sandbox of script.python, which `make run` installs: it is part of
  the embedded default (`built_in`), so a template needing only it still "runs as it is";
- ``connection``: a connection of a type the node takes (the datasources actions: any connection
  offering mail or files), chosen in the node (`connectionId`) and existing; as for ``mail``, the
  step itself says when it is not the starter's or not active.

This module knows each requirement: its words, and whether this installation meets it for one
node (a mail connection is a node's parameter). From a graph it derives what the workflow needs
(:func:`graph_needs`, shown on the template cards before use; :func:`connections`, what a
template needs beyond `make run`) and what is missing (:func:`unmet` and :func:`unmet_message`:
a run whose workflow misses something fails at once, see backend.engine.executor.start_run).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from backend.workflows.expression_syntax import looks_templated
from backend.workflows.node_types import node_type


@dataclass(frozen=True)
class Requirement:
    """One kind of thing a node may need.

    Attributes:
        id: What node types name in `needs` (e.g. "ai").
        label: The thing, as a sentence names it (e.g. "an AI provider").
        met: Said when this installation has it (e.g. "configured here").
        built_in: Part of the embedded default (`make run` provides it): a template needing only
            such things runs as it is, and they are not among its `connections`.
        problem: For one node (its parameters as written or evaluated): None when this
            installation meets the need, else what is missing and how to fix it
            ("not configured here: set …").
    """

    id: str
    label: str
    met: str
    built_in: bool
    problem: Callable[[dict[str, Any]], str | None]


def _ai_problem(_node: dict[str, Any]) -> str | None:
    from backend.config import get_settings

    if get_settings().ai_providers:
        return None
    return "not configured here: set OPENAI_API_KEY (or POWERON_AI_PROVIDERS for several providers)"


def _search_problem(_node: dict[str, Any]) -> str | None:
    from backend.config import get_settings
    from backend.web.search import SEARCH_URL_SETTING

    if get_settings().search_url:
        return None
    return f"not configured here: set {SEARCH_URL_SETTING} to the URL of a SearXNG-compatible search API"


def _mail_problem(node: dict[str, Any]) -> str | None:
    """A node's mail connection (`connectionId`: email.checkEmail, email.sendMail): chosen, and a
    connection of that id exists (not revoked). Whether the run's starter may use it and whether it
    is active is the step's to say, as that user: "not found" for another user's, the reason for
    an expired or failing one."""
    from backend.connectors.mail import mail_type_ids

    if not mail_type_ids():
        return "none can be set up here: this installation has no mail connector"
    connection = (node.get("parameters") or {}).get("connectionId")
    if looks_templated(connection):
        return None  # an expression: known only when the run gets there
    if connection is None or (isinstance(connection, str) and not connection.strip()):
        return ("none chosen: add a mail connection on the Connections page and choose it in the node "
                "(connectionId)")
    if not _connection_exists(connection):
        return f"connection {connection} not found: choose one of yours on the Connections page (connectionId)"
    return None


def _connection_exists(connection_id: Any) -> bool:
    from backend.db import session_scope
    from backend.db.models import Connection
    from backend.statemachines.connection import REVOKED

    if not isinstance(connection_id, str):
        return False
    with session_scope() as session:
        found = session.get(Connection, connection_id)
        return found is not None and found.status != REVOKED


def _connection_problem(node: dict[str, Any]) -> str | None:
    """A node's connection (`connectionId`, of a type the node takes): chosen, and existing (not
    revoked). Whose it is and whether it is active is the step's to say, as the run's starter."""
    from backend.connectors.sources import node_connection_types

    if not node_connection_types(node.get("type")):
        return "none can be set up here: this installation has no connector for it"
    connection = (node.get("parameters") or {}).get("connectionId")
    if looks_templated(connection):
        return None
    if connection is None or (isinstance(connection, str) and not connection.strip()):
        return "none chosen: add a connection on the Connections page and choose it in the node (connectionId)"
    if not _connection_exists(connection):
        return f"connection {connection} not found: choose one of yours on the Connections page (connectionId)"
    return None


def _sandbox_problem(_node: dict[str, Any]) -> str | None:
    from backend.sandbox import probe

    status = probe()
    return None if status.available else f"not available here: {status.reason}"


REQUIREMENTS: tuple[Requirement, ...] = (
    Requirement("ai", "an AI provider", "configured here", False, _ai_problem),
    Requirement("webSearch", "web search", "configured here", False, _search_problem),
    Requirement("mail", "a mail connection", "set up here", False, _mail_problem),
    Requirement("sandbox", "the Python sandbox (bubblewrap)", "available here", True, _sandbox_problem),
    Requirement("connection", "a connection", "set up here", False, _connection_problem),
)
_BY_ID = {r.id: r for r in REQUIREMENTS}


def requirement(requirement_id: str) -> Requirement:
    """The requirement `requirement_id`; KeyError naming the known ones."""
    try:
        return _BY_ID[requirement_id]
    except KeyError:
        raise KeyError(f"unknown requirement '{requirement_id}'; known: {', '.join(_BY_ID)}") from None


def node_needs(node: Any) -> tuple[str, ...]:
    """What a node needs: its type's `needs` (nothing for an unknown type)."""
    kind = node_type(node.get("type")) if isinstance(node, dict) else None
    return kind.needs if kind is not None else ()


def _node_name(node: dict[str, Any]) -> str:
    """"node 'mail' (Wait for e-mail)", or "node 'mail'" when it has no other label."""
    label = node.get("label")
    named = f"node '{node.get('id')}'"
    return f"{named} ({label})" if isinstance(label, str) and label.strip() and label != node.get("id") else named


def _reachable(graph: dict[str, Any], start: str) -> set[str]:
    """The ids of `start` and every node an edge path leads to from it."""
    following: dict[str, list[str]] = {}
    for edge in graph.get("edges") or []:
        if isinstance(edge, dict):
            following.setdefault(edge.get("source"), []).append(edge.get("target"))
    seen, stack = {start}, [start]
    while stack:
        for target in following.get(stack.pop(), []):
            if target not in seen:
                seen.add(target)
                stack.append(target)
    return seen


def _nodes(graph: Any, start: str | None) -> list[dict[str, Any]]:
    nodes = [n for n in (graph.get("nodes") if isinstance(graph, dict) else None) or [] if isinstance(n, dict)]
    if start is None:
        return nodes
    reached = _reachable(graph, start)
    return [n for n in nodes if n.get("id") in reached]


@dataclass(frozen=True)
class Need:
    """One requirement of a graph, the nodes that have it and whether this installation meets it.

    Attributes:
        requirement: What is needed.
        nodes: The nodes that need it (graph JSON), in graph order.
        problems: Per node id that misses it here, what is missing and how to fix it.
    """

    requirement: Requirement
    nodes: tuple[dict[str, Any], ...]
    problems: dict[str, str]

    @property
    def id(self) -> str:
        return self.requirement.id

    @property
    def met(self) -> bool:
        """Whether every node that needs it has it here."""
        return not self.problems

    @property
    def shown(self) -> bool:
        """Whether a template card names it: always, unless `make run` provides it and it is there."""
        return not self.requirement.built_in or not self.met

    @property
    def text(self) -> str:
        """As a card says it: "Needs an AI provider — not configured here: set OPENAI_API_KEY …"."""
        state = next(iter(self.problems.values()), self.requirement.met)
        return f"Needs {self.requirement.label} — {state}"

    def as_dict(self) -> dict[str, Any]:
        """As the REST API lists it with a template (TemplateNeedOut)."""
        return {"id": self.id, "label": self.requirement.label, "nodes": [str(n.get("id")) for n in self.nodes],
                "built_in": self.requirement.built_in, "available": self.met, "text": self.text}

    def missing_text(self) -> str:
        """The unmet part, as a failed run says it: what, for which nodes, and how to fix it."""
        missing = [n for n in self.nodes if n.get("id") in self.problems]
        by_problem: dict[str, list[str]] = {}
        for node in missing:
            by_problem.setdefault(self.problems[node["id"]], []).append(_node_name(node))
        return "; ".join(f"it needs {self.requirement.label} for {', '.join(names)} — {problem}"
                         for problem, names in by_problem.items())


def needed(graph: Any, start: str | None = None) -> list[tuple[Requirement, list[dict[str, Any]]]]:
    """What the graph's nodes (those reachable from `start`, when given) need, without checking
    this installation: each requirement with the nodes that need it, in the order of the graph's
    nodes (a flow read left to right names its needs in that order)."""
    found: dict[str, tuple[Requirement, list[dict[str, Any]]]] = {}
    for node in _nodes(graph, start):
        for wanted in node_needs(node):
            found.setdefault(wanted, (requirement(wanted), []))[1].append(node)
    return list(found.values())


def connections(graph: Any) -> tuple[str, ...]:
    """The ids of what the graph needs beyond the embedded default (DESIGN §8: a template's
    `connections`; empty: it runs as it is after `make run`)."""
    return tuple(wanted.id for wanted, _nodes in needed(graph) if not wanted.built_in)


def graph_needs(graph: Any, start: str | None = None) -> list[Need]:
    """What the graph needs (see :func:`needed`), each checked against this installation."""
    needs = []
    for wanted, having in needed(graph, start):
        problems = {}
        for node in having:
            if node.get("id") not in problems and (problem := wanted.problem(node)) is not None:
                problems[node.get("id")] = problem
        needs.append(Need(wanted, tuple(having), problems))
    return needs


def unmet(graph: Any, start: str | None = None) -> list[Need]:
    """What the graph needs and this installation does not have (reachable from `start` when given)."""
    return [need for need in graph_needs(graph, start) if not need.met]


def unmet_message(needs: list[Need]) -> str:
    """Why a workflow missing `needs` cannot run here, naming what is missing, the nodes and the fix."""
    return "this workflow cannot run here: " + "; ".join(need.missing_text() for need in needs)


def node_problem(node: dict[str, Any]) -> str | None:
    """What one node (its parameters evaluated) misses here, as its failed step says it
    ("needs a mail connection — none chosen: …"); None when it has everything."""
    problems = [f"needs {need.requirement.label} — {problem}"
                for need in graph_needs({"nodes": [node], "edges": []}) for problem in need.problems.values()]
    return "; ".join(problems) or None


def runs_as_it_is(needs: list[Need]) -> bool:
    """Whether a graph with these needs runs here as it is: it needs nothing `make run` does not
    provide, and what `make run` provides is there."""
    return not any(need.shown for need in needs)
