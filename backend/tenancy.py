"""Mandates, feature instances and role grants (spec §4.1–4.2).

Creating a mandate or an instance copies the template roles with their AccessRules
(backend.rbac.templates); granting gives a user such a copy.
"""

from __future__ import annotations

from typing import Any

from sqlmodel import Session, SQLModel, select

from backend.db.models import (
    FeatureAccess,
    FeatureAccessRole,
    FeatureInstance,
    Mandate,
    Role,
    User,
    UserMandate,
    UserMandateRole,
)
from backend.errors import Conflict, FieldError, InvalidInput
from backend.features.registry import get_feature
from backend.rbac.templates import copy_system_roles_to_mandate, copy_template_roles_to_instance


def create_mandate(session: Session, name: str) -> Mandate:
    """A new mandate with copies of the system template roles."""
    name = (name or "").strip()
    if not name:
        raise InvalidInput([FieldError("name", "must not be empty")])
    if session.exec(select(Mandate).where(Mandate.name == name)).first():
        raise Conflict(f"a mandate named '{name}' already exists")
    mandate = Mandate(name=name)
    session.add(mandate)
    session.flush()
    copy_system_roles_to_mandate(session, mandate)
    return mandate


def create_feature_instance(session: Session, mandate: Mandate, feature_code: str, label: str) -> FeatureInstance:
    """A new instance of a feature with copies of that feature's template roles."""
    try:
        get_feature(feature_code)
    except KeyError as exc:
        raise InvalidInput([FieldError("featureCode", str(exc.args[0]))]) from exc
    label = (label or "").strip()
    if not label:
        raise InvalidInput([FieldError("label", "must not be empty")])
    clash = session.exec(
        select(FeatureInstance).where(FeatureInstance.mandate_id == mandate.id, FeatureInstance.label == label)
    ).first()
    if clash:
        raise Conflict(f"mandate '{mandate.name}' already has an instance labelled '{label}'")
    instance = FeatureInstance(mandate_id=mandate.id, feature_code=feature_code, label=label)
    session.add(instance)
    session.flush()
    copy_template_roles_to_instance(session, instance)
    return instance


def _role(session: Session, label: str, mandate_id: str, instance_id: str | None) -> Role:
    role = session.exec(
        select(Role).where(
            Role.role_label == label,
            Role.mandate_id == mandate_id,
            Role.feature_instance_id == instance_id if instance_id else Role.feature_instance_id.is_(None),
        )
    ).first()
    if role is None:
        raise InvalidInput([FieldError("roles", f"unknown role label '{label}'")])
    return role


def _get_or_create(session: Session, model: type[SQLModel], **keys: str) -> Any:
    """The row of `model` with these column values, created when missing."""
    row = session.exec(select(model).filter_by(**keys)).first()
    if row is None:
        row = model(**keys)
        session.add(row)
        session.flush()
    return row


def grant_mandate_roles(session: Session, user: User, mandate: Mandate, labels: list[str]) -> None:
    """Make `user` a member of `mandate` holding the mandate roles `labels`."""
    membership = _get_or_create(session, UserMandate, user_id=user.id, mandate_id=mandate.id)
    for label in labels:
        role = _role(session, label, mandate.id, None)
        _get_or_create(session, UserMandateRole, user_mandate_id=membership.id, role_id=role.id)


def grant_instance_roles(session: Session, user: User, instance: FeatureInstance, labels: list[str]) -> None:
    """Give `user` access to `instance` with the instance roles `labels`."""
    access = _get_or_create(session, FeatureAccess, user_id=user.id, feature_instance_id=instance.id)
    for label in labels:
        role = _role(session, label, instance.mandate_id, instance.id)
        _get_or_create(session, FeatureAccessRole, feature_access_id=access.id, role_id=role.id)


def instance_role_labels(session: Session, user: User, instance_id: str) -> list[str]:
    """The instance roles `user` holds in the instance (empty: no access)."""
    rows = session.exec(
        select(Role.role_label)
        .join(FeatureAccessRole, FeatureAccessRole.role_id == Role.id)
        .join(FeatureAccess, FeatureAccess.id == FeatureAccessRole.feature_access_id)
        .where(FeatureAccess.user_id == user.id, FeatureAccess.feature_instance_id == instance_id)
    ).all()
    return sorted(rows)
