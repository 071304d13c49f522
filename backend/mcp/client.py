"""A small client of external MCP servers (Streamable HTTP), over the official ``mcp`` SDK.

:func:`list_tools` and :func:`call_tool` are called from sync code (actions, the McpServers door),
on threads with or without a running event loop: each call runs its coroutine in a fresh loop (in
a worker thread when the calling thread already runs one). Every exchange is bounded:

- in time by POWERON_MCP_TIMEOUT_SECONDS (connect, handshake and the call together);
- in size by POWERON_MCP_MAX_RESPONSE_BYTES: reading an answer stops at the cap and the call
  fails saying the answer was cut (nothing larger is ever held in memory);
- credentials come from the server's sealed secret: fixed headers and/or an OAuth 2.0 access
  token obtained by the client-credentials grant (authlib), cached until it expires. They are
  never put into messages.

Errors are :class:`McpClientError` whose text names the server and what went wrong.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import threading
import time
from collections.abc import Awaitable, Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, TypeVar

import anyio
import httpx2
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from backend.config import get_settings
from backend.crypto import unseal

T = TypeVar("T")
TOKEN_EARLY_SECONDS = 30  # renew an OAuth token this long before it expires


class McpClientError(Exception):
    """A failed exchange with an external MCP server; the text names the server."""


@dataclass(frozen=True)
class ServerAccess:
    """What it takes to talk to one server: its name (for messages), URL and credentials.

    The credentials are left out of ``repr`` so they never reach a log line.
    """

    name: str
    url: str
    headers: dict[str, str] = field(default_factory=dict, repr=False)
    oauth: dict[str, str] | None = field(default=None, repr=False)


def access_of(server: Any) -> ServerAccess:
    """The ServerAccess of an McpServer row (its secret unsealed), or `server` if it is one."""
    if isinstance(server, ServerAccess):
        return server
    secret = json.loads(unseal(server.secret)) if server.secret else {}
    return ServerAccess(server.name, server.url, dict(secret.get("headers") or {}), secret.get("oauth") or None)


# --- public calls ---------------------------------------------------------------------------


def list_tools(server: Any) -> list[dict[str, Any]]:
    """The server's tools as ``{name, description, inputSchema, annotations?}`` (every page).

    Raises:
        McpClientError: the server cannot be reached, refuses the credentials, hangs or answers
            too much.
    """
    access = access_of(server)

    async def work(client: Client) -> list[dict[str, Any]]:
        tools: list[dict[str, Any]] = []
        cursor = None
        for _ in range(100):  # a paginator that never ends cannot hang the caller
            page = await client.list_tools(cursor=cursor)
            tools += [_tool_dict(tool) for tool in page.tools]
            cursor = page.next_cursor
            if not cursor:
                break
        return tools

    return _exchange(access, work)


def call_tool(server: Any, name: str, arguments: dict[str, Any] | None) -> tuple[bool, Any]:
    """Call one tool; (ok, result). Never raises.

    The result is the tool's structured content when it has some, else its content blocks as
    text (images, audio and binary resources are described, not included); ``ok`` is False when
    the tool reported an error (isError) or the exchange failed, the result then being the
    message.
    """
    access = access_of(server)

    async def work(client: Client) -> tuple[bool, Any]:
        result = await client.call_tool(name, arguments or {})
        text = _content_text(result.content)
        if result.is_error:
            return False, f"tool '{name}' of MCP server '{access.name}' failed: {text or 'no details'}"
        if result.structured_content is not None:
            return True, result.structured_content
        return True, text

    try:
        return _exchange(access, work)
    except McpClientError as exc:
        return False, str(exc)


# --- the exchange ---------------------------------------------------------------------------


@dataclass
class _Watch:
    """What the HTTP layer saw during one exchange (to explain a failure)."""

    cap: int
    cut: bool = False
    status: int | None = None


class _ResponseTooLarge(httpx2.StreamError):
    """Reading stopped at POWERON_MCP_MAX_RESPONSE_BYTES."""


class _CappedStream(httpx2.AsyncByteStream):
    """A response body that stops being read once `watch.cap` bytes came."""

    def __init__(self, inner: Any, watch: _Watch):
        self.inner = inner
        self.watch = watch

    async def __aiter__(self):
        seen = 0
        async for chunk in self.inner:
            seen += len(chunk)
            if seen > self.watch.cap:
                self.watch.cut = True
                raise _ResponseTooLarge(f"the answer exceeded {self.watch.cap} bytes")
            yield chunk

    async def aclose(self) -> None:
        await self.inner.aclose()


class _CappedTransport(httpx2.AsyncBaseTransport):
    """The default transport, every response body capped and its status noted."""

    def __init__(self, watch: _Watch):
        self.inner = httpx2.AsyncHTTPTransport()
        self.watch = watch

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        response = await self.inner.handle_async_request(request)
        if response.status_code >= 400:
            self.watch.status = response.status_code
        response.stream = _CappedStream(response.stream, self.watch)
        return response

    async def aclose(self) -> None:
        await self.inner.aclose()


def _exchange(access: ServerAccess, work: Callable[[Client], Awaitable[T]]) -> T:
    """Connect to `access`, run `work` with the connected client, within the configured limits."""
    settings = get_settings()
    timeout = settings.mcp_timeout_seconds
    headers = dict(access.headers)
    if access.oauth:
        headers["Authorization"] = f"Bearer {_oauth_token(access, timeout)}"
    watch = _Watch(settings.mcp_max_response_bytes)

    async def run() -> T:
        http = httpx2.AsyncClient(headers=headers, timeout=httpx2.Timeout(timeout),
                                  transport=_CappedTransport(watch))
        async with http:
            with anyio.fail_after(timeout):
                transport = streamable_http_client(access.url, http_client=http, max_sse_event_size=watch.cap)
                async with Client(transport, read_timeout_seconds=timeout, cache=None) as client:
                    return await work(client)

    try:
        return _run_sync(run)
    except McpClientError:
        raise
    except BaseException as exc:  # noqa: BLE001 - every failure becomes one clear message
        if isinstance(exc, KeyboardInterrupt | SystemExit):
            raise
        raise McpClientError(_explain(access, watch, exc, timeout)) from None


def _explain(access: ServerAccess, watch: _Watch, exc: BaseException, timeout: float) -> str:
    """One sentence on why an exchange with `access` failed (never a credential)."""
    where = f"MCP server '{access.name}'"
    if watch.cut:
        return (f"{where} answered more than {watch.cap} bytes (POWERON_MCP_MAX_RESPONSE_BYTES): the answer was "
                f"cut at the limit and dropped")
    causes = _leaves(exc)
    if any(isinstance(c, TimeoutError | httpx2.TimeoutException) for c in causes):
        return f"{where} did not answer within {timeout:g} s (POWERON_MCP_TIMEOUT_SECONDS)"
    if watch.status in (401, 403):
        return (f"{where} refused the credentials (HTTP {watch.status}): check its headers or OAuth "
                f"client credentials")
    if any(isinstance(c, httpx2.ConnectError) for c in causes):
        return f"{where} cannot be reached at {access.url}: connection failed"
    if watch.status is not None:
        return f"{where} answered HTTP {watch.status} at {access.url}"
    detail = "; ".join(f"{type(c).__name__}: {c}" for c in causes[:2]) or type(exc).__name__
    return f"{where} failed: {detail}"[:1000]


def _leaves(exc: BaseException) -> list[BaseException]:
    """The exceptions inside exception groups and their causes, innermost last."""
    found: list[BaseException] = []
    pending = [exc]
    while pending and len(found) < 50:
        current = pending.pop()
        found.append(current)
        if isinstance(current, BaseExceptionGroup):
            pending.extend(current.exceptions)
        for linked in (current.__cause__, current.__context__):
            if linked is not None and linked not in found:
                pending.append(linked)
    return found


def _run_sync(factory: Callable[[], Awaitable[T]]) -> T:
    """Run the coroutine `factory()` to its end from sync code, whatever loop the thread runs."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(factory())
    with ThreadPoolExecutor(max_workers=1, thread_name_prefix="mcp-client") as pool:
        return pool.submit(lambda: asyncio.run(factory())).result()


# --- OAuth 2.0 client credentials -----------------------------------------------------------

_tokens: dict[str, tuple[str, float]] = {}
_tokens_lock = threading.Lock()


def _oauth_token(access: ServerAccess, timeout: float) -> str:
    """An access token of the server's OAuth client (client-credentials grant), cached until it
    is about to expire."""
    from authlib.integrations.httpx_client import OAuth2Client

    oauth = access.oauth or {}
    key = hashlib.sha256(json.dumps([oauth.get("tokenUrl"), oauth.get("clientId"), oauth.get("clientSecret"),
                                     oauth.get("scope")]).encode()).hexdigest()
    with _tokens_lock:
        cached = _tokens.get(key)
    if cached and cached[1] > time.time():
        return cached[0]
    try:
        with OAuth2Client(oauth.get("clientId"), oauth.get("clientSecret"), scope=oauth.get("scope") or None,
                          timeout=timeout) as session:
            token = session.fetch_token(oauth.get("tokenUrl"), grant_type="client_credentials")
    except Exception as exc:  # noqa: BLE001 - authlib and httpx raise many kinds; the message says which
        raise McpClientError(f"MCP server '{access.name}': no OAuth token from {oauth.get('tokenUrl')}: "
                             f"{type(exc).__name__}: {_short(exc)}") from None
    value = token.get("access_token")
    if not value:
        raise McpClientError(f"MCP server '{access.name}': the token endpoint answered without an access_token")
    expires_in = float(token.get("expires_in") or 300)
    with _tokens_lock:
        _tokens[key] = (value, time.time() + max(expires_in - TOKEN_EARLY_SECONDS, 1))
    return value


def _short(exc: Exception) -> str:
    return str(exc)[:300]


# --- results --------------------------------------------------------------------------------


def _tool_dict(tool: Any) -> dict[str, Any]:
    found = {"name": tool.name, "description": tool.description or tool.title or "",
             "inputSchema": tool.input_schema or {"type": "object"}}
    if tool.annotations is not None:
        found["annotations"] = tool.annotations.model_dump(by_alias=True, exclude_none=True, mode="json")
    return found


def _content_text(blocks: list[Any]) -> str:
    """MCP content blocks as text: text as it is, other kinds described in brackets."""
    parts = []
    for block in blocks or []:
        kind = getattr(block, "type", "")
        if kind == "text":
            parts.append(block.text)
        elif kind in ("image", "audio"):
            parts.append(f"[{kind} {block.mime_type}, {len(block.data or '') * 3 // 4} bytes]")
        elif kind == "resource":
            resource = block.resource
            text = getattr(resource, "text", None)
            parts.append(text if text is not None else
                         f"[resource {resource.uri} ({resource.mime_type or 'binary'}), "
                         f"{len(getattr(resource, 'blob', '') or '') * 3 // 4} bytes]")
        elif kind == "resource_link":
            parts.append(f"[resource link {block.uri}{' — ' + block.name if block.name else ''}]")
        else:
            parts.append(json.dumps(block.model_dump(by_alias=True, mode="json", exclude_none=True))[:2000])
    return "\n".join(parts)
