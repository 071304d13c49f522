"""The editor's pure parts behind issue 16: new nodes start with their type's defaults, the Test
run runs the version on the canvas, errors name their node once, the trace names nodes by label,
the editor reads its address without RouterData.page, and the AI help is offered or explained."""

from __future__ import annotations

from datetime import UTC, datetime
from types import SimpleNamespace

import pytest

from backend.errors import FieldError, InvalidInput
from backend.workflows import graph_edit
from backend.workflows.node_types import palette
from backend.workflows.validation import node_errors, validate_graph
from state.editor_chat import ASK_AI_NO_PROVIDER, ai_help
from state.editor_runs import named_once, node_labels, run_error_text, run_version, trace_rows, without_node
from state.page import routed_id, user_message

# --- new nodes --------------------------------------------------------------------------------------


def test_a_new_schedule_runs_every_day_at_eight_in_the_users_time_zone():
    graph = {"nodes": [], "edges": []}
    node = graph_edit.add_node(graph, "trigger.schedule", time_zone="Europe/Zurich")
    assert node["parameters"] == {"cron": "0 8 * * *", "timezone": "Europe/Zurich"}
    assert validate_graph(graph) == []  # a lone schedule is a valid graph: nothing the draft save refuses


@pytest.mark.parametrize("reported", ["", None, "Mars/Olympus_Mons", "../etc/passwd", 42])
def test_a_time_zone_the_scheduler_does_not_know_falls_back_to_utc(reported):
    node = graph_edit.add_node({"nodes": []}, "trigger.schedule", time_zone=reported)
    assert node["parameters"]["timezone"] == "UTC"


def test_every_type_with_starting_parameters_is_valid_as_dropped():
    known = [t.type for t in palette()]
    with_defaults = [t for t in palette() if t.new_parameters is not None]
    assert {t.type for t in with_defaults} >= {"trigger.schedule", "trigger.webhook", "flow.wait", "script.python",
                                               "input.approval", "input.form"}
    for kind in with_defaults:
        for zone in ("UTC", "America/New_York"):
            node = graph_edit.add_node({"nodes": []}, kind.type, time_zone=zone)
            assert node["parameters"], kind.type
            assert node_errors(node, kind, known) == [], kind.type


def test_given_parameters_win_over_the_defaults_and_each_node_gets_its_own_copy():
    graph = {"nodes": []}
    assert graph_edit.add_node(graph, "flow.wait", parameters={})["parameters"] == {}
    first = graph_edit.add_node(graph, "flow.wait")
    second = graph_edit.add_node(graph, "flow.wait")
    first["parameters"]["seconds"] = 5
    assert second["parameters"] == {"seconds": 60}
    assert graph_edit.add_node(graph, "flow.merge")["parameters"] == {}


# --- the page's address -----------------------------------------------------------------------------


@pytest.mark.parametrize(("path", "expected"), [
    ("/editor/abc123", "abc123"), ("/editor/abc123/", "abc123"), ("/app/editor/abc123", "abc123"),
    ("/editor", ""), ("/editor/", ""), ("/workflows", ""), ("/editor/a/b", ""),
])
def test_the_workflow_id_comes_from_the_address(path, expected):
    assert routed_id(path, "editor") == expected
    assert routed_id(path.replace("editor", "forms"), "forms") == expected


# --- test runs and the trace ------------------------------------------------------------------------


def test_the_test_run_runs_the_version_on_the_canvas():
    assert run_version("draft") == "draft"
    assert run_version("published") == "published"  # right after Publish: no draft until the next edit
    assert run_version("") is None


def test_an_error_names_its_node_once():
    assert without_node("node 'gate', parameter 'condition': boom", "gate") == "parameter 'condition': boom"
    assert without_node("node 'gate': unknown node type 'x'", "gate") == "unknown node type 'x'"
    assert without_node("node 'other', parameter 'x': boom", "gate") == "node 'other', parameter 'x': boom"
    assert without_node("ZeroDivisionError: division by zero", "gate") == "ZeroDivisionError: division by zero"
    labels = {"gate": "Amount test", "plain": "plain"}
    assert run_error_text("node 'gate' failed: node 'gate', parameter 'condition': boom", labels) == \
        "Amount test (gate) failed: parameter 'condition': boom"
    assert run_error_text("node 'plain' failed: ValueError: x", labels) == "node 'plain' failed: ValueError: x"
    assert run_error_text("cancelled by admin", labels) == "cancelled by admin"


def _step(node_id: str, error: str | None = None):
    return SimpleNamespace(id=f"s-{node_id}", node_id=node_id, node_type="flow.ifElse", status="failed",
                           attempt=1, duration_ms=5, started_at=datetime(2026, 1, 1, tzinfo=UTC),
                           input={"a": 1}, output=None, error=error)


def test_the_trace_names_nodes_by_label_and_drops_the_repeated_node_from_errors():
    graph = {"nodes": [{"id": "gate", "type": "flow.ifElse", "label": "Amount test"},
                       {"id": "merge", "type": "flow.merge"}, {"id": "odd", "type": "no.such"}]}
    labels = node_labels(graph)
    assert labels == {"gate": "Amount test", "merge": "Merge", "odd": "odd"}
    rows = trace_rows([_step("gate", "node 'gate', parameter 'condition': boom"), _step("gone")], labels)
    assert [(r["label"], r["node_id"], r["error"]) for r in rows] == [
        ("Amount test", "gate", "parameter 'condition': boom"), ("gone", "gone", "")]


# --- the AI help ------------------------------------------------------------------------------------


def test_the_ai_help_is_offered_with_a_provider_and_explained_without_one():
    assert ai_help(("a provider",), True) == (True, "")
    offered, note = ai_help((), True)
    assert not offered and note == ASK_AI_NO_PROVIDER and "OPENAI_API_KEY" in note
    assert ai_help(("a provider",), False) == (False, "")  # no useAgent right: not shown at all


def test_a_refusal_names_each_node_once():
    refused = InvalidInput([
        FieldError("edges[1].sourceHandle", "node 'gate' (flow.ifElse) has no handle 'maybe'", "gate"),
        FieldError("parameters.cron", "expected 5 or 6 fields", "clock")])
    assert user_message(named_once(refused)) == ("edges[1].sourceHandle: node 'gate' (flow.ifElse) has no handle "
                                                 "'maybe'; node 'clock', parameters.cron: expected 5 or 6 fields")
    other = ValueError("node 'x', y: z")
    assert named_once(other) is other
