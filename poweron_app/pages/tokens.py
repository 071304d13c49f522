"""The API tokens page: personal tokens for the REST API (list, create once-shown, revoke)."""

from __future__ import annotations

import reflex as rx

from components.shell import empty_state, page_shell
from components.tables import data_table
from state.tokens import ALL_INSTANCES, TokenRow, TokensState


def create_form() -> rx.Component:
    return rx.form(
        rx.hstack(
            rx.input(name="name", id="new-token-name", placeholder="What the token is for, e.g. CI pipeline",
                     value=TokensState.new_name, on_change=TokensState.set_new_name, width="22em"),
            rx.select.root(
                rx.select.trigger(id="new-token-instance", min_width="14em", aria_label="Instance"),
                rx.select.content(
                    rx.select.item("Every instance", value=ALL_INSTANCES),
                    rx.foreach(TokensState.instance_options, lambda o: rx.select.item(o["label"], value=o["value"])),
                ),
                value=TokensState.new_instance,
                on_change=TokensState.set_new_instance,
            ),
            rx.checkbox("Read-only", checked=TokensState.new_read_only, on_change=TokensState.set_new_read_only,
                        id="new-token-read-only", name="read_only"),
            rx.button(rx.icon("plus", size=16), "Create token", type="submit", id="create-token"),
            align="center",
            spacing="3",
            wrap="wrap",
        ),
        on_submit=TokensState.create_token,
        reset_on_submit=False,
    )


def created_token_box() -> rx.Component:
    return rx.callout.root(
        rx.callout.icon(rx.icon("key-round")),
        rx.vstack(
            rx.text("Token '", TokensState.created_name, "' created. Copy it now: it is shown only once and "
                    "cannot be displayed again.", weight="medium", id="token-warning"),
            rx.hstack(
                rx.input(value=TokensState.created_token, read_only=True, id="new-token-value", width="36em",
                         font_family="monospace", on_focus=rx.call_script("document.activeElement.select()")),
                rx.button(rx.icon("copy", size=16), "Copy", on_click=TokensState.copy_created, id="copy-token",
                          variant="soft"),
                rx.button("Done", on_click=TokensState.dismiss_created, id="dismiss-token", variant="ghost"),
                align="center",
                spacing="2",
            ),
            rx.text("Use it as ", rx.code("Authorization: Bearer <token>"), " on the REST API, or connect an "
                    "MCP client (Claude Desktop, the MCP Inspector, another PowerOn) to ", rx.code(TokensState.mcp_url),
                    " with it (add ", rx.code("?instanceId=…"), " unless the token is limited to one instance).",
                    size="2", color_scheme="gray", id="token-usage"),
            spacing="2",
        ),
        color_scheme="amber",
        width="100%",
        id="created-token",
    )


def token_row(row: TokenRow) -> rx.Component:
    return rx.table.row(
        rx.table.cell(rx.text(row["name"], weight="medium", class_name="token-name")),
        rx.table.cell(rx.text(row["scope"], size="2", class_name="token-scope")),
        rx.table.cell(rx.text(row["created"], color_scheme="gray", size="2")),
        rx.table.cell(
            rx.button(rx.icon("trash-2", size=14), "Revoke", size="1", variant="soft", color_scheme="red",
                      class_name="revoke-token-button", on_click=TokensState.ask_revoke(row["id"], row["name"]))
        ),
        class_name="token-row",
        custom_attrs={"data-name": row["name"]},
    )


def revoke_dialog() -> rx.Component:
    return rx.alert_dialog.root(
        rx.alert_dialog.content(
            rx.alert_dialog.title("Revoke token"),
            rx.alert_dialog.description(
                "Revoke '", TokensState.revoke_name, "'? Every program using it loses access at once.",
            ),
            rx.hstack(
                rx.alert_dialog.cancel(rx.button("Cancel", variant="soft")),
                rx.alert_dialog.action(
                    rx.button("Revoke", color_scheme="red", on_click=TokensState.confirm_revoke,
                              id="confirm-revoke-token")
                ),
                justify="end",
                spacing="3",
                margin_top="1em",
            ),
        ),
        open=TokensState.revoke_id != "",
        on_open_change=TokensState.revoke_open_change,
    )


def tokens_page() -> rx.Component:
    return page_shell(
        "API tokens",
        rx.vstack(
            rx.text("Personal tokens let scripts, integrations and MCP clients act as you, with your rights — "
                    "everywhere, or only in one feature instance, and read-only if you like. They do not expire; "
                    "revoke a token you no longer need.", color_scheme="gray"),
            create_form(),
            rx.cond(TokensState.error != "",
                    rx.callout(TokensState.error, icon="triangle-alert", color_scheme="red", id="tokens-error")),
            rx.cond(TokensState.notice != "",
                    rx.callout(TokensState.notice, icon="check", color_scheme="green", id="tokens-notice")),
            rx.cond(TokensState.created_token != "", created_token_box()),
            rx.cond(
                TokensState.tokens.length() > 0,
                data_table(("Name", "Reaches", "Created", ""), TokensState.tokens, token_row, "token-table"),
                rx.cond(
                    TokensState.loaded,
                    empty_state("key-round", "No API tokens",
                                "Create a token with the name field above to call the REST API from a script."),
                ),
            ),
            revoke_dialog(),
            width="100%",
            spacing="4",
        ),
    )
