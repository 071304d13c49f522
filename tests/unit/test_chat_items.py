"""The chat items the Workspace shows: built from streamed agent events and from a persisted trace."""

from __future__ import annotations

from types import SimpleNamespace

from state.chat_items import apply_event, items_of_run


def test_events_build_the_chat_in_order_and_cards_finish_in_place():
    items = []
    for kind, data in [
        ("run.started", {"runId": "r1", "chatId": "c"}),
        ("toolbox.escalated", {"runId": "r1", "toolboxId": "ai", "label": "AI", "reason": "why", "tools": ["a", "b"]}),
        ("tool.started", {"runId": "r1", "callId": "k1", "name": "ai_x", "arguments": {"text": "hi"}}),
        ("text.delta", {"runId": "r1", "text": "Hel"}),
        ("text.delta", {"runId": "r1", "text": "lo"}),
        ("tool.finished", {"runId": "r1", "callId": "k1", "name": "ai_x", "ok": False, "result": "x" * 5000}),
        ("guard", {"runId": "r1", "kind": "budget", "message": "rounds spent"}),
        ("final", {"runId": "r1", "text": "Hello", "usage": {"promptTokens": 10, "completionTokens": 2},
                   "costChf": 0.5}),
    ]:
        items = apply_event(items, kind, data)
    assert [i["kind"] for i in items] == ["escalation", "tool", "assistant", "guard", "usage"]
    assert items[0]["name"] == "AI" and items[0]["text"] == "why" and items[0]["detail"] == "a, b"
    assert items[1]["status"] == "failed" and '"text": "hi"' in items[1]["detail"]
    assert len(items[1]["result"]) < 1000 and "more characters" in items[1]["result"]
    assert items[2]["text"] == "Hello"
    assert items[4]["text"] == "10 tokens in · 2 out · CHF 0.5000"


def test_a_run_that_ends_marks_running_cards_failed_and_errors_show_in_place():
    items = apply_event([], "tool.started", {"runId": "r", "callId": "k", "name": "t", "arguments": {}})
    items = apply_event(items, "error", {"runId": "r", "message": "provider down"})
    assert [(i["kind"], i["status"]) for i in items] == [("tool", "failed"), ("error", "")]
    assert items[1]["text"] == "provider down"


def step(kind, **fields):
    base = {"name": None, "call_id": None, "arguments": None, "result": None, "ok": None, "detail": None,
            "duration_ms": None}
    return SimpleNamespace(kind=kind, **{**base, **fields})


def test_a_persisted_run_rebuilds_prompt_cards_answer_and_usage():
    run = SimpleNamespace(id="r", prompt="Hi", status="completed", prompt_tokens=5, completion_tokens=3,
                          cost_chf=None, error=None)
    steps = [step("round", detail={"text": ""}),
             step("escalation", name="ai", ok=True, detail={"reason": "needed", "tools": ["ai_x"]}),
             step("tool_call", name="ai_x", call_id="k", arguments={"a": 1}, result="done", ok=True, duration_ms=42),
             step("round", detail={"text": "All done."}),
             step("final", result="All done.")]
    items = items_of_run(run, steps)
    assert [i["kind"] for i in items] == ["user", "escalation", "tool", "assistant", "usage"]
    assert items[1]["text"] == "needed" and items[2]["status"] == "ok" and items[3]["text"] == "All done."
    assert items[2]["text"] == "42 ms"  # a tool card shows how long the call took
    cancelled = SimpleNamespace(**{**vars(run), "status": "cancelled", "error": "cancelled by admin"})
    assert items_of_run(cancelled, [])[-1]["kind"] == "cancelled"
