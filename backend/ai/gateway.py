"""The AI gateway: several OpenAI-compatible providers behind one AiClient, with failover.

Providers are tried in their configured order (POWERON_AI_PROVIDERS, or the one provider of
OPENAI_*). A call moves on to the next provider when one times out, answers HTTP 5xx or 429,
cannot be reached, or breaks a stream off; it stops at the first other refusal (400, 401, 403,
404, …: the request or that provider's set-up is wrong, another provider would not help) and
reports it. When every provider failed, the AiProviderError names each one and why.

Each provider has a :class:`~backend.ai.breaker.CircuitBreaker`: after `failure_threshold`
consecutive failovers-worthy failures it is skipped for `cooldown_seconds`, then one trial
call goes through (half-open). Refusals of the 4xx kind count as answers (the provider is up).
When every provider's circuit is open the gateway does not give up untried: it sends the call
to the provider whose cool-down ends first, as its trial.

Streams fail over only before their first piece reached the caller; a failure after that is
an AiProviderError raised from the iterator (the caller has shown text already).

Usage and cost (CHF, backend.ai.pricing) come with every AiReply, as do the provider's name and
the failovers that happened; each successful reply's cost is also added to the usage meters open
in the caller's context (backend.ai.usage: the engine meters every run step). Neutralisation of
personal data (per call, or POWERON_AI_NEUTRALIZE) happens once, before failover, so every
provider sees the same placeholders.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import replace
from typing import TypeVar

from backend.ai import usage as ai_usage
from backend.ai.breaker import CircuitBreaker
from backend.ai.client import (
    AiClient,
    AiError,
    AiProviderError,
    AiReply,
    ChatDone,
    ChatRequest,
    OpenAICompatibleClient,
    StreamEvent,
    image_message,
)
from backend.config import AiProviderSettings

T = TypeVar("T")

FAILURE_THRESHOLD = 3
COOLDOWN_SECONDS = 30.0


class AiGateway(AiClient):
    """Failover over `providers`, in order; see the module docstring.

    Args:
        providers: The providers, in failover order (names must be unique).
        failure_threshold: Consecutive failures after which a provider is skipped.
        cooldown_seconds: How long it is skipped before a trial call.
        clock: Seconds from any origin, for the circuit breakers (tests inject their own).
        neutralize: Neutralise personal data in chats that do not say otherwise.
    """

    def __init__(self, providers: Sequence[OpenAICompatibleClient], *, failure_threshold: int = FAILURE_THRESHOLD,
                 cooldown_seconds: float = COOLDOWN_SECONDS, clock: Callable[[], float] = time.monotonic,
                 neutralize: bool = False):
        if not providers:
            raise AiError("the AI gateway needs at least one provider")
        names = [p.name for p in providers]
        if len(set(names)) != len(names):
            raise AiError(f"AI provider names must be unique: {names}")
        self.providers = list(providers)
        self.breakers = {p.name: CircuitBreaker(failure_threshold, cooldown_seconds, clock) for p in providers}
        self.neutralize_by_default = neutralize

    @classmethod
    def from_settings(cls, providers: Iterable[AiProviderSettings], **options) -> AiGateway:
        return cls([OpenAICompatibleClient.from_settings(p) for p in providers], **options)

    def __repr__(self) -> str:
        return f"AiGateway(providers={[p.name for p in self.providers]!r})"

    # --- choosing providers ---------------------------------------------------------------

    def _candidates(self, skipped: list[str]) -> Iterator[OpenAICompatibleClient]:
        """The providers a call may use now, in order; those skipped are described in
        `skipped`. With every circuit open, the one that reopens first is tried anyway."""
        tried = False
        for provider in self.providers:
            breaker = self.breakers[provider.name]
            if breaker.allow():
                tried = True
                yield provider
            else:
                skipped.append(f"{provider.where} skipped: {breaker.consecutive_failures} failures in a row, "
                               f"paused for {breaker.retry_in():.0f} s more")
        if not tried:
            provider = min(self.providers, key=lambda p: self.breakers[p.name].retry_in())
            self.breakers[provider.name].force_trial()
            skipped.append(f"every provider is paused; trying {provider.where} anyway")
            yield provider

    def _give_up(self, what: str, attempts: list[str], last: AiProviderError) -> AiProviderError:
        if len(attempts) == 1:
            return last
        return AiProviderError(f"{what}: no AI provider could answer — " + "; ".join(attempts),
                               status=last.status, provider=last.provider, attempts=tuple(attempts))

    def _failover(self, what: str, call: Callable[[OpenAICompatibleClient], T]) -> tuple[T, tuple[str, ...]]:
        """`call` on the first provider that answers; the result and the failovers before it."""
        attempts: list[str] = []
        last: AiProviderError | None = None
        for provider in self._candidates(attempts):
            breaker = self.breakers[provider.name]
            try:
                result = call(provider)
            except AiProviderError as error:
                if not error.retryable:
                    breaker.record_success()  # it answered: the fault is the request's or the set-up's
                    if attempts:
                        raise AiProviderError(f"{error} (after: {'; '.join(attempts)})", status=error.status,
                                              provider=error.provider,
                                              attempts=(*attempts, _reason(error, what))) from None
                    raise
                breaker.record_failure()
                attempts.append(_reason(error, what))
                last = error
                continue
            except BaseException:
                breaker.record_success()  # not the provider's failure
                raise
            breaker.record_success()
            return result, tuple(attempts)
        assert last is not None
        raise self._give_up(what, attempts, last)

    # --- chat -----------------------------------------------------------------------------

    def _complete(self, request: ChatRequest) -> AiReply:
        reply, failovers = self._failover("AI chat", lambda provider: provider._complete(request))
        ai_usage.record(reply.cost_chf, reply.usage)
        return replace(reply, failovers=failovers) if failovers else reply

    def _stream(self, request: ChatRequest) -> Iterator[StreamEvent]:
        attempts: list[str] = []
        last: AiProviderError | None = None
        for provider in self._candidates(attempts):
            breaker = self.breakers[provider.name]
            events = provider._stream(request)
            delivered = False
            try:
                for event in events:
                    if isinstance(event, ChatDone):
                        breaker.record_success()
                        ai_usage.record(event.reply.cost_chf, event.reply.usage)
                        yield ChatDone(replace(event.reply, failovers=tuple(attempts))) if attempts else event
                        return
                    delivered = True
                    yield event
            except AiProviderError as error:
                if not error.retryable:
                    breaker.record_success()
                    if attempts:
                        raise AiProviderError(f"{error} (after: {'; '.join(attempts)})", status=error.status,
                                              provider=error.provider,
                                              attempts=(*attempts, _reason(error, "AI chat"))) from None
                    raise
                breaker.record_failure()
                if delivered:
                    raise AiProviderError(f"{error} (the answer broke off after it had begun; no failover)",
                                          status=error.status, provider=error.provider,
                                          attempts=(*attempts, _reason(error, "AI chat"))) from None
                attempts.append(_reason(error, "AI chat"))
                last = error
                continue
            except BaseException:
                breaker.record_success()  # the caller stopped or failed, not the provider
                raise
            finally:
                events.close()
            raise AiProviderError(f"AI chat: {provider.where} ended the stream without a final event",
                                  provider=provider.name)
        assert last is not None
        raise self._give_up("AI chat", attempts, last)

    def image_description(self, image_bytes: bytes, mime: str, prompt: str, model: str | None = None) -> str:
        return self.chat(image_message(image_bytes, mime, prompt), model=model).text

    # --- images and audio -----------------------------------------------------------------

    def generate_image(self, prompt: str, size: str = "1024x1024") -> bytes:
        return self._failover("AI image generation", lambda p: p.generate_image(prompt, size))[0]

    def text_to_speech(self, text: str, voice: str = "alloy", format: str = "mp3") -> bytes:  # noqa: A002
        return self._failover("AI text to speech", lambda p: p.text_to_speech(text, voice, format))[0]

    def speech_to_text(self, audio_bytes: bytes, filename: str = "audio.mp3", language: str | None = None) -> str:
        return self._failover("AI speech to text", lambda p: p.speech_to_text(audio_bytes, filename, language))[0]

    # --- state ----------------------------------------------------------------------------

    def status(self) -> list[dict[str, object]]:
        """Per provider: name, base URL, circuit state, failures in a row, seconds until a trial."""
        return [{"name": p.name, "baseUrl": p.base_url, "state": self.breakers[p.name].state,
                 "consecutiveFailures": self.breakers[p.name].consecutive_failures,
                 "retryInSeconds": round(self.breakers[p.name].retry_in(), 1)} for p in self.providers]


def _reason(error: AiProviderError, what: str) -> str:
    """The error's message without the "AI chat: " in front (the summary says it once)."""
    text = str(error)
    prefix = f"{what}: "
    return text[len(prefix):] if text.startswith(prefix) else text
