"""External MCP servers for the tests of the MCP client side (issue 19), built with the official SDK.

:func:`serve_tools_server` serves an ``MCPServer`` over Streamable HTTP with uvicorn on a free
127.0.0.1 port, in a thread. It requires a bearer token (the SDK's own bearer middleware with a
token verifier) and has a few tools: ``add`` (read-only), ``shout``, ``whoami`` (structured
content), ``broken`` (isError), ``hang`` (never answers) and ``huge`` (10 MB of text).

With ``oauth=True`` the accepted tokens are those its ``/token`` endpoint issued for the client
credentials ``CLIENT_ID`` / ``CLIENT_SECRET`` (OAuth 2.0 client-credentials grant); the counter
``issued`` tells how many it gave out.
"""

from __future__ import annotations

import secrets
import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

import anyio
import uvicorn
from mcp.server.auth.provider import AccessToken
from mcp.server.auth.settings import AuthSettings
from mcp.server.mcpserver import MCPServer
from mcp_types import ToolAnnotations
from pydantic import BaseModel
from starlette.requests import Request
from starlette.responses import JSONResponse

STATIC_TOKEN = "test-mcp-token-1"
CLIENT_ID = "poweron-test-client"
CLIENT_SECRET = "poweron-test-secret"
HUGE_BYTES = 10 * 1024 * 1024


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


@dataclass
class Verifier:
    """Accepts the tokens in `valid` (the SDK's TokenVerifier protocol)."""

    valid: set[str] = field(default_factory=set)

    async def verify_token(self, token: str) -> AccessToken | None:
        if token in self.valid:
            return AccessToken(token=token, client_id=CLIENT_ID, scopes=[])
        return None


class Person(BaseModel):
    name: str
    calls: int


@dataclass
class RunningServer:
    """A served test MCP server."""

    url: str
    verifier: Verifier
    issued: int = 0
    token_url: str = ""


def build_server(verifier: Verifier, port: int, state: RunningServer | None = None) -> MCPServer:
    """The test server's tools."""
    base = f"http://127.0.0.1:{port}"
    server = MCPServer("poweron-test-tools", token_verifier=verifier,
                       auth=AuthSettings(issuer_url=base, resource_server_url=f"{base}/mcp",
                                         validate_token_resource=False))
    calls = {"n": 0}

    @server.tool(description="Add two whole numbers", annotations=ToolAnnotations(read_only_hint=True))
    def add(a: int, b: int) -> str:
        return str(a + b)

    @server.tool(description="Repeat a text in capitals")
    def shout(text: str) -> str:
        return text.upper() + "!"

    @server.tool(description="Who is called, as structured content", structured_output=True,
                 annotations=ToolAnnotations(read_only_hint=True))
    def whoami(name: str) -> Person:
        calls["n"] += 1
        return Person(name=name, calls=calls["n"])

    @server.tool(description="Always fails")
    def broken() -> str:
        raise ValueError("the broken tool broke as designed")

    @server.tool(description="Never answers")
    async def hang() -> str:
        await anyio.sleep(3600)
        return "never"

    @server.tool(description="Answers 10 MB of text")
    def huge() -> str:
        return "x" * HUGE_BYTES

    if state is not None:
        @server.custom_route("/token", methods=["POST"])
        async def token(request: Request) -> JSONResponse:
            form = await request.form()
            if (form.get("grant_type") != "client_credentials" or
                    not _client_ok(request, form)):
                return JSONResponse({"error": "invalid_client"}, status_code=401)
            value = secrets.token_urlsafe(16)
            verifier.valid.add(value)
            state.issued += 1
            return JSONResponse({"access_token": value, "token_type": "Bearer", "expires_in": 3600})

    return server


def _client_ok(request: Request, form) -> bool:
    import base64

    header = request.headers.get("authorization", "")
    if header.lower().startswith("basic "):
        user, _, password = base64.b64decode(header[6:]).decode().partition(":")
        return user == CLIENT_ID and password == CLIENT_SECRET
    return form.get("client_id") == CLIENT_ID and form.get("client_secret") == CLIENT_SECRET


@contextmanager
def serve_tools_server(oauth: bool = False) -> Iterator[RunningServer]:
    """Serve the test server on a free port until the block ends."""
    port = free_port()
    verifier = Verifier(set() if oauth else {STATIC_TOKEN})
    state = RunningServer(f"http://127.0.0.1:{port}/mcp", verifier)
    if oauth:
        state.token_url = f"http://127.0.0.1:{port}/token"
    app = build_server(verifier, port, state if oauth else None).streamable_http_app()
    with serve_in_thread(app, port):
        yield state


@contextmanager
def serve_in_thread(app, port: int) -> Iterator[None]:
    """Serve the ASGI `app` with uvicorn (lifespan on) on 127.0.0.1:`port` in a thread until the block ends."""
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning",
                                           timeout_graceful_shutdown=1, lifespan="on"))
    thread = threading.Thread(target=server.run, name=f"uvicorn-{port}", daemon=True)
    thread.start()
    deadline = time.monotonic() + 20
    while not server.started:
        if time.monotonic() > deadline or not thread.is_alive():
            raise RuntimeError(f"uvicorn did not start on port {port}")
        time.sleep(0.02)
    try:
        yield
    finally:
        server.should_exit = True
        thread.join(timeout=10)


@contextmanager
def serve_stand_in(state, build_app):
    """Serve a stand-in's ASGI app (`build_app(state)`) on a free port of 127.0.0.1, setting
    `state.url`, until the block ends; yields `state`."""
    port = free_port()
    state.url = f"http://127.0.0.1:{port}"
    with serve_in_thread(build_app(state), port):
        yield state
