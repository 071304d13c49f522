"""The Admin page's "MCP servers" tab (issue 19): register external MCP servers, test and refresh
them, see their tools, choose the roles that may use them."""

from __future__ import annotations

import reflex as rx

from components.tables import data_table
from state.admin import MANDATE_ROLES, AdminState
from state.mcp_servers import McpServerRow, McpToolRow


def _field(label: str, field: str, value, placeholder: str = "", **props) -> rx.Component:
    return rx.vstack(
        rx.text(label, size="2", weight="medium"),
        rx.input(value=value, placeholder=placeholder, on_change=lambda v: AdminState.set_mcp_field(field, v),
                 id=f"mcp-{field.replace('_', '-')}", **props),
        spacing="1",
    )


def add_form() -> rx.Component:
    return rx.card(
        rx.vstack(
            rx.heading("Add an MCP server", size="3"),
            rx.text("A server that speaks MCP over Streamable HTTP. Its tools become the toolbox mcp:<name>: "
                    "agents request it, the editor's palette shows them as nodes. Its tools are listed now, "
                    "then again when you press Refresh.", size="2", color_scheme="gray"),
            rx.hstack(
                _field("Name", "name", AdminState.mcp_name, "e.g. github", width="12em"),
                _field("URL", "url", AdminState.mcp_url, "https://mcp.example.com/mcp", width="26em"),
                _field("Description (optional)", "description", AdminState.mcp_description,
                       "What it is for, for agents and people", width="22em"),
                spacing="3",
                wrap="wrap",
            ),
            rx.hstack(
                rx.text("Authentication", size="2", weight="medium"),
                rx.radio_group.root(
                    rx.hstack(
                        rx.radio_group.item(value="none", id="mcp-auth-none"), rx.text("None", size="2"),
                        rx.radio_group.item(value="headers", id="mcp-auth-headers"), rx.text("Headers", size="2"),
                        rx.radio_group.item(value="oauth", id="mcp-auth-oauth"),
                        rx.text("OAuth 2.0 client credentials", size="2"),
                        spacing="2",
                        align="center",
                    ),
                    value=AdminState.mcp_auth,
                    on_change=AdminState.set_mcp_auth,
                ),
                spacing="3",
                align="center",
            ),
            rx.cond(
                AdminState.mcp_auth == "headers",
                rx.vstack(
                    rx.text("Headers, one per line (sealed at rest, never shown again)", size="2", weight="medium"),
                    rx.text_area(value=AdminState.mcp_headers, placeholder="Authorization: Bearer …",
                                 on_change=lambda v: AdminState.set_mcp_field("headers", v), id="mcp-headers",
                                 width="40em", rows="3", font_family="monospace"),
                    spacing="1",
                ),
            ),
            rx.cond(
                AdminState.mcp_auth == "oauth",
                rx.hstack(
                    _field("Token URL", "token_url", AdminState.mcp_token_url, "https://login.example.com/token",
                           width="22em"),
                    _field("Client ID", "client_id", AdminState.mcp_client_id, width="14em"),
                    _field("Client secret", "client_secret", AdminState.mcp_client_secret, type="password",
                           width="14em"),
                    _field("Scope (optional)", "scope", AdminState.mcp_scope, width="12em"),
                    spacing="3",
                    wrap="wrap",
                ),
            ),
            rx.hstack(
                rx.text("May be used by", size="2", weight="medium"),
                *[rx.checkbox(role, checked=AdminState.mcp_roles.contains(role),
                              on_change=lambda checked, r=role: AdminState.toggle_mcp_role(r, checked),
                              id=f"mcp-role-{role}") for role in MANDATE_ROLES],
                spacing="3",
                align="center",
            ),
            rx.button(rx.icon("plug", size=16), "Connect and add", on_click=AdminState.add_mcp_server,
                      id="mcp-add"),
            spacing="3",
            width="100%",
        ),
        width="100%",
    )


def tool_row(tool: McpToolRow) -> rx.Component:
    return rx.table.row(
        rx.table.cell(rx.code(tool["name"]), class_name="mcp-tool-name"),
        rx.table.cell(rx.badge(tool["kind"], color_scheme=rx.cond(tool["kind"] == "read", "green", "amber"),
                               variant="soft")),
        rx.table.cell(rx.text(tool["description"], size="2", color_scheme="gray")),
    )


def server_row(row: McpServerRow) -> rx.Component:
    return rx.fragment(
        rx.table.row(
            rx.table.cell(rx.vstack(rx.text(row["name"], weight="medium", class_name="mcp-server-name"),
                                    rx.code(row["toolbox_id"], size="1"), spacing="1")),
            rx.table.cell(rx.vstack(rx.text(row["url"], size="2"),
                                    rx.text(row["auth"], size="1", color_scheme="gray"), spacing="1")),
            rx.table.cell(rx.cond(
                row["status"] == "active",
                rx.badge("active", color_scheme="green"),
                rx.tooltip(rx.badge(row["status"], color_scheme="red"), content=row["last_error"]),
            ), class_name="mcp-server-status"),
            rx.table.cell(rx.button(row["tool_count"].to_string() + " tools", rx.icon("chevron-down", size=14),
                                    size="1", variant="ghost", on_click=AdminState.toggle_mcp_tools(row["id"]),
                                    class_name="mcp-tools-button")),
            rx.table.cell(rx.text(rx.cond(row["roles"] != "", row["roles"], "nobody"), size="2",
                                  class_name="mcp-server-roles")),
            rx.table.cell(rx.hstack(
                rx.button(rx.icon("activity", size=14), "Test", size="1", variant="soft",
                          on_click=AdminState.test_mcp_server(row["id"], row["name"]), class_name="mcp-test"),
                rx.button(rx.icon("refresh-cw", size=14), "Refresh", size="1", variant="soft",
                          on_click=AdminState.refresh_mcp_server(row["id"], row["name"]), class_name="mcp-refresh"),
                rx.button(rx.icon("users", size=14), "Roles", size="1", variant="soft",
                          on_click=AdminState.ask_mcp_roles(row["id"], row["name"], row["roles"]),
                          class_name="mcp-roles"),
                rx.button(rx.icon("trash-2", size=14), "Remove", size="1", variant="soft", color_scheme="red",
                          on_click=AdminState.ask_mcp_delete(row["id"], row["name"]), class_name="mcp-delete"),
                spacing="2",
            )),
            class_name="mcp-server-row",
            custom_attrs={"data-name": row["name"]},
        ),
        rx.cond(
            AdminState.mcp_open_id == row["id"],
            rx.table.row(rx.table.cell(
                rx.vstack(
                    rx.text("Tools as the server listed them on ", row["refreshed"], size="1", color_scheme="gray"),
                    rx.table.root(rx.table.body(rx.foreach(row["tools"], tool_row)), size="1", width="100%"),
                    width="100%",
                ),
                col_span=6,
            ), class_name="mcp-tools-row"),
        ),
    )


def roles_dialog() -> rx.Component:
    return rx.dialog.root(
        rx.dialog.content(
            rx.dialog.title("Who may use ", AdminState.mcp_roles_name),
            rx.dialog.description("Members with one of these mandate roles get the server's tools (agents, "
                                  "palette, /mcp); everybody else does not."),
            rx.hstack(*[rx.checkbox(role, checked=AdminState.mcp_roles_selected.contains(role),
                                    on_change=lambda checked, r=role: AdminState.toggle_mcp_roles_selected(r, checked),
                                    id=f"mcp-roles-{role}") for role in MANDATE_ROLES],
                      spacing="4", margin_y="1em"),
            rx.hstack(
                rx.dialog.close(rx.button("Cancel", variant="soft")),
                rx.button("Save", on_click=AdminState.save_mcp_roles, id="mcp-roles-save"),
                justify="end",
                spacing="3",
            ),
        ),
        open=AdminState.mcp_roles_id != "",
        on_open_change=AdminState.mcp_dialog_open_change,
    )


def delete_dialog() -> rx.Component:
    return rx.alert_dialog.root(
        rx.alert_dialog.content(
            rx.alert_dialog.title("Remove MCP server"),
            rx.alert_dialog.description("Remove '", AdminState.mcp_delete_name, "'? Agents and workflows lose its "
                                        "tools at once; its credentials are deleted."),
            rx.hstack(
                rx.alert_dialog.cancel(rx.button("Cancel", variant="soft")),
                rx.alert_dialog.action(rx.button("Remove", color_scheme="red", on_click=AdminState.confirm_mcp_delete,
                                                 id="mcp-delete-confirm")),
                justify="end",
                spacing="3",
                margin_top="1em",
            ),
        ),
        open=AdminState.mcp_delete_id != "",
        on_open_change=AdminState.mcp_dialog_open_change,
    )


def mcp_servers_tab() -> rx.Component:
    return rx.vstack(
        add_form(),
        rx.cond(
            AdminState.mcp_servers.length() > 0,
            data_table(("Server", "Address", "Status", "Tools", "Used by", ""), AdminState.mcp_servers, server_row,
                       "mcp-server-table"),
            rx.text("No MCP servers yet. Add one above to give agents and workflows its tools.",
                    color_scheme="gray", id="mcp-empty"),
        ),
        roles_dialog(),
        delete_dialog(),
        width="100%",
        spacing="4",
    )
