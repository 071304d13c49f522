"""The Workspace page: the UDB panel (chats, files, sources) on the left, the open chat and the chat bar.

What a user without the right to talk to the agent (a viewer) sees fits that: no "New" chat, no
chat bar and no "Attach" — the chats are there to read, and the page says so.
"""

import reflex as rx

from components.chat import chat_bar, chat_stream
from components.shell import empty_state, gated, page_shell
from poweron_app.pages.workspace_udb import udb_panel
from state.workspace import NO_USE_AGENT, ChatRow, WorkspaceState

EMPTY_CHAT = "Ask the agent anything; its answer streams here."
EMPTY_CHAT_READ_ONLY = "Open a chat on the left to read it."
EMPTY_CHAT_NO_PROVIDER = ("The agent needs an AI provider, and none is configured on this server (how to set one: "
                          "below). Files and chats can still be browsed.")


def _chat_entry(chat: ChatRow) -> rx.Component:
    is_open = WorkspaceState.chat_id == chat["id"]
    return rx.cond(
        WorkspaceState.rename_id == chat["id"],
        rx.hstack(
            rx.input(value=WorkspaceState.rename_value, on_change=WorkspaceState.set_rename_value,
                     id="chat-rename-input", auto_focus=True, size="1", width="100%"),
            rx.icon_button(rx.icon("check", size=14), size="1", on_click=WorkspaceState.save_rename,
                           id="chat-rename-save", title="Save"),
            rx.icon_button(rx.icon("x", size=14), size="1", variant="soft", on_click=WorkspaceState.cancel_rename,
                           title="Cancel"),
            width="100%", spacing="1",
        ),
        rx.hstack(
            rx.box(
                rx.text(chat["title"], size="2", weight=rx.cond(is_open, "bold", "regular"), trim="both",
                        class_name="chat-title", overflow="hidden", text_overflow="ellipsis", white_space="nowrap"),
                rx.text(chat["modified"], size="1", color_scheme="gray"),
                on_click=WorkspaceState.open_chat(chat["id"]),
                cursor="pointer", flex="1", min_width="0",
            ),
            rx.cond(chat["may_rename"],
                    rx.icon_button(rx.icon("pencil", size=12), size="1", variant="ghost", class_name="chat-rename",
                                   title="Rename", on_click=WorkspaceState.start_rename(chat["id"], chat["title"]))),
            rx.cond(chat["may_delete"],
                    rx.icon_button(rx.icon("trash-2", size=12), size="1", variant="ghost", color_scheme="red",
                                   class_name="chat-delete", title="Delete",
                                   on_click=WorkspaceState.ask_delete(chat["id"], chat["title"]))),
            width="100%", spacing="1", align="center",
            padding="0.4em 0.5em", border_radius="6px",
            background_color=rx.cond(is_open, rx.color("accent", 4), "transparent"),
            class_name="chat-item",
        ),
    )


def chats_panel() -> rx.Component:
    return rx.vstack(
        rx.hstack(
            rx.heading("Chats", size="3"),
            rx.spacer(),
            rx.cond(WorkspaceState.can_use_agent,
                    rx.button(rx.icon("plus", size=14), "New", size="1", variant="soft",
                              on_click=WorkspaceState.new_chat, id="chat-new")),
            width="100%", align="center",
        ),
        rx.cond(
            WorkspaceState.chats.length() > 0,
            rx.vstack(rx.foreach(WorkspaceState.chats, _chat_entry), id="chat-list", width="100%", spacing="1"),
            rx.text(rx.cond(WorkspaceState.can_use_agent, "No chats yet.", "No chats to read yet."), size="2",
                    color_scheme="gray", id="chat-list-empty"),
        ),
        width="100%", spacing="3",
    )


def delete_dialog() -> rx.Component:
    return rx.alert_dialog.root(
        rx.alert_dialog.content(
            rx.alert_dialog.title("Delete chat"),
            rx.alert_dialog.description(
                "Delete '", WorkspaceState.delete_title, "' with all its answers and traces? This cannot be undone.",
            ),
            rx.hstack(
                rx.alert_dialog.cancel(rx.button("Cancel", variant="soft", on_click=WorkspaceState.cancel_delete)),
                rx.alert_dialog.action(rx.button("Delete", color_scheme="red", on_click=WorkspaceState.confirm_delete,
                                                 id="confirm-chat-delete")),
                justify="end", spacing="3", margin_top="1em",
            ),
        ),
        open=WorkspaceState.delete_id != "",
    )


def conversation() -> rx.Component:
    return rx.vstack(
        rx.heading(rx.cond(WorkspaceState.chat_title != "", WorkspaceState.chat_title,
                           rx.cond(WorkspaceState.can_use_agent, "New chat", "No chat open")), size="4",
                   id="chat-heading"),
        rx.cond(WorkspaceState.error != "",
                rx.callout(WorkspaceState.error, icon="triangle-alert", color_scheme="red", id="workspace-error",
                           width="100%")),
        rx.cond(WorkspaceState.notice != "",
                rx.callout(WorkspaceState.notice, icon="check", color_scheme="green", id="workspace-notice",
                           width="100%")),
        chat_stream(WorkspaceState.messages, WorkspaceState.streaming, on_retry=WorkspaceState.retry,
                    on_decide=WorkspaceState.decide,
                    empty_text=rx.cond(WorkspaceState.can_use_agent,
                                       rx.cond(WorkspaceState.provider_configured, EMPTY_CHAT,
                                               EMPTY_CHAT_NO_PROVIDER),
                                       EMPTY_CHAT_READ_ONLY)),
        rx.cond(
            WorkspaceState.can_use_agent,
            chat_bar(WorkspaceState.send, WorkspaceState.stop, WorkspaceState.streaming,
                     WorkspaceState.disabled_reason, attachments=WorkspaceState.attachments,
                     on_remove_attachment=WorkspaceState.detach_file),
            # No prompt field for those who may not talk to the agent: only why.
            rx.text(rx.icon("eye", size=14), NO_USE_AGENT, id="chat-disabled-reason", size="2", color_scheme="gray",
                    display="flex", align_items="center", gap="0.4em"),
        ),
        flex="1", min_width="0", spacing="3", height="calc(100vh - 8em)",
    )


def workspace_page() -> rx.Component:
    return page_shell(
        "Workspace",
        gated(
            "nav_workspace", "the Workspace page",
            rx.cond(
                WorkspaceState.loaded & (WorkspaceState.instance_id == ""),
                empty_state("lock", "No Workspace instance",
                            "You have no access to a Workspace instance. Ask an administrator of your mandate to "
                            "give you a role in one."),
                rx.hstack(udb_panel(chats_panel()), conversation(), delete_dialog(), width="100%", spacing="4",
                          align="start"),
            ),
        ),
        instance=WorkspaceState,
    )
