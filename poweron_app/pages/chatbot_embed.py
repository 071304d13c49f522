"""The public embed page of a Chatbot: /embed/chatbot/[token], no sign-in and no shell (for an iframe)."""

import reflex as rx

from state.chatbot_embed import UNAVAILABLE, ChatbotEmbedState, EmbedMessage


def _message(message: EmbedMessage) -> rx.Component:
    mine = message["role"] == "user"
    return rx.box(
        rx.cond(mine, rx.text(message["text"], white_space="pre-wrap"), rx.markdown(message["text"])),
        class_name=rx.cond(mine, "embed-user-message", "embed-answer"),
        align_self=rx.cond(mine, "flex-end", "flex-start"), max_width="85%", padding="0.5em 0.8em",
        border_radius="10px", background_color=rx.cond(mine, rx.color("accent", 4), rx.color("gray", 3)),
    )


def _chat() -> rx.Component:
    return rx.vstack(
        rx.heading(ChatbotEmbedState.title, size="4", id="page-title"),
        rx.vstack(rx.foreach(ChatbotEmbedState.messages, _message), id="embed-messages", width="100%",
                  spacing="2", flex="1", overflow_y="auto"),
        rx.cond(ChatbotEmbedState.sending, rx.hstack(rx.spinner(size="1"), rx.text("…", size="2"))),
        rx.cond(ChatbotEmbedState.error != "",
                rx.callout(ChatbotEmbedState.error, icon="triangle-alert", color_scheme="red", id="embed-error",
                           width="100%")),
        rx.form(
            rx.hstack(
                rx.input(value=ChatbotEmbedState.prompt, on_change=ChatbotEmbedState.set_prompt, id="embed-input",
                         placeholder="Ask a question…", width="100%", disabled=ChatbotEmbedState.sending),
                rx.button("Send", type="submit", id="embed-send", disabled=ChatbotEmbedState.sending),
                width="100%",
            ),
            on_submit=ChatbotEmbedState.send, width="100%",
        ),
        width="100%", height="100%", spacing="3",
    )


def chatbot_embed_page() -> rx.Component:
    return rx.box(
        rx.match(
            ChatbotEmbedState.status,
            ("ready", _chat()),
            ("unavailable", rx.vstack(rx.heading("Chatbot", size="4", id="page-title"),
                                      rx.text(UNAVAILABLE, id="embed-unavailable", color_scheme="gray"))),
            rx.center(rx.spinner(), width="100%"),
        ),
        padding="1em", height="100vh", max_width="48em", margin="0 auto",
    )
