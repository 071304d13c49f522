"""The shared agent chat (state/agent_chat.py) and the editor's chat sidebar (state/editor_chat.py):
their pure parts, and that both page states get the chat's handlers from the mixins."""

from __future__ import annotations

import asyncio
from datetime import datetime
from types import SimpleNamespace

import pytest

from backend.agent.runner import AgentEvent
from state.agent_chat import _pump, _Stream, chat_title_of, last_prompt
from state.chat_items import item
from state.editor_chat import GRAPH_TOOLS, changes_graph, editor_chat_rows
from tests.integration.test_engine_events import run_in_own_loop


def test_a_chat_is_titled_by_the_first_line_of_its_first_prompt():
    assert chat_title_of("  Build a flow\nwith two steps") == "Build a flow"
    assert chat_title_of("x" * 300) == "x" * 200
    assert chat_title_of("   ") == ""


def test_retry_sends_the_last_prompt():
    messages = [item("user", "first"), item("assistant", "ok"), item("user", "second"), item("error", "boom")]
    assert last_prompt(messages) == "second"
    assert last_prompt([item("assistant", "hello")]) == ""


@pytest.mark.parametrize("name", sorted(GRAPH_TOOLS))
def test_a_successful_workflow_change_refreshes_the_canvas(name):
    assert changes_graph("tool.finished", {"name": name, "ok": True})
    assert not changes_graph("tool.finished", {"name": name, "ok": False})  # refused: nothing changed
    assert not changes_graph("tool.started", {"name": name})


def test_reading_tools_and_other_events_leave_the_canvas_alone():
    for name in ("workflow_readWorkflowGraph", "workflow_validateGraph", "workflow_listAvailableNodeTypes",
                 "core_readFile", ""):
        assert not changes_graph("tool.finished", {"name": name, "ok": True})
    assert not changes_graph("final", {"text": "done"})


def test_the_sidebar_lists_only_the_users_own_chats():
    when = datetime(2026, 1, 2, 3, 4)
    chats = [SimpleNamespace(id="c1", title="Mine", sys_created_by="me", sys_modified_at=when),
             SimpleNamespace(id="c2", title="Theirs", sys_created_by="other", sys_modified_at=when),
             SimpleNamespace(id="c3", title="", sys_created_by="me", sys_modified_at=when)]
    assert editor_chat_rows(chats, "me") == [
        {"id": "c1", "title": "Mine", "modified": "2026-01-02 03:04"},
        {"id": "c3", "title": "(untitled)", "modified": "2026-01-02 03:04"}]


def _pumped(events) -> list[AgentEvent | None]:
    async def run():
        stream = _Stream(asyncio.get_running_loop(), asyncio.Queue())
        await asyncio.to_thread(_pump, events, stream)
        await asyncio.sleep(0)
        got = []
        while not stream.queue.empty():
            got.append(stream.queue.get_nowait())
        return got

    return run_in_own_loop(run)


def test_the_pump_hands_over_every_event_then_the_end():
    events = [AgentEvent("run.started", {"runId": "r"}), AgentEvent("final", {"text": "hi"})]
    assert _pumped(iter(events)) == [*events, None]


def test_a_failing_run_becomes_an_error_event_and_the_generator_is_closed():
    closed = []

    def events():
        try:
            yield AgentEvent("run.started", {"runId": "r"})
            raise RuntimeError("provider down")
        finally:
            closed.append(True)

    got = _pumped(events())
    assert [e.type if e else None for e in got] == ["run.started", "error", None]
    assert got[1].data["message"] == "RuntimeError: provider down"
    assert closed == [True]


def test_both_pages_get_the_chat_handlers_from_the_mixin():
    from state.editor import EditorState
    from state.workspace import WorkspaceState

    for cls in (WorkspaceState, EditorState):
        handlers = cls.event_handlers
        assert {"send", "retry", "stream_answer", "stop"} <= set(handlers), cls
        assert handlers["stream_answer"].fn.__qualname__ == f"{cls.__name__}.stream_answer"
        assert getattr(handlers["stream_answer"].fn, "_reflex_background_task", False), cls
        assert {"messages", "streaming", "stream_key", "agent_run_id"} <= set(cls.base_vars), cls
        watched = {name for name, deps in cls._var_dependencies.items()
                   if any(dep[1] == "disabled_reason" for dep in deps)}
        assert {"loaded", "provider_configured", "can_use_agent"} <= watched, cls
    assert {"new_editor_chat", "open_editor_chat"} <= set(EditorState.event_handlers)
    # The agent's run is not the editor's test run (EditorRunsMixin.run_id).
    assert "run_id" in EditorState.base_vars and "agent_run_id" in EditorState.base_vars
