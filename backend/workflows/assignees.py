"""Who a human task (input.approval, input.form) of one Graphical Editor instance can be assigned to.

The choices are exactly what backend/engine/tasks.py matches: an assignee ``{"role": <label>}`` is
completed by whoever holds a role of that label in the task's mandate (mandate roles) or instance
(instance roles), ``{"user": <id>}`` by that user. So the roles offered are the mandate's roles and
this instance's, and the users the mandate's enabled members — nothing of other mandates or instances.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from sqlalchemy import or_
from sqlmodel import Session, select

from backend.db.models import FeatureInstance, Role, User, UserMandate


@dataclass(frozen=True)
class AssigneeUser:
    """A user as the picker shows them."""

    id: str
    name: str  # display name, with the username when they differ


@dataclass(frozen=True)
class AssigneeChoices:
    """The roles (labels, sorted) and users (by name) a task of the instance can be assigned to."""

    roles: list[str]
    users: list[AssigneeUser]

    def describe(self, assignee: Any) -> tuple[str, bool]:
        """(how the page names a stored assignee, whether it is still one of the choices)."""
        if not isinstance(assignee, dict):
            return "", True
        if assignee.get("user"):
            user = next((u for u in self.users if u.id == assignee["user"]), None)
            return (user.name, True) if user else (f"user {assignee['user']} (no longer exists here)", False)
        if assignee.get("role"):
            role = str(assignee["role"])
            return (role, True) if role in self.roles else (f"role {role} (no longer exists here)", False)
        return "", True


def shown_name(user: User) -> str:
    """'Display Name (username)', or the username alone when there is no other name."""
    display = (user.display_name or "").strip()
    return f"{display} ({user.username})" if display and display != user.username else user.username


def assignee_choices(session: Session, instance: FeatureInstance) -> AssigneeChoices:
    """The roles and users a human task in `instance` can be assigned to (see the module doc)."""
    labels = session.exec(select(Role.role_label).where(
        Role.mandate_id == instance.mandate_id,
        or_(Role.feature_instance_id.is_(None), Role.feature_instance_id == instance.id))).all()
    members = session.exec(select(User).join(UserMandate, UserMandate.user_id == User.id).where(
        UserMandate.mandate_id == instance.mandate_id, User.disabled.is_(False))).all()
    users = sorted((AssigneeUser(u.id, shown_name(u)) for u in members), key=lambda u: u.name.lower())
    return AssigneeChoices(roles=sorted(set(labels)), users=users)
