"""The Graphical Editor's chat sidebar (UC-4) below the page: the run it prepares knows the graph
being edited, its events go through the same worker-thread pump as the Workspace's, and the
events that changed the draft are the ones that refresh the canvas."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest
from sqlmodel import select

from backend.agent import service as agent_service
from backend.auth import issue_token
from backend.db import session_scope
from backend.db.models import AgentChat, FeatureInstance, Mandate, User
from backend.errors import Forbidden, NotFound
from backend.tenancy import grant_instance_roles, grant_mandate_roles
from state.agent_chat import _pump, _Stream
from state.auth import NotSignedIn
from state.editor_chat import changes_graph, editor_chat_rows, prepare_editor_run
from tests.integration.test_engine_events import run_in_own_loop

pytestmark = pytest.mark.parametrize("db_url", ["sqlite"], indirect=True)

GRAPH = {"nodes": [{"id": "start", "type": "trigger.manual", "parameters": {}}], "edges": []}


def call(name: str, arguments: dict[str, Any], call_id: str) -> dict[str, Any]:
    return {"id": call_id, "name": name, "arguments": arguments}


def _workflow(api, name: str = "Edited in the sidebar") -> str:
    response = api.client.post(f"{api.base()}/workflows", json={"name": name, "graph": GRAPH}, headers=api.auth)
    assert response.status_code == 201, response.text
    return response.json()["id"]


def _streamed(request) -> list[Any]:
    """The run's events as the chat's background handler receives them (through _pump)."""
    async def read():
        stream = _Stream(asyncio.get_running_loop(), asyncio.Queue())
        pumping = asyncio.create_task(asyncio.to_thread(_pump, agent_service.stream_run(request), stream))
        events = []
        while (event := await stream.queue.get()) is not None:
            events.append(event)
        await pumping
        return events

    return run_in_own_loop(read)


def test_the_sidebar_run_knows_the_graph_and_its_changes_are_flagged_for_the_canvas(api, ai_server):
    workflow_id = _workflow(api)
    ai_server.reply(None, tool_calls=[
        call("workflow_readWorkflowGraph", {"workflowId": workflow_id, "editorInstanceId": None}, "r1"),
        call("workflow_addNode", {"workflowId": workflow_id, "type": "flow.wait", "id": "pause", "label": None,
                                  "parameters": json.dumps({"seconds": 5}), "editorInstanceId": None}, "a1"),
        call("workflow_connectNodes", {"workflowId": workflow_id, "source": "start", "target": "pause",
                                       "sourceHandle": None, "editorInstanceId": None}, "c1")])
    ai_server.reply("Added a wait.")

    request = prepare_editor_run(api.token, workflow_id, "Wait five seconds after the start", "")
    assert request.instance_id == api.instance_id and request.profile_name == "graphicalEditor"
    assert f"workflowId {workflow_id}" in request.system_extra and '"type":"trigger.manual"' in request.system_extra
    events = _streamed(request)

    first = ai_server.chat_requests[0]
    assert f"workflowId {workflow_id}" in first.system_text
    finished = [(e.data["name"], changes_graph(e.type, e.data)) for e in events if e.type == "tool.finished"]
    assert finished == [("workflow_readWorkflowGraph", False), ("workflow_addNode", True),
                        ("workflow_connectNodes", True)]
    assert events[-1].type == "final" and events[-1].data["text"] == "Added a wait."

    # The chat exists, is listed for its author, and continues with the graph as it is now.
    with session_scope() as session:
        chats = list(session.exec(select(AgentChat).where(AgentChat.feature_instance_id == api.instance_id)))
        admin = session.exec(select(User).where(User.username == "admin")).one()
        assert [r["id"] for r in editor_chat_rows(chats, admin.id)] == [request.chat_id]
    again = prepare_editor_run(api.token, workflow_id, "And now?", request.chat_id)
    assert again.chat_id == request.chat_id and '"id":"pause"' in again.system_extra
    assert again.history[0] == {"role": "user", "content": "Wait five seconds after the start"}


def test_the_sidebar_run_is_refused_without_sign_in_workflow_or_right(api):
    workflow_id = _workflow(api, "Guarded")
    with pytest.raises(NotSignedIn):
        prepare_editor_run("not-a-token", workflow_id, "hi", "")
    with pytest.raises(NotFound):
        prepare_editor_run(api.token, "no-such-workflow", "hi", "")
    with session_scope() as session:
        instance = session.get(FeatureInstance, api.instance_id)
        viewer = User(username="vic", display_name="Vic Viewer")
        session.add(viewer)
        session.flush()
        grant_mandate_roles(session, viewer, session.get(Mandate, instance.mandate_id), ["viewer"])
        grant_instance_roles(session, viewer, instance, ["graphicalEditor-viewer"])
    with session_scope() as session:
        token = issue_token(session, session.exec(select(User).where(User.username == "vic")).one()).token
    with pytest.raises(Forbidden, match="useAgent"):
        prepare_editor_run(token, workflow_id, "hi", "")
