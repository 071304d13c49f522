"""PowerOn's MCP server at /mcp (issue 19), spoken to by clients nobody here wrote.

The REST API (with /mcp) is served by uvicorn on a free 127.0.0.1 port in this process, its
lifespan running the MCP session manager as in production; the official ``mcp`` SDK client (both
protocol eras: the current 2026-07-28 and the handshake era) and the MCP Inspector's CLI connect
with real bearer tokens over HTTP.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass

import httpx
import httpx2
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError
from mcp_types import Implementation
from sqlmodel import select

from backend.api.app import create_api
from backend.db import session_scope
from backend.db.models import AgentRun, AgentStep, WorkflowRun
from tests.integration.conftest import ADMIN_PASSWORD
from tests.mcp_test_servers import free_port, serve_in_thread
from tests.mcp_tools import INSPECTOR, node_env

PASSWORD = "secret-pass-123"
WAIT = 20.0


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
    url = f"http://127.0.0.1:{port}"
    with serve_in_thread(create_api(), port), httpx.Client(base_url=url, timeout=WAIT) as rest:
        admin = rest.post("/api/auth/login", json={"username": "admin", "password": ADMIN_PASSWORD}).json()["token"]
        me = rest.get("/api/me", headers={"Authorization": f"Bearer {admin}"}).json()
        code_of = {i["featureCode"]: i["id"] for i in me["instances"]}
        yield Served(url, rest, admin, code_of["workspace"], code_of["graphicalEditor"])


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


# --- who may connect, where ------------------------------------------------------------------------------


def test_no_or_a_bad_token_is_401_with_a_bearer_challenge(served):
    for headers in ({}, {"Authorization": "Bearer pon_not-a-token"}, {"Authorization": "Basic YTpi"}):
        response = served.rest.post(f"/mcp?instanceId={served.workspace}", headers=headers,
                                    json={"jsonrpc": "2.0", "id": 1, "method": "tools/list"})
        assert response.status_code == 401
        assert response.headers["www-authenticate"].startswith("Bearer ")
        assert response.json()["error"] == "invalid_token"

    async def refused():
        async with client(served.mcp_url(served.workspace), None):
            pass

    with pytest.raises(Exception):  # noqa: B017 - the SDK reports the 401 in its own way
        run(refused())
    assert traces() == []


def test_the_instance_comes_from_the_token_scope_or_the_query_and_others_are_refused(served):
    scoped = served.api_token(served.admin, "only-workspace", instanceId=served.workspace)
    listed = served.rest.get("/api/me/tokens", headers=served.auth(served.admin)).json()
    assert {(t["name"], t["instanceId"], t["readOnly"]) for t in listed} == {
        ("only-workspace", served.workspace, False)}
    assert "core_readFile" in run(tool_names(served.mcp_url(), scoped))  # no instanceId needed
    assert "core_readFile" in run(tool_names(served.mcp_url(served.workspace), scoped))

    other = served.rest.post(f"/mcp?instanceId={served.editor}", headers=served.auth(scoped),
                             json={"jsonrpc": "2.0", "id": 1, "method": "tools/list"})
    assert other.status_code == 403 and other.json()["error"] == "insufficient_scope"
    assert served.workspace in other.json()["error_description"]

    unscoped = served.api_token(served.admin, "everywhere")
    unnamed = served.rest.post("/mcp", headers=served.auth(unscoped),
                               json={"jsonrpc": "2.0", "id": 1, "method": "tools/list"})
    assert unnamed.status_code == 400 and "instanceId" in unnamed.json()["error_description"]
    missing = served.rest.post("/mcp?instanceId=nope", headers=served.auth(unscoped),
                               json={"jsonrpc": "2.0", "id": 1, "method": "tools/list"})
    assert missing.status_code == 404


def test_an_instance_of_another_mandate_is_not_found_and_tokens_cannot_name_it(served):
    acme = served.rest.post("/api/mandates", json={"name": "Acme"}, headers=served.auth(served.admin)).json()["id"]
    created = served.rest.post(f"/api/mandates/{acme}/users", headers=served.auth(served.admin),
                               json={"username": "alice", "password": PASSWORD, "roles": ["admin"]})
    assert created.status_code == 201, created.text
    alice = served.login("alice")
    foreign = served.rest.post(f"/mcp?instanceId={served.workspace}", headers=served.auth(alice),
                               json={"jsonrpc": "2.0", "id": 1, "method": "tools/list"})
    assert foreign.status_code == 404 and foreign.json()["error"] == "not_found"
    refused = served.rest.post("/api/me/tokens", json={"name": "sneaky", "instanceId": served.workspace},
                               headers=served.auth(alice))
    assert refused.status_code == 404


def _default_mandate(served: Served) -> str:
    me = served.rest.get("/api/me", headers=served.auth(served.admin)).json()
    return next(i["mandateId"] for i in me["instances"] if i["id"] == served.workspace)


def test_a_viewer_sees_no_write_tools_and_a_read_only_token_only_read_tools(served):
    mandate = _default_mandate(served)
    created = served.rest.post(f"/api/mandates/{mandate}/users", headers=served.auth(served.admin),
                               json={"username": "vera", "password": PASSWORD, "roles": ["viewer"]})
    assert created.status_code == 201, created.text
    granted = served.rest.post(f"/api/instances/{served.workspace}/access", headers=served.auth(served.admin),
                               json={"userId": created.json()["id"], "roles": ["workspace-viewer"]})
    assert granted.status_code in (200, 201, 204), granted.text
    url = served.mcp_url(served.workspace)
    everything = run(tool_names(url, served.admin))
    assert {"core_writeFile", "core_deleteFile"} <= everything
    viewer = run(tool_names(url, served.login("vera")))
    # The viewer connects and is offered what their roles allow: no toolbox at all (as in the agent).
    assert viewer == set()

    read_only = served.api_token(served.admin, "reader", readOnly=True)
    allowed = run(tool_names(url, read_only))
    assert allowed and "core_readFile" in allowed and "core_writeFile" not in allowed
    from backend.actions.catalogue import registry_for
    from backend.actions.openai_tools import tool_name

    with session_scope() as session:
        actions = {tool_name(a.id): a for a in registry_for(session, mandate).actions.values()}
    assert all(actions[name].capabilities == {"read"} for name in allowed)

    async def write_anyway():
        async with client(url, read_only) as session:
            with pytest.raises(MCPError, match="Unknown tool: core_writeFile"):
                await session.call_tool("core_writeFile", {"path": "/x.txt", "content": "no"})

    run(write_anyway())
    assert traces() == []


# --- bad input --------------------------------------------------------------------------------------------


def test_malformed_json_rpc_unknown_tools_and_oversized_arguments_get_clear_errors_and_run_nothing(served):
    headers = {**served.auth(served.admin), "Accept": "application/json, text/event-stream",
               "Content-Type": "application/json"}
    url = f"/mcp?instanceId={served.workspace}"
    for version in ("2026-07-28", "2025-11-25"):
        garbage = served.rest.post(url, content=b'{"jsonrpc": "2.0", "id": 1, "method": ',
                                   headers={**headers, "MCP-Protocol-Version": version})
        assert garbage.status_code == 400, garbage.text
        assert garbage.json()["error"]["code"] == -32700  # parse error
    batch = served.rest.post(url, content=b"[1, 2]", headers={**headers, "MCP-Protocol-Version": "2026-07-28"})
    assert batch.status_code == 400 and batch.json()["error"]["code"] == -32600

    huge = {"path": "/big.txt", "content": "x" * (300 * 1024)}
    oversized = served.rest.post(url, headers=headers, json={
        "jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": {"name": "core_writeFile", "arguments": huge}})
    assert oversized.status_code == 413
    assert "262,144 bytes" in oversized.json()["error"]["message"]

    async def unknown():
        async with client(served.mcp_url(served.workspace), served.admin) as session:
            with pytest.raises(MCPError, match="Unknown tool: core_nothing"):
                await session.call_tool("core_nothing", {})
            listed = await session.list_tools()
            assert "core_readFile" in {t.name for t in listed.tools}
            bad = await session.call_tool("core_readFile", {"path": 12})
            assert bad.is_error and "path" in bad.content[0].text

    run(unknown())
    found = traces()
    assert [(r.status, s[0].name) for r, s in found] == [("failed", "core_readFile")]  # only the call that ran
    with session_scope() as session:
        assert session.exec(select(WorkflowRun)).all() == []


# --- workflows as tools, list changes ---------------------------------------------------------------------

FORM = [{"name": "name", "label": "Your name", "type": "text", "required": True},
        {"name": "amount", "type": "number", "required": True},
        {"name": "kind", "type": "select", "options": ["order", "refund"], "default": "order"}]


def _published(served: Served, name: str, graph: dict) -> str:
    base = f"/api/graphicalEditor/{served.editor}"
    headers = served.auth(served.admin)
    created = served.rest.post(f"{base}/workflows", json={"name": name, "graph": graph}, headers=headers)
    assert created.status_code == 201, created.text
    workflow_id = created.json()["id"]
    assert served.rest.post(f"{base}/workflows/{workflow_id}/publish", headers=headers).status_code == 200
    return workflow_id


def _expose(served: Served, workflow_id: str, on: bool = True) -> None:
    patched = served.rest.patch(f"/api/graphicalEditor/{served.editor}/workflows/{workflow_id}",
                                json={"mcpTool": on}, headers=served.auth(served.admin))
    assert patched.status_code == 200, patched.text
    assert patched.json()["mcpTool"] is on


def test_an_exposed_workflow_is_a_tool_whose_call_returns_the_run_output_or_its_pause(served):
    form = _published(served, "Order intake", {
        "nodes": [{"id": "start", "type": "trigger.form", "parameters": {"fields": FORM}},
                  {"id": "echo", "type": "context.transform",
                   "parameters": {"data": "{{ input }}", "template": "{{ name }} asks {{ amount }}"}}],
        "edges": [{"source": "start", "target": "echo"}]})
    waiting = _published(served, "Slow one", {
        "nodes": [{"id": "start", "type": "trigger.manual", "parameters": {}},
                  {"id": "nap", "type": "flow.wait", "parameters": {"seconds": 3600}}],
        "edges": [{"source": "start", "target": "nap"}]})
    url = served.mcp_url(served.editor)
    assert not {"workflow_order_intake", "workflow_slow_one"} & run(tool_names(url, served.admin))
    _expose(served, form)
    _expose(served, waiting)

    async def scenario():
        async with client(url, served.admin, client_info=Implementation(name="wf-client", version="9")) as session:
            listed = {t.name: t for t in (await session.list_tools()).tools}
            schema = listed["workflow_order_intake"].input_schema
            assert schema["required"] == ["name", "amount"]
            assert schema["properties"]["kind"]["enum"] == ["order", "refund", None]
            done = await session.call_tool("workflow_order_intake", {"name": "Ada", "amount": "12.5"})
            assert not done.is_error, done.content
            answer = json.loads(done.content[0].text)
            assert answer["status"] == "completed" and answer["output"]["echo"]["result"] == "Ada asks 12.5"
            missing = await session.call_tool("workflow_order_intake", {"amount": 3})
            assert missing.is_error and "name" in missing.content[0].text
            paused = json.loads((await session.call_tool("workflow_slow_one", {"note": "hi"})).content[0].text)
            assert paused["status"] == "paused" and paused["pauseReason"] == "wait" and paused["runId"]
            return answer["runId"], paused["runId"]

    done_id, paused_id = run(scenario())
    with session_scope() as session:
        assert session.get(WorkflowRun, done_id).input == {"name": "Ada", "amount": 12.5, "kind": "order"}
        assert session.get(WorkflowRun, paused_id).input == {"note": "hi"}
    steps = [s[0] for _, s in traces()]
    assert steps[0].detail["workflowRunId"] == done_id and steps[0].detail["mcpClient"]["name"] == "wf-client"

    read_only = served.api_token(served.admin, "reader", readOnly=True)
    assert "workflow_order_intake" not in run(tool_names(url, read_only))


def test_a_listening_client_is_told_when_its_tool_list_changes(served):
    workflow_id = _published(served, "Announced", {
        "nodes": [{"id": "start", "type": "trigger.manual", "parameters": {}}], "edges": []})
    url = served.mcp_url(served.editor)

    async def scenario():
        async with client(url, served.admin) as session:
            async with session.listen(tools_list_changed=True) as subscription:
                _expose(served, workflow_id)
                async for _event in subscription:
                    break
            assert "workflow_announced" in {t.name for t in (await session.list_tools()).tools}

    run(scenario())


def test_the_handshake_era_get_stream_announces_tool_list_changes(served):
    workflow_id = _published(served, "Announced", {
        "nodes": [{"id": "start", "type": "trigger.manual", "parameters": {}}], "edges": []})
    headers = {**served.auth(served.admin), "Accept": "text/event-stream"}
    with served.rest.stream("GET", f"/mcp?instanceId={served.editor}", headers=headers) as stream:
        assert stream.status_code == 200
        assert stream.headers["content-type"].startswith("text/event-stream")
        lines = stream.iter_lines()
        assert next(lines).startswith(": ping")  # the stream is open and watching
        _expose(served, workflow_id)
        data = next(line for line in lines if line.startswith("data:"))
    assert json.loads(data[5:]) == {"jsonrpc": "2.0", "method": "notifications/tools/list_changed"}


# --- the MCP Inspector ------------------------------------------------------------------------------------


def inspector(served: Served, token: str, *args: str) -> dict:
    done = subprocess.run([str(INSPECTOR), "--cli", served.mcp_url(served.workspace), "--transport", "http",
                           "--header", f"Authorization: Bearer {token}", *args],
                          capture_output=True, text=True, timeout=90, env=node_env())
    assert done.returncode == 0, done.stderr + done.stdout
    return json.loads(done.stdout)


@pytest.mark.skipif(not INSPECTOR.exists(), reason="make test installs the MCP Inspector (scripts/ensure_mcp_tools.sh)")
def test_the_mcp_inspector_cli_lists_and_calls_tools(served):
    token = served.api_token(served.admin, "inspector")
    listed = inspector(served, token, "--method", "tools/list")
    names = {tool["name"] for tool in listed["tools"]}
    assert {"core_writeFile", "core_readFile"} <= names
    written = inspector(served, token, "--method", "tools/call", "--tool-name", "core_writeFile",
                        "--tool-arg", "path=/inspected.txt", "--tool-arg", "content=from the inspector")
    assert not written.get("isError"), written
    read = inspector(served, token, "--method", "tools/call", "--tool-name", "core_readFile",
                     "--tool-arg", "path=/inspected.txt")
    assert json.loads(read["content"][0]["text"])["text"] == "from the inspector"
    clients = {s[0].detail["mcpClient"].get("name") for _, s in traces()}
    assert clients and None not in clients


# --- another PowerOn as the client -----------------------------------------------------------------------


def test_another_poweron_registers_this_one_and_its_tools_run_as_the_token_user(served):
    """A PowerOn registers a PowerOn's /mcp as an external MCP server (here: a second mandate of the
    same installation, the way another installation would): its tools become the toolbox
    mcp:<name> there and run here with the rights of the token's user, traced here as MCP calls."""
    other = served.rest.post("/api/mandates", json={"name": "Other PowerOn"}, headers=served.auth(served.admin))
    assert other.status_code == 201, other.text
    # A token of the admin here, limited to the Workspace and to reading.
    token = served.api_token(served.admin, "for the other PowerOn", instanceId=served.workspace, readOnly=True)
    registered = served.rest.post(
        f"/api/mandates/{other.json()['id']}/mcp-servers", headers=served.auth(served.admin),
        json={"name": "home", "url": served.mcp_url(), "headers": {"Authorization": f"Bearer {token}"}})
    assert registered.status_code == 201, registered.text
    tools = {t["name"]: t for t in registered.json()["tools"]}
    assert "core_detectLanguage" in tools and tools["core_detectLanguage"]["readOnly"] is True
    assert all(tool["readOnly"] for tool in tools.values())  # a read-only token: read tools only
    assert token not in registered.text

    with session_scope() as session:
        from backend.actions import ActionContext, execute_action
        from backend.actions.catalogue import registry_for
        from backend.db.models import User

        admin = session.exec(select(User).where(User.username == "admin")).one()
        context = ActionContext(session, admin, other.json()["id"])
        result = execute_action("mcp:home.core_detectLanguage", {"text": "Guten Morgen, wie geht es dir heute?"},
                                context, registry_for(session, other.json()["id"]))
    assert result.ok, result.error
    assert "de" in json.dumps(result.output)
    called = [steps[0] for _run, steps in traces() if steps and steps[0].name == "core_detectLanguage"]
    assert called and called[-1].ok is True
