"""One small AI-client interface and its first implementation over any OpenAI-compatible API.

Every AI step of the action library talks to :class:`AiClient` and nothing else. Today
:func:`get_ai_client` returns an :class:`OpenAICompatibleClient` for OPENAI_BASE_URL /
OPENAI_API_KEY / POWERON_AI_MODEL; the AI-service work puts its gateway (failover, streaming,
cost) behind the same interface.

Failures are :class:`AiError` (a :class:`backend.errors.DomainError`, so `execute_action` and
the UI report its message): :class:`AiNotConfigured` names the missing setting,
:class:`AiProviderError` names the provider and its HTTP status or the timeout.
"""

from __future__ import annotations

import base64
import functools
import json
import re
from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from typing import Any, Literal

from backend.config import get_settings
from backend.errors import DomainError

DEFAULT_CHAT_MODEL = "gpt-4o-mini"
DEFAULT_IMAGE_MODEL = "dall-e-3"
DEFAULT_SPEECH_MODEL = "tts-1"
DEFAULT_TRANSCRIPTION_MODEL = "whisper-1"
OPENAI_DEFAULT_URL = "https://api.openai.com/v1"

ResponseFormat = Literal["text", "json"]


class AiError(DomainError):
    """An AI step could not be done; the message says why in plain words."""


class AiNotConfigured(AiError):
    """No AI provider is configured."""


class AiProviderError(AiError):
    """The provider refused, failed, timed out or could not be reached.

    Attributes:
        status: The provider's HTTP status, or None for timeouts and connection failures.
    """

    def __init__(self, message: str, status: int | None = None):
        super().__init__(message)
        self.status = status


@dataclass(frozen=True)
class AiReply:
    """The answer of one chat call.

    Attributes:
        text: The assistant's text.
        model: The model that answered (as the provider reports it).
        usage: Token counts: prompt_tokens, completion_tokens, total_tokens (when reported).
        cost_chf: Cost of the call in CHF when known (the AI service fills it in).
    """

    text: str
    model: str
    usage: dict[str, int] = field(default_factory=dict)
    cost_chf: float | None = None

    def json(self) -> Any:
        """The text parsed as JSON (a Markdown code fence around it is tolerated)."""
        return parse_json_reply(self.text)


_FENCE = re.compile(r"^\s*```(?:json)?\s*(.*?)\s*```\s*$", re.DOTALL | re.IGNORECASE)


def parse_json_reply(text: str) -> Any:
    """Parse a model's JSON answer; raise AiError saying what came back when it is not JSON."""
    fenced = _FENCE.match(text)
    candidate = fenced.group(1) if fenced else text
    try:
        return json.loads(candidate)
    except json.JSONDecodeError as exc:
        shown = text if len(text) <= 200 else text[:200] + "…"
        raise AiError(f"the AI model did not answer with valid JSON ({exc.msg}): {shown!r}") from None


Message = dict[str, Any]


class AiClient(ABC):
    """What the platform needs from an AI provider."""

    @abstractmethod
    def chat(
        self,
        messages: list[Message] | str,
        model: str | None = None,
        system: str | None = None,
        response_format: ResponseFormat = "text",
        temperature: float | None = None,
    ) -> AiReply:
        """One chat completion.

        Args:
            messages: Chat messages (`{"role": …, "content": …}`), or one user message as text.
            model: Model id; None means the configured default.
            system: A system prompt put before the messages.
            response_format: "json" asks for a JSON object (`AiReply.json()` parses it).
            temperature: Sampling temperature, or None for the provider's default.
        """

    @abstractmethod
    def image_description(self, image_bytes: bytes, mime: str, prompt: str, model: str | None = None) -> str:
        """What a vision model says about an image, following `prompt`."""

    @abstractmethod
    def generate_image(self, prompt: str, size: str = "1024x1024") -> bytes:
        """An image (PNG or what the model produces) for `prompt`."""

    @abstractmethod
    def text_to_speech(self, text: str, voice: str = "alloy", format: str = "mp3") -> bytes:  # noqa: A002
        """Spoken `text` as audio bytes in `format` (mp3, wav, opus, aac, flac, pcm)."""

    @abstractmethod
    def speech_to_text(self, audio_bytes: bytes, filename: str = "audio.mp3", language: str | None = None) -> str:
        """The transcript of an audio file; `filename` tells the provider its format."""


class OpenAICompatibleClient(AiClient):
    """AiClient over one OpenAI-compatible HTTP endpoint, with the official `openai` package.

    The client does not retry: failover and retries belong to the AI service.
    """

    def __init__(
        self,
        api_key: str,
        base_url: str | None = None,
        model: str | None = None,
        *,
        image_model: str | None = None,
        speech_model: str | None = None,
        transcription_model: str | None = None,
        timeout_seconds: float = 60.0,
    ):
        import openai

        self.base_url = base_url or OPENAI_DEFAULT_URL
        self.model = model or DEFAULT_CHAT_MODEL
        self.image_model = image_model or DEFAULT_IMAGE_MODEL
        self.speech_model = speech_model or DEFAULT_SPEECH_MODEL
        self.transcription_model = transcription_model or DEFAULT_TRANSCRIPTION_MODEL
        self.timeout_seconds = timeout_seconds
        self._openai = openai.OpenAI(api_key=api_key, base_url=self.base_url, timeout=timeout_seconds,
                                     max_retries=0)

    # --- errors ---------------------------------------------------------------------------

    def _provider_error(self, exc: Exception, what: str) -> AiProviderError:
        import openai

        where = f"the AI provider at {self.base_url}"
        if isinstance(exc, openai.APITimeoutError):
            return AiProviderError(f"{what}: {where} did not answer within {self.timeout_seconds:g} s "
                                   "(POWERON_AI_TIMEOUT_SECONDS)")
        if isinstance(exc, openai.APIConnectionError):
            return AiProviderError(f"{what}: {where} could not be reached ({_cause(exc)})")
        if isinstance(exc, openai.APIStatusError):
            status = exc.status_code
            detail = _error_detail(exc)
            hint = ""
            if status in (401, 403):
                hint = " — check OPENAI_API_KEY"
            elif status == 404:
                hint = " — check OPENAI_BASE_URL and the model name"
            return AiProviderError(f"{what}: {where} answered HTTP {status}: {detail}{hint}", status=status)
        return AiProviderError(f"{what}: {where} failed: {type(exc).__name__}: {exc}")

    def _call(self, what: str, fn, *args, **kwargs):
        import openai

        try:
            return fn(*args, **kwargs)
        except openai.OpenAIError as exc:
            raise self._provider_error(exc, what) from None

    # --- chat -----------------------------------------------------------------------------

    def chat(
        self,
        messages: list[Message] | str,
        model: str | None = None,
        system: str | None = None,
        response_format: ResponseFormat = "text",
        temperature: float | None = None,
    ) -> AiReply:
        conversation: list[Message] = [{"role": "user", "content": messages}] if isinstance(messages, str) \
            else list(messages)
        if system:
            conversation.insert(0, {"role": "system", "content": system})
        if not conversation:
            raise AiError("a chat call needs at least one message")
        options: dict[str, Any] = {"model": model or self.model, "messages": conversation}
        if response_format == "json":
            options["response_format"] = {"type": "json_object"}
        elif response_format != "text":
            raise AiError(f"unknown response format '{response_format}' (text or json)")
        if temperature is not None:
            options["temperature"] = temperature
        completion = self._call("AI chat", self._openai.chat.completions.create, **options)
        choices = getattr(completion, "choices", None) or []
        if not choices:
            raise AiProviderError(f"AI chat: the AI provider at {self.base_url} answered without a choice")
        message = choices[0].message
        text = message.content or getattr(message, "refusal", None) or ""
        usage = {}
        if completion.usage is not None:
            usage = {k: v for k, v in completion.usage.model_dump().items() if isinstance(v, int)}
        return AiReply(text=text, model=completion.model or options["model"], usage=usage)

    def image_description(self, image_bytes: bytes, mime: str, prompt: str, model: str | None = None) -> str:
        if not mime.startswith("image/"):
            raise AiError(f"describing an image needs an image, not '{mime}'")
        data_uri = f"data:{mime};base64,{base64.b64encode(image_bytes).decode('ascii')}"
        content = [{"type": "text", "text": prompt},
                   {"type": "image_url", "image_url": {"url": data_uri}}]
        return self.chat([{"role": "user", "content": content}], model=model).text

    # --- images and audio -----------------------------------------------------------------

    def generate_image(self, prompt: str, size: str = "1024x1024") -> bytes:
        options: dict[str, Any] = {"model": self.image_model, "prompt": prompt, "size": size, "n": 1}
        if not self.image_model.startswith("gpt-image"):  # gpt-image models always answer base64
            options["response_format"] = "b64_json"
        result = self._call("AI image generation", self._openai.images.generate, **options)
        data = getattr(result, "data", None) or []
        encoded = data[0].b64_json if data else None
        if not encoded:
            raise AiProviderError(f"AI image generation: the AI provider at {self.base_url} returned no image data")
        try:
            return base64.b64decode(encoded, validate=True)
        except ValueError:
            raise AiProviderError("AI image generation: the image data is not valid base64") from None

    def text_to_speech(self, text: str, voice: str = "alloy", format: str = "mp3") -> bytes:  # noqa: A002
        response = self._call("AI text to speech", self._openai.audio.speech.create, model=self.speech_model,
                              voice=voice, input=text, response_format=format)
        return response.content

    def speech_to_text(self, audio_bytes: bytes, filename: str = "audio.mp3", language: str | None = None) -> str:
        options: dict[str, Any] = {"model": self.transcription_model, "file": (filename, audio_bytes)}
        if language:
            options["language"] = language
        result = self._call("AI speech to text", self._openai.audio.transcriptions.create, **options)
        return result if isinstance(result, str) else (getattr(result, "text", None) or "")


def _cause(exc: BaseException) -> str:
    cause = exc.__cause__ or exc.__context__
    return f"{type(cause).__name__}: {cause}" if cause else str(exc)


def _error_detail(exc: Any) -> str:
    """The provider's own error message, short."""
    body = getattr(exc, "body", None)
    detail = None
    if isinstance(body, dict):
        error = body.get("error", body)
        detail = error.get("message") if isinstance(error, dict) else str(error)
    if not detail:
        try:
            detail = exc.response.text
        except Exception:  # noqa: BLE001 - a detail is a nicety
            detail = ""
    detail = (detail or "no details").strip()
    return detail if len(detail) <= 300 else detail[:300] + "…"


def not_configured_message() -> str:
    return ("no AI provider is configured: set OPENAI_API_KEY (and OPENAI_BASE_URL for an "
            "OpenAI-compatible endpoint other than api.openai.com; POWERON_AI_MODEL picks the model)")


@functools.lru_cache(maxsize=8)
def _client_for(api_key: str, base_url: str | None, model: str | None, image_model: str | None,
                speech_model: str | None, transcription_model: str | None, timeout: float) -> AiClient:
    return OpenAICompatibleClient(api_key, base_url, model, image_model=image_model, speech_model=speech_model,
                                  transcription_model=transcription_model, timeout_seconds=timeout)


def get_ai_client() -> AiClient:
    """The configured AI client; raises AiNotConfigured naming OPENAI_API_KEY when there is none."""
    settings = get_settings()
    if not settings.openai_api_key:
        raise AiNotConfigured(not_configured_message())
    return _client_for(settings.openai_api_key, settings.openai_base_url, settings.ai_model,
                       settings.ai_image_model, settings.ai_speech_model, settings.ai_transcription_model,
                       settings.ai_timeout_seconds)
