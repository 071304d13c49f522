"""Run one action of the library directly, as the caller, in one of their feature instances."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Path
from fastapi.responses import JSONResponse

from backend.actions import ActionContext, execute_action
from backend.api.deps import CurrentUser, DbSession
from backend.api.permissions import permission
from backend.api.schemas import StrictCamelModel
from backend.errors import Forbidden
from backend.rbac.rights import RESOURCE

router = APIRouter(prefix="/api", tags=["actions"])

ANY_TOOLBOX = "resource.toolbox"
STATUS = {"unknown": 404, "invalid": 422, "forbidden": 403}


class ActionCall(StrictCamelModel):
    action: str
    parameters: dict[str, Any] = {}


@router.post("/instances/{instanceId}/actions", **permission("RESOURCE", "resource.toolbox.*"))
def run_action(
    instance_id: Annotated[str, Path(alias="instanceId")], body: ActionCall, user: CurrentUser, session: DbSession
) -> JSONResponse:
    """Execute `action` with `parameters`; the answer is the ActionResult.

    404 unknown action, 422 invalid parameters (the field named), 403 not allowed; an action
    that ran and failed answers 200 with `ok: false` and its message.
    """
    context = ActionContext(session, user, "", instance_id)
    instance = context.access.require_instance(instance_id)
    context.mandate_id = instance.mandate_id
    if not context.access.resolve(RESOURCE, ANY_TOOLBOX, instance.mandate_id, instance.id).allowed:
        raise Forbidden("your roles in this instance do not allow running actions")
    result = execute_action(body.action, body.parameters, context)
    status = STATUS.get(result.error_kind or "", 200)
    answer = result.as_dict() if status == 200 else {"detail": result.error or result.error_kind, **result.as_dict()}
    return JSONResponse(answer, status_code=status)
