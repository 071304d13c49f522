"""CommCoach (issue 22 part 3) over REST against the scripted OpenAI-compatible server.

A coaching chat streams over SSE with the instance's persona in the model's system prompt and
only the core toolbox offered (no requestToolbox: the profile never escalates); the persona is
changed by who may configure; a session summary is written by the model and saved per chat,
refused for a chat without answered turns; a foreign instance answers 404 and a viewer cannot
chat, change the persona or summarise.
"""

from __future__ import annotations

import pytest
from sqlmodel import select

from backend.agent.config import REQUEST_TOOLBOX
from backend.db import session_scope
from backend.db.models import AgentChat
from backend.features.commcoach.main import DEFAULT_SYSTEM_PROMPT
from tests.integration.test_agent import of, sse_events, tool_names

pytestmark = pytest.mark.parametrize("db_url", ["sqlite"], indirect=True)
PASSWORD = "coach-pass-123"
PERSONA = "You coach Anna for her salary negotiation with her manager. Ask one question at a time."


def default_mandate(api) -> str:
    me = api.client.get("/api/me", headers=api.auth).json()
    return next(m["id"] for m in me["mandates"] if m["name"] == "Default")


def new_coach(api, label: str = "Coach", mandate_id: str | None = None) -> str:
    created = api.client.post(f"/api/mandates/{mandate_id or default_mandate(api)}/instances",
                              json={"featureCode": "commcoach", "label": label}, headers=api.auth)
    assert created.status_code == 201, created.text
    return created.json()["id"]


def member(api, username: str, mandate_roles: list[str], instance_id: str, instance_roles: list[str]) -> dict:
    """A new member of the Default mandate with `instance_roles` in the coach; their bearer header."""
    created = api.client.post(f"/api/mandates/{default_mandate(api)}/users",
                              json={"username": username, "password": PASSWORD, "roles": mandate_roles},
                              headers=api.auth)
    assert created.status_code == 201, created.text
    granted = api.client.post(f"/api/instances/{instance_id}/access",
                              json={"userId": created.json()["id"], "roles": instance_roles}, headers=api.auth)
    assert granted.status_code == 200, granted.text
    return {"Authorization": f"Bearer {api.login(username, PASSWORD)}"}


def coach_turn(api, instance_id: str, prompt: str, chat_id: str | None = None, headers: dict | None = None):
    body = {"prompt": prompt, **({"chatId": chat_id} if chat_id else {})}
    with api.client.stream("POST", f"/api/commcoach/{instance_id}/agent", json=body,
                           headers=headers or api.auth) as response:
        assert response.status_code == 200, response.read()
        return sse_events(response)


def test_a_coaching_chat_runs_with_the_instance_persona_and_core_tools_only(api, ai_server):
    coach = new_coach(api)
    base = f"/api/commcoach/{coach}"
    settings = api.client.get(f"{base}/settings", headers=api.auth).json()
    assert settings == {"systemPrompt": DEFAULT_SYSTEM_PROMPT, "isDefault": True, "canConfigure": True}
    changed = api.client.put(f"{base}/settings", json={"systemPrompt": f"  {PERSONA}  "}, headers=api.auth)
    assert changed.status_code == 200 and changed.json()["systemPrompt"] == PERSONA
    assert not changed.json()["isDefault"]

    ai_server.reply("What outcome would make you happy?")
    events = coach_turn(api, coach, "I want to ask for a raise.")
    assert of(events, "final")[0]["text"] == "What outcome would make you happy?"
    chat_id = events[0][1]["chatId"]

    first = ai_server.chat_requests[0]
    assert PERSONA in first.system_text and DEFAULT_SYSTEM_PROMPT not in first.system_text
    tools = tool_names(first)
    assert "core_webSearch" in tools and "core_readFile" not in tools  # no file table: no file tools
    assert REQUEST_TOOLBOX not in tools and "queryFeatureInstance" not in tools
    assert all(name.startswith("core_") for name in tools)
    assert "requestToolbox" not in first.system_text
    run = api.client.get(f"{base}/agent/runs/{events[0][1]['runId']}", headers=api.auth).json()
    assert run["profile"] == "commcoach" and run["toolboxes"] == ["core"] and run["status"] == "completed"

    ai_server.reply("Good: a number. Now say it as one sentence to your manager.")
    coach_turn(api, coach, "10% more.", chat_id=chat_id)
    sent = ai_server.chat_requests[-1]
    assert PERSONA in sent.system_text
    assert [m["content"] for m in sent.messages if m["role"] in ("user", "assistant")] == [
        "I want to ask for a raise.", "What outcome would make you happy?", "10% more."]

    restored = api.client.put(f"{base}/settings", json={"systemPrompt": None}, headers=api.auth).json()
    assert restored["isDefault"] and restored["systemPrompt"] == DEFAULT_SYSTEM_PROMPT
    ai_server.reply("Hello again.")
    coach_turn(api, coach, "Another question")
    assert DEFAULT_SYSTEM_PROMPT in ai_server.chat_requests[-1].system_text


def test_the_persona_is_refused_when_empty_too_long_or_not_text(api):
    base = f"/api/commcoach/{new_coach(api)}"
    for body in ({"systemPrompt": "   "}, {"systemPrompt": "x" * 8001}, {"systemPrompt": 42}, {}):
        response = api.client.put(f"{base}/settings", json=body, headers=api.auth)
        assert response.status_code == 422, response.text
        assert {e["field"] for e in response.json()["errors"]} == {"systemPrompt"}
    assert api.client.get(f"{base}/settings", headers=api.auth).json()["isDefault"]


def test_a_session_summary_is_written_by_the_model_saved_and_replaced(api, ai_server):
    coach = new_coach(api)
    base = f"/api/commcoach/{coach}"
    ai_server.reply("Try: 'I would like to talk about my salary.'")
    chat_id = coach_turn(api, coach, "How do I open the talk?")[0][1]["chatId"]
    assert api.client.get(f"{base}/agent/chats/{chat_id}/summary", headers=api.auth).json()["summary"] == ""

    ai_server.reply("**Key topics**\n- Opening a salary talk\n**What to practise next**\n- Say the number first")
    made = api.client.post(f"{base}/agent/chats/{chat_id}/summary", headers=api.auth)
    assert made.status_code == 200, made.text
    assert made.json()["chatId"] == chat_id and made.json()["summary"].startswith("**Key topics**")
    request = ai_server.chat_requests[-1]
    assert "What to practise next" in request.system_text and not request.json.get("tools")
    assert "Person coached: How do I open the talk?" in request.user_text
    assert "Coach: Try: 'I would like to talk about my salary.'" in request.user_text
    again = api.client.get(f"{base}/agent/chats/{chat_id}/summary", headers=api.auth).json()
    assert again["summary"] == made.json()["summary"]

    ai_server.reply("**Key topics**\n- A second look")
    replaced = api.client.post(f"{base}/agent/chats/{chat_id}/summary", headers=api.auth).json()
    assert replaced["summary"] == "**Key topics**\n- A second look"
    with session_scope() as session:
        assert session.get(AgentChat, chat_id).summary == "**Key topics**\n- A second look"

    ai_server.fail(500, "model overloaded", times=10)
    failed = api.client.post(f"{base}/agent/chats/{chat_id}/summary", headers=api.auth)
    assert failed.status_code == 503 and "could not be summarised" in failed.json()["detail"]
    with session_scope() as session:  # nothing half-written: the last summary stays
        assert session.get(AgentChat, chat_id).summary == "**Key topics**\n- A second look"


def test_a_chat_without_answered_turns_is_not_summarised_and_the_model_is_not_asked(api, ai_server):
    coach = new_coach(api)
    base = f"/api/commcoach/{coach}"
    ai_server.fail(500, "model down", times=10)
    chat_id = coach_turn(api, coach, "Hello coach")[0][1]["chatId"]  # the run fails: no answered turn
    asked = len(ai_server.chat_requests)
    refused = api.client.post(f"{base}/agent/chats/{chat_id}/summary", headers=api.auth)
    assert refused.status_code == 409 and "no answered turns" in refused.json()["detail"]
    assert len(ai_server.chat_requests) == asked
    assert api.client.post(f"{base}/agent/chats/nope/summary", headers=api.auth).status_code == 404


def test_a_foreign_instance_answers_404(api, ai_server):
    other = api.client.post("/api/mandates", json={"name": "Elsewhere"}, headers=api.auth).json()["id"]
    coach = new_coach(api, "Foreign coach", mandate_id=other)
    ai_server.reply("Hi.")
    chat_id = coach_turn(api, coach, "Hello")[0][1]["chatId"]
    alice = member(api, "alice", ["admin"], new_coach(api, "Alice's coach"), ["commcoach-admin"])
    base = f"/api/commcoach/{coach}"
    for method, path, body in (("GET", "/settings", None), ("PUT", "/settings", {"systemPrompt": "x"}),
                               ("POST", "/agent", {"prompt": "hi"}), ("GET", "/agent/chats", None),
                               ("GET", f"/agent/chats/{chat_id}/summary", None),
                               ("POST", f"/agent/chats/{chat_id}/summary", None)):
        response = api.client.request(method, base + path, json=body, headers=alice)
        assert response.status_code == 404, (method, path, response.text)
    workspace = next(i["id"] for i in api.client.get("/api/me", headers=api.auth).json()["instances"]
                     if i["featureCode"] == "workspace")
    assert api.client.get(f"/api/commcoach/{workspace}/settings", headers=api.auth).status_code == 404
    # The agent routes of one feature do not reach another feature's instance either: the
    # Workspace's chats are not listed, nor its agent run, under /api/commcoach.
    for method, path, body in (("GET", "/agent/chats", None), ("GET", "/agent/runs", None),
                               ("POST", "/agent", {"prompt": "hi"})):
        response = api.client.request(method, f"/api/commcoach/{workspace}{path}", json=body, headers=api.auth)
        assert response.status_code == 404, (method, path, response.text)
    assert api.client.get(f"/api/workspace/{coach}/agent/chats", headers=api.auth).status_code == 404
    with session_scope() as session:
        assert session.exec(select(AgentChat).where(AgentChat.feature_instance_id == coach)).one().summary == ""


def test_a_viewer_reads_but_cannot_chat_configure_or_summarise_and_a_user_cannot_configure(api, ai_server):
    coach = new_coach(api)
    base = f"/api/commcoach/{coach}"
    ai_server.reply("Let us practise.")
    chat_id = coach_turn(api, coach, "Coach me")[0][1]["chatId"]
    viewer = member(api, "vera", ["viewer"], coach, ["commcoach-viewer"])
    asked = len(ai_server.chat_requests)
    assert api.client.post(f"{base}/agent", json={"prompt": "hi"}, headers=viewer).status_code == 403
    assert api.client.post(f"{base}/agent/chats/{chat_id}/summary", headers=viewer).status_code == 403
    assert api.client.put(f"{base}/settings", json={"systemPrompt": "Be rude."}, headers=viewer).status_code == 403
    assert api.client.get(f"{base}/settings", headers=viewer).json()["canConfigure"] is False
    assert [c["id"] for c in api.client.get(f"{base}/agent/chats", headers=viewer).json()] == [chat_id]
    assert len(ai_server.chat_requests) == asked

    user = member(api, "uma", ["user"], coach, ["commcoach-user"])
    assert api.client.put(f"{base}/settings", json={"systemPrompt": "Be rude."}, headers=user).status_code == 403
    assert api.client.get(f"{base}/settings", headers=user).json() == {
        "systemPrompt": DEFAULT_SYSTEM_PROMPT, "isDefault": True, "canConfigure": False}
    ai_server.reply("Sure.")
    own = coach_turn(api, coach, "My own session", headers=user)[0][1]["chatId"]
    ai_server.reply("**Key topics**\n- Uma's session")
    assert api.client.post(f"{base}/agent/chats/{own}/summary", headers=user).status_code == 200
    # uma reads the admin's chat (read all) but may not summarise it (update own)
    assert api.client.post(f"{base}/agent/chats/{chat_id}/summary", headers=user).status_code == 403
