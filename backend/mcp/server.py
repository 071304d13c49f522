"""PowerOn's MCP server at ``/mcp`` (Streamable HTTP, the official ``mcp`` SDK's low-level Server).

Connecting: ``POST|GET http(s)://<host>/mcp?instanceId=<feature instance id>`` with
``Authorization: Bearer <API token or login token>``. A token narrowed to one instance
(``POST /api/me/tokens {instanceId}``) needs no ``instanceId``; naming another instance with it is
403. Without a token, or with an expired or revoked one: 401 with ``WWW-Authenticate: Bearer``
(no OAuth: PowerOn hands out its own tokens, so no protected resource metadata is served). An
instance the user may not open, existing or not, answers 404 as everywhere in the API (a
foreign object is not found). What the caller is offered and how calls run and are traced:
backend/mcp/tools.py.

Protocol versions: the SDK's current one (2026-07-28, one self-contained POST per request, client
info in every request's ``_meta``) and the handshake era before it (``initialize``, up to
2025-11-25).

Stateless, by decision: behind one port several backend processes answer in turn (GRANIAN_WORKERS
with PostgreSQL and Redis, several API machines behind a load balancer), without sticky routing,
so nothing may live in one process's memory between requests. The session manager runs
``stateless=True``: every POST is served on its own by whichever process gets it, from the
database. What the handshake era keeps per session is carried by the client instead: the answer
to ``initialize`` sets an ``Mcp-Session-Id`` that encodes the client's name and version (not a
secret, nothing to forge: the client states it in ``initialize`` anyway), so every later request
of that client names it for the audit trail, whichever process serves it.

Tool list changes: the server advertises ``tools.listChanged``. A watcher compares a fingerprint
of the caller's tool list every WATCH_SECONDS (from the database, so on any process) while the
client listens, and announces a change: on a ``subscriptions/listen`` stream (2026-07-28) as
``notifications/tools/list_changed`` stamped with the subscription id, and on the GET stream of
the handshake era (served here, since the stateless SDK transport keeps none).

Limits: request bodies above MAX_BODY_BYTES are refused with 413 and a JSON-RPC error before
anything is parsed; malformed JSON-RPC gets the SDK's parse/invalid-request errors.
"""

from __future__ import annotations

import base64
import json
import logging
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any
from urllib.parse import parse_qs

import anyio
import mcp_types as types
from mcp.server.lowlevel import NotificationOptions, Server
from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
from mcp.shared.exceptions import MCPError
from mcp.shared.subscriptions import SUBSCRIPTION_ID_META_KEY, ToolsListChanged, event_to_notification
from mcp_types.version import MODERN_PROTOCOL_VERSIONS
from starlette.types import Message, Receive, Scope, Send

from backend import __version__
from backend.api.asgi_body import read_body, replay
from backend.auth import token_and_user
from backend.db import session_scope
from backend.errors import NotFound
from backend.mcp import tools
from backend.rbac.access import AccessContext

log = logging.getLogger(__name__)

PATH = "/mcp"
MAX_BODY_BYTES = 256 * 1024
WATCH_SECONDS = 2.0
PING_SECONDS = 15.0
SCOPE_KEY = "poweron.mcp"
SESSION_PREFIX = "pon1."
SESSION_HEADER = b"mcp-session-id"
CLIENT_FIELD_MAX = 100
INSTRUCTIONS = ("PowerOn's tools for one feature instance, run with your rights: the agent tools you may use "
                "there and the workflows exposed as tools.")


# --- who calls -------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Identity:
    """The authenticated caller of one HTTP request and the client it says it is."""

    caller: tools.Caller
    token: str
    client: dict[str, Any]


class Refusal(Exception):
    """An HTTP-level refusal (authentication, instance choice) with its status and OAuth error code."""

    def __init__(self, status: int, error: str, description: str):
        super().__init__(description)
        self.status = status
        self.error = error
        self.description = description


def _header(scope: Scope, name: bytes) -> str | None:
    for key, value in scope.get("headers", ()):
        if key.lower() == name:
            return value.decode("latin-1")
    return None


def _bearer(scope: Scope) -> str | None:
    scheme, _, token = (_header(scope, b"authorization") or "").partition(" ")
    return token.strip() if scheme.lower() == "bearer" and token.strip() else None


def _instance_param(scope: Scope) -> str | None:
    values = parse_qs(scope.get("query_string", b"").decode("latin-1")).get("instanceId")
    return values[0].strip() or None if values else None


def resolve(token: str | None, instance_id: str | None) -> tools.Caller:
    """The caller a bearer token and the requested instance stand for (database work).

    Raises:
        Refusal: 401 without a valid token, 403 when the token is narrowed to another instance,
            400 when no instance is named, 404 for an instance the user may not open.
    """
    with session_scope() as session:
        found = token_and_user(session, token)
        if found is None:
            raise Refusal(401, "invalid_token", "missing, expired or revoked bearer token")
        row, user = found
        if row.instance_id and instance_id and instance_id != row.instance_id:
            raise Refusal(403, "insufficient_scope", f"this token is limited to feature instance {row.instance_id}")
        chosen = row.instance_id or instance_id
        if not chosen:
            raise Refusal(400, "invalid_request", "name the feature instance to work in: /mcp?instanceId=<id> "
                                                  "(or use a token limited to one instance)")
        try:
            instance = AccessContext(session, user).require_instance(chosen)
        except NotFound as exc:
            raise Refusal(404, "not_found", str(exc)) from None
        return tools.Caller(user_id=user.id, instance_id=instance.id, mandate_id=instance.mandate_id,
                            read_only=row.read_only, scoped=bool(row.instance_id))


def _session_id(client_info: Any) -> str | None:
    """The Mcp-Session-Id of a handshake: the client's name and version, base64url-encoded."""
    if not isinstance(client_info, dict):
        return None
    info = {k: str(client_info.get(k))[:CLIENT_FIELD_MAX] for k in ("name", "version") if client_info.get(k)}
    encoded = base64.urlsafe_b64encode(json.dumps(info, separators=(",", ":")).encode()).decode().rstrip("=")
    return SESSION_PREFIX + encoded


def _client_of_session(value: str | None) -> dict[str, Any] | None:
    if not value or not value.startswith(SESSION_PREFIX) or len(value) > 1024:
        return None
    text = value[len(SESSION_PREFIX):]
    try:
        info = json.loads(base64.urlsafe_b64decode(text + "=" * (-len(text) % 4)))
    except (ValueError, TypeError):
        return None
    if not isinstance(info, dict):
        return None
    return {k: str(info[k])[:CLIENT_FIELD_MAX] for k in ("name", "version") if k in info}


def _client_of(scope: Scope) -> dict[str, Any]:
    client = _client_of_session(_header(scope, SESSION_HEADER)) or {}
    agent = _header(scope, b"user-agent")
    if agent:
        client = {**client, "userAgent": agent[:200]}
    return client


# --- the SDK server and its handlers -----------------------------------------------------------------


def _identity(ctx: Any) -> Identity:
    request = getattr(ctx, "request", None)
    identity = request.scope.get(SCOPE_KEY) if request is not None else None
    if not isinstance(identity, Identity):  # never: every request passes McpEndpoint first
        raise MCPError(types.INTERNAL_ERROR, "request reached the MCP server without authentication")
    return identity


def _client(ctx: Any, identity: Identity) -> dict[str, Any]:
    """The client as it introduced itself: the request envelope's clientInfo (2026-07-28), else
    the handshake's (carried in the session id), with the protocol version."""
    client = dict(identity.client)
    params = ctx.session.client_params
    if params is not None and params.client_info is not None:
        client.update(name=params.client_info.name[:CLIENT_FIELD_MAX],
                      version=params.client_info.version[:CLIENT_FIELD_MAX])
    client["protocolVersion"] = ctx.protocol_version
    return client


def _in_session(fn: Callable[..., Any]) -> Callable[..., Any]:
    def run(*args: Any) -> Any:
        with session_scope() as session:
            return fn(session, *args)

    return run


async def _list_tools(ctx: Any, _params: types.PaginatedRequestParams | None) -> types.ListToolsResult:
    identity = _identity(ctx)
    listed, _ = await anyio.to_thread.run_sync(_in_session(tools.listing), identity.caller)
    return types.ListToolsResult(tools=[types.Tool.model_validate(tool) for tool in listed])


async def _call_tool(ctx: Any, params: types.CallToolRequestParams) -> types.CallToolResult:
    identity = _identity(ctx)
    request_id = str(ctx.request_id) if ctx.request_id is not None else None
    try:
        outcome = await anyio.to_thread.run_sync(
            _in_session(tools.call), identity.caller, params.name, params.arguments, _client(ctx, identity),
            request_id)
    except tools.UnknownTool:
        raise MCPError(types.INVALID_PARAMS, f"Unknown tool: {params.name} (not among your tools here; "
                                             "see tools/list)") from None
    return types.CallToolResult(content=[types.TextContent(type="text", text=outcome.text)],
                                is_error=not outcome.ok)


async def _fingerprint(identity: Identity) -> str | None:
    """The caller's tool list fingerprint, or None once the token no longer holds (stream ends)."""
    def check(session: Any) -> str | None:
        if token_and_user(session, identity.token) is None:
            return None
        return tools.fingerprint(session, identity.caller)

    try:
        return await anyio.to_thread.run_sync(_in_session(check))
    except Exception:  # noqa: BLE001 - a lost database must not crash the stream; it ends instead
        log.exception("MCP list-changed watcher failed")
        return None


async def watch(identity: Identity, last: str | None) -> AsyncIterator[None]:
    """Yields each time the caller's tool list changed from fingerprint `last` (taken before the
    client was told it listens, so no change in between is missed); ends when the token no
    longer holds."""
    while last is not None:
        await anyio.sleep(WATCH_SECONDS)
        now = await _fingerprint(identity)
        if now is None:
            return
        if now != last:
            last = now
            yield


async def _listen(ctx: Any, params: types.SubscriptionsListenRequestParams) -> types.SubscriptionsListenResult:
    """`subscriptions/listen` (2026-07-28): acknowledge, then announce tool list changes."""
    identity = _identity(ctx)
    subscription_id = ctx.request_id
    if subscription_id is None:
        raise MCPError(types.INVALID_REQUEST, "subscriptions/listen requires a request id")
    wants_tools = bool(params.notifications.tools_list_changed)
    meta: dict[str, Any] = {SUBSCRIPTION_ID_META_KEY: subscription_id}
    honored = types.SubscriptionFilter(tools_list_changed=True if wants_tools else None)
    first = await _fingerprint(identity) if wants_tools else None
    await ctx.session.send_notification(
        types.SubscriptionsAcknowledgedNotification(
            params=types.SubscriptionsAcknowledgedNotificationParams(notifications=honored, _meta=meta)),
        related_request_id=subscription_id)
    if wants_tools:
        async for _ in watch(identity, first):
            await ctx.session.send_notification(event_to_notification(ToolsListChanged(), meta),
                                                related_request_id=subscription_id)
    else:
        await anyio.sleep_forever()  # nothing else is ever announced; the client closes the stream
    return types.SubscriptionsListenResult(_meta=meta)


class PowerOnMcpServer(Server):
    """The low-level server with PowerOn's handlers; its tool list changes are announced."""

    def __init__(self) -> None:
        super().__init__("PowerOn", version=__version__, instructions=INSTRUCTIONS, on_list_tools=_list_tools,
                         on_call_tool=_call_tool, on_subscriptions_listen=_listen)

    def create_initialization_options(self, notification_options: NotificationOptions | None = None,
                                      experimental_capabilities: dict[str, dict[str, Any]] | None = None,
                                      extensions: dict[str, dict[str, Any]] | None = None) -> Any:
        """The handshake's capabilities, with `tools.listChanged`."""
        return super().create_initialization_options(notification_options or NotificationOptions(tools_changed=True),
                                                     experimental_capabilities, extensions)


# --- HTTP ----------------------------------------------------------------------------------------------


async def _send_json(send: Send, status: int, body: dict[str, Any], headers: list[tuple[bytes, bytes]] = ()) -> None:
    data = json.dumps(body).encode()
    await send({"type": "http.response.start", "status": status,
                "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(data)).encode()),
                            *headers]})
    await send({"type": "http.response.body", "body": data})


async def _refuse(send: Send, refusal: Refusal) -> None:
    headers = []
    if refusal.status in (401, 403):
        challenge = f'Bearer realm="PowerOn", error="{refusal.error}", error_description="{refusal.description}"'
        headers.append((b"www-authenticate", challenge.encode()))
    await _send_json(send, refusal.status, {"error": refusal.error, "error_description": refusal.description},
                     headers)


def _rpc_error(message: str, code: int = types.INVALID_REQUEST) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": None, "error": {"code": code, "message": message}}


def _initialize_client(body: bytes) -> Any:
    try:
        message = json.loads(body)
    except ValueError:
        return None
    if isinstance(message, dict) and message.get("method") == "initialize" and isinstance(message.get("params"), dict):
        return message["params"].get("clientInfo")
    return None


def _with_session_header(send: Send, session_id: str) -> Send:
    async def sending(message: Message) -> None:
        if message["type"] == "http.response.start" and message.get("status", 500) < 300:
            headers = [h for h in message.get("headers", []) if h[0].lower() != SESSION_HEADER]
            message = {**message, "headers": [*headers, (SESSION_HEADER, session_id.encode())]}
        await send(message)

    return sending


async def _change_stream(identity: Identity, scope: Scope, receive: Receive, send: Send) -> None:
    """The handshake era's GET stream: `notifications/tools/list_changed` when the list changes."""
    if "text/event-stream" not in (_header(scope, b"accept") or ""):
        await _send_json(send, 406, _rpc_error("Not Acceptable: a GET stream needs Accept: text/event-stream"))
        return
    headers = [(b"content-type", b"text/event-stream"), (b"cache-control", b"no-cache, no-transform"),
               (b"x-accel-buffering", b"no")]
    session = _header(scope, SESSION_HEADER)
    if session:
        headers.append((SESSION_HEADER, session.encode("latin-1")))
    first = await _fingerprint(identity)
    await send({"type": "http.response.start", "status": 200, "headers": headers})
    changed = json.dumps({"jsonrpc": "2.0", "method": "notifications/tools/list_changed"})
    event = f"event: message\r\ndata: {changed}\r\n\r\n".encode()

    async def announce() -> None:
        async for _ in watch(identity, first):
            await send({"type": "http.response.body", "body": event, "more_body": True})
        tg.cancel_scope.cancel()  # the token no longer holds

    async def keep_alive() -> None:
        while True:
            await send({"type": "http.response.body", "body": b": ping\r\n\r\n", "more_body": True})
            await anyio.sleep(PING_SECONDS)

    async def until_gone() -> None:
        while (await receive())["type"] != "http.disconnect":
            pass
        tg.cancel_scope.cancel()

    try:
        async with anyio.create_task_group() as tg:
            tg.start_soon(announce)
            tg.start_soon(keep_alive)
            tg.start_soon(until_gone)
        await send({"type": "http.response.body", "body": b"", "more_body": False})
    except OSError:  # the client went away while we wrote
        pass


class McpEndpoint:
    """The ASGI app at /mcp: authentication, instance choice, limits, then the SDK's session manager.

    :meth:`run` must be entered in the serving process's lifespan (the REST API's own lifespan,
    backend/runtime.py's, or a Reflex lifespan task); until then requests answer 503.
    """

    def __init__(self) -> None:
        self.server = PowerOnMcpServer()
        self.manager: StreamableHTTPSessionManager | None = None

    @asynccontextmanager
    async def run(self) -> AsyncIterator[None]:
        """Serve MCP for the lifetime of the context. A session manager runs only once, so every
        lifespan gets a fresh one (an app whose lifespan starts again, as test clients do);
        entering while running already (the app's lifespan inside a host's) changes nothing."""
        if self.manager is not None:
            yield
            return
        manager = StreamableHTTPSessionManager(self.server, stateless=True, max_request_body_size=MAX_BODY_BYTES)
        async with manager.run():
            self.manager = manager
            try:
                yield
            finally:
                self.manager = None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Answer one HTTP request at /mcp."""
        if scope["type"] != "http":
            return
        manager = self.manager
        if manager is None:
            await _send_json(send, 503, _rpc_error("the MCP server is starting or stopping; try again shortly"))
            return
        try:
            caller = await anyio.to_thread.run_sync(resolve, _bearer(scope), _instance_param(scope))
        except Refusal as refusal:
            await _refuse(send, refusal)
            return
        identity = Identity(caller, _bearer(scope) or "", _client_of(scope))
        scope = {**scope, SCOPE_KEY: identity}
        version = _header(scope, b"mcp-protocol-version")
        if scope["method"] == "GET" and version not in MODERN_PROTOCOL_VERSIONS:
            await _change_stream(identity, scope, receive, send)
            return
        if scope["method"] != "POST":
            await manager.handle_request(scope, receive, send)
            return
        await self._post(manager, scope, receive, send)

    async def _post(self, manager: StreamableHTTPSessionManager, scope: Scope, receive: Receive, send: Send) -> None:
        declared = _header(scope, b"content-length")
        if declared and declared.isdigit() and int(declared) > MAX_BODY_BYTES:
            body, gone = None, None
        else:
            body, gone = await read_body(receive, MAX_BODY_BYTES)
        if gone is not None:
            return
        if body is None:
            await _send_json(send, 413, _rpc_error(f"request body exceeds {MAX_BODY_BYTES:,} bytes "
                                                   "(tool arguments included); nothing was executed"))
            return
        client_info = _initialize_client(body)
        session_id = _session_id(client_info) if client_info is not None else None
        await manager.handle_request(scope, replay(body, receive),
                                          _with_session_header(send, session_id) if session_id else send)


def lifespan_of(endpoint: McpEndpoint) -> Callable[[Any], Any]:
    """A Starlette/FastAPI lifespan that serves `endpoint` (for apps that run nothing else)."""

    @asynccontextmanager
    async def lifespan(_app: Any) -> AsyncIterator[None]:
        async with endpoint.run():
            yield

    return lifespan

