"""Run one action of the library directly, as the caller, in one of their feature instances."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Path
from fastapi.responses import JSONResponse

from backend.actions import ActionContext
from backend.actions.executor import InstanceActions
from backend.api.deps import CurrentUser, DbSession
from backend.api.permissions import declared_by
from backend.api.schemas import StrictCamelModel

router = APIRouter(prefix="/api", tags=["actions"])

STATUS = {"unknown": 404, "not_found": 404, "invalid": 422, "forbidden": 403}


class ActionCall(StrictCamelModel):
    action: str
    parameters: dict[str, Any] = {}


@router.post("/instances/{instanceId}/actions", **declared_by(InstanceActions.run))
def run_action(
    instance_id: Annotated[str, Path(alias="instanceId")], body: ActionCall, user: CurrentUser, session: DbSession
) -> JSONResponse:
    """Execute `action` with `parameters`; the answer is the ActionResult.

    404 unknown action or something it names that the caller cannot see (a connection, a file),
    422 invalid parameters (the field named), 403 not allowed; an action that ran and failed
    answers 200 with `ok: false` and its message.
    """
    actions = InstanceActions.of(ActionContext(session, user, "", instance_id), instance_id)
    result = actions.run(body.action, body.parameters)
    status = STATUS.get(result.error_kind or "", 200)
    answer = result.as_dict() if status == 200 else {"detail": result.error or result.error_kind, **result.as_dict()}
    return JSONResponse(answer, status_code=status)
