"""The AI-client interface, its reply and stream-event types, and one OpenAI-compatible provider.

Every AI step of the action library and the agent loop talk to :class:`AiClient` and nothing
else. :func:`get_ai_client` returns the gateway (:class:`backend.ai.gateway.AiGateway`): the
providers of POWERON_AI_PROVIDERS in order, or the one of OPENAI_BASE_URL / OPENAI_API_KEY /
POWERON_AI_MODEL, with failover, a circuit breaker per provider, streaming, cost in CHF and
optional neutralisation of personal data. :class:`OpenAICompatibleClient` is one provider,
without retries or failover.

Failures are :class:`AiError` (a :class:`backend.errors.DomainError`, so `execute_action` and
the UI report its message): :class:`AiNotConfigured` names the missing setting,
:class:`AiProviderError` names the provider and its HTTP status or the timeout — never the key.
"""

from __future__ import annotations

import base64
import functools
import json
import re
from abc import ABC, abstractmethod
from collections.abc import Iterator, Mapping
from dataclasses import asdict, dataclass, field, replace
from typing import TYPE_CHECKING, Any, ClassVar, Literal

from backend.config import AiProviderSettings, get_settings
from backend.errors import DomainError

if TYPE_CHECKING:
    from backend.ai.pricing import ModelPrice

DEFAULT_CHAT_MODEL = "gpt-4o-mini"
DEFAULT_IMAGE_MODEL = "dall-e-3"
DEFAULT_SPEECH_MODEL = "tts-1"
DEFAULT_TRANSCRIPTION_MODEL = "whisper-1"
OPENAI_DEFAULT_URL = "https://api.openai.com/v1"

ResponseFormat = Literal["text", "json"]
Message = dict[str, Any]
ToolChoice = str | dict[str, Any]


class AiError(DomainError):
    """An AI step could not be done; the message says why in plain words."""


class AiNotConfigured(AiError):
    """No AI provider is configured."""


class AiProviderError(AiError):
    """The provider refused, failed, timed out or could not be reached.

    Attributes:
        status: The provider's HTTP status, or None for timeouts and connection failures.
        provider: Name of the provider that failed (the last one, after a failover).
        retryable: True for what another provider may do better (timeout, HTTP 5xx, 429,
            connection failure, an answer broken off): the gateway fails over on these only.
        attempts: After a failover: one line per provider tried or skipped, and why.
    """

    def __init__(self, message: str, status: int | None = None, *, provider: str | None = None,
                 retryable: bool = False, attempts: tuple[str, ...] = ()):
        super().__init__(message)
        self.status = status
        self.provider = provider
        self.retryable = retryable
        self.attempts = attempts


@dataclass(frozen=True)
class ToolCall:
    """A function call the model asked for.

    Attributes:
        id: The call's id, to be quoted by the tool result message (`tool_call_id`).
        name: The function's name.
        arguments: The arguments as the model wrote them: a JSON text, possibly malformed.
    """

    id: str
    name: str
    arguments: str

    def parsed_arguments(self) -> Any:
        """The arguments as JSON; raises AiError saying what is wrong when they are not JSON."""
        try:
            return json.loads(self.arguments or "{}")
        except json.JSONDecodeError as exc:
            raise AiError(f"the arguments of the call to '{self.name}' are not valid JSON ({exc.msg})") from None

    def to_dict(self) -> dict[str, str]:
        return {"id": self.id, "name": self.name, "arguments": self.arguments}


@dataclass(frozen=True)
class AiReply:
    """The answer of one chat call.

    Attributes:
        text: The assistant's text ("" when it only called tools).
        model: The model that answered (as the provider reports it).
        usage: Token counts: prompt_tokens, completion_tokens, total_tokens (when reported).
        cost_chf: Cost of the call in CHF, or None when unknown (a model missing from the
            price table, or no token counts) — None is not 0.
        tool_calls: The function calls the model asked for, in order.
        finish_reason: "stop", "tool_calls", "length", … as the provider says.
        provider: Name of the provider that answered.
        failovers: One line per provider tried or skipped before this one, and why.
    """

    text: str
    model: str
    usage: dict[str, int] = field(default_factory=dict)
    cost_chf: float | None = None
    tool_calls: tuple[ToolCall, ...] = ()
    finish_reason: str | None = None
    provider: str | None = None
    failovers: tuple[str, ...] = ()

    def json(self) -> Any:
        """The text parsed as JSON (a Markdown code fence around it is tolerated)."""
        return parse_json_reply(self.text)

    def assistant_message(self) -> Message:
        """This answer as an assistant message for the next call's history."""
        message: Message = {"role": "assistant", "content": self.text or None}
        if self.tool_calls:
            message["tool_calls"] = [{"id": c.id, "type": "function",
                                      "function": {"name": c.name, "arguments": c.arguments}}
                                     for c in self.tool_calls]
        return message

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["tool_calls"] = [c.to_dict() for c in self.tool_calls]
        data["failovers"] = list(self.failovers)
        return data


# --- stream events -------------------------------------------------------------------------


@dataclass(frozen=True)
class TextDelta:
    """A piece of the assistant's text."""

    text: str
    type: ClassVar[str] = "text"

    def to_dict(self) -> dict[str, Any]:
        return {"type": self.type, "text": self.text}


@dataclass(frozen=True)
class ToolCallDelta:
    """A piece of a tool call. Pieces with the same `index` belong to one call; the first
    carries `id` and `name`, every piece a fragment of the JSON `arguments` (maybe "")."""

    index: int
    id: str | None
    name: str | None
    arguments: str
    type: ClassVar[str] = "tool_call"

    def to_dict(self) -> dict[str, Any]:
        return {"type": self.type, "index": self.index, "id": self.id, "name": self.name,
                "arguments": self.arguments}


@dataclass(frozen=True)
class ChatDone:
    """The last event: the whole answer, assembled, with usage, cost, model and provider."""

    reply: AiReply
    type: ClassVar[str] = "done"

    def to_dict(self) -> dict[str, Any]:
        return {"type": self.type, **self.reply.to_dict()}


StreamEvent = TextDelta | ToolCallDelta | ChatDone


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


@dataclass(frozen=True)
class ChatRequest:
    """One chat call, checked: the system prompt is the first message already."""

    messages: list[Message]
    model: str | None = None
    response_format: ResponseFormat = "text"
    temperature: float | None = None
    tools: list[dict[str, Any]] | None = None
    tool_choice: ToolChoice | None = None


def make_request(messages: list[Message] | str, model: str | None = None, system: str | None = None,
                 response_format: ResponseFormat = "text", temperature: float | None = None,
                 tools: list[dict[str, Any]] | None = None, tool_choice: ToolChoice | None = None) -> ChatRequest:
    """Check a chat call's arguments (AiError saying what is wrong) and make a ChatRequest."""
    conversation: list[Message] = [{"role": "user", "content": messages}] if isinstance(messages, str) \
        else list(messages)
    if system:
        conversation.insert(0, {"role": "system", "content": system})
    if not conversation:
        raise AiError("a chat call needs at least one message")
    if response_format not in ("text", "json"):
        raise AiError(f"unknown response format '{response_format}' (text or json)")
    if tools is not None:
        if not isinstance(tools, list) or not all(isinstance(t, dict) for t in tools):
            raise AiError("tools must be a list of OpenAI tool objects ({\"type\": \"function\", \"function\": …})")
        tools = tools or None
    if isinstance(tool_choice, str) and tool_choice not in ("auto", "none", "required"):
        tool_choice = {"type": "function", "function": {"name": tool_choice}}  # a tool's name
    if tool_choice is not None and tools is None and tool_choice != "none":
        raise AiError("tool_choice needs tools")
    return ChatRequest(conversation, model, response_format, temperature, tools, tool_choice)


class AiClient(ABC):
    """What the platform needs from an AI provider.

    `chat` and `chat_stream` are the same call, answered at once or as events; both take
    OpenAI function tools and `tool_choice`, and both can neutralise personal data: the
    messages go out with placeholders ([EMAIL_1], [PERSON_1], … see backend.ai.neutralize)
    and the answer (text and tool-call arguments) comes back with the originals restored.
    Implementations provide `_complete` (and `_stream` when they can stream for real).
    """

    neutralize_by_default: bool = False
    """Neutralise when a call does not say (the gateway takes POWERON_AI_NEUTRALIZE)."""

    def chat(
        self,
        messages: list[Message] | str,
        model: str | None = None,
        system: str | None = None,
        response_format: ResponseFormat = "text",
        temperature: float | None = None,
        *,
        tools: list[dict[str, Any]] | None = None,
        tool_choice: ToolChoice | None = None,
        neutralize: bool | None = None,
    ) -> AiReply:
        """One chat completion.

        Args:
            messages: Chat messages (`{"role": …, "content": …}`, also assistant messages with
                `tool_calls` and `tool` results), or one user message as text.
            model: Model id; None means the provider's default.
            system: A system prompt put before the messages.
            response_format: "json" asks for a JSON object (`AiReply.json()` parses it).
            temperature: Sampling temperature, or None for the provider's default.
            tools: OpenAI function tools (`{"type": "function", "function": {name,
                description, parameters}}`) the model may call.
            tool_choice: "auto", "none", "required", a tool's name, or OpenAI's object form.
            neutralize: Replace personal data by placeholders on the way out and restore it
                in the answer; None means `neutralize_by_default`.
        """
        request = make_request(messages, model, system, response_format, temperature, tools, tool_choice)
        if not self._neutralizing(neutralize):
            return self._complete(request)
        hidden, mapping = neutralize_request(request)
        return restore_reply(self._complete(hidden), mapping)

    def chat_stream(
        self,
        messages: list[Message] | str,
        model: str | None = None,
        system: str | None = None,
        response_format: ResponseFormat = "text",
        temperature: float | None = None,
        *,
        tools: list[dict[str, Any]] | None = None,
        tool_choice: ToolChoice | None = None,
        neutralize: bool | None = None,
    ) -> Iterator[StreamEvent]:
        """The chat call of :meth:`chat` as events: TextDelta and ToolCallDelta pieces as they
        arrive, then one ChatDone with the assembled AiReply (usage, cost, provider).

        The arguments are checked at once (AiError); provider failures surface while
        iterating, as AiProviderError. Closing the iterator early closes the connection.
        """
        request = make_request(messages, model, system, response_format, temperature, tools, tool_choice)
        if not self._neutralizing(neutralize):
            return self._stream(request)
        hidden, mapping = neutralize_request(request)
        return restore_stream(self._stream(hidden), mapping)

    def _neutralizing(self, neutralize: bool | None) -> bool:
        return self.neutralize_by_default if neutralize is None else bool(neutralize)

    @abstractmethod
    def _complete(self, request: ChatRequest) -> AiReply:
        """Answer a checked request (no neutralisation here: `chat` did it)."""

    def _stream(self, request: ChatRequest) -> Iterator[StreamEvent]:
        """Events for a checked request; by default the whole answer of `_complete` at once."""
        reply = self._complete(request)
        if reply.text:
            yield TextDelta(reply.text)
        for index, call in enumerate(reply.tool_calls):
            yield ToolCallDelta(index, call.id, call.name, call.arguments)
        yield ChatDone(reply)

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


def image_type(data: bytes) -> str | None:
    """The image type of `data` by its signature (PNG, JPEG, GIF, WebP), else None."""
    if data.startswith(b"\x89PNG\r\n\x1a\n"):
        return "image/png"
    if data.startswith(b"\xff\xd8\xff"):
        return "image/jpeg"
    if data[:6] in (b"GIF87a", b"GIF89a"):
        return "image/gif"
    if data[:4] == b"RIFF" and data[8:12] == b"WEBP":
        return "image/webp"
    return None


def image_message(image_bytes: bytes, mime: str, prompt: str) -> list[Message]:
    """A user message with `prompt` and the image as a data URI (AiError for a non-image)."""
    if not mime.startswith("image/"):
        raise AiError(f"describing an image needs an image, not '{mime}'")
    data_uri = f"data:{mime};base64,{base64.b64encode(image_bytes).decode('ascii')}"
    return [{"role": "user", "content": [{"type": "text", "text": prompt},
                                         {"type": "image_url", "image_url": {"url": data_uri}}]}]


# --- neutralisation of requests and answers ------------------------------------------------


def neutralize_request(request: ChatRequest) -> tuple[ChatRequest, dict[str, str]]:
    """The request with personal data replaced in every text (message contents, text parts,
    tool-call arguments; not images), and the mapping to restore it. One mapping for the
    whole conversation, so a value has the same placeholder in every message."""
    from backend.ai.neutralize import neutralize

    mapping: dict[str, str] = {}

    def hide(text: str) -> str:
        nonlocal mapping
        done = neutralize(text, mapping=mapping)
        mapping = done.mapping
        return done.text

    messages: list[Message] = []
    for message in request.messages:
        copy = dict(message)
        content = copy.get("content")
        if isinstance(content, str):
            copy["content"] = hide(content)
        elif isinstance(content, list):
            copy["content"] = [{**part, "text": hide(part["text"])}
                               if isinstance(part, dict) and part.get("type") == "text"
                               and isinstance(part.get("text"), str) else part
                               for part in content]
        if isinstance(copy.get("tool_calls"), list):
            calls = []
            for call in copy["tool_calls"]:
                function = call.get("function") if isinstance(call, dict) else None
                if isinstance(function, dict) and isinstance(function.get("arguments"), str):
                    call = {**call, "function": {**function, "arguments": hide(function["arguments"])}}
                calls.append(call)
            copy["tool_calls"] = calls
        messages.append(copy)
    return replace(request, messages=messages), mapping


def restore_reply(reply: AiReply, mapping: Mapping[str, str]) -> AiReply:
    """The reply with the originals back in its text and tool-call arguments."""
    from backend.ai.neutralize import restore

    if not mapping:
        return reply
    calls = tuple(replace(c, arguments=restore(c.arguments, dict(mapping))) for c in reply.tool_calls)
    return replace(reply, text=restore(reply.text, dict(mapping)), tool_calls=calls)


_PARTIAL_PLACEHOLDER = re.compile(r"\[[A-Z]{0,6}(?:_\d{0,9})?$")


class StreamRestorer:
    """Restores placeholders in a text that arrives in pieces: a piece that ends in what may
    be the start of a placeholder ("… [EMA") is held back until the rest arrives."""

    def __init__(self, mapping: Mapping[str, str]):
        self.mapping = dict(mapping)
        self._held = ""

    def feed(self, piece: str) -> str:
        from backend.ai.neutralize import KINDS, restore

        text = self._held + piece
        partial = _PARTIAL_PLACEHOLDER.search(text)
        cut = len(text)
        if partial:
            kind = partial.group(0)[1:].split("_", 1)[0]
            if any(k.startswith(kind) for k in KINDS):
                cut = partial.start()
        self._held = text[cut:]
        return restore(text[:cut], self.mapping)

    def flush(self) -> str:
        from backend.ai.neutralize import restore

        rest, self._held = self._held, ""
        return restore(rest, self.mapping)


def restore_stream(events: Iterator[StreamEvent], mapping: Mapping[str, str]) -> Iterator[StreamEvent]:
    """`events` with the originals restored in text and tool-call argument pieces."""
    if not mapping:
        yield from events
        return
    text = StreamRestorer(mapping)
    arguments: dict[int, StreamRestorer] = {}
    try:
        for event in events:
            if isinstance(event, TextDelta):
                piece = text.feed(event.text)
                if piece:
                    yield TextDelta(piece)
            elif isinstance(event, ToolCallDelta):
                piece = arguments.setdefault(event.index, StreamRestorer(mapping)).feed(event.arguments)
                if piece or event.id or event.name:
                    yield replace(event, arguments=piece)
            else:
                rest = text.flush()
                if rest:
                    yield TextDelta(rest)
                for index, restorer in arguments.items():
                    rest = restorer.flush()
                    if rest:
                        yield ToolCallDelta(index, None, None, rest)
                yield ChatDone(restore_reply(event.reply, mapping))
    finally:
        close = getattr(events, "close", None)
        if close is not None:
            close()


# --- one OpenAI-compatible provider --------------------------------------------------------


class OpenAICompatibleClient(AiClient):
    """AiClient over one OpenAI-compatible HTTP endpoint, with the official `openai` package.

    No retries and no failover (the gateway does those): every failure is an AiProviderError
    whose `retryable` says whether another provider might do better. The key is kept out of
    `repr` and of every message.

    Args:
        api_key: The provider's key.
        base_url: Its base URL (None: api.openai.com).
        model: Default chat model.
        image_model, speech_model, transcription_model: Models for images and audio.
        timeout_seconds: Longest wait for a call (for a stream: between two pieces).
        name: Short name for messages and replies.
        models: Requested model → this provider's model; other names are sent unchanged.
        prices: Prices that override the built-in table (backend.ai.pricing) for this provider.
        source: The setting it came from, so that hints say what to fix.
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
        name: str = "default",
        models: Mapping[str, str] | None = None,
        prices: Mapping[str, ModelPrice] | None = None,
        source: str = "OPENAI_API_KEY",
    ):
        import openai

        self.name = name
        self.base_url = base_url or OPENAI_DEFAULT_URL
        self.model = model or DEFAULT_CHAT_MODEL
        self.image_model = image_model or DEFAULT_IMAGE_MODEL
        self.speech_model = speech_model or DEFAULT_SPEECH_MODEL
        self.transcription_model = transcription_model or DEFAULT_TRANSCRIPTION_MODEL
        self.timeout_seconds = timeout_seconds
        self.models = dict(models or {})
        self.prices = dict(prices or {})
        self.source = source
        self._api_key = api_key
        self._openai = openai.OpenAI(api_key=api_key, base_url=self.base_url, timeout=timeout_seconds,
                                     max_retries=0)

    @classmethod
    def from_settings(cls, provider: AiProviderSettings) -> OpenAICompatibleClient:
        from backend.ai.pricing import ModelPrice

        return cls(provider.api_key, provider.base_url, provider.model, image_model=provider.image_model,
                   speech_model=provider.speech_model, transcription_model=provider.transcription_model,
                   timeout_seconds=provider.timeout_seconds, name=provider.name, models=dict(provider.models),
                   prices={m: ModelPrice(i, o) for m, i, o in provider.prices}, source=provider.source)

    def __repr__(self) -> str:
        return f"OpenAICompatibleClient(name={self.name!r}, base_url={self.base_url!r}, model={self.model!r})"

    @property
    def where(self) -> str:
        """How messages name this provider."""
        if self.source == "OPENAI_API_KEY":
            return f"the AI provider at {self.base_url}"
        return f"the AI provider '{self.name}' at {self.base_url}"

    def resolve_model(self, requested: str | None) -> str:
        """The model this provider is asked for when a call requests `requested`."""
        if not requested:
            return self.model
        return self.models.get(requested, requested)

    def cost(self, model: str | None, usage: Mapping[str, int]) -> float | None:
        """CHF for `usage` of `model` at this provider's prices (None when unknown)."""
        from backend.ai.pricing import cost_chf

        return cost_chf(model, usage, self.prices)

    # --- errors ---------------------------------------------------------------------------

    def _hint(self, status: int) -> str:
        legacy = self.source == "OPENAI_API_KEY"
        if status in (401, 403):
            return " — check OPENAI_API_KEY" if legacy else f" — check apiKey of {self.source}"
        if status == 404:
            return " — check OPENAI_BASE_URL and the model name" if legacy \
                else f" — check baseUrl and the model names of {self.source}"
        return ""

    def provider_error(self, exc: Exception, what: str) -> AiProviderError:
        """An exception of `openai` or `httpx` as an AiProviderError, with `retryable` set."""
        import httpx
        import openai

        status: int | None = None
        retryable = True
        timeout_setting = "POWERON_AI_TIMEOUT_SECONDS" if self.source == "OPENAI_API_KEY" \
            else f"{self.source}.timeoutSeconds"
        if isinstance(exc, openai.APITimeoutError | httpx.TimeoutException):
            reason = f"did not answer within {self.timeout_seconds:g} s ({timeout_setting})"
        elif isinstance(exc, openai.APIConnectionError):
            reason = f"could not be reached ({_cause(exc)})"
        elif isinstance(exc, httpx.TransportError):
            reason = f"broke the connection off ({type(exc).__name__}: {exc})"
        elif isinstance(exc, openai.APIStatusError):
            status = exc.status_code
            retryable = status >= 500 or status in (408, 429)
            reason = f"answered HTTP {status}: {_error_detail(exc)}{self._hint(status)}"
        elif isinstance(exc, openai.APIError):  # an error event inside a stream
            reason = f"reported an error: {exc.message}"
        else:
            retryable = False
            reason = f"failed: {type(exc).__name__}: {exc}"
        return self._error(what, reason, status=status, retryable=retryable)

    def _error(self, what: str, reason: str, status: int | None = None, retryable: bool = False) -> AiProviderError:
        message = f"{what}: {self.where} {reason}"
        if len(self._api_key) >= 4:
            message = message.replace(self._api_key, "[key]")
        return AiProviderError(message, status=status, provider=self.name, retryable=retryable)

    def _call(self, what: str, fn, *args, **kwargs):
        import httpx
        import openai

        try:
            return fn(*args, **kwargs)
        except (openai.OpenAIError, httpx.HTTPError) as exc:
            raise self.provider_error(exc, what) from None

    # --- chat -----------------------------------------------------------------------------

    def _options(self, request: ChatRequest) -> dict[str, Any]:
        options: dict[str, Any] = {"model": self.resolve_model(request.model), "messages": request.messages}
        if request.response_format == "json":
            options["response_format"] = {"type": "json_object"}
        if request.temperature is not None:
            options["temperature"] = request.temperature
        if request.tools:
            options["tools"] = request.tools
        if request.tool_choice is not None:
            options["tool_choice"] = request.tool_choice
        return options

    def _complete(self, request: ChatRequest) -> AiReply:
        options = self._options(request)
        completion = self._call("AI chat", self._openai.chat.completions.create, **options)
        choices = getattr(completion, "choices", None) or []
        if not choices:
            raise self._error("AI chat", "answered without a choice")
        message = choices[0].message
        text = message.content or getattr(message, "refusal", None) or ""
        calls = tuple(ToolCall(id=call.id or f"call_{index}", name=call.function.name,
                               arguments=call.function.arguments or "")
                      for index, call in enumerate(getattr(message, "tool_calls", None) or [])
                      if getattr(call, "function", None) is not None)
        usage = _usage(completion.usage)
        model = completion.model or options["model"]
        return AiReply(text=text, model=model, usage=usage, cost_chf=self.cost(model, usage), tool_calls=calls,
                       finish_reason=choices[0].finish_reason, provider=self.name)

    def _stream(self, request: ChatRequest) -> Iterator[StreamEvent]:
        import httpx
        import openai

        options = self._options(request)
        stream = self._call("AI chat", self._openai.chat.completions.create, **options, stream=True,
                            stream_options={"include_usage": True})
        model = options["model"]
        text: list[str] = []
        calls: dict[int, dict[str, Any]] = {}
        usage: dict[str, int] = {}
        finish: str | None = None
        try:
            for chunk in stream:
                model = chunk.model or model
                if chunk.usage is not None:
                    usage = _usage(chunk.usage)
                for choice in chunk.choices or []:
                    if choice.index != 0:
                        continue
                    delta = choice.delta
                    piece = (delta.content or getattr(delta, "refusal", None) or "") if delta else ""
                    if piece:
                        text.append(piece)
                        yield TextDelta(piece)
                    for fragment in (delta.tool_calls or []) if delta else []:
                        event = _assemble(calls, fragment)
                        if event is not None:
                            yield event
                    finish = choice.finish_reason or finish
        except (openai.OpenAIError, httpx.HTTPError) as exc:
            raise self.provider_error(exc, "AI chat") from None
        finally:
            stream.close()
        if finish is None:
            raise self._error("AI chat", "ended the answer's stream before it was complete", retryable=True)
        tool_calls = tuple(ToolCall(id=c["id"] or f"call_{i}", name=c["name"] or "", arguments=c["arguments"])
                           for i, c in sorted(calls.items()))
        yield ChatDone(AiReply(text="".join(text), model=model, usage=usage, cost_chf=self.cost(model, usage),
                               tool_calls=tool_calls, finish_reason=finish, provider=self.name))

    def image_description(self, image_bytes: bytes, mime: str, prompt: str, model: str | None = None) -> str:
        return self.chat(image_message(image_bytes, mime, prompt), model=model).text

    # --- images and audio -----------------------------------------------------------------

    def generate_image(self, prompt: str, size: str = "1024x1024") -> bytes:
        options: dict[str, Any] = {"model": self.image_model, "prompt": prompt, "size": size, "n": 1}
        if not self.image_model.startswith("gpt-image"):  # gpt-image models always answer base64
            options["response_format"] = "b64_json"
        result = self._call("AI image generation", self._openai.images.generate, **options)
        data = getattr(result, "data", None) or []
        encoded = data[0].b64_json if data else None
        if not encoded:
            raise self._error("AI image generation", "returned no image data")
        try:
            return base64.b64decode(encoded, validate=True)
        except ValueError:
            raise self._error("AI image generation", "returned image data that is not valid base64") from None

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


def _usage(usage: Any) -> dict[str, int]:
    """The provider's top-level token counts."""
    if usage is None:
        return {}
    data = usage.model_dump() if hasattr(usage, "model_dump") else dict(usage)
    return {k: v for k, v in data.items() if isinstance(v, int) and not isinstance(v, bool)}


def _assemble(calls: dict[int, dict[str, Any]], fragment: Any) -> ToolCallDelta | None:
    """Add one streamed tool-call fragment to `calls`; the event for it, or None when empty."""
    index = fragment.index if fragment.index is not None else 0
    call = calls.setdefault(index, {"id": None, "name": None, "arguments": ""})
    function = fragment.function
    new_id = fragment.id if fragment.id and fragment.id != call["id"] else None
    if new_id:
        call["id"] = new_id
    name = function.name if function is not None else None
    new_name = None
    if name and name != call["name"]:
        # Providers send the name once; should one send it in pieces, they are joined.
        call["name"] = name if call["name"] is None else call["name"] + name
        new_name = name
    arguments = (function.arguments or "") if function is not None else ""
    call["arguments"] += arguments
    if not (new_id or new_name or arguments):
        return None
    return ToolCallDelta(index=index, id=new_id, name=new_name, arguments=arguments)


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
            "OpenAI-compatible endpoint other than api.openai.com; POWERON_AI_MODEL picks the model), "
            "or POWERON_AI_PROVIDERS with a JSON list of providers for failover")


@functools.lru_cache(maxsize=8)
def _gateway_for(providers: tuple[AiProviderSettings, ...], neutralize: bool) -> AiClient:
    from backend.ai.gateway import AiGateway

    return AiGateway.from_settings(providers, neutralize=neutralize)


def get_ai_client() -> AiClient:
    """The configured AI gateway (one per configuration, so circuit breakers keep their state);
    raises AiNotConfigured naming OPENAI_API_KEY and POWERON_AI_PROVIDERS when there is none."""
    settings = get_settings()
    if not settings.ai_providers:
        raise AiNotConfigured(not_configured_message())
    return _gateway_for(settings.ai_providers, settings.ai_neutralize)
