"""The Chatbot page: the chats on the left, the open chat and the chat bar; for those who may
configure the instance, its settings (system prompt, data source, limits) behind "Settings"."""

import reflex as rx

from components.chat import chat_bar, chat_stream
from components.shell import empty_state, gated, page_shell
from state.chatbot import NO_USE_AGENT, ChatbotState, ChatRow, Option

TABLE_UPLOAD = "chatbot-table-upload"
XLSX = "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet"
EMPTY_CHAT = "Ask a question about the chatbot's data; its answer streams here."
EMPTY_CHAT_READ_ONLY = "Open a chat on the left to read it."
EMPTY_CHAT_NO_PROVIDER = "The chatbot needs an AI provider, and none is configured on this server."


def _chat_entry(chat: ChatRow) -> rx.Component:
    is_open = ChatbotState.chat_id == chat["id"]
    return rx.box(
        rx.text(chat["title"], size="2", weight=rx.cond(is_open, "bold", "regular"), class_name="chat-title",
                overflow="hidden", text_overflow="ellipsis", white_space="nowrap"),
        rx.text(chat["modified"], size="1", color_scheme="gray"),
        on_click=ChatbotState.open_chat(chat["id"]), cursor="pointer", width="100%", padding="0.4em 0.5em",
        border_radius="6px", background_color=rx.cond(is_open, rx.color("accent", 4), "transparent"),
        class_name="chat-item",
    )


def chats_panel() -> rx.Component:
    return rx.vstack(
        rx.hstack(
            rx.heading("Chats", size="3"),
            rx.spacer(),
            rx.cond(ChatbotState.can_use_agent,
                    rx.button(rx.icon("plus", size=14), "New", size="1", variant="soft",
                              on_click=ChatbotState.new_chat, id="chat-new")),
            width="100%", align="center",
        ),
        rx.cond(
            ChatbotState.chats.length() > 0,
            rx.vstack(rx.foreach(ChatbotState.chats, _chat_entry), id="chat-list", width="100%", spacing="1"),
            rx.text("No chats yet.", size="2", color_scheme="gray", id="chat-list-empty"),
        ),
        width="16em", min_width="12em", spacing="3",
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
        chat_stream(ChatbotState.messages, ChatbotState.streaming, on_retry=ChatbotState.retry,
                    on_decide=ChatbotState.decide,
                    empty_text=rx.cond(ChatbotState.can_use_agent,
                                       rx.cond(ChatbotState.provider_configured, EMPTY_CHAT, EMPTY_CHAT_NO_PROVIDER),
                                       EMPTY_CHAT_READ_ONLY)),
        rx.cond(
            ChatbotState.can_use_agent,
            chat_bar(ChatbotState.send, ChatbotState.stop, ChatbotState.streaming, ChatbotState.disabled_reason),
            rx.text(rx.icon("eye", size=14), NO_USE_AGENT, id="chat-disabled-reason", size="2", color_scheme="gray",
                    display="flex", align_items="center", gap="0.4em"),
        ),
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
                rx.hstack(chats_panel(), conversation(), width="100%", spacing="4", align="start"),
            ),
        ),
        instance=ChatbotState,
    )
