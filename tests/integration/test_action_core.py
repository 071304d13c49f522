"""The action library's one path: validation, rights, failures, savepoints, tool adapter, catalogue."""

from __future__ import annotations

import json

import pytest
from pydantic import Field
from sqlmodel import select

from backend.actions import ActionContext, ActionError, ActionParams, action, execute_action
from backend.actions.base import declared_action
from backend.actions.openai_tools import (
    TOOL_NAME,
    TOOL_RESULT_LIMIT,
    execute_tool_call,
    result_for_agent,
    strict_parameters,
    to_tool_definition,
    tool_name,
    truncate_for_agent,
)
from backend.actions.registry import ActionRegistry, get_registry
from backend.db import session_scope
from backend.db.models import FeatureInstance, Mandate, User
from backend.tenancy import grant_instance_roles

SQLITE = pytest.mark.parametrize("db_url", ["sqlite"], indirect=True)


class Greeting(ActionParams):
    name: str = Field(..., min_length=1, description="who to greet")
    title: str | None = Field(None, description="a parameter named like a schema keyword")
    times: int = Field(1, ge=1, le=5)
    shout: bool | None = None


@action("test.greet", toolbox="core", label="Greet", description="Greets someone.", params=Greeting)
def greet(params: Greeting, context: ActionContext) -> dict:
    text = " ".join([f"Hello {params.name}"] * params.times)
    return {"text": text.upper() if params.shout else text, "user": context.user.username}


@action("test.createThenFail", toolbox="core", label="Write then fail", description="Writes, then fails.",
        capabilities=("write",))
def create_then_fail(params, context: ActionContext) -> None:
    context.session.add(Mandate(name="half-written"))
    context.session.flush()
    raise ActionError("the second half did not work")


@action("test.crash", toolbox="core", label="Crash", description="Raises an unexpected error.")
def crash(params, context: ActionContext) -> None:
    raise ZeroDivisionError("division by zero")


@action("outlook.readEmails", toolbox="email", label="Read", description="Reads mail.", connection_type="outlook")
def read_emails(params, context: ActionContext) -> list:
    return []


REGISTRY = ActionRegistry({a.id: a for a in map(declared_action, (greet, create_then_fail, crash, read_emails))})


@SQLITE
def test_valid_call_returns_the_output(action_context):
    result = execute_action("test.greet", {"name": "Ada", "times": 2}, action_context, REGISTRY)
    assert result.ok and result.output == {"text": "Hello Ada Hello Ada", "user": "admin"}


@SQLITE
def test_unknown_action_and_invalid_parameters_are_named(action_context):
    unknown = execute_action("test.nothing", {}, action_context, REGISTRY)
    assert not unknown.ok and unknown.error == "unknown action id 'test.nothing'"
    invalid = execute_action("test.greet", {"name": "", "times": 9, "colour": "red"}, action_context, REGISTRY)
    assert not invalid.ok and invalid.error_kind == "invalid"
    for field in ("name", "times", "colour"):
        assert field in invalid.error


@SQLITE
def test_a_failing_action_leaves_nothing_written(action_context):
    result = execute_action("test.createThenFail", {}, action_context, REGISTRY)
    assert not result.ok and result.error == "the second half did not work"
    assert action_context.session.exec(select(Mandate).where(Mandate.name == "half-written")).first() is None


@SQLITE
def test_an_unexpected_exception_is_a_clear_message_not_a_traceback(action_context):
    result = execute_action("test.crash", {}, action_context, REGISTRY)
    assert not result.ok and result.error_kind == "crashed"
    assert "ZeroDivisionError: division by zero" in result.error and "Traceback" not in result.error


@SQLITE
def test_rights_are_checked_for_the_caller_in_their_instance(app_config):
    with session_scope() as session:
        instance = session.exec(select(FeatureInstance).where(FeatureInstance.feature_code == "workspace")).one()
        viewer = User(username="vic")
        session.add(viewer)
        session.flush()
        grant_instance_roles(session, viewer, instance, ["workspace-viewer"])
        outsider = User(username="otto")
        session.add(outsider)
        session.flush()
    with session_scope() as session:
        instance = session.exec(select(FeatureInstance).where(FeatureInstance.feature_code == "workspace")).one()
        for username in ("vic", "otto"):
            user = session.exec(select(User).where(User.username == username)).one()
            context = ActionContext(session, user, instance.mandate_id, instance.id)
            result = execute_action("test.greet", {"name": "x"}, context, REGISTRY)
            assert not result.ok and result.error_kind == "forbidden", username
            assert "test.greet" in result.error


def test_tool_definitions_are_valid_for_strict_mode():
    definition = to_tool_definition(declared_action(greet))
    function = definition["function"]
    assert function["name"] == "test_greet" and function["strict"] is True
    parameters = function["parameters"]
    assert parameters["additionalProperties"] is False
    assert sorted(parameters["required"]) == ["name", "shout", "times", "title"]
    assert parameters["properties"]["times"]["type"] == ["integer", "null"]  # optional: nullable, compactly
    assert "minLength" not in json.dumps(parameters) and "default" not in json.dumps(parameters)
    assert tool_name("outlook.readEmails") == "outlook_readEmails"


def test_every_registered_action_gives_a_valid_tool_definition():
    for found in get_registry().actions.values():
        definition = to_tool_definition(found)
        assert TOOL_NAME.match(definition["function"]["name"]), found.id
        _assert_strict(strict_parameters(found), found.id)


def _assert_strict(node, action_id):
    if isinstance(node, dict):
        if node.get("type") == "object":
            assert node["additionalProperties"] is False, action_id
            assert sorted(node["required"]) == sorted(node["properties"]), action_id
        for value in node.values():
            _assert_strict(value, action_id)
    elif isinstance(node, list):
        for value in node:
            _assert_strict(value, action_id)


@SQLITE
def test_tool_calls_come_back_to_the_action(action_context):
    registry_names = {tool_name(a.id) for a in REGISTRY.actions.values()}
    assert "test_greet" in registry_names
    result = execute_tool_call("core_nothing", "{}", action_context)
    assert not result.ok and "unknown tool" in result.error
    broken = execute_tool_call("core_readFile", "{not json", action_context)
    assert not broken.ok


def test_results_for_agents_are_cut_with_a_visible_note():
    long = "x" * (TOOL_RESULT_LIMIT * 2)
    cut = truncate_for_agent(long)
    assert len(cut) <= TOOL_RESULT_LIMIT and "result cut" in cut and f"{TOOL_RESULT_LIMIT * 2:,}" in cut
    assert truncate_for_agent("short") == "short"
    from backend.actions.base import ActionResult

    assert json.loads(result_for_agent(ActionResult("a", False, error="boom"))) == {"error": "boom"}


@SQLITE
def test_catalogue_routes_list_toolboxes_and_node_types(api):
    boxes = api.client.get("/api/toolboxes", headers=api.auth).json()
    registry = get_registry()
    assert [b["id"] for b in boxes] == [t.id for t in registry.toolboxes()]
    for box in boxes:
        assert box["actions"], box["id"]
        for entry in box["actions"]:
            assert entry["parameters"]["type"] == "object"
    types = {t["type"]: t for t in api.client.get("/api/node-types", headers=api.auth).json()}
    for builtin in ("trigger.manual", "flow.ifElse", "flow.loop", "input.approval", "ai.prompt", "script.python"):
        assert builtin in types
    assert types["flow.ifElse"]["handles"] == ["true", "false"]
    assert types["input.approval"]["handles"] == ["approved", "rejected"]
    assert types["flow.switch"]["dynamicHandles"] == "cases"
    assert "intervalSeconds" in types["trigger.schedule"]["parameters"]["properties"]
    for node_action in registry.graph_nodes():
        assert types[node_action.id]["toolbox"] == node_action.toolbox
    assert api.client.get("/api/node-types").status_code == 401
