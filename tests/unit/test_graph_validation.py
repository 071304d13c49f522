"""validate_graph: every rule of DESIGN §4, each error naming the node and the field."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from backend.workflows.expression_syntax import is_whole_expression
from backend.workflows.graph import default_graph
from backend.workflows.node_types import node_type
from backend.workflows.validation import validate_graph

# The example graph of DESIGN §4, verbatim.
DESIGN_EXAMPLE = {
    "nodes": [
        {"id": "start", "type": "trigger.manual", "label": "Start", "parameters": {},
         "position": {"x": 0, "y": 0}},
        {"id": "big", "type": "flow.ifElse", "parameters": {"condition": "{{ input.amount > 1000 }}"}},
        {"id": "ok", "type": "input.approval",
         "parameters": {"title": "Approve {{ input.amount }} CHF", "assignee": {"role": "graphicalEditor-admin"}}},
        {"id": "sum", "type": "ai.summarize", "parameters": {"text": "{{ nodes.start.output.text }}"},
         "retry": {"maxAttempts": 3, "backoff": "exponential", "delaySeconds": 1}, "onError": "fail"},
    ],
    "edges": [
        {"source": "start", "target": "big"},
        {"source": "big", "sourceHandle": "true", "target": "ok"},
        {"source": "big", "sourceHandle": "false", "target": "sum"},
    ],
}

START = {"id": "start", "type": "trigger.manual", "parameters": {}}


def graph(*nodes: dict, edges: list[dict] | None = None, trigger: bool = True) -> dict[str, Any]:
    """A graph of a manual trigger `start` (unless trigger=False) plus `nodes`."""
    return {"nodes": ([START] if trigger else []) + list(nodes), "edges": edges or []}


def node(node_id: str, type_id: str, **parameters: Any) -> dict[str, Any]:
    return {"id": node_id, "type": type_id, "parameters": parameters}


def edge(source: str, target: str, handle: str | None = None) -> dict[str, Any]:
    return {"source": source, "target": target, **({"sourceHandle": handle} if handle is not None else {})}


def fields(errors) -> set[tuple[str | None, str]]:
    return {(e.node_id, e.field) for e in errors}


LOOP_GRAPH = graph(
    node("each", "flow.loop", items="{{ input.rows }}"),
    node("body", "context.transform", data="{{ item }}", mapping={"name": "customer.name"}),
    node("check", "flow.ifElse", condition="{{ nodes.body.output.result.name }}"),
    node("after", "flow.merge"),
    edges=[edge("start", "each"), edge("each", "body", "each"), edge("body", "check"),
           edge("check", "each", "true"), edge("check", "each", "false"), edge("each", "after", "done")],
)

VALID = {
    "design example": DESIGN_EXAMPLE,
    "default graph": default_graph(),
    "loop body returning into its loop": LOOP_GRAPH,
    "nested loops": graph(
        node("outer", "flow.loop", items="{{ input.groups }}"),
        node("inner", "flow.loop", items="{{ item.members }}"),
        node("work", "flow.wait", seconds=1),
        edges=[edge("start", "outer"), edge("outer", "inner", "each"), edge("inner", "work", "each"),
               edge("work", "inner"), edge("inner", "outer", "done")],
    ),
    "switch handles: one per case plus default": graph(
        node("route", "flow.switch", value="{{ input.country }}",
             cases=[{"value": "CH"}, {"value": 7}, {"value": True}, {"value": "{{ input.home }}", "handle": "home"}]),
        node("a", "flow.merge"),
        edges=[edge("start", "route"), edge("route", "a", "CH"), edge("route", "a", "7"),
               edge("route", "a", "true"), edge("route", "a", "home"), edge("route", "a", "default")],
    ),
    "ai.decide handles: one per option": graph(
        node("pick", "ai.decide", question="Which team handles {{ input.text }}?", options=["sales", "support"]),
        node("s", "flow.stop", status="completed"),
        edges=[edge("start", "pick"), edge("pick", "s", "sales"), edge("pick", "s", "support")],
    ),
    "onError route adds an error handle": graph(
        {**node("call", "core.readUrl", url="https://example.org"), "onError": "route",
         "retry": {"maxAttempts": 2}},
        node("handled", "flow.stop", status="failed", message="{{ nodes.call.error }}"),
        edges=[edge("start", "call"), edge("call", "handled", "error")],
    ),
    "expression-valued parameters of other types": graph(
        node("wait", "flow.wait", seconds="{{ input.delay }}"),
        node("form", "input.form", title="Details", fields="{{ input.fields }}",
             timeoutSeconds="{{ input.timeout }}", onTimeout="{{ input.onTimeout }}",
             assignee="{{ input.assignee }}"),
        node("sum", "ai.summarize", text="{{ nodes.form.output.text }}", maxWords=" {{ input.words }} "),
        node("py", "script.python", code="output = 1", timeoutSeconds="{{ input.limit }}"),
        edges=[edge("start", "wait"), edge("wait", "form"), edge("form", "sum"), edge("sum", "py")],
    ),
    "several triggers, approval handles, schedule": graph(
        node("cron", "trigger.schedule", cron="0 8 * * 1-5", timezone="Europe/Zurich"),
        node("hook", "trigger.webhook", path="invoices"),
        node("ask", "input.approval", title="OK?"),
        node("yes", "flow.merge"),
        edges=[edge("start", "ask"), edge("cron", "ask"), edge("hook", "ask"), edge("ask", "yes", "approved"),
               edge("ask", "yes", "rejected")],
    ),
}


@pytest.mark.parametrize("name", list(VALID))
def test_valid_graphs_have_no_errors(name):
    assert validate_graph(VALID[name]) == []


def _broken_loop_target() -> dict:
    # The body returns into a node before the loop instead: start → prep → loop → body → prep.
    return graph(
        node("prep", "flow.merge"),
        node("loop", "flow.loop", items=[1, 2]),
        node("body", "flow.merge"),
        edges=[edge("start", "prep"), edge("prep", "loop"), edge("loop", "body", "done"), edge("body", "prep")],
    )


INVALID = {
    "no trigger": (graph(node("a", "flow.merge"), trigger=False), (None, "nodes")),
    "unknown type": (graph(node("x", "flow.ifelse")), ("x", "type")),
    "unknown parameter": (graph(node("x", "flow.ifElse", condition=True, colour="red")),
                          ("x", "parameters.colour")),
    "missing required parameter": (graph(node("x", "flow.ifElse")), ("x", "parameters.condition")),
    "wrong type": (graph(node("x", "script.python", code="x", timeoutSeconds="ten")),
                   ("x", "parameters.timeoutSeconds")),
    "out of range": (graph(node("x", "script.python", code="x", timeoutSeconds=900)),
                     ("x", "parameters.timeoutSeconds")),
    "nested list item": (graph(node("x", "flow.switch", value=1, cases=[{"handle": "a"}])),
                         ("x", "parameters.cases[0].value")),
    "nested model key": (graph(node("x", "input.form", title="t", fields=[{"name": "a", "type": "colour"}])),
                         ("x", "parameters.fields[0].type")),
    "action parameter": (graph(node("x", "ai.summarize", text="t", style="poem")), ("x", "parameters.style")),
    "action model check": (graph(node("x", "context.transform", data=1)), ("x", "parameters")),
    "schedule needs cron or interval": (graph(node("t", "trigger.schedule")), ("t", "parameters")),
    "cron with 3 fields": (graph(node("t", "trigger.schedule", cron="* * *")), ("t", "parameters.cron")),
    "wait needs seconds or until": (graph(node("w", "flow.wait")), ("w", "parameters")),
    "templated string is no whole expression": (graph(node("x", "script.python", code="x",
                                                           timeoutSeconds="{{ a }}{{ b }}")),
                                                ("x", "parameters.timeoutSeconds")),
    "expression that does not parse": (graph(node("x", "ai.prompt", prompt="Hi {{ input.name")),
                                       ("x", "parameters.prompt")),
    "unknown handle": (graph(node("x", "flow.ifElse", condition=True), edges=[edge("x", "start", "maybe")]),
                       ("x", "edges[0].sourceHandle")),
    "missing handle means out": (graph(node("x", "flow.ifElse", condition=True), node("y", "flow.merge"),
                                       edges=[edge("x", "y")]), ("x", "edges[0].sourceHandle")),
    "no handles on flow.stop": (graph(node("x", "flow.stop"), node("y", "flow.merge"), edges=[edge("x", "y")]),
                                ("x", "edges[0].sourceHandle")),
    "error handle without route": (graph(node("x", "flow.merge"), node("y", "flow.merge"),
                                         edges=[edge("x", "y", "error")]), ("x", "edges[0].sourceHandle")),
    "switch case handle not declared": (graph(node("x", "flow.switch", value=1, cases=[{"value": 1}]),
                                              node("y", "flow.merge"), edges=[edge("x", "y", "2")]),
                                        ("x", "edges[0].sourceHandle")),
    "ai.decide option not declared": (graph(node("x", "ai.decide", question="q", options=["a", "b"]),
                                            node("y", "flow.merge"), edges=[edge("x", "y", "out")]),
                                      ("x", "edges[0].sourceHandle")),
    "duplicate switch handles": (graph(node("x", "flow.switch", value=1, cases=[{"value": 1}, {"value": "1"}])),
                                 ("x", "parameters.cases[1]")),
    "switch case named default": (graph(node("x", "flow.switch", value=1, cases=[{"value": 1, "handle": "default"}])),
                                  ("x", "parameters.cases[0].handle")),
    "expression case value without handle": (graph(node("x", "flow.switch", value=1,
                                                        cases=[{"value": "{{ input.limit }}"}])),
                                             ("x", "parameters.cases[0].handle")),
    "options from an expression": (graph(node("x", "ai.decide", question="q", options="{{ input.options }}")),
                                   ("x", "parameters.options")),
    "duplicate options": (graph(node("x", "ai.decide", question="q", options=["a", "a"])),
                          ("x", "parameters.options[1]")),
    "too few options": (graph(node("x", "ai.decide", question="q", options=["a"])), ("x", "parameters.options")),
    "retry not an object": (graph({**node("x", "flow.merge"), "retry": 3}), ("x", "retry")),
    "retry maxAttempts 0": (graph({**node("x", "flow.merge"), "retry": {"maxAttempts": 0}}),
                            ("x", "retry.maxAttempts")),
    "retry backoff": (graph({**node("x", "flow.merge"), "retry": {"backoff": "linear"}}), ("x", "retry.backoff")),
    "retry negative delay": (graph({**node("x", "flow.merge"), "retry": {"delaySeconds": -1}}),
                             ("x", "retry.delaySeconds")),
    "retry unknown key": (graph({**node("x", "flow.merge"), "retry": {"tries": 2}}), ("x", "retry.tries")),
    "onError": (graph({**node("x", "flow.merge"), "onError": "ignore"}), ("x", "onError")),
    "label not a string": (graph({**node("x", "flow.merge"), "label": 5}), ("x", "label")),
    "edge into a trigger": (graph(node("x", "flow.merge"), edges=[edge("x", "start")]), ("start", "edges[0].target")),
    "edge to a missing node (structural)": (graph(edges=[edge("start", "ghost")]), ("ghost", "edges[0].target")),
    "duplicate edge": (graph(node("y", "flow.merge"), edges=[edge("start", "y"), edge("start", "y", "out")]),
                       ("start", "edges[1]")),
    "plain cycle": (graph(node("a", "flow.merge"), node("b", "flow.merge"),
                          edges=[edge("start", "a"), edge("a", "b"), edge("b", "a")]), ("a", "edges[2]")),
    "self loop": (graph(node("a", "flow.merge"), edges=[edge("a", "a")]), ("a", "edges[0]")),
    "cycle through a loop's done handle": (
        graph(node("loop", "flow.loop", items=[1]), node("after", "flow.merge"),
              edges=[edge("start", "loop"), edge("loop", "after", "done"), edge("after", "loop")]),
        ("loop", "edges[2]")),
    "cycle inside a loop body": (
        graph(node("loop", "flow.loop", items=[1]), node("a", "flow.merge"), node("b", "flow.merge"),
              edges=[edge("start", "loop"), edge("loop", "a", "each"), edge("a", "b"), edge("b", "a"),
                     edge("b", "loop")]),
        ("a", "edges[3]")),
    "body returning before the loop, not into it": (_broken_loop_target(), ("prep", "edges[3]")),
}


@pytest.mark.parametrize("name", list(INVALID))
def test_invalid_graphs_name_node_and_field(name):
    bad, expected = INVALID[name]
    errors = validate_graph(bad)
    assert expected in fields(errors), [str(e) for e in errors]
    for error in errors:
        assert error.message and str(error)


def test_messages_say_what_is_expected():
    errors = validate_graph(graph(node("x", "flow.ifElse", condition=True), node("y", "flow.merge"),
                                  edges=[edge("x", "y", "maybe")]))
    assert "expected one of: true, false" in errors[0].message
    unknown = validate_graph(graph(node("x", "flow.ifelse")))[0]
    assert "did you mean flow.ifElse" in unknown.message
    extra = validate_graph(graph(node("x", "flow.ifElse", condition=True, colour="red")))[0]
    assert "expected one of: condition" in extra.message
    retry = validate_graph(graph({**node("x", "flow.merge"), "retry": {"backoff": "linear"}}))[0]
    assert "'fixed' or 'exponential'" in retry.message


def test_cycle_error_names_the_nodes_of_the_cycle():
    cycle = validate_graph(INVALID["plain cycle"][0])
    assert len(cycle) == 1 and "a → b → a" in cycle[0].message
    body = validate_graph(INVALID["cycle inside a loop body"][0])
    assert len(body) == 1 and "a → b → a" in body[0].message


def test_every_problem_is_reported_not_only_the_first():
    bad = graph(node("x", "flow.ifelse"), {**node("y", "flow.merge"), "onError": "ignore"},
                node("z", "script.python"), edges=[edge("y", "start"), edge("y", "y")], trigger=True)
    assert {("x", "type"), ("y", "onError"), ("z", "parameters.code"), ("start", "edges[0].target"),
            ("y", "edges[1]")} <= fields(validate_graph(bad))


def test_expression_values_are_accepted_only_where_they_are_whole():
    assert is_whole_expression("{{ input.amount }}")
    assert is_whole_expression("  {{ {'a': {'b': 1}} }}\n")
    assert not is_whole_expression("{{ a }} CHF")
    assert not is_whole_expression("{{ a }}{{ b }}")
    assert not is_whole_expression("{{ a")
    assert not is_whole_expression(5)
    # An expression still counts as present for a required field, and unknown keys are still refused.
    ok = graph(node("x", "input.approval", title="{{ input.title }}", assignee="{{ input.who }}"))
    assert validate_graph(ok) == []
    bad = graph(node("x", "input.approval", title="t", assignee={"group": "{{ input.who }}"}))
    assert ("x", "parameters.assignee.group") in fields(validate_graph(bad))


def test_long_chains_validate_without_recursion_limits():
    chain = [node(f"n{i}", "flow.merge") for i in range(3000)]
    edges = [edge("start", "n0")] + [edge(f"n{i}", f"n{i + 1}") for i in range(2999)]
    assert validate_graph(graph(*chain, edges=edges)) == []
    edges.append(edge("n2999", "n0"))
    (error,) = validate_graph(graph(*chain, edges=edges))
    assert (error.node_id, error.field) == ("n0", "edges[3000]")


def test_output_handles_follow_parameters_and_on_error():
    switch = node_type("flow.switch")
    assert switch.output_handles({"cases": [{"value": "a"}, {"value": 2, "handle": "two"}, {"value": None}]},
                                 "route") == ["a", "two", "null", "default", "error"]
    assert node_type("ai.decide").output_handles({"options": ["x", "y"]}) == ["x", "y"]
    assert node_type("flow.stop").output_handles({}) == []
    assert node_type("flow.loop").output_handles({}) == ["each", "done"]


def test_validation_does_not_change_the_graph():
    before = copy.deepcopy(LOOP_GRAPH)
    validate_graph(LOOP_GRAPH)
    assert LOOP_GRAPH == before


@pytest.mark.parametrize("bad", [None, [], {"nodes": "x"}, {"nodes": [1, {"id": 3}], "edges": [7]}])
def test_malformed_input_gives_structural_errors_without_crashing(bad):
    assert validate_graph(bad)
