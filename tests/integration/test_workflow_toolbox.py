"""The workflow toolbox (spec §5.2, UC-3/UC-4/UC-5): agents build and inspect workflow drafts.

Tools are called through execute_action and, as a model would send them, through
openai_tools.execute_tool_call with JSON arguments that name every property of the strict schema
(null for the ones not given). Each call runs in a transaction of its own, like a request.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from sqlmodel import select

from backend.actions import ActionContext, execute_action
from backend.actions.openai_tools import execute_tool_call, result_for_agent, strict_parameters, to_tool_definition
from backend.actions.registry import get_registry
from backend.db import session_scope
from backend.db.models import FeatureInstance, Mandate, User, Workflow
from backend.tenancy import create_feature_instance, create_mandate, grant_instance_roles, grant_mandate_roles
from backend.workflows import service
from backend.workflows.node_types import palette

SQLITE = pytest.mark.parametrize("db_url", ["sqlite"], indirect=True)

TOOLS = ("listWorkflows", "createWorkflow", "readWorkflowGraph", "addNode", "removeNode", "connectNodes",
         "disconnectNodes", "setNodeParameter", "listAvailableNodeTypes", "validateGraph", "listWorkflowHistory",
         "readWorkflowMessages")


def _instance(session, feature_code: str, label: str | None = None) -> FeatureInstance:
    query = select(FeatureInstance).where(FeatureInstance.feature_code == feature_code)
    if label:
        query = query.where(FeatureInstance.label == label)
    return session.exec(query.order_by(FeatureInstance.sys_created_at)).first()


def _context(session, username: str, instance_id: str | None) -> ActionContext:
    user = session.exec(select(User).where(User.username == username)).one()
    instance = session.get(FeatureInstance, instance_id) if instance_id else _instance(session, "workspace")
    return ActionContext(session, user, instance.mandate_id, instance.id)


def act(name: str, args: dict[str, Any] | None = None, user: str = "admin", instance_id: str | None = None):
    """execute_action of workflow.<name> in its own transaction (default: the admin in the Workspace)."""
    with session_scope() as session:
        return execute_action(f"workflow.{name}", args or {}, _context(session, user, instance_id))


def tool(tool: str, /, user: str = "admin", instance_id: str | None = None, **given: Any):
    """A tool call as a strict-mode model sends it: every property present, null when not given."""
    action = get_registry().get(f"workflow.{tool}")
    properties = strict_parameters(action)["properties"]
    unknown = set(given) - set(properties)
    assert not unknown, f"{tool} has no properties {unknown}"
    arguments = json.dumps({key: given.get(key) for key in properties})
    with session_scope() as session:
        return execute_tool_call(f"workflow_{tool}", arguments, _context(session, user, instance_id))


def ok(result) -> Any:
    assert result.ok, result.error
    return result.output


def refused(result, *fragments: str) -> str:
    assert not result.ok, result.output
    for fragment in fragments:
        assert fragment in result.error, result.error
    return result.error


def draft_state(workflow_id: str) -> tuple[Any, int, int] | None:
    """The stored graph a person edits, with its version number and lock version."""
    with session_scope() as session:
        workflow = session.get(Workflow, workflow_id)
        version = service.draft_version(session, workflow) or service.published_version(session, workflow)
        return json.loads(json.dumps(version.graph)), version.version_number, version.lock_version


def transform(template: str) -> str:
    return json.dumps({"data": "{{ input }}", "template": template})


def build_branch(name: str = "Big or small") -> str:
    """trigger → ifElse → two transforms, step by step through tool calls; returns the workflow id."""
    created = ok(tool("createWorkflow", name=name, description="Routes by amount"))
    workflow_id = created["workflowId"]
    assert [n["type"] for n in created["nodes"]] == ["trigger.manual"] and created["draftVersion"] == 1
    big = ok(tool("addNode", workflowId=workflow_id, type="flow.ifElse", id="big",
                  parameters=json.dumps({"condition": "{{ input.amount > 1000 }}"})))
    assert big["node"]["id"] == "big" and big["handles"] == ["true", "false"]
    yes = ok(tool("addNode", workflowId=workflow_id, type="context.transform", label="Big",
                  parameters=transform("big {{ amount }}")))
    no = ok(tool("addNode", workflowId=workflow_id, type="context.transform", parameters=transform("small")))
    assert (yes["node"]["id"], no["node"]["id"]) == ("transform", "transform2")  # generated from the type
    ok(tool("connectNodes", workflowId=workflow_id, source="start", target="big"))
    ok(tool("connectNodes", workflowId=workflow_id, source="big", target="transform", sourceHandle="true"))
    ok(tool("connectNodes", workflowId=workflow_id, source="big", target="transform2", sourceHandle="false"))
    ok(tool("setNodeParameter", workflowId=workflow_id, nodeId="transform2", name="template",
            value="small {{ amount }}"))
    return workflow_id


@SQLITE
def test_a_graph_is_built_step_by_step_and_runs(api):
    workflow_id = build_branch()
    graph = ok(tool("readWorkflowGraph", workflowId=workflow_id))
    assert graph["version"] == {"number": 1, "status": "draft"}
    assert [(n["id"], n["type"]) for n in graph["nodes"]] == [
        ("start", "trigger.manual"), ("big", "flow.ifElse"), ("transform", "context.transform"),
        ("transform2", "context.transform")]
    assert graph["nodes"][3]["parameters"] == {"data": "{{ input }}", "template": "small {{ amount }}"}
    assert graph["edges"] == [{"source": "start", "target": "big"},
                              {"source": "big", "target": "transform", "sourceHandle": "true"},
                              {"source": "big", "target": "transform2", "sourceHandle": "false"}]
    assert "position" not in json.dumps(graph)  # compact
    stored, _, _ = draft_state(workflow_id)
    position = {n["id"]: n["position"] for n in stored["nodes"]}
    assert position["start"]["x"] < position["big"]["x"] < position["transform"]["x"]
    assert position["transform"]["x"] == position["transform2"]["x"]
    assert position["transform"]["y"] < position["transform2"]["y"]  # true above false
    assert ok(tool("validateGraph", workflowId=workflow_id)) == {
        "workflowId": workflow_id, "version": {"number": 1, "status": "draft"}, "valid": True, "errors": []}

    # The REST API sees the same draft and runs it.
    detail = api.client.get(f"{api.base()}/workflows/{workflow_id}", headers=api.auth).json()
    assert detail["graph"] == stored
    run = api.client.post(f"{api.base()}/workflows/{workflow_id}/runs", json={"input": {"amount": 5000}},
                          headers=api.auth).json()
    assert run["status"] == "completed", run
    assert run["output"] == {"transform": {"result": "big 5000", "missing": []}}

    history = ok(tool("listWorkflowHistory", workflowId=workflow_id))
    assert [(v["number"], v["status"]) for v in history["versions"]] == [(1, "draft")]
    assert [(r["id"], r["status"], r["version"], r["error"]) for r in history["runs"]] == [
        (run["id"], "completed", 1, None)]
    messages = ok(tool("readWorkflowMessages", workflowId=workflow_id))
    assert messages["run"]["id"] == run["id"] and messages["run"]["status"] == "completed"
    assert [(s["nodeId"], s["status"], s["attempt"]) for s in messages["steps"]] == [
        ("start", "completed", 1), ("big", "completed", 1), ("transform", "completed", 1)]
    assert "big 5000" in messages["steps"][-1]["output"]
    assert all(isinstance(s["durationMs"], int) for s in messages["steps"])

    # Published: the next change starts a new draft from the published graph, as PUT draft does.
    assert api.client.post(f"{api.base()}/workflows/{workflow_id}/publish", headers=api.auth).status_code == 200
    ok(tool("setNodeParameter", workflowId=workflow_id, nodeId="big", name="condition",
            value="{{ input.amount > 10 }}"))
    history = ok(act("listWorkflowHistory", {"workflowId": workflow_id}))
    assert [(v["number"], v["status"]) for v in history["versions"]] == [(2, "draft"), (1, "published")]
    with session_scope() as session:
        workflow = session.get(Workflow, workflow_id)
        published = service.published_version(session, workflow)
        assert published.graph["nodes"][1]["parameters"] == {"condition": "{{ input.amount > 1000 }}"}
        draft = service.draft_version(session, workflow)
        assert draft.graph["nodes"][1]["parameters"] == {"condition": "{{ input.amount > 10 }}"}
        assert draft.graph["edges"] == published.graph["edges"]


@SQLITE
def test_refused_mutations_name_the_reason_and_change_nothing(app_config):
    workflow_id = build_branch()
    before = draft_state(workflow_id)
    refusals = [
        (tool("addNode", workflowId=workflow_id, type="flow.ifelse", parameters="{}"),
         ("unknown node type 'flow.ifelse'", "did you mean flow.ifElse")),
        (tool("addNode", workflowId=workflow_id, type="flow.ifElse", parameters='{"conditon": "{{ true }}"}'),
         ("parameters.conditon", "unknown parameter of flow.ifElse", "parameters.condition", "required")),
        (tool("addNode", workflowId=workflow_id, type="flow.wait", parameters='{"seconds": -5}'),
         ("parameters.seconds", "greater than or equal to 0")),
        (tool("addNode", workflowId=workflow_id, type="flow.ifElse", parameters='{"condition": '),
         ("parameters", "not valid JSON")),
        (tool("addNode", workflowId=workflow_id, type="flow.ifElse", parameters='{"condition": "{{ input. }}"}'),
         ("parameters.condition", "expression does not parse")),
        (tool("addNode", workflowId=workflow_id, type="flow.merge", id="big"),
         ("a node with id 'big' already exists",)),
        (tool("addNode", workflowId=workflow_id, type="flow.merge", id="my node"),
         ("id 'my node' must start with a letter",)),
        (tool("setNodeParameter", workflowId=workflow_id, nodeId="transform", name="output", value="xml"),
         ("node 'transform', parameters.output", "'text' or 'json'")),
        (tool("setNodeParameter", workflowId=workflow_id, nodeId="big", name="colour", value="red"),
         ("parameters.colour", "expected one of: condition")),
        (tool("setNodeParameter", workflowId=workflow_id, nodeId="big", name="condition"),
         ("parameters.condition", "required by flow.ifElse")),
        (tool("setNodeParameter", workflowId=workflow_id, nodeId="ghost", name="x", value=1),
         ("node 'ghost' is not in the graph", "start, big, transform, transform2")),
        (tool("connectNodes", workflowId=workflow_id, source="big", target="transform", sourceHandle="maybe"),
         ("node 'big' (flow.ifElse) has no handle 'maybe'", "true, false")),
        (tool("connectNodes", workflowId=workflow_id, source="big", target="transform"),
         ("has no handle 'out'",)),
        (tool("connectNodes", workflowId=workflow_id, source="transform", target="big"),
         ("closes the cycle big → transform → big", "loop body")),
        (tool("connectNodes", workflowId=workflow_id, source="transform", target="transform"),
         ("cycle",)),
        (tool("connectNodes", workflowId=workflow_id, source="big", target="transform", sourceHandle="true"),
         ("the edge big.true → transform already exists",)),
        (tool("connectNodes", workflowId=workflow_id, source="transform", target="start"),
         ("node 'start' is a trigger",)),
        (tool("connectNodes", workflowId=workflow_id, source="nowhere", target="big"),
         ("source 'nowhere' is not in the graph",)),
        (tool("disconnectNodes", workflowId=workflow_id, source="big", target="transform"),
         ("there is no edge big.out → transform", "big.true → transform")),
        (tool("removeNode", workflowId=workflow_id, nodeId="ghost"), ("node 'ghost' is not in the graph",)),
    ]
    for result, fragments in refusals:
        error = refused(result, *fragments)
        # Invalid tool arguments (bad JSON) are refused before the tool runs; the tool's own refusals
        # say that the graph is unchanged.
        assert result.error_kind == "invalid" or (result.error_kind == "failed" and "unchanged" in error), error
        assert draft_state(workflow_id) == before, error
    # What the model reads for a refusal is the reason itself.
    assert "has no handle 'maybe'" in json.loads(result_for_agent(refusals[11][0]))["error"]


@SQLITE
def test_a_loop_body_may_return_into_its_loop_but_no_other_cycle_is_allowed(app_config):
    workflow_id = ok(act("createWorkflow", {"name": "Loop"}))["workflowId"]
    ok(act("addNode", {"workflowId": workflow_id, "type": "flow.loop", "id": "each",
                       "parameters": {"items": "{{ input.items }}"}}))
    ok(act("addNode", {"workflowId": workflow_id, "type": "context.transform", "id": "body",
                       "parameters": {"data": "{{ item }}", "template": "{{ data }}"}}))
    ok(act("addNode", {"workflowId": workflow_id, "type": "flow.merge", "id": "after"}))
    for source, target, handle in (("start", "each", None), ("each", "body", "each"), ("body", "each", None),
                                   ("each", "after", "done")):
        ok(act("connectNodes", {"workflowId": workflow_id, "source": source, "target": target,
                                "sourceHandle": handle}))
    before = draft_state(workflow_id)
    refused(act("connectNodes", {"workflowId": workflow_id, "source": "after", "target": "each"}), "cycle")
    assert draft_state(workflow_id) == before
    assert ok(act("validateGraph", {"workflowId": workflow_id}))["valid"] is True


@SQLITE
def test_remove_node_takes_its_edges_and_warns_about_references(app_config):
    workflow_id = build_branch()
    ok(act("addNode", {"workflowId": workflow_id, "type": "context.transform", "id": "after",
                       "parameters": {"data": "{{ nodes.transform.output }}", "template": "{{ data }}"}}))
    ok(act("connectNodes", {"workflowId": workflow_id, "source": "transform", "target": "after"}))
    removed = ok(tool("removeNode", workflowId=workflow_id, nodeId="transform"))
    assert removed["removedEdges"] == [{"source": "big", "target": "transform", "sourceHandle": "true"},
                                       {"source": "transform", "target": "after"}]
    assert "after" in removed["warning"]
    graph = ok(act("readWorkflowGraph", {"workflowId": workflow_id}))
    assert "transform" not in [n["id"] for n in graph["nodes"]]
    assert all("transform" not in (e["source"], e["target"]) for e in graph["edges"])
    ok(act("disconnectNodes", {"workflowId": workflow_id, "source": "big", "target": "transform2",
                               "sourceHandle": "false"}))
    # Removing the only trigger leaves an incomplete draft, which validateGraph reports.
    ok(act("removeNode", {"workflowId": workflow_id, "nodeId": "start"}))
    report = ok(tool("validateGraph", workflowId=workflow_id))
    assert report["valid"] is False
    assert {"nodeId": None, "field": "nodes"} == {k: report["errors"][0][k] for k in ("nodeId", "field")}
    assert "needs at least one trigger" in report["errors"][0]["message"]


@SQLITE
def test_failed_run_is_explained_by_the_step_log(api):
    workflow_id = ok(tool("createWorkflow", name="Broken"))["workflowId"]
    assert "has not run yet" in refused(tool("readWorkflowMessages", workflowId=workflow_id))
    ok(tool("addNode", workflowId=workflow_id, type="context.transform", id="parse",
            parameters=json.dumps({"data": "{{ input }}", "template": "not json {{ name }}", "output": "json"})))
    ok(tool("connectNodes", workflowId=workflow_id, source="start", target="parse"))
    run = api.client.post(f"{api.base()}/workflows/{workflow_id}/runs", json={"input": {"name": "x"}},
                          headers=api.auth).json()
    assert run["status"] == "failed", run
    history = ok(tool("listWorkflowHistory", workflowId=workflow_id, limit=5))
    assert history["runs"][0]["id"] == run["id"] and history["runs"][0]["status"] == "failed"
    assert "not valid JSON" in history["runs"][0]["error"]
    messages = ok(tool("readWorkflowMessages", workflowId=workflow_id, runId=run["id"]))
    failed = messages["steps"][-1]
    assert (failed["nodeId"], failed["nodeType"], failed["status"], failed["attempt"]) == (
        "parse", "context.transform", "failed", 1)
    assert "the rendered template is not valid JSON" in failed["error"]
    assert json.loads(failed["input"])["data"] == {"name": "x"} and failed["output"] is None
    assert messages["run"]["status"] == "failed" and messages["run"]["version"] == 1
    other = ok(tool("createWorkflow", name="Other"))["workflowId"]
    refused(tool("readWorkflowMessages", workflowId=other, runId=run["id"]), "not found")


def _setup_users() -> dict[str, str]:
    """ulla: Workspace user and graphicalEditor-user in the first editor only; otto: Workspace only.
    A second editor instance of the same mandate holds a workflow; a second mandate holds another."""
    with session_scope() as session:
        workspace = _instance(session, "workspace")
        editor = _instance(session, "graphicalEditor")
        mandate = session.get(Mandate, workspace.mandate_id)
        admin = session.exec(select(User).where(User.username == "admin")).one()
        second = create_feature_instance(session, mandate, "graphicalEditor", "Second editor")
        hidden = service.create_workflow(session, admin, second, "Hidden")
        other_mandate = create_mandate(session, "Other mandate")
        foreign_editor = create_feature_instance(session, other_mandate, "graphicalEditor", "Foreign editor")
        foreign = service.create_workflow(session, admin, foreign_editor, "Foreign")
        for username in ("ulla", "otto"):
            user = User(username=username)
            session.add(user)
            session.flush()
            grant_mandate_roles(session, user, mandate, ["user"])
            grant_instance_roles(session, user, workspace, ["workspace-user"])
            if username == "ulla":
                grant_instance_roles(session, user, editor, ["graphicalEditor-user"])
        return {"editor": editor.id, "second": second.id, "hidden": hidden.id, "foreign": foreign.id,
                "foreignEditor": foreign_editor.id, "workspace": workspace.id}


@SQLITE
def test_rights_of_the_caller_in_the_editor_instance(app_config):
    ids = _setup_users()
    hidden_before, foreign_before = draft_state(ids["hidden"]), draft_state(ids["foreign"])
    mine = ok(tool("createWorkflow", user="ulla", name="Ulla's"))["workflowId"]
    admins = build_branch("Admin's")
    assert {w["name"] for w in ok(tool("listWorkflows", user="ulla"))["workflows"]} == {"Ulla's", "Admin's"}
    ok(tool("addNode", user="ulla", workflowId=mine, type="flow.merge"))
    # graphicalEditor-user reads every workflow but changes only their own.
    assert ok(tool("readWorkflowGraph", user="ulla", workflowId=admins))["name"] == "Admin's"
    before = draft_state(admins)
    refused(tool("addNode", user="ulla", workflowId=admins, type="flow.merge"), "do not allow changing")
    assert draft_state(admins) == before
    # Workflows of an editor instance ulla may not open, or of another mandate: not found.
    for workflow_id in (ids["hidden"], ids["foreign"]):
        for name, extra in (("readWorkflowGraph", {}), ("addNode", {"type": "flow.merge"}),
                            ("validateGraph", {}), ("readWorkflowMessages", {})):
            refused(tool(name, user="ulla", workflowId=workflow_id, **extra), f"workflow {workflow_id} not found")
    for instance in (ids["second"], ids["foreignEditor"]):
        refused(tool("listWorkflows", user="ulla", editorInstanceId=instance), f"feature instance {instance} not found")
        refused(tool("readWorkflowGraph", user="ulla", workflowId=ids["hidden"], editorInstanceId=instance),
                "not found")
    # The admin may open the second editor by naming it, but not an instance of another mandate.
    listed = ok(tool("listWorkflows", editorInstanceId=ids["second"]))
    assert [w["name"] for w in listed["workflows"]] == ["Hidden"]
    refused(tool("readWorkflowGraph", workflowId=ids["foreign"], editorInstanceId=ids["foreignEditor"]),
            "not found")
    # otto has the Workspace but no Graphical Editor.
    refused(tool("listWorkflows", user="otto"), "no Graphical Editor instance in this mandate")
    refused(tool("readWorkflowGraph", user="otto", workflowId=admins, editorInstanceId=ids["editor"]), "not found")
    assert draft_state(ids["hidden"]) == hidden_before and draft_state(ids["foreign"]) == foreign_before


@SQLITE
def test_in_the_editor_chat_the_tools_work_in_that_editor(app_config):
    ids = _setup_users()
    created = ok(tool("createWorkflow", instance_id=ids["second"], name="In second"))
    assert created["editorInstanceId"] == ids["second"]
    names = [w["name"] for w in ok(tool("listWorkflows", instance_id=ids["second"]))["workflows"]]
    assert sorted(names) == ["Hidden", "In second"]
    refused(tool("listWorkflows", instance_id=ids["second"], editorInstanceId=ids["editor"]),
            "cannot name another instance")
    # From the editor chat, a workflow of the first editor is not found.
    workspace_workflow = ok(tool("createWorkflow", name="In first"))["workflowId"]
    refused(tool("readWorkflowGraph", instance_id=ids["second"], workflowId=workspace_workflow), "not found")


@SQLITE
def test_node_types_come_from_the_palette(app_config):
    listed = ok(tool("listAvailableNodeTypes"))
    assert [t["type"] for t in listed["nodeTypes"]] == [t.type for t in palette()]
    by_type = {t["type"]: t for t in listed["nodeTypes"]}
    assert by_type["flow.ifElse"] == {"type": "flow.ifElse", "label": "If / else", "description":
                                      "Branches on a condition", "parameters": ["condition"],
                                      "required": ["condition"], "handles": ["true", "false"]}
    assert by_type["trigger.manual"]["trigger"] is True
    assert by_type["flow.switch"]["handles"] == ["<one per case>", "default"]
    assert "template" in by_type["context.transform"]["parameters"]
    flows = ok(tool("listAvailableNodeTypes", category="flow"))["nodeTypes"]
    assert {t["type"] for t in flows} == {t.type for t in palette() if t.category == "flow"}
    refused(tool("listAvailableNodeTypes", category="nope"), "unknown category 'nope'", "trigger, flow")
    full = ok(tool("listAvailableNodeTypes", nodeType="input.approval"))
    assert full["handles"] == ["approved", "rejected"] and "assignee" in full["parameters"]["properties"]
    refused(tool("listAvailableNodeTypes", nodeType="flow.iff"), "did you mean flow.if")


def test_workflow_tools_are_strict_agent_tools_with_the_right_capabilities():
    registry = get_registry()
    found = {a.id: a for a in registry.in_toolbox("workflow")}
    assert set(found) == {f"workflow.{name}" for name in TOOLS}
    writes = {"createWorkflow", "addNode", "removeNode", "connectNodes", "disconnectNodes", "setNodeParameter"}
    for action_id, action in found.items():
        assert action.agent_tool and not action.graph_node, action_id
        expected = "write" if action_id.split(".")[1] in writes else "read"
        assert action.capabilities == frozenset({expected}), action_id
        definition = to_tool_definition(action)["function"]
        assert definition["strict"] is True and len(definition["name"]) <= 64
        parameters = definition["parameters"]
        assert parameters["additionalProperties"] is False
        assert sorted(parameters["required"]) == sorted(parameters["properties"])
        for prop in parameters["properties"].values():
            # Free-form JSON arrives as text: no object without properties in a strict schema.
            assert '"type": "object"' not in json.dumps(prop), (action_id, prop)
    assert "editorInstanceId" in json.dumps(to_tool_definition(found["workflow.addNode"]))
    value = strict_parameters(found["workflow.setNodeParameter"])["properties"]["value"]
    assert {v["type"] for v in value["anyOf"]} == {"string", "number", "boolean", "null"}


@SQLITE
def test_values_are_given_as_model_friendly_json(app_config):
    workflow_id = ok(tool("createWorkflow", name="Values"))["workflowId"]
    ok(tool("addNode", workflowId=workflow_id, type="input.approval", id="ok",
            parameters=json.dumps({"title": "Approve {{ input.amount }} CHF"})))
    ok(tool("setNodeParameter", workflowId=workflow_id, nodeId="ok", name="assignee", value='{"role": "boss"}'))
    ok(tool("setNodeParameter", workflowId=workflow_id, nodeId="ok", name="timeoutSeconds", value=3600))
    ok(tool("setNodeParameter", workflowId=workflow_id, nodeId="ok", name="message", value="{{ input.note }}"))
    refused(tool("setNodeParameter", workflowId=workflow_id, nodeId="ok", name="assignee", value='{"team": "x"}'),
            "parameters.assignee")
    node = ok(tool("readWorkflowGraph", workflowId=workflow_id))["nodes"][1]
    assert node["parameters"] == {"title": "Approve {{ input.amount }} CHF", "assignee": {"role": "boss"},
                                  "timeoutSeconds": 3600, "message": "{{ input.note }}"}
    ok(tool("setNodeParameter", workflowId=workflow_id, nodeId="ok", name="message"))  # null removes it
    assert "message" not in ok(tool("readWorkflowGraph", workflowId=workflow_id))["nodes"][1]["parameters"]
    ok(tool("addNode", workflowId=workflow_id, type="flow.switch", id="sw",
            parameters=json.dumps({"value": "{{ input.kind }}", "cases": [{"value": "a"}, {"value": "b"}]})))
    ok(tool("connectNodes", workflowId=workflow_id, source="sw", target="ok", sourceHandle="b"))
    before = draft_state(workflow_id)
    # Dropping the case whose handle an edge uses would leave a dangling handle: refused.
    refused(tool("setNodeParameter", workflowId=workflow_id, nodeId="sw", name="cases", value='[{"value": "a"}]'),
            "has no handle 'b'")
    assert draft_state(workflow_id) == before
