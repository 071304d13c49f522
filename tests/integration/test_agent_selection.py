# ruff: noqa: F811 - the fixtures of test_web_actions are imported by name
"""Toolbox preselection, the marketplace budgets and the 48-round ceiling (issue 21, items 1 and 5).

The Workspace agent runs against the scripted model (tests/ai_server.py), which records what it was
offered in each round; web searches go to a local search server speaking SearXNG's JSON.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from sqlmodel import select

from backend.agent.config import ROUND_LIMIT, AgentConfig
from backend.agent.runner import AgentRunner
from backend.db import session_scope
from backend.db.models import Connection, FeatureInstance, User
from tests.ai_server import Reply
from tests.integration.test_agent import call, of, request_toolbox_enum, stream, tool_names, workspace_id
from tests.integration.test_web_actions import settings_env, web  # noqa: F401 - fixtures

pytestmark = pytest.mark.parametrize("db_url", ["sqlite"], indirect=True)

CORE_ONLY = {"core_readFile", "core_webSearch", "core_readUrl", "requestToolbox"}


def connect_mailbox(api) -> None:
    """An active IMAP connection of the admin (a row: the toolset asks the mail server nothing)."""
    with session_scope() as session:
        admin = session.exec(select(User).where(User.username == "admin")).one()
        instance = session.get(FeatureInstance, workspace_id(api))
        session.add(Connection(mandate_id=instance.mandate_id, owner_id=admin.id, type="imap", label="Office"))


def run(api, prompt: str, config: AgentConfig | None = None) -> tuple[AgentRunner, list[tuple[str, dict]]]:
    """The runner itself, with the Workspace profile (or `config`)."""
    with session_scope() as session:
        admin = session.exec(select(User).where(User.username == "admin")).one()
        runner = AgentRunner(session, admin, session.get(FeatureInstance, workspace_id(api)), prompt,
                             profile_name="workspace", config=config)
        events = [(e.type, e.data) for e in runner.events()]
    return runner, events


def trace(api, events) -> dict[str, Any]:
    run_id = events[0][1]["runId"]
    return api.client.get(f"/api/workspace/{workspace_id(api)}/agent/runs/{run_id}", headers=api.auth).json()


def test_an_email_request_has_the_email_tools_in_round_one_without_requesting_them(api, ai_server):
    connect_mailbox(api)
    ai_server.reply(None, tool_calls=[call("email_sendMail", {"connectionId": "nope", "to": ["anna@example.com"],
                                                              "subject": "Meeting", "body": "moved"}, "s1")])
    ai_server.reply("I could not send it.")
    events = stream(api, "Schreib Anna eine E-Mail, dass das Meeting verschoben wird")

    first = ai_server.chat_requests[0]
    assert "email_sendMail" in tool_names(first) and CORE_ONLY <= set(tool_names(first))
    assert "email" not in (request_toolbox_enum(first) or [])
    assert "Active toolboxes: core, email." in first.system_text
    assert not of(events, "toolbox.escalated")  # no requestToolbox round was needed
    assert of(events, "run.started")[0]["preselected"] == ["email"]
    preselected = of(events, "toolbox.preselected")[0]
    assert preselected["toolboxIds"] == ["email"] and preselected["labels"] == ["E-mail"]
    # Sending waits for the user's approval (issue 21, item 3): the call is there, nothing ran yet.
    assert [r["name"] for r in of(events, "approval.required")] == ["email_sendMail"]

    run = trace(api, events)
    assert run["toolboxes"] == ["core", "email"]
    selection = next(s for s in run["steps"] if s["kind"] == "selection")
    assert selection["name"] == "email" and selection["detail"]["selected"] == ["email"]
    scores = selection["detail"]["scores"]
    assert scores["email"] > 0 and scores["email"] == max(v for k, v in scores.items() if k != "core")
    assert set(scores) >= {"email", "ai", "workflow", "marketplace"}
    assert selection["detail"]["query"].startswith("Schreib Anna eine E-Mail")
    assert selection["detail"]["marketplace"] is False and selection["detail"]["limits"] == {}


def test_smalltalk_selects_nothing_beyond_core(api, ai_server):
    connect_mailbox(api)
    ai_server.reply("Fine, thanks!")
    events = stream(api, "Hello, how are you?")
    offered = set(tool_names(ai_server.chat_requests[0]))
    assert CORE_ONLY <= offered and not {n for n in offered if not n.startswith("core_")} - {
        "requestToolbox", "queryFeatureInstance"}
    assert {"ai", "workflow", "email"} <= set(request_toolbox_enum(ai_server.chat_requests[0]))
    assert of(events, "toolbox.preselected")[0]["toolboxIds"] == []
    selection = next(s for s in trace(api, events)["steps"] if s["kind"] == "selection")
    assert selection["detail"]["selected"] == [] and selection["name"] is None


def test_a_long_message_and_a_french_request_run(api, ai_server):
    connect_mailbox(api)
    ai_server.reply("Noted.")
    long_message = "Bitte lies das Protokoll und schick es per Mail an das Team. " + "Lorem ipsum dolor. " * 5_300
    assert len(long_message) > 100_000
    runner, events = run(api, long_message)  # how fast: bench/toolbox_selection.py
    assert runner.run.status == "completed" and runner.selection.selected == ["email"]
    assert len(runner.selection.query) <= 200
    # Typed into the chat or sent by REST, such a message is refused before any run, naming the limit.
    refused = api.client.post(f"/api/workspace/{workspace_id(api)}/agent", json={"prompt": long_message},
                              headers=api.auth)
    assert refused.status_code == 422 and "at most 20,000 characters" in refused.text and "prompt" in refused.text

    ai_server.reply("Bien sûr.")
    runner, events = run(api, "Pouvez-vous m'expliquer la différence entre une SA et une Sàrl ?")
    assert runner.run.status == "completed" and of(events, "final")[0]["text"] == "Bien sûr."
    assert runner.selection.selected == []


def test_a_marketplace_request_gets_three_searches_and_five_fetches(api, ai_server, web, settings_env):
    answer = {"results": [{"title": "Bike", "url": "https://shop.example/bike", "content": "CHF 900"}]}
    web.routes["/search"] = (200, {"Content-Type": "application/json"}, json.dumps(answer).encode())
    settings_env(POWERON_SEARCH_URL=web.url("/"))
    searches = [call("core_webSearch", {"query": f"used e-bike offer {n}", "limit": None, "language": None},
                     f"w{n}") for n in range(4)]
    fetches = [call("core_readUrl", {"url": f"http://127.0.0.1:9/offer{n}", "maxChars": None}, f"f{n}")
               for n in range(6)]
    ai_server.reply(None, tool_calls=searches + fetches)
    ai_server.reply("The cheapest offer I found is CHF 900.")

    runner, events = run(api, "Where can I buy a used e-bike cheapest, including shipping costs?")

    assert runner.selection.marketplace and runner.selection.limits == {"webSearch": 3, "pageFetch": 5}
    assert of(events, "toolbox.preselected")[0]["limits"] == {"webSearch": 3, "pageFetch": 5}
    suppressed = [g for g in of(events, "guard") if g["kind"] == "suppressed"]
    assert [g["callId"] for g in suppressed] == ["w3", "f5"]
    assert "at most 3 calls of core_webSearch" in suppressed[0]["message"]
    assert len(web.paths()) == 3  # the fourth search never reached the search server
    assert runner.run.answer == "The cheapest offer I found is CHF 900."
    with session_scope() as session:
        from backend.db.models import AgentStep
        step = session.exec(select(AgentStep).where(AgentStep.run_id == runner.run.id,
                                                    AgentStep.kind == "selection")).one()
        assert step.detail["marketplace"] is True and step.detail["limits"] == {"webSearch": 3, "pageFetch": 5}

    ai_server.reply(None, tool_calls=searches)
    ai_server.reply("Done.")
    runner, events = run(api, "Search the web for the history of the Gotthard tunnel")
    assert not runner.selection.marketplace
    assert not [g for g in of(events, "guard") if g["kind"] == "suppressed"]  # other requests keep the usual budget


def test_a_model_that_never_stops_is_stopped_at_the_48_round_ceiling_with_a_final_answer(api, ai_server):
    def never_stops(request) -> Reply:
        if request.json.get("tools"):  # always one more tool call while tools are offered
            return Reply(tool_calls=[{"id": f"r{len(ai_server.chat_requests)}", "name": "core_detectLanguage",
                                      "arguments": {"text": "Grüezi mitenand"}}])
        return Reply(content="Swiss German, as far as I got.")

    ai_server.responder = never_stops
    runner, events = run(api, "Keep checking the language", AgentConfig(max_rounds=ROUND_LIMIT))

    assert runner.run.status == "completed" and runner.run.rounds == 48
    assert len(ai_server.chat_requests) == 49 and "tools" not in ai_server.chat_requests[-1].json
    budget = [g for g in of(events, "guard") if g["kind"] == "budget"]
    assert len(budget) == 1 and "round budget is spent (48 of 48 rounds)" in budget[0]["message"]
    assert of(events, "final")[0]["text"] == "Swiss German, as far as I got."
    assert runner.run.tool_calls == 2  # identical calls after the second are suppressed, not run
