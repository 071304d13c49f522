"""Running one action of the library as a user, the way the connector tests do (own transaction)."""

from __future__ import annotations

from typing import Any

from sqlmodel import select

from backend.actions import ActionContext, ActionResult, execute_action
from backend.db import session_scope
from backend.db.models import FeatureInstance, User


def run(action_id: str, params: dict, username: str = "admin", instance_id: str | None = None) -> ActionResult:
    """`action_id` through execute_action as `username` in a Workspace (default: the first one)."""
    with session_scope() as session:
        user = session.exec(select(User).where(User.username == username)).one()
        instance = session.get(FeatureInstance, instance_id) if instance_id else session.exec(
            select(FeatureInstance).where(FeatureInstance.feature_code == "workspace")
            .order_by(FeatureInstance.sys_created_at)).first()
        return execute_action(action_id, params, ActionContext(session, user, instance.mandate_id, instance.id))


def ok(action_id: str, params: dict) -> Any:
    """The output of an action that must succeed."""
    result = run(action_id, params)
    assert result.ok, result.error
    return result.output


def failed(action_id: str, params: dict) -> str:
    """The message of an action that must fail."""
    result = run(action_id, params)
    assert not result.ok, result.output
    return result.error
