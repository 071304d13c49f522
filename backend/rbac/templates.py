"""Template roles and their AccessRules (spec §4.2), and copying them.

Two separate template systems: system templates (admin, user, viewer; isSystemRole, no
mandate) are copied into every new mandate; feature templates (`<featureCode>-admin` …) into
every new feature instance. Copies are made only at creation; the one exception is
:func:`sync_ui_objects`, which adds UI rules of templates that the copies lack (new UI
objects of a feature) at start-up.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from sqlmodel import Session, select

from backend.db.models import AccessRule, FeatureInstance, Mandate, Role
from backend.rbac.rights import DATA, GENERIC_ITEM, RESOURCE, UI


@dataclass(frozen=True)
class RuleSpec:
    """An AccessRule as declared in code."""

    context: str
    item: str = GENERIC_ITEM
    view: bool = False
    read: str = "none"
    create: str = "none"
    update: str = "none"
    delete: str = "none"

    def to_rule(self, role_id: str) -> AccessRule:
        return AccessRule(role_id=role_id, context=self.context, item=self.item, view=self.view,
                          read=self.read, create=self.create, update=self.update, delete=self.delete)


@dataclass(frozen=True)
class TemplateRole:
    """A template role: its label and the rules every copy starts with."""

    label: str
    rules: tuple[RuleSpec, ...] = field(default_factory=tuple)
    description: str = ""


# The platform's own objects (mandate administration): the one place these items are spelled.
ADMIN_UI = "ui.admin"
ADMIN_MANDATES_UI = "ui.admin.mandates"
ADMIN_USERS_UI = "ui.admin.users"
ADMIN_INSTANCES_UI = "ui.admin.instances"
ADMIN_PERMISSIONS_UI = "ui.admin.permissions"
MANAGE_USERS = "resource.mandate.manageUsers"
MANAGE_INSTANCES = "resource.mandate.manageInstances"
VIEW_PERMISSIONS = "resource.mandate.viewPermissions"
SHARE_CONNECTIONS = "resource.mandate.shareConnections"
MANAGE_MCP_SERVERS = "resource.mandate.manageMcpServers"
MANAGE_AGENT_APPROVALS = "resource.mandate.manageAgentApprovals"

PLATFORM_UI_OBJECTS = (
    (ADMIN_UI, "Admin page"),
    (ADMIN_MANDATES_UI, "Mandates tab"),
    (ADMIN_USERS_UI, "Users tab"),
    (ADMIN_INSTANCES_UI, "Feature instances tab"),
    (ADMIN_PERMISSIONS_UI, "Permissions view"),
)
PLATFORM_RESOURCE_OBJECTS = (
    (MANAGE_USERS, "Create, disable and reset users; assign mandate roles"),
    (MANAGE_INSTANCES, "Create feature instances and grant access to them"),
    (VIEW_PERMISSIONS, "See the resolved permissions of the mandate's users"),
    (SHARE_CONNECTIONS, "Share a connection with every member of the mandate, or stop sharing it"),
    (MANAGE_MCP_SERVERS, "Register external MCP servers, test and refresh them, choose the roles that may use them"),
    (MANAGE_AGENT_APPROVALS, "Choose which consequences of agent tool calls need a person's approval"),
)

SYSTEM_TEMPLATE_ROLES = (
    TemplateRole(
        "admin",
        (RuleSpec(UI, "*", view=True), RuleSpec(RESOURCE, "*", view=True),
         RuleSpec(DATA, "*", read="all", create="all", update="all", delete="all")),
        "Administers the mandate: users, instances, all data",
    ),
    TemplateRole(
        "user",
        (RuleSpec(DATA, "*", read="all", create="all", update="own", delete="own"),),
        "Works with the data of the instances they are given",
    ),
    TemplateRole("viewer", (RuleSpec(DATA, "*", read="all"),), "Reads only"),
)


# Calling actions: `resource.toolbox.<toolbox>.<actionId>`; a prefix rule grants a whole toolbox.
TOOLBOXES_ITEM = "resource.toolbox.*"


def standard_feature_roles(code: str, modifying_ui_items: Iterable[str] = ()) -> tuple[TemplateRole, ...]:
    """The usual admin / user / viewer templates of a feature.

    Viewers see the feature's UI but not the items in `modifying_ui_items` (create, edit and
    delete buttons): exact rules beat the prefix rule.
    """
    ui_all = RuleSpec(UI, f"ui.feature.{code}.*", view=True)
    resources = f"resource.feature.{code}.*"
    data = f"data.feature.{code}.*"
    return (
        TemplateRole(
            f"{code}-admin",
            (ui_all, RuleSpec(RESOURCE, resources, view=True), RuleSpec(RESOURCE, TOOLBOXES_ITEM, view=True),
             RuleSpec(DATA, data, read="all", create="all", update="all", delete="all")),
            "Everything in the instance, including who has access",
        ),
        TemplateRole(
            f"{code}-user",
            (ui_all, RuleSpec(RESOURCE, resources, view=True), RuleSpec(RESOURCE, TOOLBOXES_ITEM, view=True),
             RuleSpec(RESOURCE, f"resource.feature.{code}.manageAccess", view=False),
             RuleSpec(DATA, data, read="all", create="all", update="own", delete="own")),
            "Creates and runs; changes only what they created",
        ),
        TemplateRole(
            f"{code}-viewer",
            (ui_all, *(RuleSpec(UI, item, view=False) for item in modifying_ui_items),
             RuleSpec(RESOURCE, TOOLBOXES_ITEM, view=False), RuleSpec(DATA, data, read="all")),
            "Reads only",
        ),
    )


def _add_rules(session: Session, role: Role, specs: Iterable[RuleSpec]) -> None:
    for spec in specs:
        session.add(spec.to_rule(role.id))


def _rules_of(session: Session, role_id: str) -> list[AccessRule]:
    return list(session.exec(select(AccessRule).where(AccessRule.role_id == role_id)).all())


def ensure_template_roles(session: Session, feature_templates: dict[str, tuple[TemplateRole, ...]]) -> None:
    """Make the template roles in the database equal to the code's declarations."""
    existing = {
        (r.role_label, r.feature_code): r
        for r in session.exec(select(Role).where(Role.mandate_id.is_(None))).all()
    }
    wanted = [(t, None) for t in SYSTEM_TEMPLATE_ROLES]
    wanted += [(t, code) for code, templates in feature_templates.items() for t in templates]
    for template, code in wanted:
        role = existing.get((template.label, code))
        if role is None:
            role = Role(role_label=template.label, is_system_role=code is None, feature_code=code)
            session.add(role)
            session.flush()
        current = {(r.context, r.item): r for r in _rules_of(session, role.id)}
        declared = {(s.context, s.item): s for s in template.rules}
        for key, rule in current.items():
            if key not in declared:
                session.delete(rule)
        for key, spec in declared.items():
            rule = current.get(key)
            if rule is None:
                session.add(spec.to_rule(role.id))
            else:
                for name in ("view", "read", "create", "update", "delete"):
                    setattr(rule, name, getattr(spec, name))
                session.add(rule)
    session.flush()


def _copy(session: Session, template: Role, **scope: str) -> Role:
    copy = Role(role_label=template.role_label, is_system_role=False, feature_code=template.feature_code, **scope)
    session.add(copy)
    session.flush()
    for rule in _rules_of(session, template.id):
        session.add(AccessRule(role_id=copy.id, context=rule.context, item=rule.item, view=rule.view,
                               read=rule.read, create=rule.create, update=rule.update, delete=rule.delete))
    return copy


def copy_system_roles_to_mandate(session: Session, mandate: Mandate) -> list[Role]:
    """Copies of the system templates (with their rules) for a new mandate."""
    templates = session.exec(select(Role).where(Role.is_system_role.is_(True), Role.mandate_id.is_(None))).all()
    copies = [_copy(session, t, mandate_id=mandate.id) for t in templates]
    session.flush()
    return copies


def copy_template_roles_to_instance(session: Session, instance: FeatureInstance) -> list[Role]:
    """Copies of the feature's templates (with their rules) for a new feature instance."""
    templates = session.exec(
        select(Role).where(Role.mandate_id.is_(None), Role.feature_code == instance.feature_code,
                           Role.is_system_role.is_(False))
    ).all()
    copies = [_copy(session, t, mandate_id=instance.mandate_id, feature_instance_id=instance.id) for t in templates]
    session.flush()
    return copies


def sync_ui_objects(session: Session) -> int:
    """Add the templates' UI rules that existing copies with the same label lack; returns how many."""
    added = 0
    templates = session.exec(select(Role).where(Role.mandate_id.is_(None))).all()
    for template in templates:
        ui_rules = [r for r in _rules_of(session, template.id) if r.context == UI]
        copies = session.exec(
            select(Role).where(Role.mandate_id.is_not(None), Role.role_label == template.role_label,
                               Role.feature_code == template.feature_code
                               if template.feature_code else Role.feature_code.is_(None))
        ).all()
        for copy in copies:
            have = {r.item for r in _rules_of(session, copy.id) if r.context == UI}
            for rule in ui_rules:
                if rule.item not in have:
                    session.add(AccessRule(role_id=copy.id, context=UI, item=rule.item, view=rule.view))
                    added += 1
    session.flush()
    return added
