"""Full validation of a graph against DESIGN §4, on top of the structural checks of graph.py.

A graph is valid when, besides being well formed:

- every node's type is in the palette (built-ins and node actions);
- its parameters validate against the type's pydantic model, `retry` against RetryPolicy and
  `onError` is fail | continue | route;
- every edge leaves by a handle its source has (a missing sourceHandle means `out`; switch
  cases, ai.decide options and onError "route" add handles) and no edge enters a trigger;
- there is at least one trigger;
- the only cycles are loop bodies: every cycle leaves a flow.loop through its `each` handle
  (and so comes back into that loop). Checked by dropping the loops' `each` edges and
  requiring what is left to be acyclic.

Expressions. A parameter string that is one whole `{{ … }}` is evaluated at run time to a
value of any type, so it is accepted wherever a value is expected: the parameters are
validated as written and every pydantic error located at (or inside) such a value is
dropped. Everything else about the node is still checked: unknown and missing parameters,
the other values, and the Jinja2 syntax of every string that contains template markers.
Checks spanning several fields (a model validator) run only once each field validates, so
they are skipped while a field they need is an expression of another type. Parameters that
define handles (switch `cases`, ai.decide `options`) must be written out: handles are fixed
when the graph is saved.

Saving a draft checks structure only (drafts may be incomplete); `validate` and `publish`
use validate_graph.
"""

from __future__ import annotations

import difflib
from collections import defaultdict
from typing import Any

from pydantic import BaseModel, ValidationError

from backend.errors import FieldError
from backend.workflows.expression_syntax import is_whole_expression, looks_templated, syntax_error
from backend.workflows.graph import structural_errors
from backend.workflows.node_types import (
    DEFAULT_HANDLE,
    ERROR_HANDLE,
    ON_ERROR,
    NodeType,
    RetryPolicy,
    palette,
)

Path = tuple[str | int, ...]


def field_path(prefix: str, path: Path) -> str:
    """("cases", 0, "value") under "parameters" → "parameters.cases[0].value"."""
    text = prefix
    for part in path:
        text += f"[{part}]" if isinstance(part, int) else (f".{part}" if text else str(part))
    return text


def _data_path(loc: tuple, data: Any, error_type: str) -> Path:
    """The path into `data` that a pydantic error location names.

    Pydantic adds the name of a union member to the location ("filter", "dict[str,any]");
    such parts are not in the data and are left out. A missing key stays (it is the field).
    """
    path: list[str | int] = []
    current = data
    for position, part in enumerate(loc):
        if isinstance(part, int) and isinstance(current, list) and 0 <= part < len(current):
            path.append(part)
            current = current[part]
        elif isinstance(part, str) and isinstance(current, dict) and part in current:
            path.append(part)
            current = current[part]
        elif (isinstance(part, str) and isinstance(current, dict) and position == len(loc) - 1
              and error_type == "missing"):
            path.append(part)
    return tuple(path)


def _leaves(value: Any, path: Path = ()) -> list[tuple[Path, Any]]:
    """Every string of a JSON value with its path (other scalars are never expressions)."""
    if isinstance(value, dict):
        return [leaf for key, item in value.items() for leaf in _leaves(item, (*path, key))]
    if isinstance(value, list):
        return [leaf for index, item in enumerate(value) for leaf in _leaves(item, (*path, index))]
    return [(path, value)] if isinstance(value, str) else []


def _aliases(model: type[BaseModel]) -> list[str]:
    return [field.alias or name for name, field in model.model_fields.items()]


def _message(error: dict, model: type[BaseModel], path: Path, node_type: NodeType) -> str:
    kind = error["type"]
    if kind == "missing":
        return f"required by {node_type.type}" if len(path) == 1 else "required"
    if kind == "extra_forbidden":
        if len(path) == 1:
            known = _aliases(model)
            expected = f"expected one of: {', '.join(known)}" if known else "it takes no parameters"
            return f"unknown parameter of {node_type.type}; {expected}"
        return "unknown key here"
    message = error["msg"]
    for prefix in ("Value error, ", "Assertion failed, "):
        if message.startswith(prefix):
            message = message[len(prefix):]
    return message


def _model_errors(model: type[BaseModel], data: Any, prefix: str, node_id: str,
                  skip: set[Path], node_type: NodeType) -> list[FieldError]:
    """Pydantic errors of `data` against `model` as FieldErrors, one per path (union messages
    joined with "or"); errors at or inside a path in `skip` are dropped."""
    try:
        model.model_validate(data)
    except ValidationError as exc:
        by_path: dict[Path, list[str]] = defaultdict(list)
        for error in exc.errors():
            path = _data_path(tuple(error["loc"]), data, error["type"])
            # An unknown key is wrong whatever its value; any other error at an expression is
            # about the value, which only the run will know.
            if error["type"] != "extra_forbidden" and any(path[:len(skipped)] == skipped for skipped in skip):
                continue
            message = _message(error, model, path, node_type)
            if message not in by_path[path]:
                by_path[path].append(message)
        return [FieldError(field_path(prefix, path), _join(messages), node_id) for path, messages in by_path.items()]
    return []


def _join(messages: list[str]) -> str:
    if len(messages) == 1:
        return messages[0]
    lead = "Input should be "
    if all(m.startswith(lead) for m in messages):
        return lead + " or ".join(m[len(lead):] for m in messages)
    return "; or ".join(messages)


# --- one node ---------------------------------------------------------------------------------------


def _handle_parameter_errors(node_id: str, node_type: NodeType, parameters: dict,
                             on_error: Any) -> list[FieldError]:
    """Switch cases and ai.decide options name handles: they must be written out and distinct."""
    key = node_type.dynamic_handles
    if key is None or key not in parameters:
        return []
    values = parameters[key]
    if is_whole_expression(values):
        what = node_type.dynamic.item
        return [FieldError(f"parameters.{key}", f"must be a list written out in the graph: each {what} is an "
                                                "output handle, so the list cannot come from an expression",
                           node_id)]
    if not isinstance(values, list):
        return []  # the model reports the type
    reserved = {*node_type.handles, *([ERROR_HANDLE] if on_error == "route" else [])}
    errors: list[FieldError] = []
    first_seen: dict[str, str] = {}
    for index, item in enumerate(values):
        where = f"parameters.{key}[{index}]"
        if key == "cases":
            if not isinstance(item, dict):
                continue
            explicit = item.get("handle")
            if explicit is None and looks_templated(item.get("value")):
                errors.append(FieldError(f"{where}.handle", "required when the case value is an expression: "
                                                            "name the handle this case leads to", node_id))
                continue
            if explicit is not None:
                where = f"{where}.handle"
                if not isinstance(explicit, str):
                    continue  # the model reports the type
                if looks_templated(explicit):
                    errors.append(FieldError(where, "must be plain text: it names an output handle", node_id))
                    continue
            handle = node_type.dynamic.handle_of(item)
        else:
            if not isinstance(item, str):
                continue  # the model reports the type
            if looks_templated(item):
                errors.append(FieldError(where, "must be plain text: each option names an output handle",
                                         node_id))
                continue
            handle = item
        if handle is None:
            continue
        if not handle.strip():
            errors.append(FieldError(where, "gives an empty handle name; expected a non-empty text", node_id))
        elif handle in reserved:
            errors.append(FieldError(where, f"gives the handle '{handle}', which {node_type.type} already has "
                                            f"({', '.join(sorted(reserved))}); choose another name", node_id))
        elif handle in first_seen:
            errors.append(FieldError(where, f"gives the handle '{handle}' like {first_seen[handle]}; "
                                            "each needs its own handle", node_id))
        else:
            first_seen[handle] = where
    return errors


def parameter_errors(node_id: str, node_type: NodeType, parameters: Any, on_error: Any = None) -> list[FieldError]:
    """Problems of one node's parameters (see the module docstring for expressions)."""
    if parameters is None:
        parameters = {}
    if not isinstance(parameters, dict):
        return []  # structural_errors reports it
    errors: list[FieldError] = []
    expressions: set[Path] = set()
    for path, value in _leaves(parameters):
        problem = syntax_error(value)
        if problem:
            errors.append(FieldError(field_path("parameters", path), f"expression does not parse: {problem}",
                                     node_id))
            expressions.add(path)  # already reported; its type is not checked as well
        elif is_whole_expression(value):
            expressions.add(path)
    errors += _model_errors(node_type.params_model, parameters, "parameters", node_id, expressions, node_type)
    errors += _handle_parameter_errors(node_id, node_type, parameters, on_error)
    errors += _literal_parameter_errors(node_id, node_type, parameters)
    return errors


def _literal_parameter_errors(node_id: str, node_type: NodeType, parameters: dict) -> list[FieldError]:
    """Parameters read when the workflow is published, before any run exists (`literal_parameters`:
    a trigger.schedule's cron, interval and time zone, read by the scheduler) must be written out.
    (The strict checks of cron and time zone are ScheduleParams' validators, backend/scheduler/cron.py.)"""
    return [FieldError(f"parameters.{key}", f"must be written out, not an expression: {node_type.literal_reader} "
                                            "reads it when the workflow is published, before any run exists",
                       node_id)
            for key in node_type.literal_parameters if looks_templated(parameters.get(key))]


def _unknown_type_message(type_id: str, known: list[str]) -> str:
    close = difflib.get_close_matches(type_id, known, n=2)
    hint = f"; did you mean {' or '.join(close)}?" if close else ""
    return (f"unknown node type '{type_id}'; expected a built-in type (trigger.manual, flow.ifElse, …) "
            f"or an action offered as a node, as listed in the palette{hint}")


def node_errors(node: dict, node_type: NodeType | None, known_types: list[str]) -> list[FieldError]:
    """Problems of one well-formed node (a dict with a string id)."""
    node_id = node["id"]
    errors: list[FieldError] = []
    type_id = node.get("type")
    if isinstance(type_id, str) and type_id.strip() and node_type is None:
        errors.append(FieldError("type", _unknown_type_message(type_id, known_types), node_id))
    on_error = node.get("onError")
    if on_error is not None and on_error not in ON_ERROR:
        errors.append(FieldError("onError", f"must be one of {', '.join(ON_ERROR)} (default fail), "
                                            f"got {on_error!r}", node_id))
    retry = node.get("retry")
    if retry is not None:
        if not isinstance(retry, dict):
            errors.append(FieldError("retry", "must be an object {maxAttempts >= 1, backoff fixed|exponential, "
                                              "delaySeconds >= 0}", node_id))
        else:
            errors += _retry_errors(node_id, retry)
    for key, kind, expected in (("label", str, "a string"), ("notes", str, "a string"),
                                ("disabled", bool, "true or false")):
        if node.get(key) is not None and not isinstance(node[key], kind):
            errors.append(FieldError(key, f"must be {expected}", node_id))
    if node_type is not None:
        errors += parameter_errors(node_id, node_type, node.get("parameters"), on_error)
    return errors


def _retry_errors(node_id: str, retry: dict) -> list[FieldError]:
    try:
        RetryPolicy.model_validate(retry)
    except ValidationError as exc:
        errors = []
        for error in exc.errors():
            path = _data_path(tuple(error["loc"]), retry, error["type"])
            message = error["msg"]
            if error["type"] == "extra_forbidden":
                message = "unknown key; expected maxAttempts, backoff, delaySeconds"
            errors.append(FieldError(field_path("retry", path), message, node_id))
        return errors
    return []


# --- the graph --------------------------------------------------------------------------------------


def _strongly_connected(nodes: list[str], successors: dict[str, list[str]]) -> list[list[str]]:
    """Tarjan's algorithm without recursion (long chains must not hit the recursion limit)."""
    index_of: dict[str, int] = {}
    low: dict[str, int] = {}
    on_stack: set[str] = set()
    stack: list[str] = []
    components: list[list[str]] = []
    counter = 0
    for root in nodes:
        if root in index_of:
            continue
        work: list[tuple[str, int]] = [(root, 0)]
        while work:
            node, position = work.pop()
            if position == 0:
                index_of[node] = low[node] = counter
                counter += 1
                stack.append(node)
                on_stack.add(node)
            children = successors.get(node, [])
            if position < len(children):
                work.append((node, position + 1))
                child = children[position]
                if child not in index_of:
                    work.append((child, 0))
                elif child in on_stack:
                    low[node] = min(low[node], index_of[child])
                continue
            if low[node] == index_of[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                components.append(component)
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[node])
    return components


def _cycle_through(start: str, members: set[str], successors: dict[str, list[str]]) -> list[str]:
    """A shortest cycle from `start` back to itself inside one strongly connected component."""
    previous: dict[str, str] = {}
    frontier = [start]
    while frontier:
        following = []
        for node in frontier:
            for child in successors.get(node, []):
                if child == start:
                    path = [node]
                    while path[-1] != start:
                        path.append(previous[path[-1]])
                    return [*reversed(path), start]
                if child in members and child not in previous:
                    previous[child] = node
                    following.append(child)
        frontier = following
    return [start, start]


def cycle_errors(order: list[str], edges: list[tuple[int, str, str, str]],
                  types: dict[str, NodeType | None]) -> list[FieldError]:
    """Cycles left once every flow.loop's `each` edges are set aside (see the module docstring)."""
    successors: dict[str, list[str]] = defaultdict(list)
    edge_index: dict[tuple[str, str], int] = {}
    for index, source, handle, target in edges:
        source_type = types.get(source)
        if source_type is not None and source_type.is_loop and handle == "each":
            continue
        if target not in successors[source]:
            successors[source].append(target)
        edge_index.setdefault((source, target), index)
    position = {node: i for i, node in enumerate(order)}
    errors = []
    for component in _strongly_connected(order, successors):
        if len(component) == 1 and component[0] not in successors.get(component[0], []):
            continue
        start = min(component, key=position.__getitem__)
        cycle = _cycle_through(start, set(component), successors)
        closing = edge_index[(cycle[-2], cycle[-1])]
        others = sorted(set(component) - set(cycle), key=position.__getitem__)
        also = f" (nodes {', '.join(others)} are caught in it too)" if others else ""
        errors.append(FieldError(
            f"edges[{closing}]",
            f"closes the cycle {' → '.join(cycle)}{also}; the only cycle allowed is a loop body that starts at a "
            "flow.loop's each handle and leads back into that loop",
            start,
        ))
    return errors


def validate_graph(graph: Any) -> list[FieldError]:
    """Every problem that keeps `graph` from being published or run, each naming node and field.

    Node-level fields are relative to the node ("parameters.cases[0].value", "retry.maxAttempts",
    "type"); edge problems name the edge ("edges[3].sourceHandle") and the node concerned;
    structural problems keep the paths of graph.structural_errors ("nodes[2].id").
    """
    errors = structural_errors(graph)
    if not isinstance(graph, dict) or not isinstance(graph.get("nodes"), list):
        return errors
    edges = graph.get("edges", [])
    edges = edges if isinstance(edges, list) else []
    registry = {t.type: t for t in palette()}
    known_types = list(registry)

    nodes: dict[str, dict] = {}
    types: dict[str, NodeType | None] = {}
    for node in graph["nodes"]:
        if not isinstance(node, dict) or not isinstance(node.get("id"), str) or not node["id"].strip():
            continue
        if node["id"] in nodes:
            continue  # a duplicate id: structural_errors names it
        nodes[node["id"]] = node
        type_id = node.get("type")
        types[node["id"]] = registry.get(type_id) if isinstance(type_id, str) else None
        errors += node_errors(node, types[node["id"]], known_types)

    triggers = {node_id for node_id, t in types.items() if t is not None and t.is_trigger}
    if not triggers:
        trigger_types = [t.type for t in registry.values() if t.is_trigger]
        errors.append(FieldError("nodes", f"needs at least one trigger node ({', '.join(trigger_types)}) "
                                          "to start the workflow"))

    usable: list[tuple[int, str, str, str]] = []
    seen: dict[tuple[str, str, str], int] = {}
    for index, edge in enumerate(edges):
        if not isinstance(edge, dict):
            continue
        source, target = edge.get("source"), edge.get("target")
        if not (isinstance(source, str) and source in nodes and isinstance(target, str) and target in nodes):
            continue  # structural_errors names it
        handle = edge.get("sourceHandle")
        if handle is None:
            handle = DEFAULT_HANDLE
        if not isinstance(handle, str):
            continue  # structural_errors names it
        source_type = types[source]
        if source_type is not None:
            handles = source_type.output_handles(nodes[source].get("parameters"), nodes[source].get("onError"))
            if handle not in handles:
                expected = (f"expected one of: {', '.join(dict.fromkeys(handles))}" if handles
                            else "it has no outgoing handles, so no edge may leave it")
                implied = " (an edge without sourceHandle leaves by 'out')" if edge.get("sourceHandle") is None else ""
                errors.append(FieldError(f"edges[{index}].sourceHandle",
                                         f"node '{source}' ({source_type.type}) has no handle '{handle}'{implied}; "
                                         f"{expected}", source))
        if target in triggers:
            errors.append(FieldError(f"edges[{index}].target",
                                     f"node '{target}' is a trigger ({types[target].type}): triggers start the "
                                     "workflow and take no incoming edges", target))
        key = (source, handle, target)
        if key in seen:
            errors.append(FieldError(f"edges[{index}]", f"repeats edges[{seen[key]}] ({source}.{handle} → {target})",
                                     source))
        else:
            seen[key] = index
        usable.append((index, source, handle, target))

    errors += cycle_errors(list(nodes), usable, types)
    return errors
