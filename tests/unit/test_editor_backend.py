"""The Graphical Editor's backend helpers: connection rules, templates, import/export, autocomplete."""

from __future__ import annotations

import copy
import json

import pytest

from backend.errors import InvalidInput, NotFound
from backend.triggers.secrets import MASK
from backend.workflows import templates as catalogue
from backend.workflows.connections import connection_error, handles_of
from backend.workflows.graph_io import export_document, parse_import
from backend.workflows.suggestions import MAX_SUGGESTIONS, expression_suggestions
from backend.workflows.validation import validate_graph

GRAPH = {
    "nodes": [
        {"id": "start", "type": "trigger.manual", "parameters": {}},
        {"id": "big", "type": "flow.ifElse", "parameters": {"condition": "{{ input.amount > 1000 }}"}},
        {"id": "yes", "type": "context.transform", "parameters": {"data": "{{ input }}", "template": "y"}},
        {"id": "no", "type": "context.transform", "parameters": {"data": "{{ input }}", "template": "n"},
         "onError": "route"},
        {"id": "loop", "type": "flow.loop", "parameters": {"items": "{{ input.items }}"}},
        {"id": "body", "type": "context.transform", "parameters": {"data": "{{ item }}", "template": "b"}},
        {"id": "body2", "type": "context.transform", "parameters": {"data": "{{ item }}", "template": "c"}},
        {"id": "after", "type": "context.transform", "parameters": {"data": "{{ input }}", "template": "a"}},
        {"id": "sw", "type": "flow.switch", "parameters": {"value": "{{ input.kind }}",
                                                           "cases": [{"value": "a"}, {"value": 2, "handle": "two"}]}},
    ],
    "edges": [
        {"source": "start", "target": "big"},
        {"source": "big", "sourceHandle": "true", "target": "yes"},
        {"source": "big", "sourceHandle": "false", "target": "no"},
        {"source": "yes", "target": "loop"},
        {"source": "loop", "sourceHandle": "each", "target": "body"},
        {"source": "body", "target": "body2"},
        {"source": "body2", "target": "loop"},
        {"source": "loop", "sourceHandle": "done", "target": "after"},
    ],
}


# --- connection rules -------------------------------------------------------------------------


def test_handles_of_a_node_follow_its_parameters_and_on_error():
    nodes = {n["id"]: n for n in GRAPH["nodes"]}
    assert handles_of(nodes["big"]) == ["true", "false"]
    assert handles_of(nodes["no"]) == ["out", "error"]
    assert handles_of(nodes["sw"]) == ["a", "two", "default"]
    assert handles_of(nodes["loop"]) == ["each", "done"]
    assert handles_of({"id": "x", "type": "no.such.type"}) == ["out"]
    assert handles_of({"id": "s", "type": "flow.stop"}) == []


@pytest.mark.parametrize(("source", "handle", "target", "fragments"), [
    ("ghost", None, "big", ("source 'ghost' is not in the graph", "start, big")),
    ("big", "true", "ghost", ("target 'ghost' is not in the graph",)),
    ("yes", None, "yes", ("'yes' cannot connect to itself", "cycle")),
    ("big", "maybe", "after", ("node 'big' (flow.ifElse) has no handle 'maybe'", "its handles are: true, false")),
    ("big", None, "after", ("has no handle 'out'",)),
    ("no", "error", "start", ("node 'start' is a trigger", "nothing can connect into 'start'")),
    ("big", "true", "yes", ("the edge big.true → yes already exists",)),
    ("after", None, "big", ("closes the cycle", "loop body")),
    ("body2", None, "body", ("closes the cycle body → body2 → body", "loop body")),
])
def test_connection_errors_name_the_reason(source, handle, target, fragments):
    reason = connection_error(GRAPH, source, handle, target)
    assert reason is not None
    for fragment in fragments:
        assert fragment in reason, reason


@pytest.mark.parametrize(("source", "handle", "target"), [
    ("no", "error", "after"),
    ("no", None, "after"),
    ("sw", "two", "after"),
    ("start", None, "sw"),
    ("body", None, "loop"),  # a loop body may return into its loop
    ("big", "true", "no"),
])
def test_allowed_connections_answer_none(source, handle, target):
    assert connection_error(GRAPH, source, handle, target) is None
    graph = copy.deepcopy(GRAPH)
    graph["edges"].append({"source": source, "target": target, **({"sourceHandle": handle} if handle else {})})
    assert not [e for e in validate_graph(graph) if "cycle" in e.message or "repeats" in e.message]


# --- templates --------------------------------------------------------------------------------


def test_there_are_at_least_six_templates_each_valid_and_laid_out_left_to_right():
    found = catalogue.templates()
    assert len(found) >= 6 and len({t.id for t in found}) == len(found)
    names = {t.name for t in found}
    assert {"Approval of large expenses", "Daily web research digest", "Summarise new files",
            "Webhook to notification", "E-mail attachment → AI analysis → SharePoint upload",
            "Jira → ClickUp sync", "ClickUp overdue tasks → daily mail"} <= names
    for template in found:
        assert validate_graph(template.graph) == [], template.id
        assert template.description and template.category and isinstance(template.connections, tuple)
        positions = {n["id"]: n["position"] for n in template.graph["nodes"]}
        assert len(positions) == len(template.graph["nodes"])
        assert len({(p["x"], p["y"]) for p in positions.values()}) == len(positions), template.id
        loops = {n["id"] for n in template.graph["nodes"] if n["type"] == "flow.loop"}
        for edge in template.graph["edges"]:
            source, target = positions[edge["source"]], positions[edge["target"]]
            if edge["target"] in loops and target["x"] < source["x"]:
                continue  # a loop body's way back into its loop
            assert target["x"] - source["x"] == catalogue.X_STEP, (template.id, edge)
            assert abs(target["y"] - source["y"]) in (0, catalogue.Y_STEP), (template.id, edge)


def test_template_lookup_copies_and_unknown_ids_name_the_known_ones():
    first = catalogue.template("expense-approval")
    first.graph["nodes"].clear()
    assert catalogue.template("expense-approval").graph["nodes"]
    with pytest.raises(NotFound) as error:
        catalogue.template("nope")
    assert "template 'nope' not found" in str(error.value) and "jira-to-clickup-sync" in str(error.value)


# --- import / export --------------------------------------------------------------------------


def _problem(raw) -> str:
    with pytest.raises(InvalidInput) as error:
        parse_import(raw)
    return str(error.value)


def test_import_refuses_bad_files_with_a_clear_reason():
    assert "not UTF-8" in _problem(b'{"nodes": [], "x": "\xff"}')
    assert "line 2, column 11" in _problem('{"nodes": [],\n "edges": }')
    assert "is empty" in _problem("  ")
    assert "JSON list, not an object" in _problem("[1, 2]")
    assert "neither a graph nor a PowerOn export" in _problem('{"name": "x"}')
    assert "version 2 is not supported" in _problem('{"poweronWorkflow": 2, "graph": {"nodes": []}}')
    assert "graph: is missing" in _problem('{"poweronWorkflow": 1, "name": "x"}')
    structure = _problem(json.dumps({"nodes": [{"id": "a", "type": "trigger.manual"}, {"id": "a", "type": ""}],
                                     "edges": [{"source": "a", "target": "zz"}]}))
    assert "nodes[1].id: duplicate node id 'a'" in structure and "nodes[1].type" in structure
    assert "edges[0].target: refers to unknown node 'zz'" in structure


def test_export_masks_webhook_secrets_and_imports_back():
    graph = {"nodes": [{"id": "hook", "type": "trigger.webhook",
                        "parameters": {"path": "in", "secret": "whsec_c2VjcmV0LXZhbHVlLTEyMzQ1Ng=="},
                        "position": {"x": 0, "y": 0}},
                       {"id": "t", "type": "context.transform", "parameters": {"data": 1, "template": "x"}}],
             "edges": [{"source": "hook", "target": "t"}]}
    text = export_document("My flow", graph)
    assert "whsec_" not in text and "c2VjcmV0" not in text
    document = json.loads(text)
    assert document["poweronWorkflow"] == 1 and document["name"] == "My flow" and document["exportedAt"]
    assert document["graph"]["nodes"][0]["parameters"]["secret"] == MASK
    assert graph["nodes"][0]["parameters"]["secret"].startswith("whsec_")  # the original is untouched
    imported = parse_import(text.encode("utf-8"))
    expected = copy.deepcopy(graph)
    expected["nodes"][0]["parameters"]["secret"] = MASK
    assert imported == expected
    assert parse_import(json.dumps(expected)) == expected  # a bare graph too
    assert parse_import(b"\xef\xbb\xbf" + json.dumps(expected).encode()) == expected  # with a BOM


# --- expression suggestions -------------------------------------------------------------------


def test_suggestions_offer_upstream_outputs_nearest_first_with_paths_from_the_last_run():
    last = {"start": {"amount": 5000, "items": [{"sku": "A"}]},
            "big": {"result": True},
            "yes": {"result": {"body": {"title": "T", "tags": ["x"], "deep": {"a": {"b": {"c": 1}}}},
                               "odd-key": 1}},
            "after": {"result": "never upstream"}}
    found = expression_suggestions(GRAPH, "loop", last)
    assert found[0] == "{{ input }}"
    assert "{{ input.amount }}" in found and "{{ input.items[0].sku }}" in found
    outputs = [s for s in found if s.endswith(".output }}")]
    assert outputs == ["{{ nodes.yes.output }}", "{{ nodes.big.output }}", "{{ nodes.start.output }}"]
    assert "{{ nodes.yes.output.result.body.title }}" in found
    assert "{{ nodes.yes.output.result['odd-key'] }}" in found
    assert "{{ nodes.yes.output.result.body.tags }}" in found
    assert not any("deep.a" in s for s in found)  # three levels below output at most
    assert not any("after" in s or "body2" in s or "nodes.loop" in s for s in found)
    assert "{{ item }}" not in found
    assert found[-3:] == ["{{ run.id }}", "{{ workflow.name }}", "{{ now }}"]


def test_suggestions_inside_a_loop_body_offer_item_and_index_but_not_later_body_nodes():
    found = expression_suggestions(GRAPH, "body", {})
    assert found[:3] == ["{{ item }}", "{{ index }}", "{{ input }}"]
    assert "{{ nodes.loop.output }}" in found and "{{ nodes.body2.output }}" not in found
    after = expression_suggestions(GRAPH, "after", {})
    assert "{{ item }}" not in after and "{{ nodes.loop.output }}" in after
    assert "{{ nodes.body.output }}" not in after


def test_suggestions_are_capped_and_quote_odd_node_ids():
    graph = {"nodes": [{"id": "start", "type": "trigger.manual"}, {"id": "send-mail", "type": "x"},
                       {"id": "end", "type": "x"}],
             "edges": [{"source": "start", "target": "send-mail"}, {"source": "send-mail", "target": "end"}]}
    wide = {"send-mail": {f"k{i}": i for i in range(500)}}
    found = expression_suggestions(graph, "end", wide)
    assert len(found) == MAX_SUGGESTIONS and found[-1] == "{{ now }}"
    assert found[1] == "{{ nodes['send-mail'].output }}"
    assert expression_suggestions(graph, "start") == ["{{ input }}", "{{ run.id }}", "{{ workflow.name }}",
                                                      "{{ now }}"]
