"""The public embed page of a Chatbot (/embed/chatbot/[token]): no sign-in, no shell.

Thin: the token, the rate limit and the run are backend.features.chatbot.embed's, the same function
the REST route `POST /api/chatbot/embed/{token}/messages` calls; the client address is the browser's.
"""

from __future__ import annotations

import asyncio
from typing import TypedDict

import reflex as rx

from backend.db import session_scope
from backend.errors import DomainError, NotFound
from backend.features.chatbot import embed
from backend.features.chatbot.interface import instance_for_token
from state.page import routed_id, user_message
from state.permissions import requires

UNAVAILABLE = "This chatbot link is not valid (wrong, rotated or switched off)."


class EmbedMessage(TypedDict):
    role: str
    text: str


def _ask(token: str, client: str, prompt: str, chat_key: str) -> embed.EmbedAnswer:
    with session_scope() as session:
        return embed.ask(session, token, client, prompt, chat_key or None)


class ChatbotEmbedState(rx.State):
    """What the embed page shows: the chatbot's name, the conversation, the prompt field."""

    status: str = "loading"  # loading | ready | unavailable
    title: str = ""
    messages: list[EmbedMessage] = []
    prompt: str = ""
    sending: bool = False
    error: str = ""
    _chat_key: str = ""

    def _token(self) -> str:
        return routed_id(self.router.url.path, "chatbot").strip()

    @rx.event
    @requires("public")
    def load(self):
        """on_load: whether the link is valid, and the chatbot's name."""
        self.messages, self.error, self._chat_key = [], "", ""
        with session_scope() as session:
            instance = instance_for_token(session, self._token())
            self.title = instance.label if instance else ""
        self.status = "ready" if self.title else "unavailable"

    @rx.event
    @requires("public")
    def set_prompt(self, value: str):
        self.prompt = value

    @rx.event(background=True)
    @requires("public")
    async def send(self, form_data: dict):
        """Ask: the visitor's message runs as the user who enabled the embed (rate-limited)."""
        del form_data  # the prompt is the input's value (self.prompt)
        async with self:
            prompt, token, key = self.prompt.strip(), self._token(), self._chat_key
            if not prompt or self.sending:
                return
            client = self.router.session.client_ip or "unknown"
            self.messages = [*self.messages, EmbedMessage(role="user", text=prompt)]
            self.prompt, self.sending, self.error = "", True, ""
        try:
            answer = await asyncio.to_thread(_ask, token, client, prompt, key)
        except NotFound:
            async with self:
                self.status, self.sending = "unavailable", False
            return
        except (embed.EmbedLimited, DomainError) as exc:
            async with self:
                self.error = str(exc) if isinstance(exc, embed.EmbedLimited) else user_message(exc)
                self.sending = False
            return
        async with self:
            self._chat_key = answer.chat_key
            text = answer.answer if answer.answer is not None else f"Sorry, no answer: {answer.error}"
            self.messages = [*self.messages, EmbedMessage(role="assistant", text=text)]
            self.sending = False
