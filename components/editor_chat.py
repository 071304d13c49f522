"""The Graphical Editor's AI chat sidebar (UC-4): the open chat's stream and the chat bar of
components/chat.py, under a header to start a new chat or reopen one of the user's chats."""

from __future__ import annotations

import reflex as rx

from components.chat import chat_bar, chat_stream

EMPTY_TEXT = ("Ask the assistant to change this workflow (\"add a 5 second wait after the start\") or to "
              "explain it; its changes appear on the canvas and Undo takes them back.")


def _chat_menu(state) -> rx.Component:
    """The user's chats in this editor instance, newest first; one click reopens one."""
    return rx.menu.root(
        rx.menu.trigger(
            rx.icon_button(rx.icon("history", size=16), variant="ghost", size="2", title="Earlier chats",
                           id="editor-chat-history", disabled=state.streaming | (state.chats.length() == 0)),
        ),
        rx.menu.content(
            rx.foreach(
                state.chats,
                lambda chat: rx.menu.item(
                    rx.hstack(rx.text(chat["title"], trim="end", max_width="16em"),
                              rx.text(chat["modified"], size="1", color_scheme="gray"),
                              justify="between", width="100%", spacing="3"),
                    on_click=state.open_editor_chat(chat["id"]),
                    class_name="editor-chat-entry",
                ),
            ),
            max_height="24em",
            overflow_y="auto",
        ),
    )


def _header(state) -> rx.Component:
    return rx.hstack(
        rx.icon("sparkles", size=16),
        rx.text(rx.cond(state.chat_title != "", state.chat_title, "AI assistant"), weight="medium", size="2",
                trim="end", flex="1", min_width="0", id="editor-chat-title"),
        _chat_menu(state),
        rx.button(rx.icon("plus", size=14), "New chat", size="1", variant="soft", id="editor-chat-new",
                  on_click=state.new_editor_chat, disabled=state.streaming),
        width="100%",
        align="center",
        spacing="2",
    )


def editor_chat_panel(state) -> rx.Component:
    """The chat column of the editor's right sidebar; `state` is the page's state class
    (state.editor.EditorState, with state.editor_chat.EditorChatMixin mixed in)."""
    return rx.vstack(
        _header(state),
        rx.divider(),
        rx.cond(
            ~state.provider_configured,
            rx.callout("The AI assistant needs an AI provider, and none is configured on this server (how to "
                       "set one: below). Everything else in the editor works without one.",
                       icon="info", color_scheme="amber", size="1", id="editor-chat-no-provider", width="100%"),
        ),
        chat_stream(state.messages, state.streaming, empty_text=EMPTY_TEXT, on_retry=state.retry,
                    on_decide=state.decide),
        chat_bar(state.send, state.stop, state.streaming, state.disabled_reason,
                 placeholder="Ask the assistant about this workflow…"),
        id="editor-chat",
        width="100%",  # the sidebar (about 380 px) sets the width
        height="100%",
        min_height="0",
        spacing="3",
        padding="0.75em",
    )
