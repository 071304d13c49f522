"""Server-side checks for one request: which mandates, instances and items a user may use.

Every REST route and UI event builds one AccessContext; its resolver caches role lookups for
that request only, so a revoked role takes effect with the next request.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import false
from sqlmodel import Session, select

from backend.db.models import FeatureInstance, Mandate, User, UserMandate
from backend.errors import Forbidden, NotFound
from backend.rbac.resolver import AccessResolver, Decision
from backend.rbac.rights import DATA, RESOURCE, UI, Level


def allows(level: Level, owner_id: str | None, user_id: str) -> bool:
    """The own/all rule, the one place it is spelled: `all` reaches every row, `own` only the
    rows the user created (sysCreatedBy), `none` no row."""
    return level == Level.ALL or (level == Level.OWN and owner_id == user_id)


def owner_filter(query: Any, model: Any, level: Level, user_id: str) -> Any:
    """`query` narrowed by the own/all rule on `model.sys_created_by` (no row for `none`)."""
    if level == Level.NONE:
        return query.where(false())
    if level == Level.OWN:
        return query.where(model.sys_created_by == user_id)
    return query


@dataclass
class AccessContext:
    """The signed-in user of a request and the checks made on their behalf."""

    session: Session
    user: User
    resolver: AccessResolver = field(init=False)

    def __post_init__(self) -> None:
        self.resolver = AccessResolver(self.session, self.user)

    # --- mandates and instances -----------------------------------------------------------

    def is_member(self, mandate_id: str) -> bool:
        return self.session.exec(
            select(UserMandate.id).where(UserMandate.user_id == self.user.id, UserMandate.mandate_id == mandate_id)
        ).first() is not None

    def require_mandate(self, mandate_id: str) -> Mandate:
        """The mandate if the user belongs to it (or is system administrator), else NotFound."""
        mandate = self.session.get(Mandate, mandate_id)
        if mandate is None or not (self.user.is_sysadmin or self.is_member(mandate_id)):
            raise NotFound(f"mandate {mandate_id} not found")
        return mandate

    def visible_mandates(self) -> list[Mandate]:
        query = select(Mandate).order_by(Mandate.name)
        if not self.user.is_sysadmin:
            query = query.join(UserMandate, UserMandate.mandate_id == Mandate.id).where(
                UserMandate.user_id == self.user.id)
        return list(self.session.exec(query).all())

    def can_open_instance(self, instance: FeatureInstance) -> bool:
        return self.resolve(UI, f"ui.feature.{instance.feature_code}", instance.mandate_id, instance.id).allowed

    def require_instance(self, instance_id: str, feature_code: str | None = None,
                         mandate_id: str | None = None) -> FeatureInstance:
        """The instance if the user may open it, else NotFound (same answer as a missing id).

        With `feature_code` or `mandate_id`, an instance of another feature or mandate is not found either.
        """
        instance = self.session.get(FeatureInstance, instance_id)
        if (instance is None or (feature_code and instance.feature_code != feature_code)
                or (mandate_id is not None and instance.mandate_id != mandate_id)):
            raise NotFound(f"feature instance {instance_id} not found")
        if not self.can_open_instance(instance):
            raise NotFound(f"feature instance {instance_id} not found")
        return instance

    def visible_instances(self, feature_code: str | None = None) -> list[FeatureInstance]:
        """Every instance the user may open, in the mandates they belong to."""
        query = select(FeatureInstance).order_by(FeatureInstance.label)
        if feature_code:
            query = query.where(FeatureInstance.feature_code == feature_code)
        if not self.user.is_sysadmin:
            mandates = select(UserMandate.mandate_id).where(UserMandate.user_id == self.user.id)
            query = query.where(FeatureInstance.mandate_id.in_(mandates))
        return [i for i in self.session.exec(query).all() if self.can_open_instance(i)]

    # --- items ------------------------------------------------------------------------------

    def resolve(self, context: str, item: str, mandate_id: str | None, instance_id: str | None = None) -> Decision:
        return self.resolver.resolve(context, item, mandate_id, instance_id)

    def can_see(self, item: str, mandate_id: str | None, instance_id: str | None = None) -> bool:
        """UI check: show this page, navigation entry or button?"""
        return self.resolve(UI, item, mandate_id, instance_id).allowed

    def require_resource(self, item: str, mandate_id: str | None, instance_id: str | None = None) -> None:
        """RESOURCE check: Forbidden unless the user may perform this operation."""
        if not self.resolve(RESOURCE, item, mandate_id, instance_id).allowed:
            raise Forbidden(f"your roles do not allow {item}")

    def data_level(self, item: str, operation: str, mandate_id: str | None, instance_id: str | None = None) -> Level:
        """DATA check: none, own or all for one CRUD operation."""
        return self.resolve(DATA, item, mandate_id, instance_id).level(operation)

    # --- rows (the own/all rule) ----------------------------------------------------------

    def visible(self, query: Any, model: Any, item: str, mandate_id: str | None,
                instance_id: str | None = None, operation: str = "read") -> Any:
        """`query` over `model` narrowed to the rows the user may `operation` (read by default)."""
        return owner_filter(query, model, self.data_level(item, operation, mandate_id, instance_id), self.user.id)

    def may(self, operation: str, item: str, row: Any, mandate_id: str | None = None,
            instance_id: str | None = None) -> bool:
        """Whether the user may `operation` this `row` of DATA item `item`.

        The scope defaults to the row's own mandate and feature instance.
        """
        mandate_id = mandate_id if mandate_id is not None else getattr(row, "mandate_id", None)
        instance_id = instance_id if instance_id is not None else getattr(row, "feature_instance_id", None)
        level = self.data_level(item, operation, mandate_id, instance_id)
        return allows(level, getattr(row, "sys_created_by", None), self.user.id)

    def forget(self) -> None:
        """Drop cached role lookups after this request changed roles."""
        self.resolver.forget()
