"""The Chatbot page: the chats on the left (components/chat_list.py, as on the Workspace and the Coach
page: open, rename, delete), the open chat and the chat bar; for those who may configure the
instance, its settings (system prompt, data source, limits) behind "Settings"."""

import reflex as rx

from components import chat_list
from components.chat import stream_and_bar
from components.shell import empty_state, gated, page_shell
from state.chatbot import NO_USE_AGENT, ChatbotState, Option

TABLE_UPLOAD = "chatbot-table-upload"
XLSX = "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet"
EMPTY_CHAT = "Ask a question about the chatbot's data; its answer streams here."
EMPTY_CHAT_NO_PROVIDER = "The chatbot needs an AI provider, and none is configured on this server."


def chats_column() -> rx.Component:
    return rx.box(
        chat_list.chats_panel(ChatbotState),
        width="16em", min_width="12em", flex_shrink="0", max_height="calc(100vh - 8em)", overflow_y="auto",
        id="chatbot-chats",
    )


def _option(option: Option) -> rx.Component:
    return rx.select.item(option["label"], value=option["value"])


def settings_panel() -> rx.Component:
    return rx.card(
        rx.vstack(
            rx.heading("Settings", size="3"),
            rx.text("System prompt", size="2", weight="medium"),
            rx.text_area(value=ChatbotState.system_prompt, on_change=ChatbotState.set_system_prompt,
                         id="chatbot-system-prompt", width="100%", rows="4"),
            rx.text("Data source", size="2", weight="medium"),
            rx.select.root(
                rx.select.trigger(id="chatbot-data-source"),
                rx.select.content(rx.select.item("Uploaded tables (/tables)", value="tables"),
                                  rx.select.item("SQL connection", value="connection")),
                value=ChatbotState.data_source, on_change=ChatbotState.set_data_source,
            ),
            rx.cond(
                ChatbotState.data_source == "connection",
                rx.vstack(
                    rx.text("Connection", size="2", weight="medium"),
                    rx.cond(ChatbotState.connection_options.length() > 0,
                            rx.select.root(rx.select.trigger(placeholder="Choose a connection",
                                                             id="chatbot-connection"),
                                           rx.select.content(rx.foreach(ChatbotState.connection_options, _option)),
                                           value=ChatbotState.connection_id,
                                           on_change=ChatbotState.set_connection_id),
                            rx.text("You have no SQL connection: add one on the Connections page.", size="2",
                                    color_scheme="gray")),
                    rx.text("Allowed tables (comma-separated, table or schema.table)", size="2", weight="medium"),
                    rx.input(value=ChatbotState.allowed_tables, on_change=ChatbotState.set_allowed_tables,
                             id="chatbot-allowed-tables", width="100%"),
                    width="100%",
                ),
                rx.vstack(
                    rx.text("Tables: the CSV/XLSX files in the instance's /tables folder, each named after its file.",
                            size="2", color_scheme="gray"),
                    rx.foreach(ChatbotState.table_files, lambda name: rx.text(name, size="2", class_name="table-file")),
                    rx.upload.root(
                        rx.button(rx.icon("upload", size=14), "Upload a CSV/XLSX table", size="1", variant="soft",
                                  type="button"),
                        id=TABLE_UPLOAD, no_drag=True, accept={"text/csv": [".csv"], XLSX: [".xlsx"]},
                        on_drop=ChatbotState.upload_table(rx.upload_files(upload_id=TABLE_UPLOAD)),
                    ),
                    width="100%",
                ),
            ),
            rx.hstack(
                rx.vstack(rx.text("Row limit", size="2", weight="medium"),
                          rx.input(value=ChatbotState.row_limit, on_change=ChatbotState.set_row_limit,
                                   id="chatbot-row-limit", width="7em")),
                rx.vstack(rx.text("Time limit (s)", size="2", weight="medium"),
                          rx.input(value=ChatbotState.time_limit, on_change=ChatbotState.set_time_limit,
                                   id="chatbot-time-limit", width="7em")),
                spacing="4",
            ),
            rx.text(rx.cond(ChatbotState.embed_enabled, "Public embed: on", "Public embed: off"), size="1",
                    color_scheme="gray"),
            rx.button("Save settings", on_click=ChatbotState.save_settings, id="chatbot-save-settings"),
            width="100%", spacing="2",
        ),
        width="100%", id="chatbot-settings",
    )


def conversation() -> rx.Component:
    return rx.vstack(
        rx.hstack(
            rx.heading(rx.cond(ChatbotState.chat_title != "", ChatbotState.chat_title,
                               rx.cond(ChatbotState.can_use_agent, "New chat", "No chat open")), size="4",
                       id="chat-heading"),
            rx.spacer(),
            rx.cond(ChatbotState.can_configure,
                    rx.button(rx.icon("settings", size=14), "Settings", size="1", variant="soft",
                              on_click=ChatbotState.toggle_settings, id="chatbot-settings-toggle")),
            width="100%", align="center",
        ),
        rx.cond(ChatbotState.error != "",
                rx.callout(ChatbotState.error, icon="triangle-alert", color_scheme="red", id="chatbot-error",
                           width="100%")),
        rx.cond(ChatbotState.notice != "",
                rx.callout(ChatbotState.notice, icon="check", color_scheme="green", id="chatbot-notice",
                           width="100%")),
        rx.cond(ChatbotState.show_settings & ChatbotState.can_configure, settings_panel()),
        *stream_and_bar(ChatbotState, EMPTY_CHAT, EMPTY_CHAT_NO_PROVIDER, NO_USE_AGENT),
        flex="1", min_width="0", spacing="3", height="calc(100vh - 8em)",
    )


def chatbot_page() -> rx.Component:
    return page_shell(
        "Chatbot",
        gated(
            "nav_chatbot", "the Chatbot page",
            rx.cond(
                ChatbotState.loaded & (ChatbotState.instance_id == ""),
                empty_state("lock", "No Chatbot instance",
                            "You have no access to a Chatbot instance. Ask an administrator of your mandate to "
                            "give you a role in one."),
                rx.hstack(chats_column(), conversation(), chat_list.delete_dialog(ChatbotState),
                          width="100%", spacing="4", align="start"),
            ),
        ),
        instance=ChatbotState,
    )
