"""The Admin page: mandates, users, feature instances with their access, and the "why" view."""

from __future__ import annotations

import reflex as rx

from components.agent_approvals import agent_approvals_tab
from components.mcp_servers import mcp_servers_tab
from components.shell import empty_state, gated, page_shell
from components.tables import data_table
from state.admin import MANDATE_ONLY, MANDATE_ROLES, AccessRow, AdminState, DecisionRow, InstanceRow, MemberRow


def messages() -> rx.Component:
    return rx.fragment(
        rx.cond(AdminState.error != "",
                rx.callout(AdminState.error, icon="triangle-alert", color_scheme="red", id="admin-error",
                           width="100%")),
        rx.cond(AdminState.notice != "",
                rx.callout(AdminState.notice, icon="check", color_scheme="green", id="admin-notice",
                           width="100%")),
    )


def mandate_picker() -> rx.Component:
    return rx.hstack(
        rx.text("Mandate", weight="medium"),
        rx.select.root(
            rx.select.trigger(placeholder="Choose a mandate", id="mandate-select", min_width="14em"),
            rx.select.content(
                rx.foreach(AdminState.mandates, lambda m: rx.select.item(m["name"], value=m["id"]))
            ),
            value=AdminState.mandate_id,
            on_change=AdminState.select_mandate,
        ),
        align="center",
        spacing="3",
    )


# --- mandates ----------------------------------------------------------------------------------


def mandates_tab() -> rx.Component:
    return rx.vstack(
        rx.form(
            rx.hstack(
                rx.input(name="name", id="new-mandate-name", placeholder="Name of the new mandate",
                         value=AdminState.new_mandate_name, on_change=AdminState.set_new_mandate_name,
                         width="22em"),
                rx.button(rx.icon("plus", size=16), "Create mandate", type="submit", id="create-mandate"),
            ),
            on_submit=AdminState.create_mandate,
            reset_on_submit=False,
        ),
        rx.table.root(
            rx.table.header(rx.table.row(rx.table.column_header_cell("Mandate"),
                                         rx.table.column_header_cell(""))),
            rx.table.body(
                rx.foreach(
                    AdminState.mandates,
                    lambda m: rx.table.row(
                        rx.table.cell(rx.text(m["name"], weight="medium", class_name="mandate-name")),
                        rx.table.cell(
                            rx.cond(
                                m["id"] == AdminState.mandate_id,
                                rx.badge("selected", variant="soft", color_scheme="green"),
                                rx.button("Select", size="1", variant="soft", class_name="select-mandate-button",
                                          on_click=AdminState.select_mandate(m["id"])),
                            )
                        ),
                        class_name="mandate-row",
                    ),
                )
            ),
            width="100%",
            id="mandate-table",
        ),
        width="100%",
        spacing="4",
    )


# --- users -------------------------------------------------------------------------------------


def role_checkboxes(prefix: str, selected, on_toggle) -> rx.Component:
    return rx.hstack(
        *[
            rx.checkbox(role, checked=selected.contains(role), on_change=lambda value, r=role: on_toggle(r, value),
                        id=f"{prefix}-{role}", name=f"{prefix}-{role}")
            for role in MANDATE_ROLES
        ],
        spacing="4",
    )


def create_user_form() -> rx.Component:
    return rx.form(
        rx.hstack(
            rx.input(name="username", id="new-username", placeholder="Username", value=AdminState.new_username,
                     on_change=AdminState.set_new_username, width="12em", auto_complete="off"),
            rx.input(name="password", id="new-password", placeholder="Password (8 characters or more)",
                     type="password", value=AdminState.new_password, on_change=AdminState.set_new_password,
                     width="16em", auto_complete="new-password"),
            rx.text("Roles:", size="2", color_scheme="gray"),
            role_checkboxes("new-role", AdminState.new_roles, AdminState.set_new_role),
            rx.button(rx.icon("user-plus", size=16), "Create user", type="submit", id="create-user"),
            align="center",
            spacing="3",
            wrap="wrap",
        ),
        on_submit=AdminState.create_user,
        reset_on_submit=False,
    )


def member_row(m: MemberRow) -> rx.Component:
    return rx.table.row(
        rx.table.cell(rx.text(m["username"], weight="medium", class_name="member-username")),
        rx.table.cell(rx.text(m["display_name"], class_name="member-display-name")),
        rx.table.cell(
            rx.hstack(
                rx.text(m["roles"], class_name="member-roles"),
                rx.cond(m["is_sysadmin"], rx.badge("system admin", variant="soft", color_scheme="purple")),
                spacing="2",
            )
        ),
        rx.table.cell(
            rx.cond(m["disabled"],
                    rx.badge("disabled", color_scheme="red", variant="soft", class_name="member-status"),
                    rx.badge("active", color_scheme="green", variant="soft", class_name="member-status"))
        ),
        rx.table.cell(
            rx.hstack(
                rx.button(rx.icon("shield", size=14), "Roles", size="1", variant="soft", class_name="roles-button",
                          on_click=AdminState.open_roles(m["id"], m["username"], m["roles"])),
                rx.button(rx.icon("key-round", size=14), "Reset password", size="1", variant="soft",
                          class_name="reset-button", on_click=AdminState.open_reset(m["id"], m["username"])),
                rx.cond(
                    m["disabled"],
                    rx.button(rx.icon("circle-check", size=14), "Enable", size="1", variant="soft",
                              class_name="enable-button",
                              on_click=AdminState.set_disabled(m["id"], m["username"], False)),
                    rx.button(rx.icon("ban", size=14), "Disable", size="1", variant="soft", color_scheme="orange",
                              class_name="disable-button",
                              on_click=AdminState.set_disabled(m["id"], m["username"], True)),
                ),
                rx.button(rx.icon("user-minus", size=14), "Remove", size="1", variant="soft", color_scheme="red",
                          class_name="remove-button", on_click=AdminState.ask_remove(m["id"], m["username"])),
                spacing="2",
            )
        ),
        class_name="member-row",
        custom_attrs={"data-username": m["username"]},
    )


def form_dialog(title: list, description: str, body: rx.Component, confirm: str, on_confirm,
                confirm_id: str, open_when) -> rx.Component:
    """A dialog with a title, a line of help, one form body and Cancel / confirm buttons."""
    return rx.dialog.root(
        rx.dialog.content(
            rx.dialog.title(*title),
            rx.dialog.description(description),
            body,
            rx.hstack(
                rx.dialog.close(rx.button("Cancel", variant="soft")),
                rx.button(confirm, on_click=on_confirm, id=confirm_id),
                justify="end",
                spacing="3",
            ),
        ),
        open=open_when,
        on_open_change=AdminState.dialog_open_change,
    )


def roles_dialog() -> rx.Component:
    return form_dialog(
        ["Mandate roles of ", AdminState.roles_username],
        "admin administers the mandate; user works with the data of the instances they are given; "
        "viewer reads only.",
        rx.box(role_checkboxes("edit-role", AdminState.roles_selected, AdminState.set_role_selected),
               margin_y="1em"),
        "Save roles", AdminState.save_roles, "save-roles", AdminState.roles_user_id != "",
    )


def reset_dialog() -> rx.Component:
    return form_dialog(
        ["Reset the password of ", AdminState.reset_username],
        "The user's open sessions end; tell them the new password.",
        rx.input(id="reset-password-input", type="password", placeholder="New password (8 characters or more)",
                 value=AdminState.reset_value, on_change=AdminState.set_reset_value, margin_y="1em",
                 auto_complete="new-password"),
        "Set password", AdminState.save_reset, "save-reset", AdminState.reset_user_id != "",
    )


def remove_dialog() -> rx.Component:
    return rx.alert_dialog.root(
        rx.alert_dialog.content(
            rx.alert_dialog.title("Remove from mandate"),
            rx.alert_dialog.description(
                "Remove '", AdminState.remove_username,
                "' from this mandate, with their access to its instances? The account itself stays.",
            ),
            rx.hstack(
                rx.alert_dialog.cancel(rx.button("Cancel", variant="soft")),
                rx.alert_dialog.action(
                    rx.button("Remove", color_scheme="red", on_click=AdminState.confirm_remove, id="confirm-remove")
                ),
                justify="end",
                spacing="3",
                margin_top="1em",
            ),
        ),
        open=AdminState.remove_user_id != "",
        on_open_change=AdminState.dialog_open_change,
    )


def users_tab() -> rx.Component:
    return rx.vstack(
        create_user_form(),
        data_table(("Username", "Display name", "Mandate roles", "Status", ""), AdminState.members, member_row,
                   "member-table"),
        roles_dialog(),
        reset_dialog(),
        remove_dialog(),
        width="100%",
        spacing="4",
    )


# --- instances ---------------------------------------------------------------------------------


def create_instance_form() -> rx.Component:
    return rx.form(
        rx.hstack(
            rx.select.root(
                rx.select.trigger(placeholder="Feature", id="new-instance-feature", min_width="12em"),
                rx.select.content(
                    rx.foreach(AdminState.feature_options, lambda f: rx.select.item(f["label"], value=f["value"]))
                ),
                value=AdminState.new_instance_feature,
                on_change=AdminState.set_new_instance_feature,
            ),
            rx.input(name="label", id="new-instance-label", placeholder="Label of the new instance",
                     value=AdminState.new_instance_label, on_change=AdminState.set_new_instance_label,
                     width="18em"),
            rx.button(rx.icon("plus", size=16), "Create instance", type="submit", id="create-instance"),
            align="center",
            spacing="3",
        ),
        on_submit=AdminState.create_instance,
        reset_on_submit=False,
    )


def instance_row(i: InstanceRow) -> rx.Component:
    selected = i["id"] == AdminState.access_instance_id
    return rx.table.row(
        rx.table.cell(rx.text(i["label"], weight="medium", class_name="instance-label")),
        rx.table.cell(rx.badge(i["feature_label"], variant="soft", class_name="instance-feature")),
        rx.table.cell(
            rx.button(rx.icon("users", size=14), "Access", size="1",
                      variant=rx.cond(selected, "solid", "soft"), class_name="access-button",
                      on_click=AdminState.select_access_instance(i["id"]))
        ),
        class_name="instance-row",
        custom_attrs={"data-label": i["label"]},
    )


def role_select(value, on_change, **props) -> rx.Component:
    return rx.select.root(
        rx.select.trigger(placeholder="Instance role", min_width="14em", **props),
        rx.select.content(rx.foreach(AdminState.instance_roles, lambda r: rx.select.item(r, value=r))),
        value=value,
        on_change=on_change,
    )


def access_row(a: AccessRow) -> rx.Component:
    return rx.table.row(
        rx.table.cell(rx.text(a["username"], weight="medium", class_name="access-username")),
        rx.table.cell(role_select(a["role"], lambda value: AdminState.change_access(a["user_id"], value),
                                  class_name="access-role-select")),
        rx.table.cell(
            rx.button(rx.icon("x", size=14), "Revoke", size="1", variant="soft", color_scheme="red",
                      class_name="revoke-button", on_click=AdminState.revoke_access(a["user_id"], a["username"]))
        ),
        class_name="access-row",
        custom_attrs={"data-username": a["username"]},
    )


def access_section() -> rx.Component:
    return rx.vstack(
        rx.heading("Access to ", AdminState.access_instance_label, size="3", margin_top="0.5em",
                   id="access-heading"),
        rx.cond(AdminState.access_error != "",
                rx.callout(AdminState.access_error, icon="triangle-alert", color_scheme="red",
                           id="access-error")),
        rx.hstack(
            rx.select.root(
                rx.select.trigger(placeholder="Member", id="grant-user", min_width="12em"),
                rx.select.content(
                    rx.foreach(AdminState.member_options, lambda o: rx.select.item(o["label"], value=o["value"]))
                ),
                value=AdminState.grant_user_id,
                on_change=AdminState.set_grant_user,
            ),
            role_select(AdminState.grant_role, AdminState.set_grant_role, id="grant-role"),
            rx.button(rx.icon("user-check", size=16), "Grant", on_click=AdminState.grant_access, id="grant-access"),
            align="center",
            spacing="3",
        ),
        rx.cond(
            AdminState.access_rows.length() > 0,
            data_table(("Member", "Instance role", ""), AdminState.access_rows, access_row, "access-table"),
            rx.text("Nobody has access to this instance yet.", color_scheme="gray", id="access-empty"),
        ),
        width="100%",
        spacing="3",
        id="access-section",
    )


def instances_tab() -> rx.Component:
    return rx.vstack(
        create_instance_form(),
        rx.cond(
            AdminState.instances.length() > 0,
            data_table(("Instance", "Feature", ""), AdminState.instances, instance_row, "instance-table"),
            rx.text("This mandate has no feature instances yet.", color_scheme="gray"),
        ),
        rx.cond(AdminState.access_instance_id != "", access_section()),
        width="100%",
        spacing="4",
    )


# --- permissions -------------------------------------------------------------------------------


def right_cell(value, name: str) -> rx.Component:
    """A resolved right as a coloured badge (yes/all green, own amber, no/none gray)."""
    return rx.table.cell(
        rx.match(
            value,
            ("yes", rx.badge("yes", color_scheme="green")),
            ("all", rx.badge("all", color_scheme="green")),
            ("own", rx.badge("own", color_scheme="amber")),
            ("no", rx.badge("no", color_scheme="red", variant="soft")),
            ("none", rx.badge("none", color_scheme="gray", variant="soft")),
            rx.text(value, color_scheme="gray"),
        ),
        class_name=f"decision-{name}",
    )


def decision_row(d: DecisionRow) -> rx.Component:
    return rx.table.row(
        rx.table.cell(rx.text(d["context"], size="1"), class_name="decision-context"),
        rx.table.cell(
            rx.vstack(
                rx.code(d["item"], size="1", class_name="decision-item"),
                rx.text(d["explanation"], size="1", color_scheme="gray", class_name="decision-explanation"),
                spacing="1",
            ),
        ),
        *[right_cell(d[name], name) for name in ("view", "read", "create", "update", "delete")],
        rx.table.cell(rx.text(d["level"], size="1"), class_name="decision-level"),
        rx.table.cell(rx.text(d["role"], size="1"), class_name="decision-role"),
        rx.table.cell(rx.text(d["rule"], size="1", font_family="monospace", overflow_wrap="anywhere"),
                      class_name="decision-rule", max_width="16em"),
        class_name="decision-row",
        custom_attrs={"data-item": d["item"], "data-context": d["context"]},
    )


def permissions_tab() -> rx.Component:
    return rx.vstack(
        rx.hstack(
            rx.select.root(
                rx.select.trigger(placeholder="Member", id="explain-user", min_width="12em"),
                rx.select.content(
                    rx.foreach(AdminState.member_options, lambda o: rx.select.item(o["label"], value=o["value"]))
                ),
                value=AdminState.explain_user_id,
                on_change=AdminState.set_explain_user,
            ),
            rx.select.root(
                rx.select.trigger(id="explain-instance", min_width="14em"),
                rx.select.content(
                    rx.select.item("Mandate level (no instance)", value=MANDATE_ONLY),
                    rx.foreach(AdminState.instances,
                               lambda i: rx.select.item(i["label"] + " (" + i["feature_label"] + ")",
                                                        value=i["id"])),
                ),
                value=AdminState.explain_instance_id,
                on_change=AdminState.set_explain_instance,
            ),
            rx.input(id="explain-filter", placeholder="Filter items", value=AdminState.explain_filter,
                     on_change=AdminState.set_explain_filter, width="16em"),
            align="center",
            spacing="3",
        ),
        rx.cond(
            AdminState.explain_user_id == "",
            rx.text("Choose a member (and an instance) to see every right they have and which role decides it.",
                    color_scheme="gray", id="explain-hint"),
            rx.table.root(
                rx.table.header(
                    rx.table.row(
                        *[rx.table.column_header_cell(h) for h in (
                            "Context", "Item and why", "View", "Read", "Create", "Update", "Delete", "Level",
                            "Role", "Deciding rule")]
                    )
                ),
                rx.table.body(rx.foreach(AdminState.shown_decisions, decision_row)),
                width="100%",
                size="1",
                id="decision-table",
            ),
        ),
        width="100%",
        spacing="4",
    )


# --- page --------------------------------------------------------------------------------------


def admin_tabs() -> rx.Component:
    tabs = (
        ("mandates", "Mandates", "building-2", AdminState.show_mandates, mandates_tab),
        ("users", "Users", "users", AdminState.show_users, users_tab),
        ("instances", "Instances", "boxes", AdminState.show_instances, instances_tab),
        ("permissions", "Permissions", "scale", AdminState.show_permissions, permissions_tab),
        ("mcp", "MCP servers", "plug", AdminState.show_mcp, mcp_servers_tab),
        ("approvals", "Agent approvals", "shield-check", AdminState.show_approvals, agent_approvals_tab),
    )
    return rx.tabs.root(
        rx.tabs.list(
            *[
                rx.cond(shown, rx.tabs.trigger(rx.hstack(rx.icon(icon, size=15), label, spacing="2",
                                                         align="center"),
                                               value=value, id=f"tab-{value}"))
                for value, label, icon, shown, _tab in tabs
            ]
        ),
        *[
            rx.tabs.content(rx.cond(shown, rx.box(content(), padding_top="1em")), value=value, width="100%")
            for value, _label, _icon, shown, content in tabs
        ],
        value=AdminState.tab,
        on_change=AdminState.set_tab,
        width="100%",
    )


def admin_page() -> rx.Component:
    return page_shell(
        "Admin",
        gated(
            "nav_admin", "the administration",
            rx.vstack(
                mandate_picker(),
                messages(),
                rx.cond(
                    AdminState.tab == "",
                    empty_state("shield", "Nothing to administer",
                                "Your roles do not show any administration tab in this mandate."),
                    admin_tabs(),
                ),
                width="100%",
                spacing="4",
            ),
        ),
    )
