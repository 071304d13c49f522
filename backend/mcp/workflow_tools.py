"""Published workflows exposed as MCP tools ("expose as MCP tool", ``Workflow.mcp_tool``).

A workflow is offered to a user when it is exposed, has a published version and the user may
read it and start runs in its Graphical Editor instance (the door's ``mcp_tool_workflows``). Which
instances: the chosen one when it is a Graphical Editor instance; otherwise (e.g. a Workspace) the
Graphical Editor instances of its mandate the user may open, unless the token is narrowed to the
chosen instance.

The tool's name is ``workflow_<name as a slug>`` (``workflow_<id>`` when the slug is empty or
taken); its input schema comes from the published version's trigger: the fields of a
``trigger.form`` (types, options, required), else any JSON object (``trigger.manual`` input). A
call validates the arguments like the public form does, starts a run of the published version
through the door (as REST ``POST {base}/workflows/{id}/runs``, with the user's rights) and waits
up to POWERON_MCP_RUN_WAIT_SECONDS: a completed run answers ``{runId, status, output}``, a paused
or still running one ``{runId, status, pauseReason}``, a failed one an error naming the run.
"""

from __future__ import annotations

import json
import logging
import re
from dataclasses import dataclass
from typing import Any

from pydantic import ValidationError

from backend.config import get_settings
from backend.db.models import FeatureInstance, Workflow, WorkflowVersion
from backend.errors import DomainError, FieldError, Forbidden, InvalidInput
from backend.features.graphical_editor.interface import FEATURE_CODE, GraphicalEditorInterface
from backend.rbac.access import AccessContext
from backend.statemachines import workflow_run as run_states
from backend.triggers import forms
from backend.triggers.launch import trigger_nodes
from backend.workflows.node_types import FormField, FormTriggerParams

log = logging.getLogger(__name__)

PREFIX = "workflow_"
SLUG_MAX = 64 - len(PREFIX)
_JSON_TYPES = {"text": "string", "textarea": "string", "date": "string", "select": "string",
               "number": "number", "boolean": "boolean"}


@dataclass(frozen=True)
class WorkflowTool:
    """An exposed workflow as a tool: where it lives and what its input is."""

    name: str
    workflow_id: str
    instance_id: str
    description: str
    input_schema: dict[str, Any]
    fields: tuple[FormField, ...] | None  # None: no form trigger, any object is the input


def _slug(name: str) -> str:
    return re.sub(r"[^a-z0-9]+", "_", name.casefold()).strip("_")[:SLUG_MAX].strip("_")


def _form_fields(version: WorkflowVersion) -> list[FormField] | None:
    nodes = trigger_nodes(version, forms.NODE_TYPE)
    if not nodes:
        return None
    try:
        return FormTriggerParams.model_validate(nodes[0].get("parameters") or {}).fields
    except ValidationError:
        return None


def _field_schema(field: FormField) -> dict[str, Any]:
    schema: dict[str, Any] = {"type": _JSON_TYPES[field.type]}
    if field.label:
        schema["description"] = field.label
    if field.type == "select" and field.options:
        schema["enum"] = list(field.options)
    if field.type == "date":
        schema["description"] = f"{field.label or field.name} (ISO 8601 date)"
    if not field.required:
        schema["type"] = [schema["type"], "null"]
        if "enum" in schema:
            schema["enum"] = [*schema["enum"], None]
    return schema


def input_schema(fields: list[FormField] | None) -> dict[str, Any]:
    """The tool's input: the form's fields (files cannot be sent), else any object."""
    if fields is None:
        return {"type": "object", "additionalProperties": True,
                "description": "The run input: any JSON object, handed to the workflow's trigger as `input`."}
    usable = [f for f in fields if f.type != "file"]
    return {"type": "object", "additionalProperties": False,
            "properties": {f.name: _field_schema(f) for f in usable},
            "required": [f.name for f in usable if f.required]}


def _editor_instances(access: AccessContext, instance: FeatureInstance, scoped: bool) -> list[FeatureInstance]:
    if instance.feature_code == FEATURE_CODE:
        return [instance]
    if scoped:
        return []
    return [i for i in access.visible_instances(FEATURE_CODE) if i.mandate_id == instance.mandate_id]


def _describe(workflow: Workflow) -> str:
    text = workflow.description.strip() if workflow.description else ""
    return (f"Run the PowerOn workflow \"{workflow.name}\" (published version) and return its output"
            + (f": {text}" if text else "."))


def exposed(access: AccessContext, instance: FeatureInstance, scoped: bool, taken: set[str]) -> list[WorkflowTool]:
    """The exposed workflows the user may run, as tools whose names avoid `taken`."""
    tools: list[WorkflowTool] = []
    names = set(taken)
    for editor in _editor_instances(access, instance, scoped):
        try:
            pairs = GraphicalEditorInterface(access, editor).mcp_tool_workflows()
        except Forbidden:
            continue
        for workflow, version in pairs:
            slug = _slug(workflow.name)
            name = PREFIX + slug if slug and PREFIX + slug not in names else PREFIX + workflow.id
            names.add(name)
            fields = _form_fields(version)
            tools.append(WorkflowTool(name=name, workflow_id=workflow.id, instance_id=editor.id,
                                      description=_describe(workflow), input_schema=input_schema(fields),
                                      fields=tuple(fields) if fields is not None else None))
    return tools


def _answer(run: Any) -> tuple[bool, str]:
    if run.status == run_states.COMPLETED:
        return True, json.dumps({"runId": run.id, "status": run.status, "output": run.output}, ensure_ascii=False,
                                default=str)
    if run.status in (run_states.FAILED, run_states.CANCELLED):
        return False, json.dumps({"error": f"workflow run {run.id} {run.status}: {run.error or 'no reason given'}",
                                  "runId": run.id, "status": run.status}, ensure_ascii=False)
    return True, json.dumps({"runId": run.id, "status": run.status, "pauseReason": run.pause_reason})


def run(access: AccessContext, tool: WorkflowTool, arguments: Any) -> tuple[bool, str, str | None]:
    """Start the workflow's published version with `arguments` as input and wait for it.

    Returns:
        (ok, the result text, the run id or None when no run started).
    """
    from backend.actions.openai_tools import truncate_for_agent

    values = dict(arguments or {}) if isinstance(arguments, dict) else arguments
    try:
        if not isinstance(values, dict):
            raise InvalidInput([FieldError("arguments", "must be a JSON object")])
        editor = access.session.get(FeatureInstance, tool.instance_id)
        iface = GraphicalEditorInterface(access, editor)
        workflow = iface.get_workflow(tool.workflow_id)
        data = forms.validate(list(tool.fields), values) if tool.fields is not None else values
        started = iface.start_run(workflow, data, "published", wait_seconds=get_settings().mcp_run_wait_seconds)
    except DomainError as exc:
        return False, json.dumps({"error": f"{tool.name}: {exc}"}, ensure_ascii=False), None
    except Exception as exc:  # noqa: BLE001 - a tool call answers, it never surfaces a traceback
        log.exception("MCP workflow tool %s failed", tool.name)
        return False, json.dumps({"error": f"{tool.name} failed unexpectedly: {type(exc).__name__}"}), None
    ok, text = _answer(started)
    return ok, truncate_for_agent(text), started.id
