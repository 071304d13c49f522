"""The Coach page (CommCoach): the chats on the left, the open chat with its session summary, the chat bar.

The same chats list (components/chat_list.py), ChatStream and ChatBar (components/chat.py) as the
Workspace, without files and sources. "Summarise session" writes the open chat's summary with the
AI model (it replaces the one shown); "Persona" shows the coach's system prompt, which those who
may configure the instance edit there. A viewer reads the chats and the summaries, nothing more.
"""

import reflex as rx

from components import chat_list
from components.chat import stream_and_bar
from components.shell import empty_state, gated, page_shell
from state.coach import NO_USE_AGENT, CoachState

EMPTY_CHAT = ("Tell the coach what you want to get better at — a talk you are preparing, an e-mail to phrase, a "
              "difficult conversation to rehearse. The coach's answer streams here.")
EMPTY_CHAT_NO_PROVIDER = "The coach needs an AI provider, and none is configured on this server."


def summary_card() -> rx.Component:
    """The open chat's session summary, when it has one."""
    return rx.cond(
        CoachState.summary != "",
        rx.card(
            rx.hstack(rx.icon("notebook-pen", size=16), rx.text("Session summary", weight="bold", size="2"),
                      align="center", spacing="2"),
            rx.box(rx.markdown(CoachState.summary), id="coach-summary-text", font_size="0.9em",
                   style={"& p": {"margin": "0.35em 0 0.1em"}, "& ul": {"margin": "0 0 0.2em", "paddingLeft": "1.4em"},
                          "& li": {"margin": "0"}}),
            id="coach-summary", width="100%", max_height="18em", overflow_y="auto", flex_shrink="0",
        ),
    )


def header() -> rx.Component:
    return rx.hstack(
        rx.heading(rx.cond(CoachState.chat_title != "", CoachState.chat_title,
                           rx.cond(CoachState.can_use_agent, "New coaching chat", "No chat open")), size="4",
                   id="chat-heading", flex="1", min_width="0"),
        rx.cond(
            (CoachState.chat_id != "") & CoachState.can_summarise,
            rx.button(rx.cond(CoachState.summarising, rx.spinner(size="1"), rx.icon("notebook-pen", size=14)),
                      rx.cond(CoachState.summary != "", "Summarise again", "Summarise session"),
                      size="2", variant="soft", id="coach-summarise", on_click=CoachState.summarise,
                      disabled=CoachState.summarising | CoachState.streaming),
        ),
        rx.button(rx.icon("user-cog", size=14), "Persona", size="2", variant="outline", id="coach-persona",
                  on_click=CoachState.open_settings,
                  title="The coach's persona and goal (the instance's system prompt)"),
        width="100%", align="center", spacing="2",
    )


def settings_dialog() -> rx.Component:
    """The coach's persona: editable by who may configure the instance, read only for everyone else."""
    return rx.dialog.root(
        rx.dialog.content(
            rx.dialog.title("Coach persona"),
            rx.dialog.description(
                rx.cond(CoachState.can_configure,
                        "How the coach behaves in this instance: its persona and goal. The coach's next answer "
                        "uses what you save here.",
                        "How the coach behaves in this instance. Only its administrators change it."),
                size="2", margin_bottom="0.75em",
            ),
            rx.cond(CoachState.persona_is_default,
                    rx.badge("default persona", color_scheme="gray", margin_bottom="0.5em",
                             id="coach-persona-default")),
            rx.text_area(value=CoachState.persona_draft, on_change=CoachState.set_persona_draft,
                         read_only=~CoachState.can_configure, id="coach-persona-input", rows="12", width="100%"),
            rx.cond(CoachState.error != "",
                    rx.callout(CoachState.error, icon="triangle-alert", color_scheme="red", margin_top="0.5em")),
            rx.hstack(
                rx.cond(CoachState.can_configure & ~CoachState.persona_is_default,
                        rx.button("Restore default", variant="soft", color_scheme="gray",
                                  on_click=CoachState.restore_persona, id="coach-persona-restore")),
                rx.spacer(),
                rx.button("Close", variant="soft", on_click=CoachState.close_settings, id="coach-persona-close"),
                rx.cond(CoachState.can_configure,
                        rx.button("Save", on_click=CoachState.save_persona, id="coach-persona-save")),
                spacing="3", margin_top="1em", width="100%",
            ),
            max_width="44em",
        ),
        open=CoachState.settings_open,
        on_open_change=CoachState.settings_open_changed,
    )


def conversation() -> rx.Component:
    return rx.vstack(
        header(),
        rx.cond(CoachState.error != "",
                rx.callout(CoachState.error, icon="triangle-alert", color_scheme="red", id="coach-error",
                           width="100%")),
        rx.cond(CoachState.notice != "",
                rx.callout(CoachState.notice, icon="check", color_scheme="green", id="coach-notice", width="100%")),
        summary_card(),
        *stream_and_bar(CoachState, EMPTY_CHAT, EMPTY_CHAT_NO_PROVIDER, NO_USE_AGENT, placeholder="Tell the coach…"),
        flex="1", min_width="0", spacing="3", height="calc(100vh - 8em)",
    )


def chats_column() -> rx.Component:
    return rx.box(
        chat_list.chats_panel(CoachState),
        width="18em", flex_shrink="0", padding_right="1em", border_right=f"1px solid {rx.color('gray', 4)}",
        max_height="calc(100vh - 8em)", overflow_y="auto", id="coach-chats",
    )


def coach_page() -> rx.Component:
    return page_shell(
        "Coach",
        gated(
            "nav_commcoach", "the Coach page",
            rx.cond(
                CoachState.loaded & (CoachState.instance_id == ""),
                empty_state("lock", "No CommCoach instance",
                            "You have no access to a CommCoach instance. Ask an administrator of your mandate to "
                            "create one or give you a role in one."),
                rx.hstack(chats_column(), conversation(), chat_list.delete_dialog(CoachState), settings_dialog(),
                          width="100%", spacing="4", align="start"),
            ),
        ),
        instance=CoachState,
    )
