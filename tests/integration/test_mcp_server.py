"""PowerOn's MCP server at /mcp (issue 19), spoken to by clients nobody here wrote.

The REST API (with /mcp) is served by uvicorn on a free 127.0.0.1 port in this process, its
lifespan running the MCP session manager as in production; the official ``mcp`` SDK client (both
protocol eras: the current 2026-07-28 and the handshake era) and the MCP Inspector's CLI connect
with real bearer tokens over HTTP.
"""

from __future__ import annotations

import asyncio
import json
import socket
import subprocess
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass

import httpx
import httpx2
import pytest
import uvicorn
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError
from mcp_types import Implementation
from sqlmodel import select

from backend.api.app import create_api
from backend.db import session_scope
from backend.db.models import AgentRun, AgentStep, WorkflowRun
from tests.integration.conftest import ADMIN_PASSWORD
from tests.mcp_tools import INSPECTOR, node_env

PASSWORD = "secret-pass-123"
WAIT = 20.0


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


@dataclass
class Served:
    """The API served over HTTP, with the admin's login token and the default instances."""

    url: str
    rest: httpx.Client
    admin: str
    workspace: str
    editor: str

    def mcp_url(self, instance_id: str | None = None) -> str:
        return f"{self.url}/mcp" + (f"?instanceId={instance_id}" if instance_id else "")

    def auth(self, token: str) -> dict[str, str]:
        return {"Authorization": f"Bearer {token}"}

    def api_token(self, token: str, name: str, **extra) -> str:
        created = self.rest.post("/api/me/tokens", json={"name": name, **extra}, headers=self.auth(token))
        assert created.status_code == 201, created.text
        return created.json()["token"]

    def login(self, username: str, password: str = PASSWORD) -> str:
        response = self.rest.post("/api/auth/login", json={"username": username, "password": password})
        assert response.status_code == 200, response.text
        return response.json()["token"]


@pytest.fixture
def served(app_config: str) -> Iterator[Served]:
    """create_api() under uvicorn (lifespan on) on a free port, until the test ends."""
    port = free_port()
    server = uvicorn.Server(uvicorn.Config(create_api(), host="127.0.0.1", port=port, lifespan="on",
                                           log_level="warning"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + WAIT
    while not server.started:
        assert time.monotonic() < deadline and thread.is_alive(), "uvicorn did not start"
        time.sleep(0.05)
    url = f"http://127.0.0.1:{port}"
    with httpx.Client(base_url=url, timeout=WAIT) as rest:
        admin = rest.post("/api/auth/login", json={"username": "admin", "password": ADMIN_PASSWORD}).json()["token"]
        me = rest.get("/api/me", headers={"Authorization": f"Bearer {admin}"}).json()
        code_of = {i["featureCode"]: i["id"] for i in me["instances"]}
        yield Served(url, rest, admin, code_of["workspace"], code_of["graphicalEditor"])
    server.should_exit = True
    thread.join(WAIT)


def client(url: str, token: str | None, mode: str = "auto", **options) -> Client:
    """The official SDK client for `url` with a bearer token."""
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    http = httpx2.AsyncClient(headers=headers, timeout=WAIT)
    return Client(streamable_http_client(url, http_client=http), mode=mode, **options)


def run(coro):
    return asyncio.run(asyncio.wait_for(coro, 60))


async def tool_names(url: str, token: str, mode: str = "auto") -> set[str]:
    async with client(url, token, mode) as session:
        return {tool.name for tool in (await session.list_tools()).tools}


def traces() -> list[tuple[AgentRun, list[AgentStep]]]:
    with session_scope() as session:
        runs = session.exec(select(AgentRun).where(AgentRun.profile == "mcp").order_by(AgentRun.started_at)).all()
        return [(r, list(session.exec(select(AgentStep).where(AgentStep.run_id == r.id)).all())) for r in runs]


# --- connecting, listing, calling ----------------------------------------------------------------------


@pytest.mark.parametrize("mode", ["auto", "legacy"])
def test_the_sdk_client_lists_and_calls_tools_as_the_user_and_each_call_is_traced(served, mode):
    url = served.mcp_url(served.workspace)

    async def scenario():
        async with client(url, served.api_token(served.admin, "mcp"), mode,
                          client_info=Implementation(name="pytest-client", version="1.2.3")) as session:
            assert session.server_capabilities.tools is not None
            assert session.server_capabilities.tools.list_changed is True
            listed = {tool.name: tool for tool in (await session.list_tools()).tools}
            assert {"core_writeFile", "core_readFile"} <= set(listed)
            assert "featureData" not in json.dumps([t.name for t in listed.values()])
            schema = listed["core_writeFile"].input_schema
            assert schema["type"] == "object" and {"path", "content"} <= set(schema["properties"])
            written = await session.call_tool("core_writeFile", {"path": "/notes/hello.txt", "content": "Grüezi"})
            assert not written.is_error, written.content
            read = await session.call_tool("core_readFile", {"path": "/notes/hello.txt"})
            assert not read.is_error
            assert json.loads(read.content[0].text)["text"] == "Grüezi"
            failed = await session.call_tool("core_readFile", {"path": "/nowhere.txt"})
            assert failed.is_error and "nowhere" in failed.content[0].text
            return session.protocol_version

    version = run(scenario())
    assert version == ("2026-07-28" if mode == "auto" else "2025-11-25")
    found = traces()
    assert [r.status for r, _ in found] == ["completed", "completed", "failed"]
    run_row, steps = found[1]
    assert run_row.feature_instance_id == served.workspace and run_row.prompt.startswith("pytest-client 1.2.3")
    assert [s.kind for s in steps] == ["tool_call"] and steps[0].name == "core_readFile" and steps[0].ok
    assert steps[0].detail["mcpClient"]["name"] == "pytest-client"
    assert steps[0].detail["mcpClient"]["version"] == "1.2.3"
    assert steps[0].detail["mcpClient"]["protocolVersion"] == version
    assert "nowhere" in found[2][0].error
