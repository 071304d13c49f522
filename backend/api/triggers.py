"""Routes that start workflows from outside (issue 7, item 4): webhooks, events, public forms.

- ``POST|GET|PUT|PATCH|DELETE /api/hooks/{workflowId}/{path}``: public, authenticated by the
  Standard Webhooks signature of the trigger's secret (backend/triggers/webhooks.py);
- ``POST /api/events {type, payload}``: signed-in callers with the execute right
  (backend/triggers/events.py);
- ``GET|POST /api/forms/{workflowId}``: the public form of a workflow (backend/triggers/forms.py).

All of them answer 202 with the run id(s) once the run is committed and handed to the run
worker, and 429 with Retry-After while POWERON_MAX_QUEUED_RUNS runs wait to start.
"""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, HTTPException, Path, Request
from pydantic import Field
from starlette.concurrency import run_in_threadpool

from backend import json_limits
from backend.api.deps import CurrentUser, DbSession
from backend.api.permissions import declared_by, permission
from backend.api.schemas import CamelModel, StrictCamelModel
from backend.config import get_settings
from backend.db import session_scope
from backend.errors import FieldError, InvalidInput
from backend.features.graphical_editor.interface import GraphicalEditorInterface
from backend.triggers import events, forms, launch, remote, webhooks

router = APIRouter(prefix="/api", tags=["triggers"])
WorkflowId = Annotated[str, Path(alias="workflowId")]
HOOK_METHODS = ("POST", "GET", "PUT", "PATCH", "DELETE")
RAW_BODY = {"requestBody": {"content": {"application/json": {"schema": {}}, "text/plain": {"schema": {}}},
                            "required": False}}
# What a webhook's refusals mean (backend/api/openapi.py adds the body shape and the other statuses).
HOOK_ANSWERS: dict[int | str, dict[str, Any]] = {
    401: {"description": "Missing, malformed, stale or wrong Standard Webhooks signature, or the trigger has no "
                         "secret."},
    403: {"description": "The workflow's creator may no longer run it (the run would run as them)."},
    404: {"description": "Unknown workflow (`workflow <id> not found`), or a workflow that exists named with the "
                         "reason: no published version, or no webhook on that path in its published version."},
    405: {"description": "The path is served for other methods only (see Allow)."},
    410: {"description": "The workflow is published with this webhook but switched off (inactive): switch it on "
                         "in the editor."},
    413: {"description": "The body is larger than POWERON_WEBHOOK_MAX_BYTES."},
}


class RunAccepted(CamelModel):
    run_id: str


class RunsAccepted(CamelModel):
    run_ids: list[str]


class EventIn(StrictCamelModel):
    type: str = Field(..., min_length=1, max_length=200)
    payload: Any = None


class FormOut(CamelModel):
    workflow_id: str
    name: str
    description: str
    fields: list[dict[str, Any]]


def _overloaded(exc: launch.Overloaded) -> HTTPException:
    return HTTPException(status_code=429, detail=str(exc), headers=launch.retry_after_header(exc))


async def read_body(request: Request, limit: int) -> bytes:
    """The raw body, refused with 413 as soon as it is larger than `limit` bytes."""
    declared = request.headers.get("content-length", "")
    too_large = HTTPException(status_code=413, detail=f"body larger than {limit} bytes (POWERON_WEBHOOK_MAX_BYTES)")
    if declared.isdigit() and int(declared) > limit:
        raise too_large
    body = bytearray()
    async for chunk in request.stream():
        body += chunk
        if len(body) > limit:
            raise too_large
    return bytes(body)


async def receive_webhook(workflow_id: WorkflowId, path: str, request: Request) -> RunAccepted:
    """A Standard Webhooks call: 202 {runId} (the same runId again for a repeated webhook-id);
    404 unknown workflow, or (with the reason) no published version or no webhook on that path;
    405 other method; 410 switched off (inactive); 401 bad signature or timestamp; 413 too large;
    422 a webhook-id or JSON body beyond the limits; 429 too many queued runs. Every answer to a
    workflow that exists is kept in its call log (the editor's webhook help)."""
    try:
        body = await read_body(request, get_settings().webhook_max_bytes)
    except HTTPException as exc:
        await run_in_threadpool(webhooks.record_refusal, workflow_id, path, request.method, exc.status_code,
                                str(exc.detail))
        raise
    try:
        delivery = await run_in_threadpool(webhooks.receive, workflow_id, path, request.method, body,
                                           dict(request.headers), dict(request.query_params))
    except webhooks.Unauthorized as exc:
        raise HTTPException(status_code=401, detail=str(exc)) from None
    except webhooks.MethodNotAllowed as exc:
        raise HTTPException(status_code=405, detail=str(exc), headers={"Allow": ", ".join(exc.allowed)}) from None
    except webhooks.Gone as exc:
        raise HTTPException(status_code=410, detail=str(exc)) from None
    except launch.Overloaded as exc:
        raise _overloaded(exc) from None
    return RunAccepted(run_id=delivery.run_id)


class DeliveryAccepted(CamelModel):
    run_id: str | None = None
    ignored: str | None = None


@router.post("/hooks/remote/{token}", status_code=202, response_model=DeliveryAccepted, name="remote_webhook",
             responses={401: {"description": "The delivery's signature (ClickUp X-Signature, Jira X-Hub-Signature) "
                                             "did not verify."},
                        404: {"description": "No webhook is registered at this address."},
                        413: {"description": "The body is larger than POWERON_WEBHOOK_MAX_BYTES."}},
             openapi_extra={**permission("public")["openapi_extra"], **RAW_BODY})
async def receive_remote_webhook(token: Annotated[str, Path(max_length=64)], request: Request) -> DeliveryAccepted:
    """A delivery of an outside system (ClickUp, Jira) for a webhook registered when a workflow with its
    trigger node was published: 202 {runId} (or {ignored} naming why nothing started: an event the
    trigger does not listen to, a workflow switched off); 401 bad signature; 404 unknown address;
    422 not JSON; 429 too many queued runs."""
    body = await read_body(request, get_settings().webhook_max_bytes)
    try:
        accepted = await run_in_threadpool(remote.receive, token, body, dict(request.headers))
    except remote.Unauthorized as exc:
        raise HTTPException(status_code=401, detail=str(exc)) from None
    except launch.Overloaded as exc:
        raise _overloaded(exc) from None
    return DeliveryAccepted(run_id=accepted.run_id, ignored=accepted.ignored)


for _method in HOOK_METHODS:
    router.add_api_route(
        "/hooks/{workflowId}/{path:path}", receive_webhook, methods=[_method], status_code=202,
        response_model=RunAccepted, name=f"webhook_{_method.lower()}", operation_id=f"webhook_{_method.lower()}",
        responses=HOOK_ANSWERS, openapi_extra={**permission("public")["openapi_extra"], **RAW_BODY},
    )


@router.post("/events", status_code=202, response_model=RunsAccepted,
             **declared_by(GraphicalEditorInterface.check_may_execute))
def fire_event(body: EventIn, user: CurrentUser, session: DbSession) -> RunsAccepted:
    """Start every active published workflow of the caller's mandate(s) whose trigger.event
    listens to `type` and whose filter matches `payload`, each as its creator. 403 without the
    execute right in any Graphical Editor instance of the caller's mandates; 429 when overloaded."""
    try:
        return RunsAccepted(run_ids=events.fire(session, user, body.type, body.payload))
    except launch.Overloaded as exc:
        raise _overloaded(exc) from None


def _form_definition(workflow_id: str) -> dict[str, Any]:
    with session_scope() as session:
        return forms.definition(session, workflow_id)


@router.get("/forms/{workflowId}", response_model=FormOut, **permission("public"))
def get_form(workflow_id: WorkflowId) -> dict[str, Any]:
    """The public form of an active workflow whose published version starts with trigger.form."""
    return _form_definition(workflow_id)


def _submit_form(workflow_id: str, values: Any) -> str:
    with launch.accepting, session_scope() as session:
        return forms.submit(session, workflow_id, values)


@router.post("/forms/{workflowId}", status_code=202, response_model=RunAccepted,
             openapi_extra={**permission("public")["openapi_extra"],
                            "requestBody": {"content": {"application/json": {"schema": {"type": "object"}}},
                                            "required": True}})
async def submit_form(workflow_id: WorkflowId, request: Request) -> RunAccepted:
    """Submit the public form: 202 {runId}; 422 naming each missing or invalid field."""
    raw = await read_body(request, get_settings().webhook_max_bytes)
    try:
        values = json_limits.loads(raw) if raw else None  # any content type: the limits apply too
    except ValueError:
        raise InvalidInput([FieldError("body", "must be a JSON object of field values")]) from None
    try:
        return RunAccepted(run_id=await run_in_threadpool(_submit_form, workflow_id, values))
    except launch.Overloaded as exc:
        raise _overloaded(exc) from None
