"""The chat parts every page with an agent uses: the ChatBar (prompt input) and the ChatStream
(the messages: prompts, streamed answers, tool cards, escalations, sub-agents, guards, usage).

Both take their data and event handlers as arguments, so the Workspace and the Editor's sidebar
share them unchanged. Items are :class:`state.chat_items.ChatItem` dicts.
"""

from __future__ import annotations

import reflex as rx

from components.shell import PHONE, TAP
from state.chat_items import ChatItem

# On a phone: Send and Stop at least `TAP` high, and a 16 px prompt (phones zoom into smaller text
# fields when they get the focus).
BAR_PHONE = {PHONE: {"& #chat-send, & #chat-stop": {"min_height": TAP, "flex_shrink": "0"},
                     "& #chat-input": {"font_size": "16px"}}}
# On a phone the buttons in the conversation (an approval's Approve / Decline, Retry) are at least
# `TAP` high, and a tool card's summary gets room around it.
STREAM_PHONE = {PHONE: {"& .approval-approve, & .approval-decline, & .chat-retry": {"min_height": TAP},
                        "& summary": {"padding": "0.5em 0"}}}


def _attachment_chip(path, on_remove) -> rx.Component:
    return rx.badge(
        rx.icon("paperclip", size=12),
        rx.text(path, class_name="attachment-path"),
        rx.icon_button(rx.icon("x", size=10), size="1", variant="ghost", type="button", title="Remove",
                       class_name="attachment-remove", on_click=on_remove(path)),
        class_name="attachment-chip", variant="soft", size="2", radius="full", gap="0.3em",
    )


def chat_bar(on_submit, on_stop, streaming, disabled_reason, placeholder: str = "Ask the agent…",
             attachments=None, on_remove_attachment=None) -> rx.Component:
    """The prompt input: grows with its text, Enter sends, Shift+Enter breaks the line.

    Args:
        on_submit: Event handler taking the form data ({"prompt": text}).
        on_stop: Event handler that stops the streaming answer.
        streaming: Bool var: an answer is streaming (Send is replaced by Stop).
        disabled_reason: Str var: why nothing can be sent ("" when it can); shown under the bar.
        placeholder: The input's placeholder.
        attachments: Optional list[str] var: paths of the attached files, shown as removable chips.
        on_remove_attachment: Event handler taking a path: removes that chip.
    """
    disabled = disabled_reason != ""
    chips = rx.fragment()
    if attachments is not None and on_remove_attachment is not None:
        chips = rx.cond(
            attachments.length() > 0,
            rx.hstack(rx.foreach(attachments, lambda path: _attachment_chip(path, on_remove_attachment)),
                      id="chat-attachments", wrap="wrap", spacing="1", width="100%"),
        )
    return rx.vstack(
        chips,
        rx.form(
            rx.hstack(
                rx.text_area(
                    name="prompt", id="chat-input", placeholder=placeholder, enter_key_submit=True,
                    auto_height=True, rows="2", max_height="14em", disabled=disabled, width="100%",
                    resize="none",
                ),
                rx.cond(
                    streaming,
                    rx.button(rx.icon("square", size=16), "Stop", type="button", on_click=on_stop, id="chat-stop",
                              color_scheme="red", variant="soft"),
                    rx.button(rx.icon("send-horizontal", size=16), "Send", type="submit", id="chat-send",
                              disabled=disabled),
                ),
                width="100%",
                align="end",
                spacing="2",
            ),
            on_submit=on_submit,
            reset_on_submit=False,
            width="100%",
        ),
        rx.cond(
            disabled,
            rx.text(rx.icon("info", size=14), disabled_reason, id="chat-disabled-reason", size="2",
                    color_scheme="gray", display="flex", align_items="center", gap="0.4em"),
            rx.text("Enter sends · Shift+Enter for a new line", size="1", color_scheme="gray"),
        ),
        width="100%",
        spacing="1",
        style=BAR_PHONE,
    )


def _status_badge(status) -> rx.Component:
    return rx.match(
        status,
        ("ok", rx.badge("ok", color_scheme="green", variant="soft", class_name="card-status")),
        ("failed", rx.badge("failed", color_scheme="red", variant="soft", class_name="card-status")),
        ("running", rx.badge(rx.spinner(size="1"), "running", variant="soft", class_name="card-status")),
        rx.fragment(),
    )


def _pre(text) -> rx.Component:
    return rx.code_block(text, language="json", wrap_long_lines=True, font_size="0.8em", width="100%")


def _user_message(message: ChatItem) -> rx.Component:
    return rx.box(
        rx.text(message["text"], white_space="pre-wrap"),
        class_name="user-message",
        align_self="end",
        max_width="80%",
        style={PHONE: {"overflow_wrap": "anywhere"}},
        padding="0.6em 0.9em",
        border_radius="10px",
        background_color=rx.color("accent", 3),
    )


# Code in answers comes with a copy button (Reflex 0.10 renders fenced code through "pre").
_MARKDOWN_COMPONENTS = {"pre": lambda value, **props: rx.code_block(value, margin_y="1em", wrap_long_lines=True,
                                                                   can_copy=True, **props)}


def _assistant_message(message: ChatItem) -> rx.Component:
    return rx.box(rx.markdown(message["text"], component_map=_MARKDOWN_COMPONENTS), class_name="assistant-message",
                  width="100%", style={PHONE: {"min_width": "0", "overflow_wrap": "anywhere"}})


def _tool_card(message: ChatItem) -> rx.Component:
    return rx.box(
        rx.el.details(
            rx.el.summary(
                rx.hstack(rx.icon("wrench", size=14), rx.text("Tool ", rx.code(message["name"]), size="2"),
                          _status_badge(message["status"]),
                          rx.text(message["text"], size="1", color_scheme="gray", class_name="tool-duration"),
                          spacing="2", align="center", display="inline-flex"),
                cursor="pointer",
            ),
            rx.vstack(
                rx.cond(message["detail"] != "",
                        rx.vstack(rx.text("Arguments", size="1", color_scheme="gray"), _pre(message["detail"]),
                                  width="100%", spacing="1")),
                rx.cond(message["result"] != "",
                        rx.vstack(rx.text("Result", size="1", color_scheme="gray"),
                                  rx.text(message["result"], size="1", white_space="pre-wrap",
                                          class_name="tool-result", word_break="break-all"),
                                  width="100%", spacing="1")),
                spacing="2", padding_top="0.5em", width="100%",
            ),
        ),
        class_name="tool-card",
        width="100%",
        padding="0.5em 0.75em",
        border=f"1px solid {rx.color('gray', 5)}",
        border_radius="8px",
    )


def _escalation_card(message: ChatItem) -> rx.Component:
    return rx.callout.root(
        rx.callout.icon(rx.icon("package-plus", size=16)),
        rx.callout.text(
            rx.cond(message["status"] == "failed", "Toolbox refused: ", "Toolbox requested: "),
            rx.text.strong(message["name"], class_name="escalation-toolbox"),
            rx.cond(message["text"] != "",
                    rx.fragment(" — ", rx.text(message["text"], as_="span", font_style="italic",
                                                class_name="escalation-reason"))),
            rx.cond(message["detail"] != "", rx.text(" Tools: ", message["detail"], size="1", color_scheme="gray")),
        ),
        class_name="escalation-card",
        color_scheme=rx.cond(message["status"] == "failed", "orange", "blue"),
        size="1",
        width="100%",
    )


def _subagent_card(message: ChatItem) -> rx.Component:
    return rx.box(
        rx.el.details(
            rx.el.summary(
                rx.hstack(rx.icon("bot", size=14), rx.text("Asked the data agent of ", rx.code(message["name"]),
                                                           size="2"),
                          _status_badge(message["status"]), spacing="2", align="center", display="inline-flex"),
                cursor="pointer",
            ),
            rx.text(message["text"], size="2", white_space="pre-wrap", padding_top="0.4em"),
            rx.cond(message["result"] != "", rx.text(message["result"], size="1", white_space="pre-wrap",
                                                     color_scheme="gray")),
        ),
        class_name="subagent-card",
        width="100%",
        padding="0.5em 0.75em",
        border=f"1px dashed {rx.color('gray', 6)}",
        border_radius="8px",
    )


def _approval_card(message: ChatItem, on_decide) -> rx.Component:
    """A tool call waiting for the user's approval: the tool, its arguments, the agent's reason;
    Approve / Decline while pending (with `on_decide(run_id, approved)`), else its outcome."""
    pending = message["status"] == "pending"
    buttons = rx.fragment()
    if on_decide is not None:
        buttons = rx.cond(pending, rx.hstack(
            rx.button(rx.icon("check", size=14), "Approve", size="1", class_name="approval-approve",
                      on_click=on_decide(message["run_id"], True)),
            rx.button(rx.icon("x", size=14), "Decline", size="1", variant="soft", color_scheme="gray",
                      class_name="approval-decline", on_click=on_decide(message["run_id"], False)),
            spacing="2"))
    return rx.callout.root(
        rx.callout.icon(rx.icon("shield-question", size=16)),
        rx.vstack(
            rx.hstack(rx.text(rx.cond(pending, "Waiting for your approval: ", "Approval: "), size="2"),
                      rx.text.strong(message["name"], class_name="approval-tool", size="2"),
                      rx.cond(pending, rx.fragment(),
                              rx.badge(rx.cond(message["result"] != "", message["result"], message["status"]),
                                       class_name="approval-outcome", variant="soft",
                                       color_scheme=rx.cond(message["status"] == "approved", "green", "orange"))),
                      spacing="1", align="center", wrap="wrap"),
            rx.cond(message["text"] != "", rx.text(message["text"], size="2", font_style="italic",
                                                   class_name="approval-reason")),
            rx.cond(message["detail"] != "", _pre(message["detail"])),
            buttons,
            spacing="2", width="100%",
        ),
        class_name="approval-card", custom_attrs={"data-status": message["status"]},
        color_scheme=rx.cond(pending, "amber", "gray"), size="1", width="100%",
    )


def _notice(message: ChatItem, icon: str, color: str, class_name: str) -> rx.Component:
    return rx.callout(message["text"], icon=icon, color_scheme=color, size="1", class_name=class_name,
                      width="100%")


def _error(message: ChatItem, on_retry) -> rx.Component:
    """An error in place; with `on_retry`, a button that sends the last prompt again."""
    if on_retry is None:
        return _notice(message, "triangle-alert", "red", "chat-error")
    return rx.callout.root(
        rx.callout.icon(rx.icon("triangle-alert", size=16)),
        rx.callout.text(message["text"]),
        rx.button(rx.icon("rotate-ccw", size=14), "Retry", size="1", variant="soft", on_click=on_retry,
                  class_name="chat-retry", width="fit-content"),
        color_scheme="red", size="1", class_name="chat-error", width="100%",
    )


def chat_item(message: ChatItem, on_retry=None, on_decide=None) -> rx.Component:
    return rx.match(
        message["kind"],
        ("user", _user_message(message)),
        ("assistant", _assistant_message(message)),
        ("tool", _tool_card(message)),
        ("escalation", _escalation_card(message)),
        ("subagent", _subagent_card(message)),
        ("guard", _notice(message, "shield-alert", "amber", "guard-card")),
        ("approval", _approval_card(message, on_decide)),
        ("preselected", rx.text(rx.icon("package-check", size=13), message["text"], size="1", color_scheme="gray",
                                class_name="preselected-line", display="flex", align_items="center",
                                gap="0.3em")),
        ("usage", rx.text(message["text"], size="1", color_scheme="gray", class_name="usage-line")),
        ("error", _error(message, on_retry)),
        ("cancelled", _notice(message, "circle-stop", "gray", "chat-cancelled")),
        rx.fragment(),
    )


def chat_stream(messages, streaming, empty_text: str | rx.Var = "Ask the agent anything; its answer streams here.",
                on_retry=None, on_decide=None) -> rx.Component:
    """The conversation: every item in order, a spinner while the answer streams; errors offer
    `on_retry` (send the last prompt again) when given, approval cards `on_decide(run_id,
    approved)`. `empty_text` (a text or a str var) stands in for an empty conversation."""
    return rx.vstack(
        rx.cond(
            messages.length() > 0,
            rx.foreach(messages, lambda message: chat_item(message, on_retry, on_decide)),
            rx.text(empty_text, color_scheme="gray", id="chat-empty"),
        ),
        rx.cond(streaming, rx.hstack(rx.spinner(size="2"), rx.text("working…", size="2", color_scheme="gray"),
                                     id="chat-streaming", align="center")),
        id="chat-stream",
        width="100%",
        spacing="3",
        align="start",
        flex="1",
        overflow_y="auto",
        style=STREAM_PHONE,
    )


def stream_and_bar(state, empty_text: str, no_provider_text: str, no_agent_reason: str,
                   read_only_text: str = "Open a chat on the left to read it.",
                   **bar_options) -> tuple[rx.Component, rx.Component]:
    """The ChatStream and the ChatBar of a page whose state mixes state.agent_chat.AgentChatMixin in
    (the Workspace, the CommCoach, the Chatbot); put them in the page's column with `*`.

    The empty conversation says `empty_text`, or `no_provider_text` without an AI provider, or
    `read_only_text` to who may not talk to the agent; they see `no_agent_reason` instead of the
    bar. `bar_options` go to :func:`chat_bar` (placeholder, attachments, on_remove_attachment).
    """
    stream = chat_stream(state.messages, state.streaming, on_retry=state.retry, on_decide=state.decide,
                         empty_text=rx.cond(state.can_use_agent,
                                            rx.cond(state.provider_configured, empty_text, no_provider_text),
                                            read_only_text))
    bar = rx.cond(
        state.can_use_agent,
        chat_bar(state.send, state.stop, state.streaming, state.disabled_reason, **bar_options),
        # No prompt field for those who may not talk to the agent: only why.
        rx.text(rx.icon("eye", size=14), no_agent_reason, id="chat-disabled-reason", size="2", color_scheme="gray",
                display="flex", align_items="center", gap="0.4em"),
    )
    return stream, bar
