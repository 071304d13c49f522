"""Resolution of spec §4.3: which rights a user has for an item in a mandate / instance.

1. mandate roles via UserMandate → UserMandateRole, instance roles via FeatureAccess →
   FeatureAccessRole, and their AccessRules;
2. the highest priority level with a rule covering the item wins (instance 3 > mandate 2 >
   global 1);
3. within that level the most specific item wins (exact > prefix > generic);
4. the rules left are united: view OR-ed, each DATA operation the most permissive.

A resolver lives for one request (or one UI event): it caches what it loaded, so a role that
is revoked takes effect at the next request.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from enum import IntEnum

from sqlmodel import Session, select

from backend.db.models import (
    AccessRule,
    FeatureAccess,
    FeatureAccessRole,
    Role,
    User,
    UserMandate,
    UserMandateRole,
)
from backend.rbac.rights import ALL_RIGHTS, NO_RIGHTS, Level, Rights, specificity


class Priority(IntEnum):
    """Where a role applies; the higher wins."""

    GLOBAL = 1
    MANDATE = 2
    INSTANCE = 3


@dataclass(frozen=True)
class HeldRole:
    """A role the user holds, with the priority it has in the scope being checked."""

    id: str
    label: str
    priority: Priority


@dataclass(frozen=True)
class MatchedRule:
    """A rule that decided a check, for the "why" view."""

    role_label: str
    priority: Priority
    item: str
    rights: Rights

    def as_dict(self) -> dict:
        return {"role": self.role_label, "level": self.priority.name.lower(), "item": self.item,
                "rights": self.rights.as_dict()}


@dataclass(frozen=True)
class Decision:
    """The resolved rights for one item and the reasons for them."""

    context: str
    item: str
    rights: Rights
    priority: Priority | None = None
    rules: tuple[MatchedRule, ...] = ()
    reason: str = ""

    @property
    def allowed(self) -> bool:
        """For UI and RESOURCE items: may the user see / do it."""
        return self.rights.view

    def level(self, operation: str) -> Level:
        return self.rights.level(operation)

    def explain(self) -> str:
        """One sentence a person can read."""
        if self.reason:
            return self.reason
        if not self.rules:
            return f"no rule of the user's roles covers {self.item}: nothing is allowed"
        parts = [f"role '{r.role_label}' rule '{r.item}'" for r in self.rules]
        return f"decided at {self.priority.name.lower()} level by " + " and ".join(parts)

    def as_dict(self) -> dict:
        return {
            "context": self.context,
            "item": self.item,
            "rights": self.rights.as_dict(),
            "level": self.priority.name.lower() if self.priority else None,
            "rules": [r.as_dict() for r in self.rules],
            "explanation": self.explain(),
        }


def _rule_rights(rule: AccessRule) -> Rights:
    return Rights(rule.view, *(Level.parse(getattr(rule, op)) for op in ("read", "create", "update", "delete")))


def decide(context: str, item: str, held: list[HeldRole], rules_by_role: dict[str, list[AccessRule]]) -> Decision:
    """The pure resolution over already loaded roles and rules (property-tested)."""
    candidates: dict[Priority, list[tuple[tuple[int, int], HeldRole, AccessRule]]] = defaultdict(list)
    for role in held:
        for rule in rules_by_role.get(role.id, ()):
            if rule.context != context:
                continue
            match = specificity(rule.item, item)
            if match is not None:
                candidates[role.priority].append((match, role, rule))
    if not candidates:
        return Decision(context, item, NO_RIGHTS)
    priority = max(candidates)
    best = max(match for match, _, _ in candidates[priority])
    winners = [(role, rule) for match, role, rule in candidates[priority] if match == best]
    rights = NO_RIGHTS
    matched = []
    for role, rule in winners:
        rule_rights = _rule_rights(rule)
        rights = rights.union(rule_rights)
        matched.append(MatchedRule(role.label, priority, rule.item, rule_rights))
    return Decision(context, item, rights, priority, tuple(matched))


@dataclass
class AccessResolver:
    """Resolves rights of one user; caches per instance of the resolver (one request)."""

    session: Session
    user: User
    _roles: dict[tuple[str | None, str | None], list[HeldRole]] = field(default_factory=dict)
    _rules: dict[str, list[AccessRule]] = field(default_factory=dict)

    def held_roles(self, mandate_id: str | None, instance_id: str | None = None) -> list[HeldRole]:
        """The roles that apply in this scope, each with its priority."""
        key = (mandate_id, instance_id)
        if key in self._roles:
            return self._roles[key]
        held: list[HeldRole] = []
        if mandate_id:
            mandate_roles = self.session.exec(
                select(Role)
                .join(UserMandateRole, UserMandateRole.role_id == Role.id)
                .join(UserMandate, UserMandate.id == UserMandateRole.user_mandate_id)
                .where(UserMandate.user_id == self.user.id, UserMandate.mandate_id == mandate_id)
            ).all()
            for role in mandate_roles:
                priority = Priority.GLOBAL if role.mandate_id is None else Priority.MANDATE
                held.append(HeldRole(role.id, role.role_label, priority))
        if instance_id:
            instance_roles = self.session.exec(
                select(Role)
                .join(FeatureAccessRole, FeatureAccessRole.role_id == Role.id)
                .join(FeatureAccess, FeatureAccess.id == FeatureAccessRole.feature_access_id)
                .where(FeatureAccess.user_id == self.user.id, FeatureAccess.feature_instance_id == instance_id)
            ).all()
            held.extend(HeldRole(r.id, r.role_label, Priority.INSTANCE) for r in instance_roles)
        self._roles[key] = held
        return held

    def _rules_for(self, held: list[HeldRole]) -> dict[str, list[AccessRule]]:
        missing = [r.id for r in held if r.id not in self._rules]
        if missing:
            for role_id in missing:
                self._rules[role_id] = []
            for rule in self.session.exec(select(AccessRule).where(AccessRule.role_id.in_(missing))).all():
                self._rules[rule.role_id].append(rule)
        return {r.id: self._rules[r.id] for r in held}

    def resolve(self, context: str, item: str, mandate_id: str | None, instance_id: str | None = None) -> Decision:
        """The user's rights for `item` in `context` within the mandate (and instance)."""
        if self.user.disabled:
            return Decision(context, item, NO_RIGHTS, reason="the account is disabled")
        if self.user.is_sysadmin:
            return Decision(context, item, ALL_RIGHTS, reason="system administrators may do everything")
        held = self.held_roles(mandate_id, instance_id)
        return decide(context, item, held, self._rules_for(held))

    def forget(self) -> None:
        """Drop the cache (after this request changed roles itself)."""
        self._roles.clear()
        self._rules.clear()
