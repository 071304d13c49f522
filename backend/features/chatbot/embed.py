"""The Chatbot's public embed: a visitor with the instance's link token asks, nobody signs in.

A message runs as the user who enabled the embed (their rights still apply: when they lose the
right to use the chatbot, the embed stops working), with a stricter configuration than the
chatbot's page: only the `chatbot` toolbox (no files, no web). Messages are limited per token
and client address (POWERON_CHATBOT_EMBED_LIMIT messages per POWERON_CHATBOT_EMBED_WINDOW_SECONDS,
default 20 per 600 s; counted in this process). A conversation is continued with the `chatKey` an
answer returns: the chat's id signed with the token, so only the holder of the token continues it
and rotating the token ends every conversation.
"""

from __future__ import annotations

import hashlib
import hmac
import math
import os
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass

from sqlmodel import Session

from backend.agent.config import profile
from backend.agent.runner import AgentRunner
from backend.db import get_engine
from backend.db.models import FeatureInstance, User
from backend.errors import Forbidden, NotFound
from backend.features.chatbot.config import EMBED
from backend.features.chatbot.interface import PROFILE, ChatbotInterface, instance_for_token
from backend.rbac.access import AccessContext

EMBED_TOOLBOXES = ["chatbot"]


class EmbedLimited(Exception):  # noqa: N818 - a limit, answered 429
    """Too many messages from one client with one token; `retry_after_seconds` says how long to wait."""

    def __init__(self, retry_after_seconds: int, limit: int, window: float):
        self.retry_after_seconds = retry_after_seconds
        super().__init__(f"Too many messages: at most {limit} per {window:g} seconds from one address. "
                         f"Try again in {retry_after_seconds} seconds.")


def _limits() -> tuple[int, float]:
    def number(name: str, default: float) -> float:
        try:
            value = float(os.environ.get(name, "") or default)
        except ValueError:
            return default
        return value if value > 0 else default

    return int(number("POWERON_CHATBOT_EMBED_LIMIT", 20)), number("POWERON_CHATBOT_EMBED_WINDOW_SECONDS", 600)


class RateLimiter:
    """A sliding window of message times per key (token hash, client address)."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._seen: dict[tuple[str, str], deque[float]] = {}
        self._lock = threading.Lock()

    def take(self, key: tuple[str, str]) -> None:
        """Count one message for `key`, or raise EmbedLimited with the seconds to wait."""
        limit, window = _limits()
        now = self._clock()
        with self._lock:
            times = self._seen.setdefault(key, deque())
            while times and times[0] <= now - window:
                times.popleft()
            if len(times) >= limit:
                raise EmbedLimited(max(1, math.ceil(times[0] + window - now)), limit, window)
            times.append(now)
            if len(self._seen) > 10_000:  # forget idle keys
                for stale in [k for k, v in self._seen.items() if not v or v[-1] <= now - window]:
                    del self._seen[stale]


LIMITER = RateLimiter()


@dataclass(frozen=True)
class EmbedAnswer:
    answer: str | None
    chat_key: str
    error: str | None


def chat_key(token: str, chat_id: str) -> str:
    return f"{chat_id}.{hmac.new(token.encode(), chat_id.encode(), hashlib.sha256).hexdigest()[:32]}"


def _chat_of(token: str, key: str | None) -> str | None:
    if not key:
        return None
    chat_id, _, _signature = key.partition(".")
    if not chat_id or not hmac.compare_digest(chat_key(token, chat_id), key):
        raise NotFound("chat not found")
    return chat_id


def ask(session: Session, token: str, client: str, prompt: object, key: str | None) -> EmbedAnswer:
    """Answer one visitor message through the embed of `token`.

    Raises:
        NotFound: a wrong, rotated or revoked token, a chat key not of this token, or an enabling user who
            may no longer use the chatbot.
        EmbedLimited: too many messages from this client with this token.
        InvalidInput: a bad prompt.
    """
    instance = instance_for_token(session, token)
    if instance is None:
        raise NotFound("this chatbot link is not valid (wrong, rotated or switched off)")
    embed = (instance.settings or {}).get(EMBED) or {}
    enabler = session.get(User, embed.get("enabledBy") or "")
    if enabler is None or enabler.disabled:
        raise NotFound("this chatbot link is not valid (wrong, rotated or switched off)")
    LIMITER.take((embed["tokenHash"], client))
    chat_id = _chat_of(token, key)
    door = ChatbotInterface(AccessContext(session, enabler), instance)
    try:
        request = door.prepare_run(prompt, chat_id)
    except Forbidden:  # the enabling user lost the right to use the chatbot: the link is dead
        raise NotFound("this chatbot link is not valid (wrong, rotated or switched off)") from None
    answer, error = _run(request.user_id, request.instance_id, request.prompt, request.chat_id, request.history,
                         request.system_extra)
    return EmbedAnswer(answer, chat_key(token, request.chat_id), error)


def _run(user_id: str, instance_id: str, prompt: str, chat_id: str, history: list, extra: str
         ) -> tuple[str | None, str | None]:
    """Run the stricter chatbot agent to its end: (answer, error)."""
    config = profile(PROFILE)
    config.initial_toolboxes = list(EMBED_TOOLBOXES)
    config.available_toolboxes = []
    answer = error = None
    with Session(get_engine(), expire_on_commit=False) as session:
        user = session.get(User, user_id)
        instance = session.get(FeatureInstance, instance_id)
        runner = AgentRunner(session, user, instance, prompt, profile_name=PROFILE, config=config, history=history,
                             chat_id=chat_id, system_extra=extra)
        for event in runner.events():
            if event.type == "final":
                answer = event.data.get("text")
            elif event.type in ("error", "cancelled", "approval.required"):
                error = str(event.data.get("message") or "the chatbot could not answer")
    return answer, error
