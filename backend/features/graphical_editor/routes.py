"""REST routes of one Graphical Editor instance: {base} = /api/graphicalEditor/{instanceId}.

Mounted automatically under /api/graphicalEditor by the feature registry.
"""

from __future__ import annotations

from typing import Annotated, Literal

from fastapi import APIRouter, Depends, Path, Query, Response
from fastapi.responses import StreamingResponse

from backend.api.agent import SSE_RESPONSES, AgentPrompt, add_agent_routes, event_stream
from backend.api.deps import CurrentUser, DbSession
from backend.api.permissions import declared_by
from backend.api.schemas import (
    DraftPut,
    FieldErrorOut,
    MailDecisions,
    RestoreRequest,
    RunHistoryItem,
    RunHistoryPage,
    RunOut,
    RunStart,
    RunSummaryOut,
    StepOut,
    TemplateOut,
    ValidationReport,
    VersionOut,
    WorkflowCreate,
    WorkflowDetail,
    WorkflowOut,
    WorkflowPatch,
)
from backend.db.models import WorkflowRun
from backend.engine.steps import split_error
from backend.errors import FieldError, InvalidInput
from backend.features.graphical_editor.interface import (
    FEATURE_CODE,
    GraphicalEditorInterface,
    WorkflowSummary,
    WorkflowView,
    get_interface,
)
from backend.workflows import run_history, service

router = APIRouter(prefix="/{instanceId}", tags=[FEATURE_CODE])
Door = GraphicalEditorInterface


def interface(
    instance_id: Annotated[str, Path(alias="instanceId")], user: CurrentUser, session: DbSession
) -> GraphicalEditorInterface:
    return get_interface(user, None, instance_id, session)


Iface = Annotated[GraphicalEditorInterface, Depends(interface)]
WorkflowId = Annotated[str, Path(alias="workflowId")]
RunId = Annotated[str, Path(alias="runId")]


def workflow_out(summary: WorkflowSummary | WorkflowView) -> WorkflowOut:
    """The list form of a workflow."""
    return WorkflowOut.model_validate(summary.workflow).model_copy(
        update={"draft_version": summary.draft_version, "published_version": summary.published_version})


def workflow_detail(view: WorkflowView) -> WorkflowDetail:
    """The full form: with the graph a person edits (as the caller may see it) and the audit log."""
    return WorkflowDetail(
        **workflow_out(view).model_dump(), graph=view.graph, execution_logs=view.workflow.execution_logs or [],
        test_input=view.workflow.test_input, edited_version_id=view.edited_version_id,
        edited_lock_version=view.edited_lock_version,
    )


@router.get("/workflows", response_model=list[WorkflowOut], **declared_by(Door.workflow_summaries))
def list_workflows(iface: Iface) -> list[WorkflowOut]:
    return [workflow_out(summary) for summary in iface.workflow_summaries()]


@router.post("/workflows", status_code=201, response_model=WorkflowDetail, **declared_by(Door.create_workflow))
def create_workflow(body: WorkflowCreate, iface: Iface) -> WorkflowDetail:
    """Create a workflow; its first draft is `graph`, the graph of template `templateId`, or a manual trigger."""
    workflow = iface.create_workflow(body.name, body.description, body.graph, body.template_id)
    return workflow_detail(iface.workflow_view(workflow))


@router.get("/templates", response_model=list[TemplateOut], **declared_by(Door.list_templates))
def list_templates(iface: Iface) -> list[TemplateOut]:
    """The workflow templates a new workflow can start from (POST …/workflows {templateId}), each
    with its sample input and what it needs, checked against this installation."""
    listed = []
    for t in iface.list_templates():
        needs = t.needs()
        listed.append(TemplateOut(id=t.id, name=t.name, description=t.description, category=t.category,
                                  connections=list(t.connections), node_count=len(t.graph["nodes"]),
                                  sample_input=t.sample_input, needs=[n.as_dict() for n in needs],
                                  runs_as_it_is=t.runs_as_it_is(needs)))
    return listed


@router.get("/workflows/{workflowId}", response_model=WorkflowDetail, **declared_by(Door.get_workflow))
def get_workflow(workflow_id: WorkflowId, iface: Iface) -> WorkflowDetail:
    return workflow_detail(iface.workflow_view(iface.get_workflow(workflow_id)))


@router.patch("/workflows/{workflowId}", response_model=WorkflowDetail, **declared_by(Door.update_workflow))
def patch_workflow(workflow_id: WorkflowId, body: WorkflowPatch, iface: Iface) -> WorkflowDetail:
    workflow = iface.get_workflow(workflow_id)
    test_input = body.test_input if "test_input" in body.model_fields_set else service.UNCHANGED
    iface.update_workflow(workflow, body.name, body.description, body.active, test_input, body.mcp_tool)
    return workflow_detail(iface.workflow_view(workflow))


@router.put("/workflows/{workflowId}/mail-decisions", response_model=WorkflowDetail,
            **declared_by(Door.allow_mail_decisions))
def put_mail_decisions(workflow_id: WorkflowId, body: MailDecisions, iface: Iface) -> WorkflowDetail:
    """Allow one-click decisions from the task mails of this workflow (mandate admins only)."""
    workflow = iface.get_workflow(workflow_id)
    iface.allow_mail_decisions(workflow, body.one_click)
    return workflow_detail(iface.workflow_view(workflow))


@router.delete("/workflows/{workflowId}", status_code=204, **declared_by(Door.delete_workflow))
def delete_workflow(workflow_id: WorkflowId, iface: Iface) -> Response:
    iface.delete_workflow(iface.get_workflow(workflow_id))
    return Response(status_code=204)


@router.put("/workflows/{workflowId}/draft", response_model=VersionOut, **declared_by(Door.save_draft))
def put_draft(workflow_id: WorkflowId, body: DraftPut, iface: Iface) -> VersionOut:
    """Save the draft; with baseVersionId and baseLockVersion, 409 when that version changed since."""
    return VersionOut.model_validate(iface.save_draft(iface.get_workflow(workflow_id), body.graph, draft_base(body)))


def draft_base(body: DraftPut) -> service.DraftBase | None:
    """The base of a draft save: both fields or neither (422 naming the missing one)."""
    if body.base_version_id is None and body.base_lock_version is None:
        return None
    if body.base_version_id is None or body.base_lock_version is None:
        missing = "baseVersionId" if body.base_version_id is None else "baseLockVersion"
        raise InvalidInput([FieldError(missing, "give baseVersionId and baseLockVersion together, or neither")])
    return service.DraftBase(body.base_version_id, body.base_lock_version)


@router.post("/workflows/{workflowId}/validate", response_model=ValidationReport,
             **declared_by(Door.validate_workflow))
def validate_workflow(workflow_id: WorkflowId, iface: Iface) -> ValidationReport:
    """Check the graph being edited (the draft, else the published one) against every rule of DESIGN §4."""
    errors = iface.validate_workflow(iface.get_workflow(workflow_id))
    return ValidationReport(valid=not errors, errors=[FieldErrorOut(**e.as_dict()) for e in errors])


@router.get("/workflows/{workflowId}/versions", response_model=list[VersionOut],
            **declared_by(Door.list_versions))
def list_versions(workflow_id: WorkflowId, iface: Iface) -> list[VersionOut]:
    return [VersionOut.model_validate(v) for v in iface.list_versions(iface.get_workflow(workflow_id))]


def _version_route(action: str):
    def change(workflow_id: WorkflowId, iface: Iface, body: RestoreRequest | None = None) -> VersionOut:
        version_id = body.version_id if body else None
        return VersionOut.model_validate(iface.change_version(iface.get_workflow(workflow_id), action, version_id))

    change.__name__ = f"{action}_version"
    change.__doc__ = f"{action.capitalize()} a version of the workflow (needs the publish right)."
    if action != "restore":
        def change_without_body(workflow_id: WorkflowId, iface: Iface) -> VersionOut:
            return change(workflow_id, iface)

        change_without_body.__name__ = change.__name__
        change_without_body.__doc__ = change.__doc__
        return change_without_body
    return change


for _action in ("publish", "unpublish", "archive", "restore"):
    router.post(f"/workflows/{{workflowId}}/{_action}", response_model=VersionOut,
                **declared_by(Door.change_version))(_version_route(_action))


# --- runs -------------------------------------------------------------------------------------


def run_out(iface: GraphicalEditorInterface, run: WorkflowRun, with_steps: bool = False) -> RunOut:
    """The run answer of DESIGN §6; a step's stored error is split into message and stack."""
    answer = RunOut.model_validate(run)
    if not with_steps:
        return answer
    steps = []
    for step in iface.run_steps(run):
        message, stack = split_error(step.error)
        steps.append(StepOut.model_validate(step).model_copy(update={"error": message, "stack": stack}))
    return answer.model_copy(update={"steps": steps})


@router.post("/workflows/{workflowId}/runs", status_code=201, response_model=RunOut,
             response_model_exclude_none=False, **declared_by(Door.start_run))
def start_run(workflow_id: WorkflowId, iface: Iface, body: RunStart | None = None) -> RunOut:
    """Start a run and execute it synchronously within the request; the answer is its state after
    it completed, failed or paused (with its steps). Invalid graphs are refused with 422."""
    body = body or RunStart()
    run = iface.start_run(iface.get_workflow(workflow_id), body.input, body.version, body.mode)
    return run_out(iface, run, with_steps=True)


def history_item(run: WorkflowRun) -> RunHistoryItem:
    """A run as the history lists it: its error's message without the stack, its duration."""
    message, _stack = split_error(run.error)
    return RunHistoryItem.model_validate(run).model_copy(
        update={"error": message, "duration_ms": run_history.duration_ms(run)})


@router.get("/workflows/{workflowId}/runs", response_model=RunHistoryPage, **declared_by(Door.run_history))
def workflow_runs(
    workflow_id: WorkflowId, iface: Iface,
    status: Annotated[Literal[run_history.STATUSES] | None, Query()] = None,
    trigger: Annotated[Literal[run_history.TRIGGERS] | None, Query()] = None,
    limit: Annotated[int, Query(ge=1, le=run_history.MAX_LIMIT)] = run_history.DEFAULT_LIMIT,
    before: Annotated[str | None, Query(description="nextBefore of the previous page, or an ISO time")] = None,
) -> RunHistoryPage:
    """The workflow's run history, newest first, one page at a time (follow `nextBefore`)."""
    page = iface.run_history(iface.get_workflow(workflow_id), status, trigger, limit, before)
    return RunHistoryPage(items=[history_item(r) for r in page.runs], next_before=page.next_before)


@router.get("/workflows/{workflowId}/runs/summary", response_model=RunSummaryOut,
            **declared_by(Door.run_summary))
def workflow_run_summary(
    workflow_id: WorkflowId, iface: Iface,
    days: Annotated[int, Query(ge=1, le=run_history.MAX_DAYS)] = run_history.DEFAULT_DAYS,
) -> RunSummaryOut:
    """For the monitor page: runs per status and trigger over the last `days` days, the last run,
    the last failure and the average duration."""
    workflow = iface.get_workflow(workflow_id)
    summary = iface.run_summary(workflow, days)
    return RunSummaryOut(
        workflow_id=workflow.id, days=summary.days, since=summary.since, total=summary.total,
        by_status=summary.by_status, by_trigger=summary.by_trigger,
        last_run=history_item(summary.last_run) if summary.last_run else None,
        last_failure=history_item(summary.last_failure) if summary.last_failure else None,
        average_duration_ms=summary.average_duration_ms,
    )


@router.get("/runs", response_model=list[RunOut], **declared_by(Door.list_runs))
def list_runs(iface: Iface, workflow_id: Annotated[str | None, Query(alias="workflowId")] = None,
              status: Annotated[Literal[run_history.STATUSES] | None, Query()] = None) -> list[RunOut]:
    return [run_out(iface, run) for run in iface.list_runs(workflow_id, status)]


@router.get("/runs/{runId}", response_model=RunOut, **declared_by(Door.get_run))
def get_run(run_id: RunId, iface: Iface) -> RunOut:
    return run_out(iface, iface.get_run(run_id), with_steps=True)


@router.post("/runs/{runId}/cancel", response_model=RunOut, **declared_by(Door.cancel_run))
def cancel_run(run_id: RunId, iface: Iface) -> RunOut:
    """Cancel a running or paused run (409 when it has already finished)."""
    return run_out(iface, iface.cancel_run(iface.get_run(run_id)), with_steps=True)


@router.post("/runs/{runId}/continue", response_model=RunOut, **declared_by(Door.continue_run))
def continue_run(run_id: RunId, iface: Iface) -> RunOut:
    """Step-by-step mode: execute the next node of a run paused after a step."""
    return run_out(iface, iface.continue_run(iface.get_run(run_id)), with_steps=True)


@router.post("/runs/{runId}/retry", status_code=201, response_model=RunOut, **declared_by(Door.retry_run))
def retry_run(run_id: RunId, iface: Iface,
              graph: Annotated[Literal["current", "original"], Query(
                  description="current: the version's graph as it is now (e.g. the fixed draft); "
                              "original: the graph the failed run ran")] = "current") -> RunOut:
    """Retry a failed run from its failed node: the answer is a new run (201) that reused the
    outputs of the completed steps, after it completed, failed or paused; 409 unless failed, or
    when the current graph changed around the part that already ran (the nodes are named)."""
    return run_out(iface, iface.retry_run(iface.get_run(run_id), graph=graph), with_steps=True)


# --- the editor's AI chat (UC-4): the agent with the workflow toolbox, knowing the graph ----------

add_agent_routes(router, FEATURE_CODE)


@router.post("/workflows/{workflowId}/agent", response_class=StreamingResponse, responses=SSE_RESPONSES,
             **declared_by(Door.prepare_agent_run))
def workflow_agent(workflow_id: WorkflowId, iface: Iface, body: AgentPrompt) -> StreamingResponse:
    """The editor's chat about one workflow: the agent gets the workflow toolbox and the current
    graph (draft, else published) and streams its events as POST {base}/agent does."""
    return event_stream(iface.prepare_agent_run(iface.get_workflow(workflow_id), body.prompt, body.chat_id))
