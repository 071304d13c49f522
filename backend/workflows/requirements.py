"""What a workflow needs beyond the embedded default installation, derived from its graph.

A node type declares what its nodes need (`NodeType.needs`; a node action's come from
`@action(needs=…)`), by the ids of :data:`REQUIREMENTS`:

- ``ai``: an AI provider (OPENAI_API_KEY or POWERON_AI_PROVIDERS);
- ``webSearch``: web search (backend/web/search.py): available without configuration through
  ddgs; with POWERON_SEARCH_ENGINE=searxng, brave or tavily, met once its URL or key is set;
- ``mail``: a mail connection (email.checkEmail, email.sendMail): one chosen in the node
  (`connectionId`) that exists; the step itself says, as the run's starter, when it is not theirs
  ("not found") or not active (its reason);
- ``sandbox``: the bubblewrap sandbox of script.python, which `make run` installs: it is part of
  the embedded default (`built_in`), so a template needing only it still "runs as it is";
- a connection type, or several joined by ``|`` (``msft``, ``imap|msft``): a connection of one of
  those types (backend/connectors/types.py), chosen in the node (`connectionId`), that exists and
  is of such a type, and that this installation can make at all (e.g. POWERON_MSFT_* set). These
  are not declared by hand: one rule derives them — a node action that works with connections
  (`@action(connection_type=…)` / `connection_types`) needs one of its types, unless it declares
  a connection requirement of its own (``mail``, which any mail-offering type meets).

This module knows each requirement: its words, and whether this installation meets it for one
node (a connection is a node's parameter). From a graph it derives what the workflow needs
(:func:`graph_needs`, shown on the template cards before use; :func:`connections`, what a
template needs beyond `make run`) and what is missing (:func:`unmet` and :func:`unmet_message`:
a run whose workflow misses something fails at once, see backend.engine.executor.start_run).
"""

from __future__ import annotations

import functools
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
        connection: Met by the connection a node chooses (`connectionId`): "mail" and the
            connection-type requirements.
    """

    id: str
    label: str
    met: str
    built_in: bool
    problem: Callable[[dict[str, Any]], str | None]
    connection: bool = False


def _ai_problem(_node: dict[str, Any]) -> str | None:
    from backend.config import get_settings

    if get_settings().ai_providers:
        return None
    return "not configured here: set OPENAI_API_KEY (or POWERON_AI_PROVIDERS for several providers)"


def _search_problem(_node: dict[str, Any]) -> str | None:
    from backend.config import get_settings
    from backend.web.search import SearchConfig, search_problem

    return search_problem(SearchConfig.from_settings(get_settings()))


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
    if _stored_connection(connection) is None:
        return f"connection {connection} not found: choose one of yours on the Connections page (connectionId)"
    return None


def _stored_connection(connection_id: Any) -> tuple[str, str] | None:
    """(type, label) of the connection of that id, None when there is none (or it is revoked)."""
    from backend.db import session_scope
    from backend.db.models import Connection
    from backend.statemachines.connection import REVOKED

    if not isinstance(connection_id, str):
        return None
    with session_scope() as session:
        found = session.get(Connection, connection_id)
        return (found.type, found.label) if found is not None and found.status != REVOKED else None


def _typed_connection_problem(types: tuple[str, ...], wanted: str, node: dict[str, Any]) -> str | None:
    """A node's connection (`connectionId`) of one of `types` (`wanted`: "a Microsoft 365
    connection"): this installation can make one, one is chosen, it exists and is of such a type.
    Whether the run's starter may use it and whether it is active is the step's to say."""
    from backend.connectors.types import connection_type

    reasons = [connection_type(t).unavailable() for t in types]
    if all(reasons):
        return "none can be set up here: " + "; ".join(dict.fromkeys(r for r in reasons if r))
    connection = (node.get("parameters") or {}).get("connectionId")
    if looks_templated(connection):
        return None  # an expression: known only when the run gets there
    if connection is None or (isinstance(connection, str) and not connection.strip()):
        return f"none chosen: add {wanted} on the Connections page and choose it in the node (connectionId)"
    found = _stored_connection(connection)
    if found is None:
        return f"connection {connection} not found: choose one of yours on the Connections page (connectionId)"
    kind, label = found
    if kind not in types:
        return (f"connection '{label}' is {_with_article(connection_type(kind).label + ' connection')}: choose "
                f"{wanted} (connectionId)")
    return None


def _with_article(noun: str) -> str:
    return f"{'an' if noun[:1].lower() in 'aeiou' else 'a'} {noun}"


@functools.cache
def _connection_requirement(requirement_id: str) -> Requirement | None:
    """The requirement of a connection of one of the types `requirement_id` joins with "|"
    ("msft", "imap|msft"); None when one of them is no registered connection type."""
    from backend.connectors.types import connection_types

    known = {kind.id: kind for kind in connection_types()}
    types = tuple(requirement_id.split("|"))
    if not all(t in known for t in types) or len(set(types)) != len(types):
        return None
    wanted = _with_article(" or ".join(known[t].label for t in types) + " connection")
    return Requirement(requirement_id, wanted, "set up here", False,
                       functools.partial(_typed_connection_problem, types, wanted), connection=True)


def _sandbox_problem(_node: dict[str, Any]) -> str | None:
    from backend.sandbox import probe

    status = probe()
    return None if status.available else f"not available here: {status.reason}"


REQUIREMENTS: tuple[Requirement, ...] = (
    Requirement("ai", "an AI provider", "configured here", False, _ai_problem),
    Requirement("webSearch", "web search", "available here", False, _search_problem),
    Requirement("mail", "a mail connection", "set up here", False, _mail_problem, connection=True),
    Requirement("sandbox", "the Python sandbox (bubblewrap)", "available here", True, _sandbox_problem),
)
_BY_ID = {r.id: r for r in REQUIREMENTS}


def requirement(requirement_id: str) -> Requirement:
    """The requirement `requirement_id` (one of :data:`REQUIREMENTS`, or connection types joined
    by "|"); KeyError naming the known ones."""
    found = _BY_ID.get(requirement_id)
    if found is None and isinstance(requirement_id, str):
        found = _connection_requirement(requirement_id)
    if found is None:
        from backend.connectors.types import connection_types

        types = ", ".join(sorted(kind.id for kind in connection_types()))
        raise KeyError(f"unknown requirement '{requirement_id}'; known: {', '.join(_BY_ID)}, or connection types "
                       f"joined by '|' ({types})")
    return found


def node_needs(node: Any) -> tuple[str, ...]:
    """What a node needs: its type's `needs`, and for a node action that works with connections
    the connection its types derive (see the module documentation); nothing for an unknown type."""
    kind = node_type(node.get("type")) if isinstance(node, dict) else None
    if kind is None:
        return ()
    derived = connection_need(kind.type, kind.needs)
    return (*kind.needs, derived) if derived else kind.needs


def connection_need(type_id: str, declared: tuple[str, ...] = ()) -> str | None:
    """The connection requirement a node action of `type_id` derives from its connection types
    ("msft" for sharepoint.upload), None when it takes no connection or `declared` (its needs)
    already names a connection requirement ("mail" for email.sendMail)."""
    from backend.actions.catalogue import current_registry

    action = current_registry().actions.get(type_id)
    types = tuple(action.connection_types) if action is not None else ()
    if not types or any(_BY_ID[n].connection for n in declared if n in _BY_ID):
        return None
    return "|".join(types)


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
