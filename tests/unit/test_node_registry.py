"""Issue 15, one registry: every fact of a built-in node type is in its one entry of
backend.workflows.node_types, and no other module keeps a table of node types.

The built-ins and their handles are those of DESIGN §4; the engine runs a graph of each kind in
the integration tests (checked here by name), and the handlers that need no database are run
here through their registry entries.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest
from pydantic import BaseModel

from backend.engine import nodes
from backend.engine.expressions import ExpressionScope
from backend.workflows.node_types import (
    BUILTIN_NODE_TYPES,
    ERROR_HANDLE,
    NodeType,
    node_type,
    palette,
)

ROOT = Path(__file__).resolve().parents[2]

# DESIGN §4, "Built-in node types and their output handles" (dynamic handles in angle brackets).
DESIGN_BUILTINS: dict[str, tuple[str, ...]] = {
    "trigger.manual": ("out",),
    "trigger.schedule": ("out",),
    "trigger.webhook": ("out",),
    "trigger.form": ("out",),
    "trigger.event": ("out",),
    "flow.ifElse": ("true", "false"),
    "flow.switch": ("<one per case>", "default"),
    "flow.loop": ("each", "done"),
    "flow.merge": ("out",),
    "flow.wait": ("out",),
    "flow.stop": (),
    "input.form": ("out",),
    "input.approval": ("approved", "rejected"),
    "email.checkEmail": ("out",),
    "ai.prompt": ("out",),
    "ai.decide": ("<one per option>",),
    "script.python": ("out",),
}
# Modules allowed to name built-in types in collections: the registry itself and the workflow
# templates (graphs written out as examples).
REGISTRY_MODULES = {"backend/workflows/node_types.py", "backend/workflows/templates.py"}
# Modules that must not name a built-in type at all (outside docstrings and messages): they read
# the registry entry instead.
REGISTRY_READERS = ("backend/engine/executor.py", "backend/engine/frontier.py", "backend/engine/nodes.py",
                    "backend/workflows/validation.py", "backend/workflows/suggestions.py",
                    "backend/workflows/connections.py", "backend/workflows/graph_edit.py", "state/param_fields.py",
                    "state/editor.py", "state/editor_files.py")
TYPE_PREFIXES = {f"{t.split('.')[0]}." for t in DESIGN_BUILTINS}


def test_every_builtin_of_the_design_has_exactly_one_entry():
    types = [t.type for t in BUILTIN_NODE_TYPES]
    assert sorted(types) == sorted(DESIGN_BUILTINS)
    assert len(types) == len(set(types))
    assert [t.type for t in palette()].count("flow.loop") == 1


@pytest.mark.parametrize("type_id", sorted(DESIGN_BUILTINS))
def test_each_entry_has_a_handler_a_schema_and_the_design_handles(type_id):
    entry = node_type(type_id)
    assert isinstance(entry, NodeType) and entry in BUILTIN_NODE_TYPES
    assert callable(entry.handler) and getattr(nodes, entry.handler_name) is entry.handler
    assert issubclass(entry.params_model, BaseModel) and entry.params_model.model_json_schema()["type"] == "object"
    assert tuple(entry.described_handles()) == DESIGN_BUILTINS[type_id]
    assert entry.output_handles({}, "route")[-1] == ERROR_HANDLE
    assert entry.raw_parameters <= set(entry.params_model.model_json_schema()["properties"])
    assert set(entry.literal_parameters) <= set(entry.params_model.model_json_schema()["properties"])


def test_behaviour_flags_are_facts_of_the_entries():
    def having(flag: str) -> set[str]:
        return {t.type for t in BUILTIN_NODE_TYPES if getattr(t, flag)}

    assert having("is_trigger") == {t for t in DESIGN_BUILTINS if t.startswith("trigger.")}
    assert {t.run_trigger for t in BUILTIN_NODE_TYPES if t.is_trigger} == {"manual", "schedule", "webhook", "form",
                                                                            "event"}
    assert having("is_loop") == {"flow.loop"}
    assert having("waits_for_live_branches") == {"flow.merge"}
    assert {t.type: t.human_task for t in BUILTIN_NODE_TYPES if t.is_human} == {"input.form": "form",
                                                                                "input.approval": "approval"}
    assert having("concurrent") == {"ai.prompt", "ai.decide", "script.python"}
    assert node_type("script.python").raw_parameters == {"code"}
    assert node_type("flow.switch").output_handles({"cases": [{"value": "a"}, {"value": 2}]}) == ["a", "2", "default"]
    assert node_type("ai.decide").output_handles({"options": ["x", "y"]}) == ["x", "y"]


def test_node_actions_are_entries_of_the_same_registry():
    transform = node_type("context.transform")
    assert transform is not None and transform.toolbox == "ai" and transform.handler is nodes.run_action
    assert transform.raw_parameters == {"template", "mapping"} and transform.concurrent
    assert transform.group == "Toolbox: ai" and node_type("flow.loop").group == "Flow"
    assert node_type("no.such") is None and node_type(["not", "a", "type"]) is None


def _python_files(*tops: str) -> list[Path]:
    return sorted(p for top in tops for p in (ROOT / top).rglob("*.py"))


def _rel(path: Path) -> str:
    return path.relative_to(ROOT).as_posix()


def _collection_hits(tree: ast.AST) -> list[tuple[int, str]]:
    """(line, type) of every built-in type string that is a dict key or a set/tuple/list element."""
    hits = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Dict):
            members = [k for k in node.keys if k is not None]
        elif isinstance(node, (ast.Set, ast.Tuple, ast.List)):
            members = node.elts
        else:
            continue
        hits += [(m.lineno, m.value) for m in members
                 if isinstance(m, ast.Constant) and m.value in DESIGN_BUILTINS]
    return hits


def test_no_module_outside_the_registry_keeps_a_table_of_builtin_types():
    found = {}
    for path in _python_files("backend", "state", "components"):
        if _rel(path) in REGISTRY_MODULES:
            continue
        hits = _collection_hits(ast.parse(path.read_text(encoding="utf-8")))
        if hits:
            found[_rel(path)] = hits
    assert found == {}, "read the NodeType entry instead of listing types"


def _docstrings(tree: ast.AST) -> set[int]:
    ids = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) and node.body:
            first = node.body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant):
                ids.add(id(first.value))
    return ids


@pytest.mark.parametrize("module", REGISTRY_READERS)
def test_engine_validation_and_editor_name_no_builtin_type(module):
    """Type checks by name (`== "flow.loop"`, `.startswith("trigger.")`) are registry reads here."""
    tree = ast.parse((ROOT / module).read_text(encoding="utf-8"))
    docstrings = _docstrings(tree)
    named = [(n.lineno, n.value) for n in ast.walk(tree)
             if isinstance(n, ast.Constant) and isinstance(n.value, str) and id(n) not in docstrings
             and (n.value in DESIGN_BUILTINS or n.value in TYPE_PREFIXES)]
    assert named == []


# How an integration test starts runs: the runs API, the engine, a trigger's endpoint, the scheduler.
RUN_STARTERS = ("/runs", "execute_run", "start_run", "/hooks/", "/api/forms", "/api/events", "Scheduler(")


@pytest.mark.parametrize("type_id", sorted(DESIGN_BUILTINS))
def test_the_engine_runs_a_graph_of_each_builtin_kind(type_id):
    """Each built-in is in a graph of an integration test that runs graphs."""
    texts = [p.read_text(encoding="utf-8") for p in _python_files("tests/integration")]
    assert any(f'"{type_id}"' in text and any(s in text for s in RUN_STARTERS) for text in texts), (
        f"no integration test runs a {type_id} node")


def _call(type_id: str, parameters: dict, node_parameters: dict | None = None, incoming: dict | None = None):
    node = {"id": "n", "type": type_id, "parameters": node_parameters or parameters}
    return nodes.NodeCall(node, parameters, ExpressionScope(input={"x": 1}), session=None, user=None, run=None,
                          incoming=incoming or {})


@pytest.mark.parametrize(("type_id", "parameters", "handles"), [
    ("trigger.manual", {}, ("out",)),
    ("flow.ifElse", {"condition": True}, ("true",)),
    ("flow.switch", {"value": "b", "cases": [{"value": "a"}, {"value": "b"}]}, ("b",)),
    ("flow.loop", {"items": [1, 2]}, ("each",)),
    ("flow.loop", {"items": []}, ("done",)),
    ("flow.merge", {}, ("out",)),
    ("flow.stop", {"status": "completed"}, ()),
    ("flow.wait", {"seconds": 5}, ()),
])
def test_handlers_run_through_their_entries(type_id, parameters, handles):
    outcome = node_type(type_id).handler(_call(type_id, parameters, incoming={"a": 1}))
    assert outcome.handles == handles
