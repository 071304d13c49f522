"""State of the Admin page: mandates, their users, feature instances, access grants, and "why".

Every read and change goes through the door `backend.admin.Administration`, which checks the
signed-in user's rights itself (the handlers declare its methods' permissions with
`requires_door`); which tabs are shown is the door's answer too (`Administration.tabs`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypedDict

import reflex as rx

from backend.admin import Administration, MemberInfo
from backend.errors import DomainError, Forbidden, NotFound
from backend.features.registry import get_features
from backend.rbac.access import AccessContext
from backend.rbac.resolver import Decision
from backend.rbac.rights import DATA, OPERATIONS
from state.agent_approvals import AgentApprovalsMixin
from state.auth import AuthState, NotSignedIn
from state.mcp_servers import McpServersMixin
from state.page import PageMixin, user_message
from state.permissions import requires, requires_door

MANDATE_ROLES = ("admin", "user", "viewer")
MANDATE_ONLY = "-"  # the Permissions view's "no instance" choice (a select item cannot be "")
TABS = ("mandates", "users", "instances", "permissions", "mcp", "approvals")


class MandateRow(TypedDict):
    id: str
    name: str


class MemberRow(TypedDict):
    id: str
    username: str
    display_name: str
    roles: str
    disabled: bool
    is_sysadmin: bool


class OptionRow(TypedDict):
    value: str
    label: str


class InstanceRow(TypedDict):
    id: str
    label: str
    feature_code: str
    feature_label: str


class AccessRow(TypedDict):
    user_id: str
    username: str
    role: str
    roles: str


class DecisionRow(TypedDict):
    context: str
    item: str
    view: str
    read: str
    create: str
    update: str
    delete: str
    level: str
    role: str
    rule: str
    explanation: str


def _member_row(member: MemberInfo) -> MemberRow:
    user = member.user
    return MemberRow(id=user.id, username=user.username, display_name=user.display_name or "",
                     roles=", ".join(member.roles), disabled=user.disabled, is_sysadmin=user.is_sysadmin)


def _feature_label(code: str) -> str:
    feature = get_features().get(code)
    return feature.label if feature else code


def _instance_roles(feature_code: str) -> list[str]:
    feature = get_features().get(feature_code)
    if feature is None:
        return []
    return [template.label for template in feature.template_roles]


def _decision_row(decision: Decision) -> DecisionRow:
    rights = decision.rights
    is_data = decision.context == DATA
    levels = {op: (str(rights.level(op)) if is_data else "—") for op in OPERATIONS}
    return DecisionRow(
        context=decision.context,
        item=decision.item,
        view="—" if is_data else ("yes" if rights.view else "no"),
        level=decision.priority.name.lower() if decision.priority else "—",
        role=", ".join(rule.role_label for rule in decision.rules) or "—",
        rule=", ".join(rule.item for rule in decision.rules) or "—",
        explanation=decision.explain(),
        **levels,
    )


def _toggled(roles: list[str], role: str, checked: bool) -> list[str]:
    """`roles` with `role` added or removed, in the order of MANDATE_ROLES."""
    chosen = (set(roles) | {role}) if checked else (set(roles) - {role})
    return [r for r in MANDATE_ROLES if r in chosen]


class AdminState(AgentApprovalsMixin, McpServersMixin, PageMixin, AuthState):
    """What the Admin page shows for the selected mandate, and the actions on it."""

    mandates: list[MandateRow] = []
    mandate_id: str = ""
    tab: str = ""
    show_mandates: bool = False
    show_users: bool = False
    show_instances: bool = False
    show_permissions: bool = False
    show_mcp: bool = False
    show_approvals: bool = False

    # Mandates tab
    new_mandate_name: str = ""

    # Users tab
    members: list[MemberRow] = []
    new_username: str = ""
    new_password: str = ""
    new_roles: list[str] = ["user"]
    roles_user_id: str = ""
    roles_username: str = ""
    roles_selected: list[str] = []
    reset_user_id: str = ""
    reset_username: str = ""
    reset_value: str = ""
    remove_user_id: str = ""
    remove_username: str = ""

    # Instances tab
    instances: list[InstanceRow] = []
    feature_options: list[OptionRow] = []
    new_instance_feature: str = ""
    new_instance_label: str = ""
    access_instance_id: str = ""
    access_instance_label: str = ""
    access_rows: list[AccessRow] = []
    access_error: str = ""
    instance_roles: list[str] = []
    grant_user_id: str = ""
    grant_role: str = ""

    # Permissions tab
    explain_user_id: str = ""
    explain_instance_id: str = MANDATE_ONLY
    explain_filter: str = ""
    decisions: list[DecisionRow] = []

    @rx.var
    def shown_decisions(self) -> list[DecisionRow]:
        """The explained items whose item name or context contains the filter text."""
        needle = self.explain_filter.strip().lower()
        if not needle:
            return self.decisions
        return [d for d in self.decisions if needle in d["item"].lower() or needle in d["context"].lower()]

    @rx.var
    def member_options(self) -> list[OptionRow]:
        """The mandate's members as choices for the grant and "why" selects."""
        return [OptionRow(value=m["id"], label=m["username"]) for m in self.members]

    # --- loading ------------------------------------------------------------------------------

    def _clear(self) -> None:
        """Forget everything shown for a mandate (before loading another, or for no access)."""
        self.members = []
        self.instances = []
        self.access_rows = []
        self.access_error = ""
        self.instance_roles = []
        self.decisions = []
        self.mcp_servers = []
        self.approval_rows = []
        self.show_mandates = self.show_users = self.show_instances = self.show_permissions = self.show_mcp = False
        self.show_approvals = False

    def _refresh(self) -> None:
        """Reload what the page shows for the selected mandate; raises NotSignedIn."""
        with self._user_session() as (session, user):
            self._load_navigation(session, user)
            self._clear()
            if not self.nav_admin:
                self.mandates = []
                self.mandate_id = ""
                self.loaded = True
                return
            admin = Administration(AccessContext(session, user))
            mandates = admin.admin_mandates()
            self.mandates = [MandateRow(id=m.id, name=m.name) for m in mandates]
            if self.mandate_id not in {m.id for m in mandates}:
                self.mandate_id = mandates[0].id if mandates else ""
            self.show_mandates = user.is_sysadmin
            if self.mandate_id:
                tabs = admin.tabs(self.mandate_id)
                self.show_users, self.show_instances = tabs.users, tabs.instances
                self.show_permissions, self.show_mcp = tabs.permissions, tabs.mcp_servers
                self._load_mandate(admin)
                if self.show_mcp:
                    self._load_mcp_servers(admin.access, self.mandate_id)
                self.show_approvals = tabs.agent_approvals
                if self.show_approvals:
                    self._load_approvals(admin.access, self.mandate_id)
            allowed = [t for t in TABS if getattr(self, f"show_{t}")]
            if self.tab not in allowed:
                self.tab = allowed[0] if allowed else ""
        self.loaded = True

    def _load_mandate(self, admin: Administration) -> None:
        if self.show_users or self.show_instances or self.show_permissions:
            try:
                self.members = [_member_row(m) for m in admin.list_members(self.mandate_id)]
            except Forbidden:
                self.members = []
        if self.show_instances or self.show_permissions:
            instances = admin.list_instances(self.mandate_id)
            self.instances = [InstanceRow(id=i.id, label=i.label, feature_code=i.feature_code,
                                          feature_label=_feature_label(i.feature_code)) for i in instances]
        if self.show_instances:
            self.feature_options = [OptionRow(value=f.code, label=f.label) for f in get_features().values()]
            if self.new_instance_feature not in {f["value"] for f in self.feature_options}:
                self.new_instance_feature = self.feature_options[0]["value"] if self.feature_options else ""
            self._load_access(admin)
        if self.show_permissions and self.explain_user_id:
            self._load_decisions(admin)

    def _load_access(self, admin: Administration) -> None:
        instance = next((i for i in self.instances if i["id"] == self.access_instance_id), None)
        if instance is None:
            self.access_instance_id = ""
            self.access_instance_label = ""
            return
        self.access_instance_label = instance["label"]
        self.instance_roles = _instance_roles(instance["feature_code"])
        if self.grant_role not in self.instance_roles:
            user_role = f"{instance['feature_code']}-user"
            self.grant_role = user_role if user_role in self.instance_roles else ""
        try:
            self.access_rows = [
                AccessRow(user_id=a.user.id, username=a.user.username, role=a.roles[0] if a.roles else "",
                          roles=", ".join(a.roles))
                for a in admin.list_access(instance["id"])
            ]
        except (Forbidden, NotFound) as exc:
            self.access_error = f"You cannot see who has access to '{instance['label']}': {exc}."

    def _load_decisions(self, admin: Administration) -> None:
        if self.explain_user_id not in {m["id"] for m in self.members}:
            self.explain_user_id = ""
            return
        if self.explain_instance_id != MANDATE_ONLY and self.explain_instance_id not in {
                i["id"] for i in self.instances}:
            self.explain_instance_id = MANDATE_ONLY
        instance_id = None if self.explain_instance_id == MANDATE_ONLY else self.explain_instance_id
        self.decisions = [_decision_row(d) for d in admin.explain(self.mandate_id, self.explain_user_id, instance_id)]

    def _act(self, action: Callable[[Administration], Any], success: str = "") -> tuple[bool, Any]:
        """Run `action(administration)`: (succeeded, the event for the handler to return)."""
        return self._attempt(lambda session, user: action(Administration(AccessContext(session, user))), success)

    @rx.event
    @requires_door(Administration.tabs)
    def load(self):
        """on_load: check the sign-in and the right to see the page, then load the mandate."""
        self.error = ""
        self.notice = ""
        self.decisions = []
        self._close_dialogs()
        return self._reload()

    @rx.event
    @requires_door(Administration.tabs)
    def select_mandate(self, mandate_id: str):
        """Switch to another mandate."""
        self.mandate_id = mandate_id
        self.access_instance_id = ""
        self.explain_user_id = ""
        self.explain_instance_id = MANDATE_ONLY
        self.error = ""
        self.notice = ""
        return self._reload()

    @rx.event
    @requires("ui")
    def set_tab(self, tab: str):
        self.tab = tab
        self.error = ""
        self.notice = ""

    # --- mandates -----------------------------------------------------------------------------

    @rx.event
    @requires("ui")
    def set_new_mandate_name(self, value: str):
        self.new_mandate_name = value

    @rx.event
    @requires_door(Administration.create_mandate)
    def create_mandate(self, form_data: dict):
        """Create a mandate with the typed name and select it."""
        name = (form_data.get("name") or self.new_mandate_name or "").strip()
        created: dict[str, str] = {}

        def create(admin: Administration):
            created["id"] = admin.create_mandate(name).id
            self.mandate_id = created["id"]

        ok, event = self._act(create, success=f"Created mandate '{name}'; it is now selected.")
        if ok:
            self.new_mandate_name = ""
        return event

    # --- users --------------------------------------------------------------------------------

    @rx.event
    @requires("ui")
    def set_new_username(self, value: str):
        self.new_username = value

    @rx.event
    @requires("ui")
    def set_new_password(self, value: str):
        self.new_password = value

    @rx.event
    @requires("ui")
    def set_new_role(self, role: str, checked: bool):
        """Tick or untick a mandate role of the user being created."""
        self.new_roles = _toggled(self.new_roles, role, checked)

    @rx.event
    @requires_door(Administration.create_user)
    def create_user(self, form_data: dict):
        """Create a user in the selected mandate with the ticked mandate roles."""
        username = (form_data.get("username") or self.new_username or "").strip()
        password = form_data.get("password") or self.new_password or ""
        roles, mandate_id = list(self.new_roles), self.mandate_id
        ok, event = self._act(
            lambda admin: admin.create_user(mandate_id, username, password, roles),
            success=f"Created user '{username}'.",
        )
        if ok:
            self.new_username = ""
            self.new_password = ""
            self.new_roles = ["user"]
        return event

    @rx.event
    @requires_door(Administration.set_disabled)
    def set_disabled(self, user_id: str, username: str, disabled: bool):
        """Disable or enable a member's account."""
        mandate_id = self.mandate_id
        _ok, event = self._act(
            lambda admin: admin.set_disabled(mandate_id, user_id, disabled),
            success=f"{'Disabled' if disabled else 'Enabled'} '{username}'.",
        )
        return event

    @rx.event
    @requires("ui")
    def open_roles(self, user_id: str, username: str, roles: str):
        """Open the dialog that changes a member's mandate roles."""
        self.roles_user_id = user_id
        self.roles_username = username
        self.roles_selected = [r.strip() for r in roles.split(",") if r.strip()]

    @rx.event
    @requires("ui")
    def set_role_selected(self, role: str, checked: bool):
        self.roles_selected = _toggled(self.roles_selected, role, checked)

    @rx.event
    @requires_door(Administration.set_member_roles)
    def save_roles(self):
        """Give the member exactly the ticked mandate roles."""
        user_id, username, roles, mandate_id = (self.roles_user_id, self.roles_username,
                                                list(self.roles_selected), self.mandate_id)
        ok, event = self._act(
            lambda admin: admin.set_member_roles(mandate_id, user_id, roles),
            success=f"Roles of '{username}': {', '.join(roles) or 'none'}.",
        )
        if ok:
            self.roles_user_id = ""
        return event

    @rx.event
    @requires("ui")
    def open_reset(self, user_id: str, username: str):
        """Open the dialog that sets a new password."""
        self.reset_user_id = user_id
        self.reset_username = username
        self.reset_value = ""

    @rx.event
    @requires("ui")
    def set_reset_value(self, value: str):
        self.reset_value = value

    @rx.event
    @requires_door(Administration.reset_password)
    def save_reset(self):
        """Set the typed password; the member's open sessions end."""
        user_id, username, password, mandate_id = (self.reset_user_id, self.reset_username,
                                                   self.reset_value, self.mandate_id)
        ok, event = self._act(
            lambda admin: admin.reset_password(mandate_id, user_id, password),
            success=f"New password set for '{username}'; their open sessions were ended.",
        )
        if ok:
            self.reset_user_id = ""
            self.reset_value = ""
        return event

    @rx.event
    @requires("ui")
    def ask_remove(self, user_id: str, username: str):
        self.remove_user_id = user_id
        self.remove_username = username

    @rx.event
    @requires_door(Administration.remove_member)
    def confirm_remove(self):
        """Remove the member (and their instance access) from the selected mandate."""
        user_id, username, mandate_id = self.remove_user_id, self.remove_username, self.mandate_id
        self.remove_user_id = ""
        _ok, event = self._act(
            lambda admin: admin.remove_member(mandate_id, user_id),
            success=f"Removed '{username}' from the mandate.",
        )
        return event

    def _close_dialogs(self) -> None:
        self.roles_user_id = ""
        self.reset_user_id = ""
        self.reset_value = ""
        self.remove_user_id = ""

    @rx.event
    @requires("ui")
    def dialog_open_change(self, is_open: bool):
        """A dialog was closed (Escape, click outside, Cancel)."""
        if not is_open:
            self._close_dialogs()

    # --- instances and access ----------------------------------------------------------------

    @rx.event
    @requires("ui")
    def set_new_instance_feature(self, value: str):
        self.new_instance_feature = value

    @rx.event
    @requires("ui")
    def set_new_instance_label(self, value: str):
        self.new_instance_label = value

    @rx.event
    @requires_door(Administration.create_instance)
    def create_instance(self, form_data: dict):
        """Create a feature instance in the selected mandate and open its access list."""
        label = (form_data.get("label") or self.new_instance_label or "").strip()
        feature_code, mandate_id = self.new_instance_feature, self.mandate_id

        def create(admin: Administration):
            self.access_instance_id = admin.create_instance(mandate_id, feature_code, label).id

        ok, event = self._act(create, success=f"Created {_feature_label(feature_code)} instance '{label}'.")
        if ok:
            self.new_instance_label = ""
        return event

    @rx.event
    @requires_door(Administration.list_access)
    def select_access_instance(self, instance_id: str):
        """Show who has access to this instance."""
        self.access_instance_id = instance_id
        self.grant_user_id = ""
        self.grant_role = ""
        self.error = ""
        self.notice = ""
        return self._reload()

    @rx.event
    @requires("ui")
    def set_grant_user(self, value: str):
        self.grant_user_id = value

    @rx.event
    @requires("ui")
    def set_grant_role(self, value: str):
        self.grant_role = value

    def _set_access(self, user_id: str, roles: list[str], success: str):
        instance_id = self.access_instance_id
        return self._act(lambda admin: admin.set_access(instance_id, user_id, roles), success=success)

    def _username(self, user_id: str) -> str:
        return next((m["username"] for m in self.members if m["id"] == user_id), user_id)

    @rx.event
    @requires_door(Administration.set_access)
    def grant_access(self):
        """Give the chosen member the chosen instance role (replacing their previous one)."""
        if not self.grant_user_id or not self.grant_role:
            self.error = "Choose a member and an instance role to grant."
            self.notice = ""
            return None
        username = self._username(self.grant_user_id)
        ok, event = self._set_access(self.grant_user_id, [self.grant_role],
                                     f"'{username}' now has {self.grant_role} in '{self.access_instance_label}'.")
        if ok:
            self.grant_user_id = ""
        return event

    @rx.event
    @requires_door(Administration.set_access)
    def change_access(self, user_id: str, role: str):
        """Replace a member's instance role."""
        _ok, event = self._set_access(user_id, [role], f"'{self._username(user_id)}' now has {role}.")
        return event

    @rx.event
    @requires_door(Administration.set_access)
    def revoke_access(self, user_id: str, username: str):
        """Remove a member's access to the instance."""
        _ok, event = self._set_access(user_id, [],
                                      f"Revoked the access of '{username}' to '{self.access_instance_label}'.")
        return event

    # --- permissions ("why") -------------------------------------------------------------------

    def _explain(self):
        self.error = ""
        self.notice = ""
        self.decisions = []
        if not self.explain_user_id:
            return None
        try:
            with self._user_session() as (session, user):
                self._load_decisions(Administration(AccessContext(session, user)))
        except NotSignedIn:
            return self._signed_out()
        except DomainError as exc:
            self.error = user_message(exc)
        return None

    @rx.event
    @requires_door(Administration.explain_member)
    def set_explain_user(self, user_id: str):
        """Explain the rights of this member."""
        self.explain_user_id = user_id
        return self._explain()

    @rx.event
    @requires_door(Administration.explain_member)
    def set_explain_instance(self, instance_id: str):
        """Explain the rights within this instance (or the mandate only)."""
        self.explain_instance_id = instance_id
        return self._explain()

    @rx.event
    @requires("ui")
    def set_explain_filter(self, value: str):
        self.explain_filter = value
