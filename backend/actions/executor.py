"""The one path by which anything runs an action: validate, authorise, run, report."""

from __future__ import annotations

import logging
from typing import Any

from pydantic import BaseModel, ValidationError

from backend.actions.base import ActionContext, ActionError, ActionResult
from backend.actions.registry import ActionRegistry, get_registry
from backend.errors import DomainError
from backend.rbac.rights import RESOURCE

log = logging.getLogger(__name__)


def _field_errors(exc: ValidationError) -> str:
    parts = []
    for error in exc.errors():
        where = ".".join(str(p) for p in error.get("loc", ())) or "parameters"
        parts.append(f"{where}: {error.get('msg')}")
    return "; ".join(parts)


def _jsonable(output: Any) -> Any:
    if isinstance(output, BaseModel):
        return output.model_dump(mode="json", by_alias=True)
    if isinstance(output, list):
        return [_jsonable(o) for o in output]
    return output


def execute_action(
    action_id: str, params: dict[str, Any] | None, context: ActionContext, registry: ActionRegistry | None = None
) -> ActionResult:
    """Run one action as `context.user` in their mandate and instance.

    Unknown ids, invalid parameters (the field named), a missing RESOURCE right for the action
    or its toolbox and any failure inside the action come back as an unsuccessful result with
    a clear message; nothing here raises.
    """
    found = (registry or get_registry()).get(action_id)
    if found is None:
        return ActionResult(action_id, False, error=f"unknown action id '{action_id}'", error_kind="unknown")
    try:
        parsed = found.params_model.model_validate(params or {})
    except ValidationError as exc:
        return ActionResult(action_id, False, error=f"invalid parameters for {action_id}: {_field_errors(exc)}",
                            error_kind="invalid")
    decision = context.access.resolve(RESOURCE, found.resource_item, context.mandate_id, context.feature_instance_id)
    if not decision.allowed:
        return ActionResult(action_id, False, error=f"your roles do not allow {action_id} "
                                                     f"(toolbox {found.toolbox})", error_kind="forbidden")
    # A failing action leaves nothing half-written: the writes of a `write` action live in a
    # savepoint (read-only actions skip its cost: they have nothing to undo).
    savepoint = context.session.begin_nested() if "write" in found.capabilities else None
    try:
        output = _jsonable(found.fn(parsed, context))
        if savepoint is not None:
            savepoint.commit()
    except (ActionError, DomainError) as exc:
        if savepoint is not None:
            savepoint.rollback()
        return ActionResult(action_id, False, error=str(exc), error_kind="failed")
    except Exception as exc:  # noqa: BLE001 - an action must never surface a traceback to its caller
        if savepoint is not None:
            savepoint.rollback()
        log.exception("action %s failed", action_id)
        return ActionResult(action_id, False, error=f"{action_id} failed unexpectedly: {type(exc).__name__}: {exc}",
                            error_kind="crashed")
    return ActionResult(action_id, True, output=output)
