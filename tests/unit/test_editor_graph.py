"""The editor's pure parts: graph edits (shared with the agent's tools) and the parameter form."""

from __future__ import annotations

import pytest

from backend.workflows import graph_edit
from backend.workflows.node_types import BUILTIN_NODE_TYPES
from state.param_fields import fields_of, parse_value


def _graph():
    return {"nodes": [{"id": "start", "type": "trigger.manual", "position": {"x": 0, "y": 0}},
                      {"id": "check", "type": "flow.ifElse", "parameters": {"condition": "{{ nodes.start.output }}"},
                       "position": {"x": 260, "y": 0}}],
            "edges": [{"source": "start", "target": "check"}]}


def test_added_nodes_get_free_ids_and_spots():
    graph = _graph()
    first = graph_edit.add_node(graph, "ai.prompt")
    second = graph_edit.add_node(graph, "ai.prompt")
    assert (first["id"], second["id"]) == ("prompt", "prompt2")
    assert first["label"] == "AI prompt"
    assert first["position"] != second["position"]


def test_a_taken_or_malformed_id_is_refused_with_the_reason():
    graph = _graph()
    with pytest.raises(graph_edit.GraphEditError, match="already exists"):
        graph_edit.add_node(graph, "flow.merge", node_id="check")
    with pytest.raises(graph_edit.GraphEditError, match="must start with a letter"):
        graph_edit.add_node(graph, "flow.merge", node_id="9 lives")


def test_removing_a_node_takes_its_edges_and_edges_go_by_key():
    graph = _graph()
    graph_edit.add_edge(graph, "check", "true", "start")
    assert graph_edit.edge_key(graph["edges"][1]) == "check:true->start"
    removed = graph_edit.remove_elements(graph, edge_keys=["check:true->start"])
    assert [graph_edit.edge_key(e) for e in removed] == ["check:true->start"]
    removed = graph_edit.remove_elements(graph, node_ids=["start"])
    assert [n["id"] for n in graph["nodes"]] == ["check"]
    assert graph["edges"] == [] and len(removed) == 1


def test_moves_round_and_skip_unknown_nodes():
    graph = _graph()
    assert graph_edit.move_nodes(graph, [{"id": "check", "x": 10.6, "y": -3.2}, {"id": "gone", "x": 1, "y": 1}]) == 1
    assert graph["nodes"][1]["position"] == {"x": 11, "y": -3}


def test_referring_nodes_are_found():
    assert graph_edit.referring_nodes(_graph(), "start") == ["check"]


def _schema(type_id):
    return next(t for t in BUILTIN_NODE_TYPES if t.type == type_id).params_model.model_json_schema()


def test_the_form_follows_the_schema():
    rows = {r["name"]: r for r in fields_of(_schema("input.approval"),
                                            {"title": "Pay {{ input.amount }}", "timeoutSeconds": 60})}
    assert rows["title"]["kind"] == "text" and rows["title"]["required"]
    assert rows["title"]["value"] == "Pay {{ input.amount }}"
    assert rows["timeoutSeconds"]["kind"] == "number" and rows["timeoutSeconds"]["title"] == "Timeout seconds"
    assert rows["onTimeout"]["kind"] == "select" and rows["onTimeout"]["options"] == ["cancel", "default"]
    assert rows["onTimeout"]["value"] == "cancel"  # the default is shown
    assert rows["assignee"]["kind"] == "assignee"  # a picker of roles and users (issue 16)
    prompt = {r["name"]: r for r in fields_of(_schema("ai.prompt"), {})}
    assert prompt["prompt"]["kind"] == "textarea"


def test_typed_values_are_parsed_or_explained():
    assert parse_value("number", "42") == (42, "")
    assert parse_value("number", "2.5") == (2.5, "")
    assert parse_value("number", "{{ input.n }}") == ("{{ input.n }}", "")
    value, problem = parse_value("number", "lots")
    assert value is None and "not a number" in problem
    assert parse_value("json", '{"role": "x"}') == ({"role": "x"}, "")
    assert "line 1, column" in parse_value("json", "{role")[1]
    assert parse_value("text", "  ") == (None, "")
    assert parse_value("any", "3") == (3, "") and parse_value("any", "approved") == ("approved", "")
