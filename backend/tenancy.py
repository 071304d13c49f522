"""Mandates, feature instances, template roles and role grants (spec §4.1–4.2).

The RBAC issue adds AccessRules and the resolver; here roles are copied from their
templates at creation, exactly as the spec describes, and granted to users.
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
from backend.errors import Conflict, FieldError, InvalidInput, NotFound
from backend.features.registry import DEFAULT_TEMPLATE_ROLES, get_feature, get_features

SYSTEM_ROLE_LABELS = DEFAULT_TEMPLATE_ROLES


def ensure_template_roles(session: Session) -> None:
    """Create the system and feature template roles that do not exist yet."""
    existing = {
        (r.role_label, r.feature_code)
        for r in session.exec(select(Role).where(Role.mandate_id.is_(None))).all()
    }
    for label in SYSTEM_ROLE_LABELS:
        if (label, None) not in existing:
            session.add(Role(role_label=label, is_system_role=True))
    for feature in get_features().values():
        for suffix in feature.template_roles:
            label = feature.role_label(suffix)
            if (label, feature.code) not in existing:
                session.add(Role(role_label=label, feature_code=feature.code))
    session.flush()


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
    templates = session.exec(select(Role).where(Role.is_system_role.is_(True))).all()
    for template in templates:
        session.add(Role(role_label=template.role_label, mandate_id=mandate.id))
    session.flush()
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
    templates = session.exec(
        select(Role).where(Role.mandate_id.is_(None), Role.feature_code == feature_code)
    ).all()
    for template in templates:
        session.add(
            Role(role_label=template.role_label, mandate_id=mandate.id,
                 feature_instance_id=instance.id, feature_code=feature_code)
        )
    session.flush()
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


def instances_for_user(session: Session, user: User, feature_code: str | None = None) -> list[FeatureInstance]:
    """The feature instances `user` has access to, optionally of one feature."""
    query = (
        select(FeatureInstance)
        .join(FeatureAccess, FeatureAccess.feature_instance_id == FeatureInstance.id)
        .where(FeatureAccess.user_id == user.id)
    )
    if feature_code:
        query = query.where(FeatureInstance.feature_code == feature_code)
    return list(session.exec(query.order_by(FeatureInstance.label)).all())


def require_instance(
    session: Session, user: User, instance_id: str, feature_code: str
) -> tuple[FeatureInstance, list[str]]:
    """The instance and the user's roles in it; NotFound if missing, foreign or not shared.

    The answer for a foreign instance is the same as for a missing one on purpose.
    """
    instance = session.get(FeatureInstance, instance_id)
    if instance is None or instance.feature_code != feature_code:
        raise NotFound(f"feature instance {instance_id} not found")
    roles = instance_role_labels(session, user, instance.id)
    if not roles:
        raise NotFound(f"feature instance {instance_id} not found")
    return instance, roles


def can_modify(roles: list[str]) -> bool:
    """Whether the instance roles allow changing data (viewers only read).

    The RBAC issue replaces this with the AccessRule resolver.
    """
    return any(not label.endswith("-viewer") for label in roles)
