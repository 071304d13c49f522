"""The Workspace page: the UDB panel (chats, files, sources) on the left, the open chat and the chat bar.

What a user without the right to talk to the agent (a viewer) sees fits that: no "New" chat, no
chat bar and no "Attach" — the chats are there to read, and the page says so.
"""

import reflex as rx

from components import chat_list
from components.chat import stream_and_bar
from components.shell import PHONE, TAP, empty_state, gated, page_shell
from poweron_app.pages.workspace_udb import udb_panel
from state.workspace import NO_USE_AGENT, WorkspaceState

EMPTY_CHAT = "Ask the agent anything; its answer streams here."
EMPTY_CHAT_NO_PROVIDER = ("The agent needs an AI provider, and none is configured on this server (how to set one: "
                          "below). Files and chats can still be browsed.")


# On a phone: the UDB panel (chats, files, sources) above the conversation, full width and at most
# a third of the screen high; the conversation below fills the screen under the top bar.
PHONE_LAYOUT = {PHONE: {
    "flex_direction": "column",
    "& #udb": {"width": "100%", "max_height": "32dvh", "padding_right": "0", "border_right": "none",
               "border_bottom": "1px solid var(--gray-a5)", "padding_bottom": "0.5em"},
    "& #udb [role=tab]": {"min_height": TAP, "flex": "1"},
    "& #chat-new": {"min_height": TAP},
    "& #conversation": {"width": "100%", "height": "calc(100dvh - 6.5em)", "min_height": "24em"},
    "& #chat-heading": {"font_size": "var(--font-size-4)", "display": "-webkit-box", "-webkit-line-clamp": "2",
                        "-webkit-box-orient": "vertical", "overflow": "hidden"},
}}


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
        *stream_and_bar(WorkspaceState, EMPTY_CHAT, EMPTY_CHAT_NO_PROVIDER, NO_USE_AGENT,
                        attachments=WorkspaceState.attachments, on_remove_attachment=WorkspaceState.detach_file),
        flex="1", min_width="0", spacing="3", height="calc(100vh - 8em)", id="conversation",
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
                rx.hstack(udb_panel(chat_list.chats_panel(WorkspaceState)), conversation(),
                          chat_list.delete_dialog(WorkspaceState), width="100%", spacing="4",
                          align="start", style=PHONE_LAYOUT),
            ),
        ),
        instance=WorkspaceState,
    )
