"""The one path by which anything runs an action: validate, authorise, run, report.

:func:`may_run` is the one place an action's RESOURCE item (`resource.toolbox.<box>.<id>`) is
checked; :class:`InstanceActions` is the door for callers that run actions directly in one of
their feature instances (REST), guarded by the platform's TOOLBOXES_ITEM.
"""

from __future__ import annotations

import functools
import json
import logging
from typing import Any

import jsonschema
from pydantic import BaseModel, ValidationError
from sqlmodel import Session

from backend.actions.base import Action, ActionContext, ActionError, ActionResult
from backend.actions.catalogue import current_registry, registry_for, using
from backend.actions.registry import ActionRegistry
from backend.actions.toolboxes import MCP_TOOLBOX_PREFIX
from backend.db.models import FeatureInstance
from backend.errors import DomainError, Forbidden, NotFound
from backend.rbac.access import AccessContext
from backend.rbac.door import Door, Permission, guarded
from backend.rbac.rights import RESOURCE
from backend.rbac.templates import TOOLBOXES_ITEM

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


class SchemaViolation(ValueError):
    """Parameters that do not match an action's JSON Schema (actions known only at run time)."""


def _parsed_parameters(action: Action, params: dict[str, Any]) -> Any:
    """The parameters as the action's fn takes them: its pydantic model, or for an action with a
    JSON Schema of its own (input_schema_json) the dict itself once it matches the schema."""
    if action.input_schema_json is None:
        return action.params_model.model_validate(params)
    if not isinstance(params, dict):
        raise SchemaViolation("parameters: expected a JSON object")
    validator = _schema_validator(action.input_schema_json)
    problems = sorted(validator.iter_errors(params), key=lambda e: list(e.absolute_path))
    if problems:
        raise SchemaViolation("; ".join(
            f"{'.'.join(str(p) for p in e.absolute_path) or 'parameters'}: {e.message}" for e in problems[:5]))
    return params


@functools.lru_cache(maxsize=512)
def _schema_validator(schema_json: str) -> Any:
    schema = json.loads(schema_json)
    validator_class = jsonschema.validators.validator_for(schema, default=jsonschema.Draft202012Validator)
    try:
        validator_class.check_schema(schema)
    except jsonschema.SchemaError:
        # A foreign server's broken schema must not make its tool uncallable: check the basics only.
        return jsonschema.Draft202012Validator({"type": "object"})
    return validator_class(schema)


def may_run(access: AccessContext, action: Action, mandate_id: str | None, instance_id: str | None) -> bool:
    """Whether the user may call `action` in (mandate, instance): its RESOURCE item
    `resource.toolbox.<toolbox>.<id>` (a rule on `resource.toolbox.<toolbox>.*` allows the box).

    A mandate's external MCP server (toolbox `mcp:<name>`) belongs to the mandate: besides the
    instance's right to use toolboxes, the user's mandate roles must allow it (the rules its
    admins set with McpServers.set_roles, on `resource.toolbox.mcp:<name>.*`)."""
    allowed = access.resolve(RESOURCE, action.resource_item, mandate_id, instance_id).allowed
    if allowed and instance_id is not None and action.toolbox.startswith(MCP_TOOLBOX_PREFIX):
        allowed = access.resolve(RESOURCE, action.resource_item, mandate_id, None).allowed
    return allowed


def execute_action(
    action_id: str, params: dict[str, Any] | None, context: ActionContext, registry: ActionRegistry | None = None
) -> ActionResult:
    """Run one action as `context.user` in their mandate and instance.

    Unknown ids, invalid parameters (the field named), a missing RESOURCE right for the action
    or its toolbox and any failure inside the action come back as an unsuccessful result with
    a clear message; nothing here raises.
    """
    registry = registry or current_registry()
    found = registry.get(action_id)
    if found is None:
        return ActionResult(action_id, False, error=f"unknown action id '{action_id}'", error_kind="unknown")
    try:
        parsed = _parsed_parameters(found, params or {})
    except ValidationError as exc:
        return ActionResult(action_id, False, error=f"invalid parameters for {action_id}: {_field_errors(exc)}",
                            error_kind="invalid")
    except SchemaViolation as exc:
        return ActionResult(action_id, False, error=f"invalid parameters for {action_id}: {exc}", error_kind="invalid")
    if not may_run(context.access, found, context.mandate_id, context.feature_instance_id):
        return ActionResult(action_id, False, error=f"your roles do not allow {action_id} "
                                                     f"(toolbox {found.toolbox})", error_kind="forbidden")
    # A failing action leaves nothing half-written: the writes of a `write` action live in a
    # savepoint (read-only actions skip its cost: they have nothing to undo).
    savepoint = _Savepoint(context.session) if "write" in found.capabilities else None
    try:
        with using(registry):  # node types and validation inside the action see the same catalogue
            output = _jsonable(found.fn(parsed, context))
        if savepoint is not None:
            savepoint.commit()
    except (ActionError, DomainError) as exc:
        if savepoint is not None:
            savepoint.rollback()
        # Something the caller named does not exist for them (a foreign connection, a missing file).
        kind = "not_found" if isinstance(exc, NotFound) else "failed"
        return ActionResult(action_id, False, error=str(exc), error_kind=kind)
    except Exception as exc:  # noqa: BLE001 - an action must never surface a traceback to its caller
        if savepoint is not None:
            savepoint.rollback()
        log.exception("action %s failed", action_id)
        return ActionResult(action_id, False, error=f"{action_id} failed unexpectedly: {type(exc).__name__}: {exc}",
                            error_kind="crashed")
    return ActionResult(action_id, True, output=output)


class _Savepoint:
    """The savepoint a `write` action runs in; a rollback undoes its writes and nothing else.

    On SQLite the SAVEPOINT statement itself opens the database transaction when none is open,
    and rolling back to it ends none: the caller would keep a snapshot that a connector's own
    commit meanwhile made stale (store.mark_expired, store.save_secret), and its next write would
    fail "database is locked". A rollback of a savepoint that opened the transaction therefore
    ends that transaction too (it holds nothing but the undone writes).
    """

    def __init__(self, session: Session):
        self.session = session
        session.flush()
        raw = session.connection().connection.dbapi_connection
        # sqlite3 tells whether a transaction is open; other drivers' callers are always in one.
        self.opens_transaction = getattr(raw, "in_transaction", True) is False
        self.nested = session.begin_nested()

    def commit(self) -> None:
        self.nested.commit()

    def rollback(self) -> None:
        self.nested.rollback()
        if self.opens_transaction:
            self.session.commit()


class InstanceActions(Door):
    """The action library as one user may run it directly in one of their feature instances."""

    def __init__(self, context: ActionContext, instance: FeatureInstance):
        self.context = context
        self.access = context.access
        self.instance = instance

    @classmethod
    def of(cls, context: ActionContext, instance_id: str) -> InstanceActions:
        """The door of instance `instance_id` (NotFound when the user may not open it); sets the
        context's mandate and instance to it."""
        instance = context.access.require_instance(instance_id)
        context.mandate_id, context.feature_instance_id = instance.mandate_id, instance.id
        return cls(context, instance)

    def enforce(self, permission: Permission, scope: tuple[str | None, str | None] | None = None) -> None:
        """As Door.enforce, saying what was refused in the words of this door."""
        try:
            super().enforce(permission, scope)
        except Forbidden:
            raise Forbidden("your roles in this instance do not allow running actions") from None

    @guarded(RESOURCE, TOOLBOXES_ITEM)
    def run(self, action_id: str, params: dict[str, Any] | None) -> ActionResult:
        """Run one action of the instance's mandate catalogue (execute_action, which also checks
        the action's own item)."""
        return execute_action(action_id, params, self.context, registry_for(self.context.session,
                                                                            self.instance.mandate_id))
