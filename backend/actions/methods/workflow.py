"""Workflow toolbox (spec §5.2, UC-3, UC-4): agents read and change workflow graphs.

Every tool works in one Graphical Editor instance with the caller's rights there
(GraphicalEditorInterface): a workflow of another instance, or one the caller may not read, is
"not found". The instance is the ActionContext's own when the agent runs in a Graphical Editor
(its chat); elsewhere (the Workspace chat) the optional `editorInstanceId`, by default the first
Graphical Editor instance of the context's mandate the caller may open.

Mutations act on the workflow's draft, created from the published graph when missing (exactly
as the REST `PUT …/draft` does). Each one is checked against the full validation of DESIGN §4
before it is saved: a change that adds a problem (unknown type, invalid parameters, a handle the
source does not have, an edge into a trigger, a duplicate edge, a cycle other than a loop body)
is refused with the reason and nothing is written. Only incompleteness is tolerated while a
graph is being built (a graph without a trigger yet, nodes not connected yet).

Node parameters and values are free-form JSON, which strict function calling cannot describe:
tools take them as JSON text (`parameters`) or as a string / number / boolean whose lists and
objects are written as JSON text (`value`).
"""

from __future__ import annotations

import copy
import json
import re
from collections.abc import Callable
from typing import Annotated, Any

from pydantic import BeforeValidator, Field, WithJsonSchema

from backend.actions.base import ActionContext, ActionError, ActionParams, action
from backend.db.models import FeatureInstance, Workflow, WorkflowRun, WorkflowVersion
from backend.engine.steps import split_error
from backend.errors import FieldError, Forbidden
from backend.features.graphical_editor.interface import FEATURE_CODE, GraphicalEditorInterface, get_interface
from backend.triggers.secrets import redact
from backend.workflows import graph_edit, service
from backend.workflows.connections import connection_error, edge_handle, handles_of, make_edge
from backend.workflows.graph import default_graph
from backend.workflows.node_types import DEFAULT_HANDLE, NodeType, palette
from backend.workflows.validation import node_errors, validate_graph

TOOLBOX = "workflow"
PREVIEW_CHARS = 300
ERROR_CHARS = 1500
MAX_STEPS = 60

EDITOR_HELP = "Graphical Editor instance id; empty: the current editor (in the Workspace: the first you may open)."
WORKFLOW_HELP = "Workflow id."
IN_EDITOR = (" Works in the current Graphical Editor; in the Workspace in editorInstanceId, by default the first "
             "Graphical Editor of this mandate you may open.")


# --- free-form JSON in strict tool schemas ---------------------------------------------------------


def _parse_object(value: Any) -> Any:
    if isinstance(value, str):
        text = value.strip()
        if not text:
            return {}
        try:
            value = json.loads(text)
        except json.JSONDecodeError as exc:
            raise ValueError(f"is not valid JSON ({exc.msg} at character {exc.pos}); give one JSON object "
                             'such as {"condition": "{{ input.amount > 1000 }}"}') from None
    if not isinstance(value, dict):
        raise ValueError("must be a JSON object that maps parameter names to values")
    return value


def _parse_value(value: Any) -> Any:
    """Lists and objects arrive as JSON text; every other string is taken as it is."""
    if isinstance(value, str):
        text = value.strip()
        if text and text[0] in "[{":
            try:
                return json.loads(text)
            except json.JSONDecodeError:
                return value  # e.g. "{{ input.amount }}": an expression, not JSON
    return value


JsonObjectText = Annotated[dict[str, Any], BeforeValidator(_parse_object), WithJsonSchema({"type": "string"})]
JsonValue = Annotated[Any, BeforeValidator(_parse_value),
                      WithJsonSchema({"anyOf": [{"type": "string"}, {"type": "number"}, {"type": "boolean"}]})]


# --- the editor instance, the workflow and its graph ------------------------------------------------


def _editor(context: ActionContext, requested: str | None) -> GraphicalEditorInterface:
    """The Graphical Editor instance the tools work in, as the caller (see the module docstring)."""
    own = context.feature_instance_id
    if own:
        instance = context.session.get(FeatureInstance, own)
        if instance is not None and instance.feature_code == FEATURE_CODE:
            if requested and requested != own:
                raise ActionError(f"this chat works in Graphical Editor instance {own}; leave editorInstanceId "
                                  "empty (it cannot name another instance here)")
            return get_interface(context.user, context.mandate_id, own, context.session)
    if requested:
        return get_interface(context.user, context.mandate_id, requested, context.session)
    candidates = [i for i in context.access.visible_instances(FEATURE_CODE) if i.mandate_id == context.mandate_id]
    if not candidates:
        raise ActionError("there is no Graphical Editor instance in this mandate that you may open")
    first = min(candidates, key=lambda i: (i.sys_created_at, i.label, i.id))
    return get_interface(context.user, context.mandate_id, first.id, context.session)


def _edited_version(iface: GraphicalEditorInterface, workflow: Workflow) -> WorkflowVersion | None:
    """The version a person edits: the draft, else the published one."""
    return service.edited_version(iface.session, workflow)


def _graph_of(version: WorkflowVersion | None) -> dict[str, Any]:
    graph = copy.deepcopy(version.graph) if version is not None else default_graph()
    graph.setdefault("edges", [])
    return graph


def _version_info(version: WorkflowVersion | None) -> dict[str, Any] | None:
    return {"number": version.version_number, "status": version.status} if version is not None else None


def _require_node(graph: dict[str, Any], node_id: str, role: str = "node") -> dict[str, Any]:
    nodes = graph_edit.nodes_by_id(graph)
    if node_id not in nodes:
        known = ", ".join(nodes) or "none"
        raise ActionError(f"{role} '{node_id}' is not in the graph; its nodes are: {known}")
    return nodes[node_id]


def _types() -> dict[str, NodeType]:
    return {t.type: t for t in palette()}


_EDGE_REF = re.compile(r"edges\[(\d+)\](?:\.(\w+))?")


def _error_key(error: FieldError, graph: dict[str, Any]) -> tuple[str | None, str, str]:
    """An error's identity that survives edge indices shifting (edges[3].target → the edge itself)."""
    edges = graph.get("edges", [])

    def name(match: re.Match) -> str:
        index = int(match.group(1))
        if index < len(edges) and isinstance(edges[index], dict):
            edge = edges[index]
            part = f" ({match.group(2)})" if match.group(2) else ""
            return f"edge {edge.get('source')}.{edge_handle(edge)} → {edge.get('target')}{part}"
        return match.group(0)

    return error.node_id, _EDGE_REF.sub(name, error.field), _EDGE_REF.sub(name, error.message)


def _blocking_errors(graph: dict[str, Any]) -> dict[tuple, FieldError]:
    """Problems a graph under construction may never have: all of validate_graph except the one
    about completeness (no trigger yet)."""
    return {_error_key(e, graph): e for e in validate_graph(graph) if not (e.field == "nodes" and e.node_id is None)}


def _located(error: FieldError, graph: dict[str, Any]) -> str:
    _, field, message = _error_key(error, graph)
    where = f"node '{error.node_id}', " if error.node_id else ""
    return f"{where}{field}: {message}"


def _mutate(params: Any, context: ActionContext, change: Callable[[dict[str, Any]], dict[str, Any]],
            what: str) -> dict[str, Any]:
    """Apply `change` to a copy of the edited graph, refuse it if it adds a problem, else save the draft."""
    iface = _editor(context, params.editor_instance_id)
    workflow = iface.get_workflow(params.workflow_id)
    if not iface.may_change(workflow):
        raise Forbidden(f"your roles do not allow changing workflow '{workflow.name}'")
    before = _graph_of(_edited_version(iface, workflow))
    after = copy.deepcopy(before)
    try:
        answer = change(after)
    except ActionError as exc:
        raise ActionError(f"{what} refused: {exc} (the graph is unchanged)") from None
    old = _blocking_errors(before)
    added = [e for key, e in _blocking_errors(after).items() if key not in old]
    if added:
        reasons = "; ".join(_located(e, after) for e in added)
        raise ActionError(f"{what} refused: {reasons} (the graph is unchanged)")
    draft = iface.save_draft(workflow, after)
    return {**answer, "workflowId": workflow.id, "draftVersion": draft.version_number,
            "nodeCount": len(after["nodes"]), "edgeCount": len(after["edges"])}


def _compact_node(node: dict[str, Any]) -> dict[str, Any]:
    compact = {"id": node.get("id"), "type": node.get("type")}
    for key in ("label", "parameters", "onError", "retry", "disabled", "notes"):
        if node.get(key) not in (None, {}, ""):
            compact[key] = node[key]
    return compact


def _compact_edge(edge: dict[str, Any]) -> dict[str, Any]:
    compact = {"source": edge.get("source"), "target": edge.get("target")}
    if edge.get("sourceHandle") is not None:
        compact["sourceHandle"] = edge["sourceHandle"]
    return compact


def _preview(value: Any, limit: int = PREVIEW_CHARS) -> str | None:
    if value is None:
        return None
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, default=str)
    return text if len(text) <= limit else text[:limit] + f"… ({len(text):,} characters)"


def _cut(text: str | None, limit: int = ERROR_CHARS) -> str | None:
    if text is None or len(text) <= limit:
        return text
    return text[:limit] + f"… ({len(text):,} characters)"


# --- parameters -------------------------------------------------------------------------------------


class EditorParams(ActionParams):
    editor_instance_id: str | None = Field(None, description=EDITOR_HELP)


class WorkflowParams(ActionParams):
    workflow_id: str = Field(min_length=1, description=WORKFLOW_HELP)
    editor_instance_id: str | None = Field(None, description=EDITOR_HELP)


# --- workflows --------------------------------------------------------------------------------------


@action("workflow.listWorkflows", toolbox=TOOLBOX, label="List workflows",
        description="List the workflows (id, name, description, draft and published version)." + IN_EDITOR,
        params=EditorParams)
def list_workflows(params: EditorParams, context: ActionContext) -> dict[str, Any]:
    iface = _editor(context, params.editor_instance_id)
    workflows = iface.list_workflows()
    numbers = service.version_numbers(iface.session, workflows)
    return {
        "editorInstance": {"id": iface.instance.id, "label": iface.instance.label},
        "workflows": [{"id": w.id, "name": w.name, "description": w.description or None, "active": w.active,
                       "draftVersion": numbers[w.id].get("draft"),
                       "publishedVersion": numbers[w.id].get("published"),
                       "modifiedAt": w.sys_modified_at.isoformat()} for w in workflows],
    }


class CreateWorkflowParams(ActionParams):
    name: str = Field(min_length=1, max_length=service.NAME_MAX, description="Unique name.")
    description: str | None = Field(None, max_length=5000, description="What the workflow does.")
    editor_instance_id: str | None = Field(None, description=EDITOR_HELP)


@action("workflow.createWorkflow", toolbox=TOOLBOX, label="Create workflow",
        description="Create a workflow whose draft holds one manual trigger (node id 'start'); then add and "
                    "connect nodes." + IN_EDITOR,
        params=CreateWorkflowParams, capabilities=("write",))
def create_workflow(params: CreateWorkflowParams, context: ActionContext) -> dict[str, Any]:
    iface = _editor(context, params.editor_instance_id)
    workflow = iface.create_workflow(params.name, params.description or "")
    draft = service.draft_version(iface.session, workflow)
    graph = _graph_of(draft)
    return {"workflowId": workflow.id, "name": workflow.name, "editorInstanceId": iface.instance.id,
            "draftVersion": draft.version_number if draft else None,
            "nodes": [_compact_node(n) for n in graph["nodes"]], "edges": []}


@action("workflow.readWorkflowGraph", toolbox=TOOLBOX, label="Read workflow graph",
        description="The workflow's graph (draft, else published) as compact JSON: nodes and edges.",
        params=WorkflowParams)
def read_workflow_graph(params: WorkflowParams, context: ActionContext) -> dict[str, Any]:
    iface = _editor(context, params.editor_instance_id)
    workflow = iface.get_workflow(params.workflow_id)
    version = _edited_version(iface, workflow)
    graph = redact(_graph_of(version))  # agents never see webhook secrets
    return {"workflowId": workflow.id, "name": workflow.name, "description": workflow.description or None,
            "version": _version_info(version),
            "nodes": [_compact_node(n) for n in graph["nodes"] if isinstance(n, dict)],
            "edges": [_compact_edge(e) for e in graph["edges"] if isinstance(e, dict)]}


# --- mutations --------------------------------------------------------------------------------------


class AddNodeParams(ActionParams):
    workflow_id: str = Field(min_length=1, description=WORKFLOW_HELP)
    type: str = Field(min_length=1, description="Node type, e.g. flow.ifElse or context.transform "
                                                "(see listAvailableNodeTypes).")
    parameters: JsonObjectText | None = Field(
        None, description='Parameters as JSON object text, e.g. {"condition": "{{ input.amount > 1000 }}"}; '
                          "expressions see input and nodes.<id>.output.")
    id: str | None = Field(None, description="Node id (letters, digits, _); default from the type.")
    label: str | None = Field(None, max_length=200, description="Label; default the type's.")
    editor_instance_id: str | None = Field(None, description=EDITOR_HELP)


@action("workflow.addNode", toolbox=TOOLBOX, label="Add node",
        description="Add a node to the workflow's draft; refused with the reason for an unknown type, invalid "
                    "parameters or a duplicate id.",
        params=AddNodeParams, capabilities=("write",))
def add_node(params: AddNodeParams, context: ActionContext) -> dict[str, Any]:
    types = _types()

    def change(graph: dict[str, Any]) -> dict[str, Any]:
        try:
            node = graph_edit.add_node(graph, params.type, node_id=params.id, label=params.label,
                                       parameters=params.parameters)
        except graph_edit.GraphEditError as exc:
            raise ActionError(str(exc)) from None
        node_type = types.get(params.type)
        problems = node_errors(node, node_type, list(types))
        if problems:
            raise ActionError("; ".join(str(p) for p in problems))
        return {"node": _compact_node(node), "handles": node_type.output_handles(node["parameters"]) if node_type
                else []}

    return _mutate(params, context, change, "addNode")


class RemoveNodeParams(ActionParams):
    workflow_id: str = Field(min_length=1, description=WORKFLOW_HELP)
    node_id: str = Field(min_length=1, description="Id of the node to remove.")
    editor_instance_id: str | None = Field(None, description=EDITOR_HELP)


@action("workflow.removeNode", toolbox=TOOLBOX, label="Remove node",
        description="Remove a node and its edges from the workflow's draft.",
        params=RemoveNodeParams, capabilities=("write",))
def remove_node(params: RemoveNodeParams, context: ActionContext) -> dict[str, Any]:
    def change(graph: dict[str, Any]) -> dict[str, Any]:
        _require_node(graph, params.node_id)
        removed = graph_edit.remove_elements(graph, node_ids=[params.node_id])
        referring = graph_edit.referring_nodes(graph, params.node_id)
        answer: dict[str, Any] = {"removed": params.node_id, "removedEdges": [_compact_edge(e) for e in removed]}
        if referring:
            answer["warning"] = (f"nodes {', '.join(referring)} still refer to nodes.{params.node_id} in their "
                                 "parameters; change them with setNodeParameter")
        return answer

    return _mutate(params, context, change, "removeNode")


class ConnectParams(ActionParams):
    workflow_id: str = Field(min_length=1, description=WORKFLOW_HELP)
    source: str = Field(min_length=1, description="Source node id.")
    target: str = Field(min_length=1, description="Target node id.")
    source_handle: str | None = Field(None, description="Source handle, e.g. true/false of flow.ifElse; "
                                                        "default out.")
    editor_instance_id: str | None = Field(None, description=EDITOR_HELP)


@action("workflow.connectNodes", toolbox=TOOLBOX, label="Connect nodes",
        description="Add an edge from a node's output handle to another node in the workflow's draft; refused "
                    "for unknown nodes or handles, duplicates, edges into triggers and cycles (a flow.loop body "
                    "may lead back into its loop).",
        params=ConnectParams, capabilities=("write",))
def connect_nodes(params: ConnectParams, context: ActionContext) -> dict[str, Any]:
    def change(graph: dict[str, Any]) -> dict[str, Any]:
        reason = connection_error(graph, params.source, params.source_handle, params.target)
        if reason is not None:
            raise ActionError(reason)
        nodes = graph_edit.nodes_by_id(graph)
        source, target = nodes[params.source], nodes[params.target]
        handle = params.source_handle or DEFAULT_HANDLE
        edge = make_edge(params.source, handle, params.target)
        fresh = not any(isinstance(e, dict) and params.target in (e.get("source"), e.get("target"))
                        for e in graph["edges"])
        graph["edges"].append(edge)
        origin = graph_edit.position_of(source)
        if fresh and origin is not None:
            # A node without edges yet is placed right of its source, branches side by side.
            handles = handles_of(source)
            index = handles.index(handle) if handle in handles else 0
            offset = (index - (len(handles) - 1) / 2) * graph_edit.Y_STEP if len(handles) > 1 else 0
            target["position"] = graph_edit.free_spot(graph, origin[0] + graph_edit.X_STEP, origin[1] + offset,
                                                      skip=params.target)
        return {"edge": _compact_edge(edge)}

    return _mutate(params, context, change, "connectNodes")


@action("workflow.disconnectNodes", toolbox=TOOLBOX, label="Disconnect nodes",
        description="Remove an edge from the workflow's draft.",
        params=ConnectParams, capabilities=("write",))
def disconnect_nodes(params: ConnectParams, context: ActionContext) -> dict[str, Any]:
    def change(graph: dict[str, Any]) -> dict[str, Any]:
        handle = params.source_handle or DEFAULT_HANDLE
        kept = [e for e in graph["edges"] if not (isinstance(e, dict) and e.get("source") == params.source
                                                   and e.get("target") == params.target and edge_handle(e) == handle)]
        if len(kept) == len(graph["edges"]):
            leaving = [f"{e.get('source')}.{edge_handle(e)} → {e.get('target')}" for e in graph["edges"]
                       if isinstance(e, dict) and e.get("source") == params.source]
            raise ActionError(f"there is no edge {params.source}.{handle} → {params.target}; edges leaving "
                              f"'{params.source}': {', '.join(leaving) or 'none'}")
        graph["edges"] = kept
        return {"removedEdge": {"source": params.source, "target": params.target, "sourceHandle": handle}}

    return _mutate(params, context, change, "disconnectNodes")


class SetParameterParams(ActionParams):
    workflow_id: str = Field(min_length=1, description=WORKFLOW_HELP)
    node_id: str = Field(min_length=1, description="Id of the node to change.")
    name: str = Field(min_length=1, description="Parameter name, e.g. condition.")
    value: JsonValue | None = Field(None, description='Text (may hold {{ expressions }}), number or boolean; a list '
                                                      'or object as JSON text, e.g. {"role": "approver"}; null '
                                                      "removes the parameter.")
    editor_instance_id: str | None = Field(None, description=EDITOR_HELP)


@action("workflow.setNodeParameter", toolbox=TOOLBOX, label="Set node parameter",
        description="Set or remove one parameter of a node in the workflow's draft; refused, naming the field, "
                    "when invalid for the node's type.",
        params=SetParameterParams, capabilities=("write",))
def set_node_parameter(params: SetParameterParams, context: ActionContext) -> dict[str, Any]:
    def change(graph: dict[str, Any]) -> dict[str, Any]:
        node = _require_node(graph, params.node_id)
        parameters = dict(node.get("parameters") or {})
        if params.value is None:
            if params.name not in parameters:
                raise ActionError(f"node '{params.node_id}' has no parameter '{params.name}' to remove")
            del parameters[params.name]
        else:
            parameters[params.name] = params.value
        node["parameters"] = parameters  # checked with the whole graph by _mutate
        return {"node": _compact_node(node)}

    return _mutate(params, context, change, "setNodeParameter")


# --- node types -------------------------------------------------------------------------------------


class NodeTypesParams(ActionParams):
    category: str | None = Field(None, description="Only this category: trigger, flow, human, email, ai, code, "
                                                    "or an action node's toolbox.")
    node_type: str | None = Field(None, description="One type, answered with its full parameter JSON Schema.")


def _one_line(text: str) -> str:
    line = text.strip().splitlines()[0] if text.strip() else ""
    first = re.split(r"(?<=[.!?])\s", line, maxsplit=1)[0]
    return first[:160]


def _handles_of(node_type: NodeType) -> list[str]:
    return node_type.described_handles()


def _schema_summary(node_type: NodeType) -> tuple[list[str], list[str]]:
    fields = node_type.params_model.model_fields
    names = [f.alias or n for n, f in fields.items()]
    required = [f.alias or n for n, f in fields.items() if f.is_required()]
    return names, required


@action("workflow.listAvailableNodeTypes", toolbox=TOOLBOX, label="List node types",
        description="The node types of the editor's palette: type, label, description, parameter names (and "
                    "required ones), output handles.",
        params=NodeTypesParams)
def list_available_node_types(params: NodeTypesParams, context: ActionContext) -> dict[str, Any]:
    all_types = palette()
    if params.node_type:
        found = next((t for t in all_types if t.type == params.node_type), None)
        if found is None:
            raise ActionError(node_errors({"id": "-", "type": params.node_type}, None,
                                          [t.type for t in all_types])[0].message)
        return {**found.as_dict(), "handles": _handles_of(found)}
    categories = list(dict.fromkeys(t.category for t in all_types))
    if params.category and params.category not in categories:
        raise ActionError(f"unknown category '{params.category}'; categories: {', '.join(categories)}")
    entries = []
    for node_type in all_types:
        if params.category and node_type.category != params.category:
            continue
        names, required = _schema_summary(node_type)
        entry: dict[str, Any] = {"type": node_type.type, "label": node_type.label,
                                 "description": _one_line(node_type.description), "parameters": names}
        if required:
            entry["required"] = required
        entry["handles"] = _handles_of(node_type)
        if node_type.is_trigger:
            entry["trigger"] = True
        entries.append(entry)
    return {"categories": categories, "nodeTypes": entries}


# --- validation, history, run log -------------------------------------------------------------------


@action("workflow.validateGraph", toolbox=TOOLBOX, label="Validate graph",
        description="Check the workflow's graph (draft, else published) against every rule, as publishing does.",
        params=WorkflowParams)
def validate_workflow_graph(params: WorkflowParams, context: ActionContext) -> dict[str, Any]:
    iface = _editor(context, params.editor_instance_id)
    workflow = iface.get_workflow(params.workflow_id)
    errors = iface.validate_workflow(workflow)
    return {"workflowId": workflow.id, "version": _version_info(_edited_version(iface, workflow)),
            "valid": not errors, "errors": [e.as_dict() for e in errors]}


class HistoryParams(WorkflowParams):
    limit: int = Field(10, ge=1, le=50, description="Recent runs to list (default 10).")


def _run_summary(run: WorkflowRun, numbers: dict[str, int]) -> dict[str, Any]:
    message, _ = split_error(run.error)
    return {"id": run.id, "status": run.status, "pauseReason": run.pause_reason, "version": numbers.get(run.version_id),
            "trigger": run.trigger, "startedAt": run.started_at.isoformat(),
            "finishedAt": run.finished_at.isoformat() if run.finished_at else None, "error": _cut(message, 300)}


@action("workflow.listWorkflowHistory", toolbox=TOOLBOX, label="Workflow history",
        description="The workflow's versions (number, status, dates) and its recent runs (id, status, started, "
                    "error).",
        params=HistoryParams)
def list_workflow_history(params: HistoryParams, context: ActionContext) -> dict[str, Any]:
    iface = _editor(context, params.editor_instance_id)
    workflow = iface.get_workflow(params.workflow_id)
    versions = iface.list_versions(workflow)
    numbers = {v.id: v.version_number for v in versions}
    runs = iface.list_runs(workflow.id)
    return {
        "workflowId": workflow.id, "name": workflow.name,
        "versions": [{"number": v.version_number, "status": v.status, "createdAt": v.sys_created_at.isoformat(),
                      "modifiedAt": v.sys_modified_at.isoformat(),
                      "publishedAt": v.published_at.isoformat() if v.published_at else None} for v in versions],
        "runs": [_run_summary(r, numbers) for r in runs[:params.limit]],
        "runCount": len(runs),
    }


class MessagesParams(WorkflowParams):
    run_id: str | None = Field(None, description="Run id; default the latest run.")


@action("workflow.readWorkflowMessages", toolbox=TOOLBOX, label="Read run log",
        description="The step log of the workflow's latest run (or runId): per step node, status, attempt, error, "
                    "duration, input/output previews. Use it to explain a failure.",
        params=MessagesParams)
def read_workflow_messages(params: MessagesParams, context: ActionContext) -> dict[str, Any]:
    iface = _editor(context, params.editor_instance_id)
    workflow = iface.get_workflow(params.workflow_id)
    if params.run_id:
        run = iface.get_run(params.run_id)
        if run.workflow_id != workflow.id:
            raise ActionError(f"run {params.run_id} not found for workflow '{workflow.name}'")
    else:
        runs = iface.list_runs(workflow.id)
        if not runs:
            raise ActionError(f"workflow '{workflow.name}' has not run yet")
        run = runs[0]
    version = iface.session.get(WorkflowVersion, run.version_id)
    steps = iface.run_steps(run)
    shown = steps
    if len(steps) > MAX_STEPS:
        failed = {id(s) for s in steps if s.status == "failed"}
        others = [s for s in steps if id(s) not in failed][-(max(0, MAX_STEPS - len(failed))):]
        keep = failed | {id(s) for s in others}
        shown = [s for s in steps if id(s) in keep]
    rows = []
    for step in shown:
        message, stack = split_error(step.error)
        row: dict[str, Any] = {"nodeId": step.node_id, "nodeType": step.node_type, "status": step.status,
                               "attempt": step.attempt, "durationMs": step.duration_ms,
                               "input": _preview(step.input), "output": _preview(step.output)}
        if message:
            row["error"] = _cut(message)
        if stack:
            row["stackTail"] = _cut("\n".join(stack.strip().splitlines()[-4:]), 600)
        rows.append(row)
    message, _ = split_error(run.error)
    answer: dict[str, Any] = {
        "workflowId": workflow.id,
        "run": {"id": run.id, "status": run.status, "pauseReason": run.pause_reason,
                "version": version.version_number if version else None, "mode": run.mode,
                "startedAt": run.started_at.isoformat(),
                "finishedAt": run.finished_at.isoformat() if run.finished_at else None,
                "input": _preview(run.input), "output": _preview(run.output), "error": _cut(message)},
        "steps": rows,
    }
    if len(shown) < len(steps):
        answer["omittedSteps"] = len(steps) - len(shown)
    return answer
