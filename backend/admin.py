"""Administration of mandates, users, feature instances and role grants: the door to them.

:class:`Administration` is a :class:`~backend.rbac.door.Door`: each public method declares its
permission with :func:`~backend.rbac.door.guarded`, checked in the mandate the call names
(``mandate_id``) or in the instance it names (``instance_id``, see :meth:`Administration.call_scope`).
Mandate operations need RESOURCE items of the platform (``backend.rbac.templates``); access to
an instance needs ``resource.feature.<code>.manageAccess`` there or manageInstances in its mandate
(:data:`MANAGE_ACCESS`). Objects outside what the caller may see are not found (404).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from sqlalchemy import delete, func
from sqlmodel import select

from backend.auth import hash_password
from backend.db.models import (
    AccessRule,
    AuthToken,
    FeatureAccess,
    FeatureAccessRole,
    FeatureInstance,
    Mandate,
    Role,
    User,
    UserMandate,
    UserMandateRole,
)
from backend.errors import Conflict, FieldError, Forbidden, InvalidInput, NotFound
from backend.features.registry import get_feature, get_features
from backend.names import clean_name
from backend.rbac.access import AccessContext
from backend.rbac.door import Door, Permission, guarded
from backend.rbac.resolver import Decision
from backend.rbac.rights import DATA, RESOURCE, UI
from backend.rbac.templates import (
    ADMIN_INSTANCES_UI,
    ADMIN_PERMISSIONS_UI,
    ADMIN_UI,
    ADMIN_USERS_UI,
    MANAGE_AGENT_APPROVALS,
    MANAGE_INSTANCES,
    MANAGE_MCP_SERVERS,
    MANAGE_USERS,
    PLATFORM_RESOURCE_OBJECTS,
    PLATFORM_UI_OBJECTS,
    VIEW_PERMISSIONS,
)
from backend.tenancy import (
    create_feature_instance,
    create_mandate,
    grant_instance_roles,
    grant_mandate_roles,
    instance_role_labels,
)

# Who may manage access to an instance, as declared: the instance feature's manageAccess item
# (resource.feature.<code>.manageAccess, resolved per call) or manageInstances in its mandate.
MANAGE_ACCESS = "resource.feature.*.manageAccess"
ADMIN_ROLE = "admin"
PASSWORD_MIN = 8


@dataclass(frozen=True)
class MemberInfo:
    """A member of a mandate with their mandate roles."""

    user: User
    roles: list[str]


@dataclass(frozen=True)
class AccessInfo:
    """A user's access to an instance."""

    user: User
    roles: list[str]


@dataclass(frozen=True)
class AdminTabs:
    """Which tabs of the Admin page the caller may see for one mandate."""

    mandates: bool
    users: bool
    instances: bool
    permissions: bool
    mcp_servers: bool = False
    agent_approvals: bool = False


def _check_password(password: str | None) -> str:
    if not isinstance(password, str) or len(password) < PASSWORD_MIN:
        raise InvalidInput([FieldError("password", f"must be at least {PASSWORD_MIN} characters")])
    return password


class Administration(Door):
    """The administration operations, as one signed-in user."""

    def __init__(self, access: AccessContext):
        self.access = access
        self.session = access.session
        self.actor = access.user

    # --- the door: scope of a call, the access-management rule --------------------------------

    def call_scope(self, method: str, arguments: dict[str, Any]) -> tuple[str | None, str | None]:
        """The mandate named by `mandate_id`, or the instance named by `instance_id`.

        Raises:
            NotFound: the caller may not see that mandate or instance.
        """
        if arguments.get("mandate_id") is not None:
            return self.access.require_mandate(arguments["mandate_id"]).id, None
        if arguments.get("instance_id") is not None:
            instance = self._visible_instance(arguments["instance_id"])
            return instance.mandate_id, instance.id
        return None, None

    def enforce(self, permission: Permission, scope: tuple[str | None, str | None] | None = None) -> None:
        """The declared checks; :data:`MANAGE_ACCESS` is the instance feature's manageAccess
        item there, or manageInstances in the instance's mandate."""
        if permission.item != MANAGE_ACCESS:
            super().enforce(permission, scope)
            return
        mandate_id, instance_id = self.scope if scope is None else scope
        instance = self.session.get(FeatureInstance, instance_id) if instance_id else None
        if instance is None:
            raise Forbidden("your roles do not allow managing access here")
        if not self._manages_instances_of(instance.mandate_id):
            self.access.require_resource(f"resource.feature.{instance.feature_code}.manageAccess",
                                         instance.mandate_id, instance.id)

    def _manages_instances_of(self, mandate_id: str) -> bool:
        return ((self.actor.is_sysadmin or self.access.is_member(mandate_id))
                and self.access.resolve(RESOURCE, MANAGE_INSTANCES, mandate_id).allowed)

    def _visible_instance(self, instance_id: str) -> FeatureInstance:
        """The instance if the caller manages its mandate's instances or may open it, else NotFound."""
        instance = self.session.get(FeatureInstance, instance_id)
        if instance is None or not (self._manages_instances_of(instance.mandate_id)
                                    or self.access.can_open_instance(instance)):
            raise NotFound(f"feature instance {instance_id} not found")
        return instance

    # --- helpers ---------------------------------------------------------------------------

    def _mandate(self, mandate_id: str) -> Mandate:
        """The mandate of a guarded call (call_scope has checked that the caller sees it)."""
        return self.access.require_mandate(mandate_id)

    def _membership(self, mandate: Mandate, user_id: str) -> tuple[User, UserMandate]:
        membership = self.session.exec(
            select(UserMandate).where(UserMandate.mandate_id == mandate.id, UserMandate.user_id == user_id)
        ).first()
        user = self.session.get(User, user_id)
        if membership is None or user is None:
            raise NotFound(f"user {user_id} not found in this mandate")
        return user, membership

    def _mandate_roles(self, membership: UserMandate) -> list[str]:
        return sorted(self.session.exec(
            select(Role.role_label).join(UserMandateRole, UserMandateRole.role_id == Role.id)
            .where(UserMandateRole.user_mandate_id == membership.id)
        ).all())

    def _mandate_role_labels(self, mandate: Mandate) -> set[str]:
        return set(self.session.exec(
            select(Role.role_label).where(Role.mandate_id == mandate.id, Role.feature_instance_id.is_(None))
        ).all())

    def _validate_roles(self, mandate: Mandate, roles: list[str]) -> list[str]:
        known = self._mandate_role_labels(mandate)
        unknown = [r for r in roles if r not in known]
        if unknown:
            raise InvalidInput([FieldError("roles", f"unknown role label(s) {', '.join(unknown)}; "
                                                    f"known: {', '.join(sorted(known))}")])
        return sorted(set(roles))

    def _active_admins(self, mandate: Mandate) -> set[str]:
        rows = self.session.exec(
            select(UserMandate.user_id)
            .join(UserMandateRole, UserMandateRole.user_mandate_id == UserMandate.id)
            .join(Role, Role.id == UserMandateRole.role_id)
            .join(User, User.id == UserMandate.user_id)
            .where(UserMandate.mandate_id == mandate.id, Role.role_label == ADMIN_ROLE, User.disabled.is_(False))
        ).all()
        return set(rows)

    def _keep_an_admin(self, mandate: Mandate, user_id: str, action: str) -> None:
        if self._active_admins(mandate) == {user_id}:
            raise Conflict(f"cannot {action}: this user is the last admin of mandate '{mandate.name}'")

    def _not_self(self, user_id: str, action: str) -> None:
        if user_id == self.actor.id and not self.actor.is_sysadmin:
            raise Forbidden(f"you cannot {action} yourself; ask another administrator")

    def _require_manage_everywhere(self, user: User) -> None:
        """Account-wide changes need manageUsers in every mandate the user belongs to."""
        mandates = self.session.exec(select(UserMandate.mandate_id).where(UserMandate.user_id == user.id)).all()
        for mandate_id in mandates:
            if not self.access.resolve(RESOURCE, MANAGE_USERS, mandate_id).allowed:
                raise Forbidden("this user also belongs to a mandate you do not administer")

    # --- mandates ----------------------------------------------------------------------------

    @guarded("authenticated")
    def list_mandates(self) -> list[Mandate]:
        """The mandates the caller belongs to (all of them for a system administrator)."""
        return self.access.visible_mandates()

    @guarded("sysadmin")
    def create_mandate(self, name: str) -> Mandate:
        """A new mandate with copies of the system template roles."""
        return create_mandate(self.session, clean_name(name, "name", 200))

    # --- users -------------------------------------------------------------------------------

    @guarded("RESOURCE", MANAGE_USERS)
    def list_members(self, mandate_id: str) -> list[MemberInfo]:
        """The mandate's members with their mandate roles, by username."""
        mandate = self._mandate(mandate_id)
        memberships = self.session.exec(select(UserMandate).where(UserMandate.mandate_id == mandate.id)).all()
        members = [MemberInfo(self.session.get(User, m.user_id), self._mandate_roles(m)) for m in memberships]
        return sorted(members, key=lambda m: m.user.username)

    @guarded("RESOURCE", MANAGE_USERS)
    def create_user(self, mandate_id: str, username: str, password: str, roles: list[str],
                    email: str | None = None, display_name: str | None = None,
                    is_sysadmin: bool = False) -> User:
        """A new account, member of the mandate with `roles` (system administration: only by one)."""
        mandate = self._mandate(mandate_id)
        if is_sysadmin and not self.actor.is_sysadmin:
            raise Forbidden("only a system administrator can grant system administration")
        username = clean_name(username or "", "username", 150)
        if not username:
            raise InvalidInput([FieldError("username", "must not be empty")])
        if display_name is not None:
            display_name = clean_name(display_name, "displayName", 200) or None
        roles = self._validate_roles(mandate, roles)
        _check_password(password)
        if self.session.exec(select(User.id).where(func.lower(User.username) == username.lower())).first():
            raise Conflict(f"username: '{username}' is already taken")
        user = User(username=username, password_hash=hash_password(password), email=email,
                    display_name=display_name, is_sysadmin=is_sysadmin)
        self.session.add(user)
        self.session.flush()
        grant_mandate_roles(self.session, user, mandate, roles)
        return user

    @guarded("RESOURCE", MANAGE_USERS)
    def set_member_roles(self, mandate_id: str, user_id: str, roles: list[str]) -> list[str]:
        """Give a member exactly `roles` (not oneself; the last admin keeps admin)."""
        mandate = self._mandate(mandate_id)
        _user, membership = self._membership(mandate, user_id)
        self._not_self(user_id, "change the roles of")
        roles = self._validate_roles(mandate, roles)
        if ADMIN_ROLE not in roles:
            self._keep_an_admin(mandate, user_id, "remove the admin role")
        self.session.execute(delete(UserMandateRole).where(UserMandateRole.user_mandate_id == membership.id))
        self.session.flush()
        grant_mandate_roles(self.session, _user, mandate, roles)
        self.access.forget()
        return roles

    @guarded("RESOURCE", MANAGE_USERS)
    def set_disabled(self, mandate_id: str, user_id: str, disabled: bool) -> User:
        """Disable or enable a member's account (needs manageUsers in all their mandates)."""
        mandate = self._mandate(mandate_id)
        user, _membership = self._membership(mandate, user_id)
        self._not_self(user_id, "disable or enable")
        self._require_manage_everywhere(user)
        if disabled:
            self._keep_an_admin(mandate, user_id, "disable the user")
        user.disabled = disabled
        self.session.add(user)
        self.session.flush()
        return user

    @guarded("RESOURCE", MANAGE_USERS)
    def reset_password(self, mandate_id: str, user_id: str, password: str) -> None:
        """Set a member's password; their open login sessions end."""
        mandate = self._mandate(mandate_id)
        user, _membership = self._membership(mandate, user_id)
        self._require_manage_everywhere(user)
        user.password_hash = hash_password(_check_password(password))
        self.session.add(user)
        # A reset ends every open login session of that user.
        for token in self.session.exec(select(AuthToken).where(AuthToken.user_id == user.id,
                                                               AuthToken.kind == "login")).all():
            token.revoked = True
            self.session.add(token)
        self.session.flush()

    @guarded("RESOURCE", MANAGE_USERS)
    def remove_member(self, mandate_id: str, user_id: str) -> None:
        """Remove a member and their instance access from the mandate."""
        mandate = self._mandate(mandate_id)
        _user, membership = self._membership(mandate, user_id)
        self._not_self(user_id, "remove")
        self._keep_an_admin(mandate, user_id, "remove the user")
        instance_ids = select(FeatureInstance.id).where(FeatureInstance.mandate_id == mandate.id)
        accesses = select(FeatureAccess.id).where(FeatureAccess.user_id == user_id,
                                                  FeatureAccess.feature_instance_id.in_(instance_ids))
        self.session.execute(delete(FeatureAccessRole).where(FeatureAccessRole.feature_access_id.in_(accesses)))
        self.session.execute(delete(FeatureAccess).where(FeatureAccess.user_id == user_id,
                                                         FeatureAccess.feature_instance_id.in_(instance_ids)))
        self.session.execute(delete(UserMandateRole).where(UserMandateRole.user_mandate_id == membership.id))
        self.session.delete(membership)
        self.session.flush()

    # --- instances and access -------------------------------------------------------------------

    @guarded("authenticated")
    def list_instances(self, mandate_id: str) -> list[FeatureInstance]:
        """The mandate's instances: all for who manages them, else those the caller may open."""
        mandate = self._mandate(mandate_id)
        instances = self.session.exec(
            select(FeatureInstance).where(FeatureInstance.mandate_id == mandate.id).order_by(FeatureInstance.label)
        ).all()
        if self.access.resolve(RESOURCE, MANAGE_INSTANCES, mandate.id).allowed:
            return list(instances)
        return [i for i in instances if self.access.can_open_instance(i)]

    @guarded("RESOURCE", MANAGE_INSTANCES)
    def create_instance(self, mandate_id: str, feature_code: str, label: str) -> FeatureInstance:
        """A new feature instance with copies of the feature's template roles."""
        mandate = self._mandate(mandate_id)
        return create_feature_instance(self.session, mandate, feature_code, clean_name(label, "label", 200))

    @guarded("RESOURCE", MANAGE_ACCESS)
    def list_access(self, instance_id: str) -> list[AccessInfo]:
        """Who has access to the instance, with their instance roles."""
        instance = self.session.get(FeatureInstance, instance_id)
        accesses = self.session.exec(select(FeatureAccess).where(FeatureAccess.feature_instance_id == instance.id))
        result = []
        for access in accesses.all():
            user = self.session.get(User, access.user_id)
            result.append(AccessInfo(user, instance_role_labels(self.session, user, instance.id)))
        return sorted(result, key=lambda a: a.user.username)

    @guarded("RESOURCE", MANAGE_ACCESS)
    def set_access(self, instance_id: str, user_id: str, roles: list[str]) -> list[str]:
        """Give `user_id` exactly `roles` in the instance (an empty list removes the access)."""
        instance = self.session.get(FeatureInstance, instance_id)
        mandate = self.session.get(Mandate, instance.mandate_id)
        user, _membership = self._membership(mandate, user_id)
        self._not_self(user_id, "change the access of")
        known = set(self.session.exec(select(Role.role_label).where(Role.feature_instance_id == instance.id)).all())
        unknown = [r for r in roles if r not in known]
        if unknown:
            raise InvalidInput([FieldError("roles", f"unknown role label(s) {', '.join(unknown)}; "
                                                    f"known: {', '.join(sorted(known))}")])
        existing = self.session.exec(select(FeatureAccess).where(
            FeatureAccess.user_id == user.id, FeatureAccess.feature_instance_id == instance.id)).first()
        if existing is not None:
            self.session.execute(delete(FeatureAccessRole).where(FeatureAccessRole.feature_access_id == existing.id))
            if not roles:
                self.session.delete(existing)
            self.session.flush()
        if roles:
            grant_instance_roles(self.session, user, instance, sorted(set(roles)))
        self.access.forget()
        return sorted(set(roles))

    # --- roles and permissions -----------------------------------------------------------------

    @guarded("RESOURCE", VIEW_PERMISSIONS)
    def list_roles(self, mandate_id: str) -> list[tuple[Role, list[AccessRule]]]:
        """The mandate's and its instances' roles with their AccessRules."""
        mandate = self._mandate(mandate_id)
        roles = self.session.exec(select(Role).where(Role.mandate_id == mandate.id)
                                  .order_by(Role.feature_instance_id, Role.role_label)).all()
        return [(r, list(self.session.exec(select(AccessRule).where(AccessRule.role_id == r.id)).all()))
                for r in roles]

    def explain(self, mandate_id: str, user_id: str, instance_id: str | None = None,
                context: str | None = None, item: str | None = None) -> list[Decision]:
        """The resolved rights of a member for every catalogue item (or one), and why: the
        caller's own always (:meth:`explain_own`), anybody else's with viewPermissions
        (:meth:`explain_member`)."""
        if user_id == self.actor.id:
            return self.explain_own(mandate_id, instance_id, context, item)
        return self.explain_member(mandate_id, user_id, instance_id, context, item)

    @guarded("authenticated")
    def explain_own(self, mandate_id: str, instance_id: str | None = None, context: str | None = None,
                    item: str | None = None) -> list[Decision]:
        """The caller's own resolved rights in a mandate they belong to, and why."""
        return self._explain(self._mandate(mandate_id), self.actor.id, instance_id, context, item)

    @guarded("RESOURCE", VIEW_PERMISSIONS)
    def explain_member(self, mandate_id: str, user_id: str, instance_id: str | None = None,
                       context: str | None = None, item: str | None = None) -> list[Decision]:
        """A member's resolved rights, and why."""
        return self._explain(self._mandate(mandate_id), user_id, instance_id, context, item)

    def _explain(self, mandate: Mandate, user_id: str, instance_id: str | None, context: str | None,
                 item: str | None) -> list[Decision]:
        user, _membership = self._membership(mandate, user_id)
        instance = None
        if instance_id:
            instance = self.session.get(FeatureInstance, instance_id)
            if instance is None or instance.mandate_id != mandate.id:
                raise NotFound(f"feature instance {instance_id} not found")
        resolver = AccessContext(self.session, user)
        items = [(context, item)] if context and item else catalogue_items(instance.feature_code if instance else None)
        if context and not item:
            items = [(c, i) for c, i in items if c == context]
        return [resolver.resolve(c, i, mandate.id, instance.id if instance else None) for c, i in items]

    # --- what the pages offer ------------------------------------------------------------------

    @guarded("authenticated")
    def admin_mandates(self) -> list[Mandate]:
        """The mandates whose Admin page the caller may see (the page's mandate choice)."""
        return [m for m in self.access.visible_mandates() if self.access.can_see(ADMIN_UI, m.id)]

    @guarded("authenticated")
    def navigation_rights(self) -> bool:
        """Whether the navigation offers the Admin page (system administrators: always)."""
        return self.actor.is_sysadmin or bool(self.admin_mandates())

    @guarded("UI", ADMIN_UI)
    def tabs(self, mandate_id: str) -> AdminTabs:
        """Which Admin tabs the caller sees for the mandate (Mandates: system administrators)."""
        return AdminTabs(mandates=self.actor.is_sysadmin,
                         users=self.access.can_see(ADMIN_USERS_UI, mandate_id),
                         instances=self.access.can_see(ADMIN_INSTANCES_UI, mandate_id),
                         permissions=self.access.can_see(ADMIN_PERMISSIONS_UI, mandate_id),
                         mcp_servers=self.access.resolve(RESOURCE, MANAGE_MCP_SERVERS, mandate_id).allowed,
                         agent_approvals=self.access.resolve(RESOURCE, MANAGE_AGENT_APPROVALS, mandate_id).allowed)


def catalogue_items(feature_code: str | None = None) -> list[tuple[str, str]]:
    """Every known (context, item): the platform's, and each feature's (or just one feature's)."""
    items: list[tuple[str, str]] = []
    if feature_code is None:
        items += [(UI, i) for i, _ in PLATFORM_UI_OBJECTS] + [(RESOURCE, i) for i, _ in PLATFORM_RESOURCE_OBJECTS]
        features = list(get_features().values())
    else:
        features = [get_feature(feature_code)]
    for feature in features:
        items += [(UI, i) for i, _ in feature.ui_objects]
        items += [(RESOURCE, i) for i, _ in feature.resource_objects]
        items += [(DATA, i) for i, _ in feature.data_objects]
    return items
