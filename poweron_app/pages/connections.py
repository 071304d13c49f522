"""The Connections page (/connections): the signed-in user's accounts at outside systems and those
shared with them — test, rename, share, delete — and adding one (a settings form tested before it
is stored, or the consent at the provider)."""

from __future__ import annotations

import reflex as rx

from components.shell import empty_state, page_shell
from state.connections import ConnectionRow, ConnectionsState, MandateOption, SettingField, TypeCard

S = ConnectionsState
STATUS_COLORS = (("active", "green"), ("expired", "amber"), ("error", "red"), "gray")


# --- adding --------------------------------------------------------------------------------------


def _mandate_option(option: MandateOption) -> rx.Component:
    return rx.el.option(option["name"], value=option["id"])


def _oauth_start(card: TypeCard) -> rx.Component:
    return rx.form(
        rx.hstack(
            rx.el.input(type="hidden", name="type", value=card["id"]),
            rx.input(name="label", placeholder="Label (optional)", size="2", width="12em",
                     id="oauth-label-" + card["id"]),
            rx.cond(S.mandates.length() > 1,
                    rx.el.select(rx.foreach(S.mandates, _mandate_option), name="mandate",
                                 id="oauth-mandate-" + card["id"], style={"padding": "0.3em"})),
            rx.button(rx.icon("log-in", size=14), "Connect " + card["label"], type="submit",
                      id="connect-" + card["id"]),
            spacing="2", align="center", wrap="wrap",
        ),
        on_submit=S.connect_oauth, reset_on_submit=False,
    )


def _type_card(card: TypeCard) -> rx.Component:
    return rx.card(
        rx.vstack(
            rx.text(card["label"], weight="bold", size="3"),
            rx.text(card["description"], size="2", color_scheme="gray"),
            rx.cond(
                card["unavailable"] != "",
                rx.callout(card["unavailable"], icon="info", color_scheme="amber", size="1",
                           id="unavailable-" + card["id"], class_name="type-unavailable", width="100%",
                           style={"overflow_wrap": "anywhere"}),
                rx.cond(card["auth"] == "password",
                        rx.vstack(
                            rx.button(rx.icon("plus", size=14), "Add", id="add-" + card["id"],
                                      variant="soft", on_click=S.open_form(card["id"])),
                            rx.cond(card["consent"],
                                    rx.vstack(rx.text("or sign in at the provider (OAuth):", size="1",
                                                      color_scheme="gray"),
                                              _oauth_start(card), spacing="1")),
                            spacing="2"),
                        _oauth_start(card)),
            ),
            spacing="2", width="100%",
        ),
        class_name="connection-type", custom_attrs={"data-type": card["id"]},
        width="24em", max_width="100%",
    )


def _setting_control(field: SettingField) -> rx.Component:
    common = {"name": field["name"], "id": "setting-" + field["name"], "width": "100%"}
    return rx.match(
        field["kind"],
        ("password", rx.input(type="password", auto_complete="new-password", **common)),
        ("number", rx.input(type="number", default_value=field["default"], **common)),
        ("select", rx.el.select(
            rx.foreach(field["options"], lambda option, i: rx.el.option(field["labels"][i], value=option)),
            default_value=field["default"], style={"width": "100%", "padding": "0.4em"}, **common)),
        rx.input(type="text", default_value=field["default"], auto_complete="off", **common),
    )


def _setting_field(field: SettingField) -> rx.Component:
    return rx.vstack(
        rx.hstack(rx.text(field["title"], size="2", weight="medium"),
                  rx.cond(field["required"], rx.text("*", color_scheme="red", size="2", title="required")),
                  spacing="1"),
        _setting_control(field),
        rx.cond(field["description"] != "", rx.text(field["description"], size="1", color_scheme="gray")),
        rx.cond(field["error"] != "",
                rx.text(field["error"], size="1", color_scheme="red", id="setting-error-" + field["name"],
                        class_name="setting-error")),
        spacing="1", width="100%", class_name="setting-field",
    )


def _settings_form() -> rx.Component:
    return rx.card(
        rx.form(
            rx.vstack(
                rx.heading("New ", S.form_type_label, " connection", size="4", id="connection-form-title"),
                rx.vstack(
                    rx.text("Label", size="2", weight="medium"),
                    rx.input(name="label", id="connection-label", placeholder="e.g. Team mailbox", width="100%"),
                    rx.cond(S.form_label_error != "",
                            rx.text(S.form_label_error, size="1", color_scheme="red", id="connection-label-error")),
                    spacing="1", width="100%",
                ),
                rx.cond(S.mandates.length() > 1, rx.vstack(
                    rx.text("Mandate", size="2", weight="medium"),
                    rx.el.select(rx.foreach(S.mandates, _mandate_option), name="mandate", id="connection-mandate",
                                 style={"width": "100%", "padding": "0.4em"}),
                    spacing="1", width="100%",
                )),
                rx.grid(rx.foreach(S.form_fields, _setting_field), columns=rx.breakpoints(initial="1", md="2"),
                        spacing="3", width="100%"),
                rx.hstack(
                    rx.button(rx.cond(S.form_busy, rx.spinner(size="1"), rx.icon("plug-zap", size=14)),
                              rx.cond(S.form_busy, "Testing…", "Test and save"), type="submit",
                              id="connection-save", disabled=S.form_busy),
                    rx.button("Cancel", type="button", variant="soft", color_scheme="gray", on_click=S.close_form,
                              id="connection-cancel"),
                    rx.text("The settings are tested live; nothing is stored unless the server accepts them.",
                            size="1", color_scheme="gray"),
                    spacing="2", align="center", wrap="wrap",
                ),
                rx.cond(S.form_error != "",
                        rx.callout(S.form_error, icon="triangle-alert", color_scheme="red", id="connection-form-error",
                                   width="100%")),
                spacing="3", width="100%",
            ),
            on_submit=S.create_connection, reset_on_submit=False,
            key=S.form_type + "-" + S.form_revision.to_string(),
        ),
        id="connection-form", width="100%", max_width="60em",
    )


def _add_section() -> rx.Component:
    return rx.vstack(
        rx.heading("Add a connection", size="4"),
        rx.flex(rx.foreach(S.types, _type_card), wrap="wrap", gap="1em", width="100%", align="start",
                id="connection-types"),
        rx.cond(S.form_type != "", _settings_form()),
        spacing="3", width="100%",
    )


# --- the list ------------------------------------------------------------------------------------


def _label(row: ConnectionRow) -> rx.Component:
    return rx.cond(
        S.rename_id == row["id"],
        rx.hstack(
            rx.input(value=S.rename_value, on_change=S.set_rename_value, id="connection-rename-input",
                     auto_focus=True, size="2", width="18em"),
            rx.button("Save", size="1", on_click=S.save_rename, id="connection-rename-save"),
            rx.button("Cancel", size="1", variant="soft", color_scheme="gray", on_click=S.cancel_rename),
            spacing="2", align="center",
        ),
        rx.hstack(
            rx.text(row["label"], weight="bold", class_name="connection-label", word_break="break-word"),
            rx.badge(row["type_label"], color_scheme="gray", class_name="connection-type-badge"),
            rx.cond(row["shared"], rx.badge(rx.icon("users", size=12), "shared", color_scheme="blue",
                                            class_name="shared-badge")),
            spacing="2", align="center", wrap="wrap",
        ),
    )


def _status(row: ConnectionRow) -> rx.Component:
    return rx.vstack(
        rx.hstack(
            rx.badge(row["status"], color_scheme=rx.match(row["status"], *STATUS_COLORS),
                     class_name="connection-status", custom_attrs={"data-status": row["status"]}),
            rx.cond((row["status"] == "active") & (row["tested"] != "") & (row["test_message"] == ""),
                    rx.text(row["tested"], size="1", color_scheme="gray", class_name="connection-tested")),
            spacing="2", align="center", wrap="wrap",
        ),
        rx.cond(row["last_error"] != "",
                rx.text(row["last_error"], size="1", color_scheme="red", class_name="connection-last-error")),
        rx.cond(row["test_message"] != "",
                rx.text(rx.cond(row["test_ok"], "Test passed: ", "Test failed: "), row["test_message"], size="1",
                        color_scheme=rx.cond(row["test_ok"], "green", "red"), class_name="connection-test-result",
                        custom_attrs={"data-ok": rx.cond(row["test_ok"], "true", "false")})),
        spacing="1", width="100%",
    )


def _actions(row: ConnectionRow) -> rx.Component:
    testing = S.testing_id == row["id"]
    return rx.hstack(
        rx.button(rx.cond(testing, rx.spinner(size="1"), rx.icon("plug-zap", size=14)), "Test", size="1",
                  variant="soft", class_name="test-connection", disabled=testing,
                  on_click=S.test_connection(row["id"])),
        rx.cond(row["may_reconnect"],
                rx.button(rx.icon("log-in", size=14), "Reconnect", size="1", class_name="reconnect-connection",
                          on_click=S.reconnect(row["id"]))),
        rx.cond(row["mine"],
                rx.button(rx.icon("pencil", size=14), "Rename", size="1", variant="soft",
                          class_name="rename-connection", on_click=S.start_rename(row["id"], row["label"]))),
        rx.cond(row["may_share"],
                rx.button(rx.icon("users", size=14), rx.cond(row["shared"], "Stop sharing", "Share"), size="1",
                          variant="soft", class_name="share-connection",
                          on_click=S.set_shared(row["id"], ~row["shared"]))),
        rx.cond(row["may_delete"],
                rx.button(rx.icon("trash-2", size=14), "Delete", size="1", variant="soft", color_scheme="red",
                          class_name="delete-connection", on_click=S.ask_delete(row["id"], row["label"]))),
        spacing="2", wrap="wrap", justify="end",
    )


def _connection_card(row: ConnectionRow) -> rx.Component:
    return rx.card(
        rx.flex(
            rx.vstack(
                _label(row),
                rx.text(row["mandate"], " · owner: ", row["owner"], size="1", color_scheme="gray",
                        class_name="connection-owner"),
                _status(row),
                spacing="1", flex="1", min_width="16em",
            ),
            _actions(row),
            gap="1em", wrap="wrap", align="start", width="100%",
        ),
        width="100%", class_name="connection-row",
        custom_attrs={"data-label": row["label"], "data-id": row["id"]},
    )


def _delete_dialog() -> rx.Component:
    return rx.alert_dialog.root(
        rx.alert_dialog.content(
            rx.alert_dialog.title("Delete connection"),
            rx.alert_dialog.description(
                "Delete '", S.delete_label, "' with its stored credentials? Workflows and agents that use it fail "
                "until they are given another connection.",
            ),
            rx.hstack(
                rx.alert_dialog.cancel(rx.button("Cancel", variant="soft", on_click=S.cancel_delete)),
                rx.alert_dialog.action(rx.button("Delete", color_scheme="red", on_click=S.confirm_delete,
                                                 id="confirm-delete-connection")),
                justify="end", spacing="3", margin_top="1em",
            ),
        ),
        open=S.delete_id != "",
    )


def _list_section() -> rx.Component:
    return rx.vstack(
        rx.heading("Your connections", size="4"),
        rx.cond(
            S.connections.length() > 0,
            rx.vstack(rx.foreach(S.connections, _connection_card), id="connection-list", width="100%", spacing="2"),
            rx.cond(S.loaded, empty_state("plug", "No connections yet",
                                          "Add one below: workflows and agents can then work with your mail, "
                                          "files, tasks and issues through it.")),
        ),
        spacing="3", width="100%",
    )


def _messages() -> rx.Component:
    return rx.fragment(
        rx.cond(S.result_notice != "",
                rx.callout(S.result_notice, icon="check", color_scheme="green", id="connections-result", width="100%")),
        rx.cond(S.result_error != "",
                rx.callout(S.result_error, icon="triangle-alert", color_scheme="red", id="connections-result-error",
                           width="100%")),
        rx.cond(S.error != "",
                rx.callout(S.error, icon="triangle-alert", color_scheme="red", id="connections-error", width="100%")),
        rx.cond(S.notice != "",
                rx.callout(S.notice, icon="check", color_scheme="green", id="connections-notice", width="100%")),
    )


def connections_page() -> rx.Component:
    return page_shell(
        "Connections",
        rx.vstack(
            rx.text("Your accounts at outside systems (mailboxes, Microsoft 365, ClickUp, Jira …). Workflows and "
                    "agents use them with your rights there; their passwords and tokens are stored sealed and never "
                    "shown again. A mandate's administrators can share a connection with its members.",
                    color_scheme="gray"),
            _messages(),
            _list_section(),
            _add_section(),
            _delete_dialog(),
            width="100%", spacing="5",
        ),
    )
