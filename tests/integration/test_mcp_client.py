"""External MCP servers as toolboxes `mcp:<name>` (issue 19, the client side).

Real servers on 127.0.0.1: the official SDK's MCPServer served by uvicorn (tests/mcp_test_servers.py:
bearer-protected, one OAuth client-credentials variant) and the reference server
@modelcontextprotocol/server-everything on Node.js. Everything else goes through the REST API
(/api/mandates/{mandateId}/mcp-servers, the actions route, workflows and runs, the agent's SSE
stream with the scripted model of tests/ai_server.py).
"""

from __future__ import annotations

import json
import subprocess
import time
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from backend.config import reset_settings_cache
from tests.integration.test_agent import call, of, request_toolbox_enum, stream, tool_results
from tests.mcp_test_servers import CLIENT_ID, CLIENT_SECRET, STATIC_TOKEN, free_port, serve_tools_server
from tests.mcp_tools import SERVER_EVERYTHING, node_env

PASSWORD = "member-pass-123"
TIMEOUT_SECONDS = 3
sqlite_only = pytest.mark.parametrize("db_url", ["sqlite"], indirect=True)


@pytest.fixture
def mcp_api(api, monkeypatch):
    """The API with a short MCP timeout (a hanging tool is given up after TIMEOUT_SECONDS)."""
    monkeypatch.setenv("POWERON_MCP_TIMEOUT_SECONDS", str(TIMEOUT_SECONDS))
    reset_settings_cache()
    yield api
    reset_settings_cache()


@pytest.fixture
def tools_server() -> Iterator[Any]:
    with serve_tools_server() as server:
        yield server


def me(api, headers=None) -> dict[str, Any]:
    return api.client.get("/api/me", headers=headers or api.auth).json()


def mandate_id(api) -> str:
    return me(api)["mandates"][0]["id"]


def instance_of(api, code: str, headers=None) -> str:
    return next(i["id"] for i in me(api, headers)["instances"] if i["featureCode"] == code)


def servers_url(api, mandate: str | None = None) -> str:
    return f"/api/mandates/{mandate or mandate_id(api)}/mcp-servers"


def register(api, url: str, name: str = "tools", token: str | None = STATIC_TOKEN, **extra: Any):
    body = {"name": name, "url": url, **extra}
    if token:
        body["headers"] = {"Authorization": f"Bearer {token}"}
    return api.client.post(servers_url(api), json=body, headers=api.auth)


def run_action(api, action: str, parameters: dict[str, Any], headers=None, instance: str | None = None):
    instance = instance or instance_of(api, "workspace", headers)
    return api.client.post(f"/api/instances/{instance}/actions", json={"action": action, "parameters": parameters},
                           headers=headers or api.auth)


def member(api, username: str, mandate_roles: list[str]) -> dict[str, str]:
    """A member of the default mandate with `mandate_roles` and workspace-user in its Workspace."""
    created = api.client.post(f"/api/mandates/{mandate_id(api)}/users",
                              json={"username": username, "password": PASSWORD, "roles": mandate_roles},
                              headers=api.auth)
    assert created.status_code == 201, created.text
    granted = api.client.post(f"/api/instances/{instance_of(api, 'workspace')}/access",
                              json={"userId": created.json()["id"], "roles": ["workspace-user"]}, headers=api.auth)
    assert granted.status_code in (200, 201), granted.text
    return {"Authorization": f"Bearer {api.login(username, PASSWORD)}"}


# --- registering ---------------------------------------------------------------------------------


def test_a_registered_server_lists_its_tools_and_never_shows_its_headers(mcp_api, tools_server):
    api = mcp_api
    created = register(api, tools_server.url, description="Arithmetic and friends")
    assert created.status_code == 201, created.text
    server = created.json()
    assert server["name"] == "tools" and server["toolboxId"] == "mcp:tools" and server["status"] == "active"
    tools = {t["name"]: t for t in server["tools"]}
    assert {"add", "shout", "whoami", "broken", "hang", "huge"} <= set(tools)
    assert tools["add"]["readOnly"] is True and tools["shout"]["readOnly"] is False
    assert tools["add"]["inputSchema"]["required"] == ["a", "b"]
    assert server["headerNames"] == ["Authorization"] and server["hasOAuth"] is False
    assert server["roles"] == ["admin"] and server["url"] == tools_server.url

    listed = api.client.get(servers_url(api), headers=api.auth)
    one = api.client.get(f"{servers_url(api)}/{server['id']}", headers=api.auth)
    tested = api.client.post(f"{servers_url(api)}/{server['id']}/test", headers=api.auth)
    refreshed = api.client.post(f"{servers_url(api)}/{server['id']}/refresh", headers=api.auth)
    for answer in (created, listed, one, tested, refreshed):
        assert answer.status_code in (200, 201), answer.text
        assert STATIC_TOKEN not in answer.text
    assert [s["name"] for s in listed.json()] == ["tools"]
    assert tested.json() == {"ok": True, "message": "MCP server 'tools' answered with 6 tools"}
    assert refreshed.json()["toolsRefreshedAt"] >= server["toolsRefreshedAt"]

    result = run_action(api, "mcp:tools.add", {"a": 2, "b": 3})
    assert result.status_code == 200, result.text
    assert result.json()["ok"] is True and result.json()["output"] == {"result": "5"}
    invalid = run_action(api, "mcp:tools.add", {"a": "two"})
    assert invalid.status_code == 422 and "b" in invalid.json()["detail"]

    palette = api.client.get(f"/api/node-types?instanceId={instance_of(api, 'graphicalEditor')}", headers=api.auth)
    add = next(n for n in palette.json() if n["type"] == "mcp:tools.add")
    assert add["toolbox"] == "mcp:tools" and add["parameters"]["required"] == ["a", "b"]
    assert not any(n["type"].startswith("mcp:") for n in api.client.get("/api/node-types", headers=api.auth).json())


@sqlite_only
def test_an_unreachable_or_refusing_server_is_not_registered(mcp_api, tools_server):
    api = mcp_api
    wrong_token = register(api, tools_server.url, token="not-the-token")
    assert wrong_token.status_code == 422
    assert wrong_token.json()["errors"][0]["field"] == "headers"
    assert "refused the credentials (HTTP 401)" in wrong_token.json()["detail"]
    assert "not-the-token" not in wrong_token.text

    down = register(api, f"http://127.0.0.1:{free_port()}/mcp", name="down")
    assert down.status_code == 422 and down.json()["errors"][0]["field"] == "url"
    assert "MCP server 'down' cannot be reached" in down.json()["detail"]

    wrong_path = register(api, tools_server.url.replace("/mcp", "/nothing"), name="wrong")
    assert wrong_path.status_code == 422 and "HTTP 404" in wrong_path.json()["detail"]

    for body, field in (({"name": "Bad_Name", "url": tools_server.url}, "name"),
                        ({"name": "ok", "url": "ftp://example.org/mcp"}, "url"),
                        ({"name": "ok", "url": "http://user:pw@127.0.0.1/mcp"}, "url"),
                        ({"name": "ok", "url": tools_server.url, "headers": {"Bad Header": "x"}}, "headers"),
                        ({"name": "ok", "url": tools_server.url, "roles": ["nobody"]}, "roles")):
        refused = api.client.post(servers_url(api), json=body, headers=api.auth)
        assert refused.status_code == 422, (body, refused.text)
        assert refused.json()["errors"][0]["field"] == field, refused.text
    assert api.client.get(servers_url(api), headers=api.auth).json() == []

    assert register(api, tools_server.url).status_code == 201
    twice = register(api, tools_server.url)
    assert twice.status_code == 422 and "already registered" in twice.json()["detail"]


@sqlite_only
def test_oauth_client_credentials_get_a_token_once_and_send_it_as_bearer(mcp_api):
    api = mcp_api
    with serve_tools_server(oauth=True) as server:
        oauth = {"tokenUrl": server.token_url, "clientId": CLIENT_ID, "clientSecret": "wrong"}
        refused = register(api, server.url, name="oauthed", token=None, oauth=oauth)
        assert refused.status_code == 422 and refused.json()["errors"][0]["field"] == "oauth"
        assert "no OAuth token" in refused.json()["detail"] and "wrong" not in refused.text

        oauth["clientSecret"] = CLIENT_SECRET
        created = register(api, server.url, name="oauthed", token=None, oauth={**oauth, "scope": "tools"})
        assert created.status_code == 201, created.text
        assert created.json()["hasOAuth"] is True and created.json()["headerNames"] == []
        assert CLIENT_SECRET not in created.text
        for n in range(2):
            result = run_action(api, "mcp:oauthed.whoami", {"name": f"call {n}"})
            assert result.json()["ok"] is True and result.json()["output"]["name"] == f"call {n}"
        assert server.issued == 1  # the token is cached until it expires


# --- rights --------------------------------------------------------------------------------------


@sqlite_only
def test_the_servers_roles_decide_who_may_use_it(mcp_api, tools_server):
    api = mcp_api
    server = register(api, tools_server.url).json()
    user = member(api, "mia", ["user"])
    one = f"{servers_url(api)}/{server['id']}"

    assert api.client.get(servers_url(api), headers=user).json() == []
    assert api.client.get(one, headers=user).status_code == 404
    refused = run_action(api, "mcp:tools.add", {"a": 1, "b": 1}, headers=user)
    assert refused.status_code == 403 and "mcp:tools" in refused.json()["detail"]
    assert api.client.post(servers_url(api), json={"name": "mine", "url": tools_server.url},
                           headers=user).status_code == 403

    roles = api.client.put(f"{one}/roles", json={"roles": ["admin", "user"]}, headers=api.auth)
    assert roles.status_code == 200 and roles.json()["roles"] == ["admin", "user"]
    seen = api.client.get(servers_url(api), headers=user).json()
    assert [s["name"] for s in seen] == ["tools"] and seen[0]["url"] is None and seen[0]["headerNames"] is None
    assert seen[0]["mayManage"] is False and "add" in {t["name"] for t in seen[0]["tools"]}
    allowed = run_action(api, "mcp:tools.add", {"a": 20, "b": 22}, headers=user)
    assert allowed.status_code == 200 and allowed.json()["output"] == {"result": "42"}
    assert api.client.put(f"{one}/roles", json={"roles": ["user"]}, headers=user).status_code == 403
    assert api.client.delete(one, headers=user).status_code == 403

    assert api.client.put(f"{one}/roles", json={"roles": ["admin"]}, headers=api.auth).status_code == 200
    assert run_action(api, "mcp:tools.add", {"a": 1, "b": 1}, headers=user).status_code == 403

    assert api.client.delete(one, headers=api.auth).status_code == 204
    assert api.client.get(one, headers=api.auth).status_code == 404
    assert run_action(api, "mcp:tools.add", {"a": 1, "b": 1}).status_code == 404


@sqlite_only
def test_another_mandate_sees_nothing_of_the_servers(mcp_api, tools_server):
    api = mcp_api
    server = register(api, tools_server.url).json()
    other = api.client.post("/api/mandates", json={"name": "Other"}, headers=api.auth).json()["id"]
    admin = api.client.post(f"/api/mandates/{other}/users",
                            json={"username": "otto", "password": PASSWORD, "roles": ["admin"]}, headers=api.auth)
    assert admin.status_code == 201, admin.text
    otto = {"Authorization": f"Bearer {api.login('otto', PASSWORD)}"}

    assert api.client.get(servers_url(api), headers=otto).status_code == 404
    assert api.client.get(f"{servers_url(api)}/{server['id']}", headers=otto).status_code == 404
    assert api.client.get(f"{servers_url(api, other)}/{server['id']}", headers=otto).status_code == 404
    assert api.client.delete(f"{servers_url(api, other)}/{server['id']}", headers=otto).status_code == 404
    assert api.client.get(servers_url(api, other), headers=otto).json() == []
    assert api.client.get(servers_url(api, "nosuchmandate"), headers=api.auth).status_code == 404

    # In the other mandate's editor the MCP node type is unknown, named with its node.
    editor = api.client.post(f"/api/mandates/{other}/instances", json={"featureCode": "graphicalEditor",
                                                                      "label": "Editor"}, headers=api.auth).json()["id"]
    workflow = create_workflow(api, editor, add_graph())
    checked = api.client.post(f"/api/graphicalEditor/{editor}/workflows/{workflow}/validate", headers=api.auth).json()
    assert checked["valid"] is False
    assert any(e["nodeId"] == "add" and "mcp:tools.add" in e["message"] for e in checked["errors"]), checked


# --- the agent -----------------------------------------------------------------------------------


@sqlite_only
def test_the_agent_requests_the_servers_toolbox_and_uses_its_tool(mcp_api, ai_server, tools_server):
    api = mcp_api
    assert register(api, tools_server.url, description="Arithmetic").status_code == 201
    ai_server.reply(None, tool_calls=[call("requestToolbox", {"toolboxId": "mcp:tools", "reason": "add"}, "c1")])
    ai_server.reply(None, tool_calls=[call("mcp_tools_add", {"a": 19, "b": 23}, "c2")])
    ai_server.reply("19 + 23 = 42.")

    events = stream(api, "What is 19 + 23?")

    assert [e["toolboxId"] for e in of(events, "toolbox.escalated")] == ["mcp:tools"]
    finished = of(events, "tool.finished")
    assert [(f["name"], f["ok"]) for f in finished] == [("mcp_tools_add", True)]
    assert json.loads(finished[0]["result"]) == {"result": "42"}
    first, second, third = ai_server.chat_requests
    assert "mcp:tools" in request_toolbox_enum(first)
    assert "- mcp:tools: Arithmetic" in first.system_text
    assert "mcp_tools_add" in [t["function"]["name"] for t in second.json["tools"]]
    assert json.loads(tool_results(third)["c2"]) == {"result": "42"}
    run_id = events[0][1]["runId"]
    run = api.client.get(f"/api/workspace/{instance_of(api, 'workspace')}/agent/runs/{run_id}", headers=api.auth).json()
    assert run["status"] == "completed" and ("tool_call", "mcp_tools_add") in [(s["kind"], s["name"])
                                                                             for s in run["steps"]]


@sqlite_only
def test_a_hanging_a_huge_and_a_down_server_give_tool_errors_and_the_run_completes(mcp_api, ai_server):
    api = mcp_api
    with serve_tools_server() as gone:
        assert register(api, gone.url, name="gone").status_code == 201
    with serve_tools_server() as server:
        assert register(api, server.url).status_code == 201
        ai_server.reply(None, tool_calls=[call("requestToolbox", {"toolboxId": "mcp:tools", "reason": "x"}, "r1")])
        ai_server.reply(None, tool_calls=[call("requestToolbox", {"toolboxId": "mcp:gone", "reason": "y"}, "r2")])
        ai_server.reply(None, tool_calls=[call("mcp_tools_hang", {}, "h"), call("mcp_tools_huge", {}, "b"),
                                          call("mcp_gone_add", {"a": 1, "b": 2}, "g")])
        ai_server.reply("Those servers had trouble.")
        started = time.monotonic()
        events = stream(api, "Try the tools")
        assert time.monotonic() - started < 60
    assert len(ai_server.chat_requests) == 4, events
    results = {k: json.loads(v)["error"] for k, v in tool_results(ai_server.chat_requests[3]).items()
               if k in ("h", "b", "g")}
    assert results["h"] == f"MCP server 'tools' did not answer within {TIMEOUT_SECONDS} s (POWERON_MCP_TIMEOUT_SECONDS)"
    assert "answered more than 1000000 bytes (POWERON_MCP_MAX_RESPONSE_BYTES)" in results["b"]
    assert "cut" in results["b"]
    assert results["g"].startswith("MCP server 'gone' cannot be reached at")
    assert of(events, "final")[0]["text"] == "Those servers had trouble."
    assert [f["ok"] for f in of(events, "tool.finished")] == [False, False, False]


# --- graphs --------------------------------------------------------------------------------------


def add_graph() -> dict[str, Any]:
    return {"nodes": [{"id": "start", "type": "trigger.manual", "parameters": {}},
                      {"id": "add", "type": "mcp:tools.add", "parameters": {"a": "{{ input.a }}", "b": 2}}],
            "edges": [{"source": "start", "target": "add"}]}


def create_workflow(api, editor: str, graph: dict[str, Any]) -> str:
    created = api.client.post(f"/api/graphicalEditor/{editor}/workflows", json={"name": "MCP", "graph": graph},
                              headers=api.auth)
    assert created.status_code == 201, created.text
    return created.json()["id"]


@sqlite_only
def test_a_graph_node_calls_the_servers_tool(mcp_api, tools_server):
    api = mcp_api
    assert register(api, tools_server.url).status_code == 201
    editor = instance_of(api, "graphicalEditor")
    workflow = create_workflow(api, editor, add_graph())
    base = f"/api/graphicalEditor/{editor}/workflows/{workflow}"
    assert api.client.post(f"{base}/validate", headers=api.auth).json() == {"valid": True, "errors": []}
    assert api.client.post(f"{base}/publish", headers=api.auth).status_code == 200

    run = api.client.post(f"{base}/runs", json={"input": {"a": 40}}, headers=api.auth)
    assert run.status_code in (200, 201, 202), run.text
    run = wait_for_run(api, editor, run.json()["id"])
    assert run["status"] == "completed", run
    step = next(s for s in run["steps"] if s["nodeId"] == "add")
    assert step["status"] == "completed" and step["output"] == {"result": "42"}


def wait_for_run(api, editor: str, run_id: str) -> dict[str, Any]:
    deadline = time.monotonic() + 30
    while True:
        run = api.client.get(f"/api/graphicalEditor/{editor}/runs/{run_id}", headers=api.auth).json()
        if run["status"] not in ("running", "pending") or time.monotonic() > deadline:
            return run
        time.sleep(0.1)


# --- the reference server ------------------------------------------------------------------------


@pytest.fixture
def server_everything() -> Iterator[str]:
    if not SERVER_EVERYTHING.exists():
        pytest.fail(f"{SERVER_EVERYTHING} is missing: run scripts/ensure_mcp_tools.sh (part of make test)")
    port = free_port()
    process = subprocess.Popen([str(SERVER_EVERYTHING), "streamableHttp"], env={**node_env(), "PORT": str(port)},
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}/mcp"
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                httpx.get(f"http://127.0.0.1:{port}/", timeout=1)
                break
            except httpx.TransportError:
                if process.poll() is not None or time.monotonic() > deadline:
                    pytest.fail("server-everything did not start")
                time.sleep(0.1)
        yield url
    finally:
        process.terminate()
        process.wait(timeout=10)


@sqlite_only
def test_the_reference_server_everything_is_registered_and_its_echo_tool_answers(mcp_api, server_everything):
    api = mcp_api
    created = register(api, server_everything, name="everything", token=None)
    assert created.status_code == 201, created.text
    assert "echo" in {t["name"] for t in created.json()["tools"]}
    echoed = run_action(api, "mcp:everything.echo", {"message": "hello from PowerOn"})
    assert echoed.status_code == 200, echoed.text
    assert echoed.json()["ok"] is True and "hello from PowerOn" in json.dumps(echoed.json()["output"])
