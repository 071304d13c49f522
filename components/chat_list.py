"""The chats list of a page with an agent chat (the Workspace, the CommCoach, the Chatbot): each chat with its
title and last change, opened by a click, renamed inline and deleted after a confirmation — the
buttons only where the row says the user may. Each function takes the page's state class, which
mixes state.chat_list.ChatListMixin in (and state.page.RenameMixin).
"""

import reflex as rx

from components.shell import PHONE, TAP
from state.chat_list import ChatRow

# On a phone a chat's line, and its Rename and Delete buttons, are at least `TAP` high (and the
# title keeps its whole line height: trimmed, its letters' tops were cut off).
ITEM_PHONE = {PHONE: {"min_height": TAP, "& button": {"min_width": TAP, "min_height": TAP},
                      "& .chat-title::before, & .chat-title::after": {"content": "none"}}}


def _chat_entry(state, chat: ChatRow) -> rx.Component:
    is_open = state.chat_id == chat["id"]
    return rx.cond(
        state.rename_id == chat["id"],
        rx.hstack(
            rx.input(value=state.rename_value, on_change=state.set_rename_value,
                     id="chat-rename-input", auto_focus=True, size="1", width="100%"),
            rx.icon_button(rx.icon("check", size=14), size="1", on_click=state.save_rename,
                           id="chat-rename-save", title="Save"),
            rx.icon_button(rx.icon("x", size=14), size="1", variant="soft", on_click=state.cancel_rename,
                           title="Cancel"),
            width="100%", spacing="1",
        ),
        rx.hstack(
            rx.box(
                rx.text(chat["title"], size="2", weight=rx.cond(is_open, "bold", "regular"), trim="both",
                        class_name="chat-title", overflow="hidden", text_overflow="ellipsis", white_space="nowrap"),
                rx.text(chat["modified"], size="1", color_scheme="gray"),
                on_click=state.open_chat(chat["id"]),
                cursor="pointer", flex="1", min_width="0",
            ),
            rx.cond(chat["may_rename"],
                    rx.icon_button(rx.icon("pencil", size=12), size="1", variant="ghost", class_name="chat-rename",
                                   title="Rename", on_click=state.start_rename(chat["id"], chat["title"]))),
            rx.cond(chat["may_delete"],
                    rx.icon_button(rx.icon("trash-2", size=12), size="1", variant="ghost", color_scheme="red",
                                   class_name="chat-delete", title="Delete",
                                   on_click=state.ask_delete(chat["id"], chat["title"]))),
            width="100%", spacing="1", align="center",
            padding="0.4em 0.5em", border_radius="6px",
            background_color=rx.cond(is_open, rx.color("accent", 4), "transparent"),
            class_name="chat-item",
            style=ITEM_PHONE,
        ),
    )


def chats_panel(state) -> rx.Component:
    """The "Chats" heading with "New" (for who may talk to the agent) and the list of `state.chats`."""
    return rx.vstack(
        rx.hstack(
            rx.heading("Chats", size="3"),
            rx.spacer(),
            rx.cond(state.can_use_agent,
                    rx.button(rx.icon("plus", size=14), "New", size="1", variant="soft",
                              on_click=state.new_chat, id="chat-new")),
            width="100%", align="center",
        ),
        rx.cond(
            state.chats.length() > 0,
            rx.vstack(rx.foreach(state.chats, lambda chat: _chat_entry(state, chat)), id="chat-list", width="100%",
                      spacing="1"),
            rx.text(rx.cond(state.can_use_agent, "No chats yet.", "No chats to read yet."), size="2",
                    color_scheme="gray", id="chat-list-empty"),
        ),
        width="100%", spacing="3",
    )


def delete_dialog(state) -> rx.Component:
    """The confirmation of `state.ask_delete`."""
    return rx.alert_dialog.root(
        rx.alert_dialog.content(
            rx.alert_dialog.title("Delete chat"),
            rx.alert_dialog.description(
                "Delete '", state.delete_title, "' with all its answers and traces? This cannot be undone.",
            ),
            rx.hstack(
                rx.alert_dialog.cancel(rx.button("Cancel", variant="soft", on_click=state.cancel_delete)),
                rx.alert_dialog.action(rx.button("Delete", color_scheme="red", on_click=state.confirm_delete,
                                                 id="confirm-chat-delete")),
                justify="end", spacing="3", margin_top="1em",
            ),
        ),
        open=state.delete_id != "",
    )
