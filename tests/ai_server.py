"""A scripted OpenAI-compatible server for tests: real HTTP on 127.0.0.1, in a thread.

Endpoints (under /v1):

- POST /chat/completions — answers from a queue of scripted replies (text, JSON, tool calls),
  else from a responder callable that sees the request, else echoes the last user message.
  `"stream": true` is answered as server-sent events in OpenAI's chat.completion.chunk format:
  the role, the text word by word, each tool call as a first piece with id and name and then
  its arguments in fragments of `Reply.fragment` characters, the finish reason, the usage chunk
  (when `stream_options.include_usage` asks for it), `[DONE]`. A reply can break its stream off
  (`cut_after`: the connection closes after that many pieces) or hang in it (`hang_after`).
- POST /images/generations — a small PNG as b64_json.
- POST /audio/speech — `speech_bytes`.
- POST /audio/transcriptions — multipart upload; answers `transcript` as JSON or plain text.
- GET /models — the model list.

Every request is recorded (`requests`, `chat_requests`, `last_chat`) so tests assert on what
the client sent. `fail(status)` scripts an HTTP error for the next matching request;
`stall(seconds)` delays it (for timeouts); :func:`unreachable_url` is a base URL where nothing
listens (connection refused). Several servers can run at once (one per provider).

    server = ScriptedAiServer().start()
    server.reply("Hello")                      # next chat answer
    server.reply_json({"name": "Anna"})        # next chat answer, as JSON text
    server.reply_tool_call("core_readFile", {"path": "a.txt"})
    server.reply("Looking", tool_calls=[{"id": "call_1", "name": "a", "arguments": {}}, …])
    server.reply("Hello there", cut_after=1)   # stream: one piece, then the connection closes
    server.fail(500, "overloaded")             # next request of any endpoint answers HTTP 500
    ...
    server.stop()
"""

from __future__ import annotations

import base64
import email.parser
import email.policy
import json
import struct
import sys
import threading
import time
import uuid
import zlib
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


def tiny_png(width: int = 2, height: int = 2, rgb: tuple[int, int, int] = (200, 30, 30)) -> bytes:
    """A valid PNG of one colour, made without any imaging library."""

    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF)

    rows = b"".join(b"\x00" + bytes(rgb) * width for _ in range(height))
    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", zlib.compress(rows)) + chunk(b"IEND", b"")


@dataclass
class RecordedRequest:
    """One request the server received.

    Attributes:
        method, path: e.g. "POST", "/v1/chat/completions".
        headers: Request headers (lower-case names).
        body: The raw body.
        json: The body parsed as JSON, when it was JSON.
        form: Multipart fields: name → text, or (filename, bytes, content type) for files.
    """

    method: str
    path: str
    headers: dict[str, str]
    body: bytes
    json: Any = None
    form: dict[str, Any] = field(default_factory=dict)

    @property
    def messages(self) -> list[dict[str, Any]]:
        return (self.json or {}).get("messages", [])

    @property
    def model(self) -> str | None:
        if self.json is not None:
            return self.json.get("model")
        value = self.form.get("model")
        return value if isinstance(value, str) else None

    def text_of(self, role: str) -> str:
        """All text of the messages with `role`, joined by newlines (image parts skipped)."""
        texts = []
        for message in self.messages:
            if message.get("role") != role:
                continue
            content = message.get("content")
            if isinstance(content, str):
                texts.append(content)
            elif isinstance(content, list):
                texts.extend(p.get("text", "") for p in content if p.get("type") == "text")
        return "\n".join(texts)

    @property
    def user_text(self) -> str:
        return self.text_of("user")

    @property
    def system_text(self) -> str:
        return self.text_of("system")


@dataclass
class Reply:
    """A scripted chat answer: text and/or tool calls, or an HTTP error, optionally late."""

    content: str | None = None
    tool_calls: list[dict[str, Any]] | None = None  # [{"name": …, "arguments": {…} or "…", "id"?: …}]
    model: str | None = None
    usage: dict[str, int] | None = None
    status: int | None = None  # an HTTP error status instead of an answer
    error: str = "scripted failure"
    delay: float = 0.0
    finish_reason: str | None = None
    fragment: int = 7  # stream: characters of tool-call arguments per piece
    cut_after: int | None = None  # stream: close the connection after this many content pieces
    hang_after: int | None = None  # stream: stop sending after this many pieces and hold the line
    pace: float = 0.0  # stream: seconds between pieces (to watch text arrive in parts)


Responder = Callable[[RecordedRequest], "Reply | str | dict | None"]


@dataclass
class _Failure:
    status: int
    message: str
    path: str | None
    delay: float = 0.0


class ScriptedAiServer:
    """The server; see the module docstring."""

    def __init__(self, api_key: str = "test-key"):
        self.api_key = api_key
        self.requests: list[RecordedRequest] = []
        self.replies: deque[Reply] = deque()
        self.responder: Responder | None = None
        self.image_png: bytes = tiny_png()
        self.speech_bytes: bytes = b"ID3\x03\x00\x00\x00\x00\x00\x00scripted-speech"
        self.transcript: str = "scripted transcript"
        self.models = ["test-model"]
        self._failures: deque[_Failure] = deque()
        self._lock = threading.Lock()
        self._closing = threading.Event()
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    # --- scripting -------------------------------------------------------------------------

    def reply(self, content: str | None = None, **options: Any) -> ScriptedAiServer:
        """Queue a chat answer (keywords as in :class:`Reply`)."""
        self.replies.append(Reply(content=content, **options))
        return self

    def reply_json(self, data: Any, **options: Any) -> ScriptedAiServer:
        """Queue a chat answer whose text is `data` as JSON."""
        return self.reply(json.dumps(data), **options)

    def reply_tool_call(self, name: str, arguments: dict[str, Any] | str, **options: Any) -> ScriptedAiServer:
        """Queue a chat answer that calls one tool."""
        self.replies.append(Reply(tool_calls=[{"name": name, "arguments": arguments}], **options))
        return self

    def fail(self, status: int = 500, message: str = "scripted failure", path: str | None = None,
             times: int = 1) -> ScriptedAiServer:
        """Answer the next `times` requests (to `path`, e.g. "/v1/audio/speech", or any) with HTTP `status`."""
        for _ in range(times):
            self._failures.append(_Failure(status, message, path))
        return self

    def stall(self, seconds: float, path: str | None = None) -> ScriptedAiServer:
        """Hold the next request (to `path`, or any) for `seconds` before answering with HTTP 504."""
        self._failures.append(_Failure(504, "stalled", path, delay=seconds))
        return self

    def clear(self) -> None:
        """Forget scripted replies, failures and recorded requests."""
        self.replies.clear()
        self._failures.clear()
        self.requests.clear()
        self.responder = None

    # --- what was received -----------------------------------------------------------------

    def requests_to(self, path: str) -> list[RecordedRequest]:
        return [r for r in self.requests if r.path == path]

    @property
    def chat_requests(self) -> list[RecordedRequest]:
        return self.requests_to("/v1/chat/completions")

    @property
    def last_chat(self) -> RecordedRequest:
        chats = self.chat_requests
        if not chats:
            raise AssertionError("the AI server received no chat request")
        return chats[-1]

    # --- life cycle ------------------------------------------------------------------------

    @property
    def base_url(self) -> str:
        if self._server is None:
            raise RuntimeError("the AI server is not started")
        return f"http://127.0.0.1:{self._server.server_address[1]}/v1"

    def start(self) -> ScriptedAiServer:
        handler = type("Handler", (_Handler,), {"scripted": self})
        self._server = _Server(("127.0.0.1", 0), handler)
        self._thread = threading.Thread(target=self._server.serve_forever, kwargs={"poll_interval": 0.05},
                                        name="scripted-ai-server", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._closing.set()
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)

    def __enter__(self) -> ScriptedAiServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # --- internals -------------------------------------------------------------------------

    def _take_failure(self, path: str) -> _Failure | None:
        with self._lock:
            for failure in self._failures:
                if failure.path is None or failure.path == path:
                    self._failures.remove(failure)
                    return failure
        return None

    def _next_reply(self, request: RecordedRequest) -> Reply:
        with self._lock:
            queued = self.replies.popleft() if self.replies else None
        if queued is not None:
            return queued
        if self.responder is not None:
            answer = self.responder(request)
            if isinstance(answer, Reply):
                return answer
            if isinstance(answer, dict | list):
                return Reply(content=json.dumps(answer))
            if answer is not None:
                return Reply(content=str(answer))
        return Reply(content=f"echo: {request.user_text}")

    def _sleep(self, seconds: float) -> None:
        self._closing.wait(seconds)


class _Server(ThreadingHTTPServer):
    daemon_threads = True

    def handle_error(self, request: Any, client_address: Any) -> None:
        # A client that gave up (timeout) closed the connection: nothing to report.
        if isinstance(sys.exc_info()[1], ConnectionError):
            return
        super().handle_error(request, client_address)


class _Handler(BaseHTTPRequestHandler):
    scripted: ScriptedAiServer
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - silence the default log
        pass

    # --- plumbing --------------------------------------------------------------------------

    def _record(self) -> RecordedRequest:
        length = int(self.headers.get("content-length") or 0)
        body = self.rfile.read(length) if length else b""
        headers = {k.lower(): v for k, v in self.headers.items()}
        request = RecordedRequest(self.command, self.path.split("?", 1)[0], headers, body)
        content_type = headers.get("content-type", "")
        if content_type.startswith("application/json") and body:
            try:
                request.json = json.loads(body)
            except json.JSONDecodeError:
                pass
        elif content_type.startswith("multipart/form-data"):
            request.form = _parse_multipart(content_type, body)
        with self.scripted._lock:
            self.scripted.requests.append(request)
        return request

    def _send(self, status: int, body: bytes, content_type: str = "application/json") -> None:
        self.send_response(status)
        self.send_header("content-type", content_type)
        self.send_header("content-length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def _json(self, status: int, data: Any) -> None:
        self._send(status, json.dumps(data).encode())

    def _error(self, status: int, message: str) -> None:
        self._json(status, {"error": {"message": message, "type": "scripted_error", "code": status}})

    # --- routes ----------------------------------------------------------------------------

    def do_GET(self) -> None:  # noqa: N802 - http.server's name
        request = self._record()
        if request.path == "/v1/models":
            self._json(200, {"object": "list", "data": [
                {"id": m, "object": "model", "created": 0, "owned_by": "scripted"} for m in self.scripted.models]})
        else:
            self._error(404, f"no route GET {request.path}")

    def do_POST(self) -> None:  # noqa: N802 - http.server's name
        request = self._record()
        if self.headers.get("authorization") != f"Bearer {self.scripted.api_key}":
            self._error(401, "invalid API key")
            return
        failure = self.scripted._take_failure(request.path)
        if failure is not None:
            if failure.delay:
                self.scripted._sleep(failure.delay)
            self._error(failure.status, failure.message)
            return
        routes = {
            "/v1/chat/completions": self._chat,
            "/v1/images/generations": self._image,
            "/v1/audio/speech": self._speech,
            "/v1/audio/transcriptions": self._transcription,
        }
        route = routes.get(request.path)
        if route is None:
            self._error(404, f"no route POST {request.path}")
            return
        route(request)

    def _chat(self, request: RecordedRequest) -> None:
        if not request.json or not request.json.get("messages"):
            self._error(400, "messages is required")
            return
        reply = self.scripted._next_reply(request)
        if reply.delay:
            self.scripted._sleep(reply.delay)
        if reply.status is not None:
            self._error(reply.status, reply.error)
            return
        model = reply.model or request.json.get("model") or "test-model"
        tool_calls = [
            {"id": call.get("id") or f"call_{uuid.uuid4().hex[:12]}", "type": "function",
             "function": {"name": call["name"],
                          "arguments": call["arguments"] if isinstance(call["arguments"], str)
                          else json.dumps(call["arguments"])}}
            for call in reply.tool_calls or []
        ]
        finish = reply.finish_reason or ("tool_calls" if tool_calls else "stop")
        prompt_tokens = sum(len(json.dumps(m.get("content", "")).split()) for m in request.messages)
        completion_tokens = len((reply.content or "").split()) + len(tool_calls)
        usage = reply.usage or {"prompt_tokens": prompt_tokens, "completion_tokens": completion_tokens,
                                "total_tokens": prompt_tokens + completion_tokens}
        completion_id = f"chatcmpl-{uuid.uuid4().hex[:16]}"
        if request.json.get("stream"):
            self._stream(completion_id, model, reply, tool_calls, finish, usage,
                         bool((request.json.get("stream_options") or {}).get("include_usage")))
            return
        message: dict[str, Any] = {"role": "assistant", "content": reply.content}
        if tool_calls:
            message["tool_calls"] = tool_calls
        self._json(200, {
            "id": completion_id, "object": "chat.completion", "created": int(time.time()), "model": model,
            "choices": [{"index": 0, "message": message, "finish_reason": finish, "logprobs": None}],
            "usage": usage,
        })

    def _stream(self, completion_id: str, model: str, reply: Reply, tool_calls: list[dict[str, Any]],
                finish: str, usage: dict[str, int], include_usage: bool) -> None:
        self.send_response(200)
        self.send_header("content-type", "text/event-stream")
        self.send_header("cache-control", "no-cache")
        self.send_header("connection", "close")
        self.end_headers()
        self.close_connection = True
        created = int(time.time())

        def chunk(choices: list[dict[str, Any]], usage_value: dict[str, Any] | None = None) -> bytes:
            data: dict[str, Any] = {"id": completion_id, "object": "chat.completion.chunk", "created": created,
                                    "model": model, "system_fingerprint": "fp_scripted", "choices": choices}
            if include_usage:
                data["usage"] = usage_value  # null on every chunk but the last, as OpenAI does
            return b"data: " + json.dumps(data).encode() + b"\n\n"

        def delta(content: dict[str, Any], finish_reason: str | None = None) -> bytes:
            return chunk([{"index": 0, "delta": content, "logprobs": None, "finish_reason": finish_reason}])

        pieces = [delta({"role": "assistant", "content": "", "refusal": None})]
        if reply.content:
            words = reply.content.split(" ")
            pieces += [delta({"content": word if i == len(words) - 1 else word + " "}) for i, word in enumerate(words)]
        for index, call in enumerate(tool_calls):
            arguments = call["function"]["arguments"]
            pieces.append(delta({"tool_calls": [{"index": index, "id": call["id"], "type": "function",
                                                 "function": {"name": call["function"]["name"], "arguments": ""}}]}))
            step = max(1, reply.fragment)
            pieces += [delta({"tool_calls": [{"index": index, "function": {"arguments": arguments[i:i + step]}}]})
                       for i in range(0, len(arguments), step)]
        pieces.append(delta({}, finish))
        if include_usage:
            pieces.append(chunk([], {**usage, "prompt_tokens_details": {"cached_tokens": 0, "audio_tokens": 0},
                                     "completion_tokens_details": {"reasoning_tokens": 0, "audio_tokens": 0}}))
        pieces.append(b"data: [DONE]\n\n")
        for number, piece in enumerate(pieces):
            # pieces[0] only says the role: `cut_after`/`hang_after` count the pieces after it.
            if reply.cut_after is not None and number > reply.cut_after:
                return  # the connection closes without the rest
            if reply.hang_after is not None and number > reply.hang_after:
                self.scripted._sleep(3600)
                return
            if reply.pace and number:
                self.scripted._sleep(reply.pace)
            self.wfile.write(piece)
            self.wfile.flush()

    def _image(self, request: RecordedRequest) -> None:
        if not (request.json or {}).get("prompt"):
            self._error(400, "prompt is required")
            return
        encoded = base64.b64encode(self.scripted.image_png).decode()
        self._json(200, {"created": int(time.time()), "data": [{"b64_json": encoded, "revised_prompt": None}]})

    def _speech(self, request: RecordedRequest) -> None:
        if not (request.json or {}).get("input"):
            self._error(400, "input is required")
            return
        self._send(200, self.scripted.speech_bytes, "audio/mpeg")

    def _transcription(self, request: RecordedRequest) -> None:
        upload = request.form.get("file")
        if not isinstance(upload, tuple) or not upload[1]:
            self._error(400, "file is required")
            return
        if request.form.get("response_format") in ("text", "srt", "vtt"):
            self._send(200, self.scripted.transcript.encode(), "text/plain")
            return
        self._json(200, {"text": self.scripted.transcript})


def unreachable_url() -> str:
    """A base URL on 127.0.0.1 where nothing listens: connecting is refused."""
    import socket

    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    return f"http://127.0.0.1:{port}/v1"


def _parse_multipart(content_type: str, body: bytes) -> dict[str, Any]:
    """Fields of a multipart/form-data body: text, or (filename, bytes, content type) for files."""
    message = email.parser.BytesParser(policy=email.policy.HTTP).parsebytes(
        f"Content-Type: {content_type}\r\n\r\n".encode() + body)
    fields: dict[str, Any] = {}
    for part in message.iter_parts():
        name = part.get_param("name", header="content-disposition")
        if not name:
            continue
        payload = part.get_payload(decode=True) or b""
        filename = part.get_filename()
        if filename is not None:
            fields[name] = (filename, payload, part.get_content_type())
        else:
            fields[name] = payload.decode("utf-8", errors="replace")
    return fields
