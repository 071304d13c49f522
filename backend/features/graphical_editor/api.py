"""REST routes of one Graphical Editor instance: {base} = /api/graphicalEditor/{instanceId}."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated

from fastapi import APIRouter, Depends, Path, Response
from sqlmodel import Session

from backend.api.deps import CurrentUser, DbSession
from backend.api.schemas import (
    DraftPut,
    RestoreRequest,
    VersionOut,
    WorkflowCreate,
    WorkflowDetail,
    WorkflowOut,
    WorkflowPatch,
)
from backend.db.models import FeatureInstance, User, Workflow
from backend.errors import Forbidden
from backend.tenancy import can_modify, require_instance
from backend.workflows import service

FEATURE_CODE = "graphicalEditor"

router = APIRouter(prefix="/api/graphicalEditor/{instanceId}", tags=["graphicalEditor"])


@dataclass
class InstanceContext:
    """The authorised instance of a request and what the caller may do in it."""

    session: Session
    user: User
    instance: FeatureInstance
    roles: list[str]

    def require_modify(self) -> None:
        if not can_modify(self.roles):
            raise Forbidden("your roles in this instance allow reading only")

    def workflow(self, workflow_id: str) -> Workflow:
        return service.get_workflow(self.session, self.instance, workflow_id)


def instance_context(
    instance_id: Annotated[str, Path(alias="instanceId")], user: CurrentUser, session: DbSession
) -> InstanceContext:
    instance, roles = require_instance(session, user, instance_id, FEATURE_CODE)
    return InstanceContext(session, user, instance, roles)


Ctx = Annotated[InstanceContext, Depends(instance_context)]


def workflow_out(ctx: InstanceContext, workflow: Workflow, numbers: dict[str, int] | None = None) -> WorkflowOut:
    """The list form of a workflow; `numbers` from service.version_numbers saves a query."""
    if numbers is None:
        numbers = service.version_numbers(ctx.session, [workflow])[workflow.id]
    return WorkflowOut.model_validate(workflow).model_copy(
        update={"draft_version": numbers.get("draft"), "published_version": numbers.get("published")}
    )


def workflow_detail(ctx: InstanceContext, workflow: Workflow) -> WorkflowDetail:
    """The full form of a workflow: with the graph a person edits and the audit log."""
    summary = workflow_out(ctx, workflow).model_dump()
    return WorkflowDetail(
        **summary, graph=service.current_graph(ctx.session, workflow), execution_logs=workflow.execution_logs or []
    )


@router.get("/workflows", response_model=list[WorkflowOut], response_model_by_alias=True)
def list_workflows(ctx: Ctx) -> list[WorkflowOut]:
    workflows = service.list_workflows(ctx.session, ctx.instance)
    numbers = service.version_numbers(ctx.session, workflows)
    return [workflow_out(ctx, w, numbers[w.id]) for w in workflows]


@router.post("/workflows", status_code=201, response_model=WorkflowDetail)
def create_workflow(body: WorkflowCreate, ctx: Ctx) -> WorkflowDetail:
    ctx.require_modify()
    workflow = service.create_workflow(
        ctx.session, ctx.user, ctx.instance, body.name, body.description, body.graph
    )
    return workflow_detail(ctx, workflow)


@router.get("/workflows/{workflowId}", response_model=WorkflowDetail)
def get_workflow(workflow_id: Annotated[str, Path(alias="workflowId")], ctx: Ctx) -> WorkflowDetail:
    return workflow_detail(ctx, ctx.workflow(workflow_id))


@router.patch("/workflows/{workflowId}", response_model=WorkflowDetail)
def patch_workflow(workflow_id: Annotated[str, Path(alias="workflowId")], body: WorkflowPatch, ctx: Ctx) -> WorkflowDetail:
    ctx.require_modify()
    workflow = ctx.workflow(workflow_id)
    service.update_workflow(
        ctx.session, ctx.user, workflow, ctx.instance, body.name, body.description, body.active
    )
    return workflow_detail(ctx, workflow)


@router.delete("/workflows/{workflowId}", status_code=204)
def delete_workflow(workflow_id: Annotated[str, Path(alias="workflowId")], ctx: Ctx) -> Response:
    ctx.require_modify()
    service.delete_workflow(ctx.session, ctx.workflow(workflow_id))
    return Response(status_code=204)


@router.put("/workflows/{workflowId}/draft", response_model=VersionOut)
def put_draft(workflow_id: Annotated[str, Path(alias="workflowId")], body: DraftPut, ctx: Ctx) -> VersionOut:
    ctx.require_modify()
    version = service.save_draft(ctx.session, ctx.user, ctx.workflow(workflow_id), body.graph)
    return VersionOut.model_validate(version)


@router.get("/workflows/{workflowId}/versions", response_model=list[VersionOut])
def list_versions(workflow_id: Annotated[str, Path(alias="workflowId")], ctx: Ctx) -> list[VersionOut]:
    return [VersionOut.model_validate(v) for v in service.list_versions(ctx.session, ctx.workflow(workflow_id))]


@router.post("/workflows/{workflowId}/publish", response_model=VersionOut)
def publish(workflow_id: Annotated[str, Path(alias="workflowId")], ctx: Ctx) -> VersionOut:
    ctx.require_modify()
    return VersionOut.model_validate(service.publish(ctx.session, ctx.user, ctx.workflow(workflow_id)))


@router.post("/workflows/{workflowId}/unpublish", response_model=VersionOut)
def unpublish(workflow_id: Annotated[str, Path(alias="workflowId")], ctx: Ctx) -> VersionOut:
    ctx.require_modify()
    return VersionOut.model_validate(service.unpublish(ctx.session, ctx.user, ctx.workflow(workflow_id)))


@router.post("/workflows/{workflowId}/archive", response_model=VersionOut)
def archive(workflow_id: Annotated[str, Path(alias="workflowId")], ctx: Ctx) -> VersionOut:
    ctx.require_modify()
    return VersionOut.model_validate(service.archive(ctx.session, ctx.user, ctx.workflow(workflow_id)))


@router.post("/workflows/{workflowId}/restore", response_model=VersionOut)
def restore(
    workflow_id: Annotated[str, Path(alias="workflowId")], ctx: Ctx, body: RestoreRequest | None = None
) -> VersionOut:
    ctx.require_modify()
    version_id = body.version_id if body else None
    return VersionOut.model_validate(
        service.restore(ctx.session, ctx.user, ctx.workflow(workflow_id), version_id)
    )
