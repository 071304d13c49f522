"""The agent against a scripted OpenAI-compatible server (issue 6, items 2–4, 7, 8).

Everything goes through real HTTP: the Workspace's SSE endpoint, the real `openai` client of
the gateway, the scripted server on 127.0.0.1 that plays the model's turns and records what the
agent sent. Tests assert on what a user sees (events, answers, the persisted trace) and on what
the model was offered (tools per round, the requestToolbox enum, cut results, the tool-free
final call).
"""

from __future__ import annotations

import json
import threading
import time
from typing import Any

import pytest
from sqlmodel import select

from backend.agent.config import AgentConfig
from backend.agent.runner import AgentRunner
from backend.auth import issue_token
from backend.config import reset_settings_cache
from backend.db import session_scope
from backend.db.models import FeatureInstance, Mandate, User
from backend.tenancy import grant_instance_roles, grant_mandate_roles

pytestmark = pytest.mark.parametrize("db_url", ["sqlite"], indirect=True)


def workspace_id(api) -> str:
    me = api.client.get("/api/me", headers=api.auth).json()
    return next(i["id"] for i in me["instances"] if i["featureCode"] == "workspace")


def stream(api, prompt: str, chat_id: str | None = None, instance_id: str | None = None,
           headers: dict[str, str] | None = None) -> list[tuple[str, dict[str, Any]]]:
    """POST the prompt to the agent endpoint; the server-sent events as (type, data)."""
    url = f"/api/workspace/{instance_id or workspace_id(api)}/agent"
    body = {"prompt": prompt, **({"chatId": chat_id} if chat_id else {})}
    with api.client.stream("POST", url, json=body, headers=headers or api.auth) as response:
        assert response.status_code == 200, response.read()
        return sse_events(response)


def sse_events(response) -> list[tuple[str, dict[str, Any]]]:
    """The server-sent events of a streamed answer as (type, data)."""
    assert response.headers["content-type"].startswith("text/event-stream")
    events: list[tuple[str, dict[str, Any]]] = []
    kind = None
    for line in response.iter_lines():
        if line.startswith("event: "):
            kind = line[len("event: "):]
        elif line.startswith("data: "):
            events.append((kind, json.loads(line[len("data: "):])))
    return events


def of(events, kind: str) -> list[dict[str, Any]]:
    return [data for k, data in events if k == kind]


def tool_names(request) -> list[str]:
    return [t["function"]["name"] for t in request.json.get("tools") or []]


def request_toolbox_enum(request) -> list[str] | None:
    for tool in request.json.get("tools") or []:
        if tool["function"]["name"] == "requestToolbox":
            return tool["function"]["parameters"]["properties"]["toolboxId"]["enum"]
    return None


def tool_results(request) -> dict[str, str]:
    """The tool messages of a request, by tool_call_id."""
    return {m["tool_call_id"]: m["content"] for m in request.messages if m.get("role") == "tool"}


def call(name: str, arguments: dict[str, Any] | str, call_id: str) -> dict[str, Any]:
    return {"id": call_id, "name": name, "arguments": arguments}


def test_the_agent_requests_a_toolbox_uses_it_and_answers(api, ai_server):
    ai_server.reply(None, tool_calls=[call("requestToolbox", {"toolboxId": "ai", "reason": "hide personal data"},
                                           "c1")])
    neutralize = {"text": "Write to anna.muster@example.com", "names": None, "kinds": None}
    ai_server.reply(None, tool_calls=[call("ai_neutralizeData", neutralize, "c2")])
    ai_server.reply("Done: the address is now a placeholder.")

    events = stream(api, "Hide this: Write to anna.muster@example.com")  # preselects no toolbox it has

    kinds = [k for k, _ in events]
    assert kinds[0] == "run.started" and kinds[-1] == "final"
    escalated = of(events, "toolbox.escalated")
    assert [e["toolboxId"] for e in escalated] == ["ai"] and escalated[0]["reason"] == "hide personal data"
    finished = of(events, "tool.finished")
    assert [(f["name"], f["ok"]) for f in finished] == [("ai_neutralizeData", True)]
    assert json.loads(finished[0]["result"])["text"] == "Write to [EMAIL_1]"
    assert of(events, "final")[0]["text"] == "Done: the address is now a placeholder."
    assert "".join(d["text"] for d in of(events, "text.delta")) == "Done: the address is now a placeholder."

    first, second, third = ai_server.chat_requests
    assert "requestToolbox" in tool_names(first) and "core_readFile" in tool_names(first)
    assert not any(name.startswith("ai_") for name in tool_names(first))
    assert "ai" in request_toolbox_enum(first)
    assert "Toolboxes you can request with requestToolbox" in first.system_text
    assert "- ai: " in first.system_text
    assert "ai_neutralizeData" in tool_names(second)  # offered from the next round on
    assert "ai" not in (request_toolbox_enum(second) or [])
    assert json.loads(tool_results(second)["c1"])["activated"] == "ai"
    assert json.loads(tool_results(third)["c2"])["text"] == "Write to [EMAIL_1]"

    run_id = events[0][1]["runId"]
    run = api.client.get(f"/api/workspace/{workspace_id(api)}/agent/runs/{run_id}", headers=api.auth).json()
    assert run["status"] == "completed" and run["answer"] == "Done: the address is now a placeholder."
    assert run["toolboxes"] == ["core", "ai"] and run["rounds"] == 3 and run["toolCalls"] == 2
    kinds = [(s["kind"], s["name"]) for s in run["steps"]]
    assert ("escalation", "ai") in kinds and ("tool_call", "ai_neutralizeData") in kinds and kinds[-1][0] == "final"
    escalation = next(s for s in run["steps"] if s["kind"] == "escalation")
    assert escalation["detail"]["reason"] == "hide personal data"
    rounds = [s for s in run["steps"] if s["kind"] == "round"]
    assert "requestToolbox" in rounds[0]["detail"]["toolsOffered"]
    assert "ai_neutralizeData" in rounds[1]["detail"]["toolsOffered"]


def test_a_request_outside_the_available_toolboxes_is_explained_and_the_run_goes_on(api, ai_server):
    ai_server.reply(None, tool_calls=[call("requestToolbox", {"toolboxId": "chatbot", "reason": "books"}, "c1"),
                                      call("core_detectLanguage", {"text": "Guten Morgen zusammen"}, "c2")])
    ai_server.reply("I cannot reach the books, but the text is German.")
    events = stream(api, "What language, and check the books")
    assert of(events, "toolbox.refused")[0]["toolboxId"] == "chatbot"  # the Chatbot's own, not the Workspace's
    assert [f["name"] for f in of(events, "tool.finished")] == ["core_detectLanguage"]
    results = tool_results(ai_server.chat_requests[1])
    assert "not available to this agent" in json.loads(results["c1"])["error"]
    assert results["c2"] and "error" not in json.loads(results["c2"])
    assert of(events, "final")[0]["text"].startswith("I cannot reach the books")


def test_two_toolboxes_requested_in_one_batch_are_both_activated(api, ai_server):
    ai_server.reply(None, tool_calls=[call("requestToolbox", {"toolboxId": "ai", "reason": "hide data"}, "c1"),
                                      call("requestToolbox", {"toolboxId": "workflow", "reason": "graphs"}, "c2")])
    ai_server.reply("Both are ready.")
    events = stream(api, "Get ready for two more jobs")
    assert [e["toolboxId"] for e in of(events, "toolbox.escalated")] == ["ai", "workflow"]
    assert of(events, "final")[0]["text"] == "Both are ready."
    offered = tool_names(ai_server.chat_requests[1])
    assert "ai_neutralizeData" in offered and any(name.startswith("workflow_") for name in offered)


def test_the_third_identical_call_is_suppressed_while_the_rest_of_the_batch_runs(api, ai_server):
    same = {"text": "Bonjour tout le monde"}
    ai_server.reply(None, tool_calls=[call("core_detectLanguage", same, "a1"), call("core_detectLanguage", same, "a2")])
    ai_server.reply(None, tool_calls=[call("core_detectLanguage", same, "a3"),
                                      call("core_detectLanguage", {"text": "Buongiorno a tutti"}, "a4")])
    ai_server.reply("French and Italian.")
    events = stream(api, "Languages?")
    assert [f["callId"] for f in of(events, "tool.finished")] == ["a1", "a2", "a4"]
    guard = of(events, "guard")
    assert [(g["kind"], g["callId"]) for g in guard] == [("suppressed", "a3")]
    results = tool_results(ai_server.chat_requests[2])
    assert "already called 2 times" in json.loads(results["a3"])["error"]
    assert "error" not in json.loads(results["a4"])
    assert of(events, "final")[0]["text"] == "French and Italian."


def test_malformed_arguments_and_unknown_tools_become_tool_results(api, ai_server):
    ai_server.reply(None, tool_calls=[call("core_detectLanguage", '{"text": "unterminated', "m1"),
                                      call("core_teleport", {"where": "moon"}, "m2"),
                                      call("ai_generateImage", {"prompt": "a cat", "size": None}, "m3")])
    ai_server.reply("Sorry, that did not work.")
    events = stream(api, "Break things")
    results = tool_results(ai_server.chat_requests[1])
    assert "not valid JSON" in json.loads(results["m1"])["error"]
    assert json.loads(results["m2"])["error"] == "unknown tool 'core_teleport'"
    assert "request the toolbox 'ai' first" in json.loads(results["m3"])["error"]
    assert of(events, "final")[0]["text"] == "Sorry, that did not work."


def run_directly(api, prompt: str, config: AgentConfig) -> tuple[AgentRunner, list[tuple[str, dict[str, Any]]]]:
    """The runner itself, for configurations no profile has (the API uses the feature profiles)."""
    with session_scope() as session:
        admin = session.exec(select(User).where(User.username == "admin")).one()
        instance = session.get(FeatureInstance, workspace_id(api))
        runner = AgentRunner(session, admin, instance, prompt, profile_name="workspace", config=config)
        events = [(e.type, e.data) for e in runner.events()]
    return runner, events


def test_when_the_rounds_are_spent_a_final_answer_without_tools_is_forced(api, ai_server):
    for n in range(2):
        ai_server.reply(None, tool_calls=[call("core_detectLanguage", {"text": f"Hola amigos {n}"}, f"r{n}")])
    ai_server.reply("Spanish, as far as I got.")
    runner, events = run_directly(api, "Keep checking", AgentConfig(max_rounds=2))
    assert runner.run.status == "completed" and runner.run.answer == "Spanish, as far as I got."
    guard = of(events, "guard")
    assert guard[-1]["kind"] == "budget" and "round budget is spent (2 of 2" in guard[-1]["message"]
    last = ai_server.chat_requests[-1]
    assert "tools" not in last.json and len(ai_server.chat_requests) == 3
    assert "cannot use tools any more" in last.messages[-1]["content"]
    assert of(events, "final")[0]["text"] == "Spanish, as far as I got."


def test_per_tool_budgets_and_the_forty_call_limit(api, ai_server):
    texts = [f"Hello number {n} my friend" for n in range(45)]
    ai_server.reply(None, tool_calls=[call("core_detectLanguage", {"text": t}, f"d{n}")
                                      for n, t in enumerate(texts[:4])])
    ai_server.reply("Three were enough.")
    _, events = run_directly(api, "Detect", AgentConfig(tool_budgets={"core_detectLanguage": 3}))
    assert [g["callId"] for g in of(events, "guard")] == ["d3"]
    assert "at most 3 times" in of(events, "guard")[0]["message"]

    ai_server.clear()
    batch = [call("core_detectLanguage", {"text": t}, f"x{n}") for n, t in enumerate(texts[:13])]
    batch += [call("core_listFiles", {"folder": f"/f{n}", "recursive": None}, f"l{n}") for n in range(13)]
    batch += [call("core_listFolders", {"path": f"/p{n}", "recursive": None}, f"p{n}") for n in range(13)]
    batch += [call("core_readFile", {"path": f"/none{n}.txt", "offset": None, "maxChars": None}, f"t{n}")
              for n in range(5)]
    ai_server.reply(None, tool_calls=batch)
    ai_server.reply("That was a lot.")
    runner, events = run_directly(api, "Everything", AgentConfig())
    assert runner.run.tool_calls == 40
    suppressed = [g for g in of(events, "guard") if g["kind"] == "suppressed"]
    assert {g["callId"] for g in suppressed} >= {"x12", "l12", "p12"}  # 12 per tool name
    assert any("budget of 40 tool calls is spent" in g["message"] for g in suppressed)
    assert of(events, "guard")[-1]["kind"] == "budget"
    assert "tools" not in ai_server.chat_requests[-1].json  # forced final answer
    assert runner.run.answer == "That was a lot."


def test_tool_results_are_cut_and_the_history_is_kept_under_64000_characters(api, ai_server):
    big = "word " * 6_000  # 30,000 characters
    writes = [{"path": f"/big{n}.txt", "content": big, "overwrite": None, "createFolders": None} for n in range(6)]
    ai_server.reply(None, tool_calls=[call("core_writeFile", args, f"w{n}") for n, args in enumerate(writes)])
    ai_server.reply(None, tool_calls=[call("core_readFile", {"path": f"/big{n}.txt", "offset": None,
                                                               "maxChars": 100_000}, f"r{n}")
                                      for n in range(6)])
    ai_server.reply("Read them all.")
    events = stream(api, "Write and read six big files")
    assert of(events, "final")[0]["text"] == "Read them all."
    last = ai_server.chat_requests[-1]
    results = [m["content"] for m in last.messages if m.get("role") == "tool"]
    assert all(len(r) <= 12_000 for r in results)
    assert sum(len(r) for r in results) <= 64_000
    reads = [tool_results(last)[f"r{n}"] for n in range(6)]
    assert "result cut" in reads[-1]  # each result is cut to 12,000 characters
    assert "older result shortened" in tool_results(last)["w0"] or "older result shortened" in reads[0]
    assert any(g["kind"] == "history" for g in of(events, "guard"))


def test_a_provider_failure_ends_the_run_failed_with_the_reason(api, ai_server):
    ai_server.fail(500, "model overloaded", times=10)
    events = stream(api, "Hello?")
    error = of(events, "error")[0]["message"]
    assert "500" in error or "overloaded" in error
    run_id = events[0][1]["runId"]
    run = api.client.get(f"/api/workspace/{workspace_id(api)}/agent/runs/{run_id}", headers=api.auth).json()
    assert run["status"] == "failed" and run["error"] == error


def test_a_chat_continues_with_its_history_and_runs_are_listed(api, ai_server):
    ai_server.reply("Nice to meet you, Anna.")
    first = stream(api, "My name is Anna.")
    chat_id = first[0][1]["chatId"]
    ai_server.reply("You are Anna.")
    second = stream(api, "What is my name?", chat_id=chat_id)
    assert second[0][1]["chatId"] == chat_id
    sent = ai_server.chat_requests[-1].messages
    assert [m["content"] for m in sent if m["role"] in ("user", "assistant")] == [
        "My name is Anna.", "Nice to meet you, Anna.", "What is my name?"]
    base = f"/api/workspace/{workspace_id(api)}/agent"
    listed = api.client.get(f"{base}/runs", params={"chatId": chat_id}, headers=api.auth).json()
    assert [r["prompt"] for r in listed] == ["What is my name?", "My name is Anna."]
    chats = api.client.get(f"{base}/chats", headers=api.auth).json()
    assert chats[0]["id"] == chat_id and chats[0]["title"] == "My name is Anna."
    assert api.client.get(f"{base}/runs/nope", headers=api.auth).status_code == 404
    done = api.client.post(f"{base}/runs/{first[0][1]['runId']}/cancel", headers=api.auth)
    assert done.status_code == 409  # a completed run cannot be cancelled


def test_bad_requests_are_refused_with_the_field_named(api, ai_server):
    base = f"/api/workspace/{workspace_id(api)}/agent"
    empty = api.client.post(base, json={"prompt": "  "}, headers=api.auth)
    assert empty.status_code == 422 and "prompt" in empty.text
    unknown_chat = api.client.post(base, json={"prompt": "hi", "chatId": "nope"}, headers=api.auth)
    assert unknown_chat.status_code == 404
    foreign = api.client.post("/api/workspace/not-an-instance/agent", json={"prompt": "hi"}, headers=api.auth)
    assert foreign.status_code == 404
    assert ai_server.chat_requests == []


def test_the_cost_budget_forces_the_final_answer(api, ai_server, monkeypatch):
    monkeypatch.setenv("POWERON_AI_PROVIDERS", json.dumps([
        {"name": "priced", "baseUrl": ai_server.base_url, "apiKey": ai_server.api_key, "model": "test-model",
         "prices": {"test-model": {"input": 1000.0, "output": 1000.0}}}]))
    reset_settings_cache()
    ai_server.reply(None, tool_calls=[call("core_detectLanguage", {"text": "Hyvää huomenta"}, "k1")],
                    usage={"prompt_tokens": 100, "completion_tokens": 20, "total_tokens": 120})
    ai_server.reply("Finnish, I think.", usage={"prompt_tokens": 100, "completion_tokens": 5, "total_tokens": 105})
    runner, events = run_directly(api, "Which language?", AgentConfig(max_cost_chf=0.05))
    budget = [g for g in of(events, "guard") if g["kind"] == "budget"]
    assert budget and "cost budget is spent (0.1200 of 0.05 CHF)" in budget[0]["message"]
    assert "tools" not in ai_server.chat_requests[-1].json and len(ai_server.chat_requests) == 2
    assert runner.run.answer == "Finnish, I think."
    assert runner.run.cost_chf == pytest.approx(0.12 + 0.105)
    assert of(events, "final")[0]["costChf"] == pytest.approx(0.225)


def test_cancelling_a_run_stops_it_before_its_next_step(api, ai_server):
    ai_server.reply(None, tool_calls=[call("core_detectLanguage", {"text": "God morgon"}, "s1")], delay=1.5)
    ai_server.reply("never asked")
    collected: list[tuple[str, dict[str, Any]]] = []
    worker = threading.Thread(target=lambda: collected.extend(stream(api, "Slow question")))
    worker.start()
    base = f"/api/workspace/{workspace_id(api)}/agent"
    deadline = time.monotonic() + 10
    runs: list[dict[str, Any]] = []
    while not runs and time.monotonic() < deadline:
        runs = [r for r in api.client.get(f"{base}/runs", headers=api.auth).json() if r["status"] == "thinking"]
    assert runs, "the run did not start"
    cancelled = api.client.post(f"{base}/runs/{runs[0]['id']}/cancel", headers=api.auth)
    assert cancelled.status_code == 200 and cancelled.json()["status"] == "cancelled"
    worker.join(timeout=30)
    assert [k for k, _ in collected][-1] == "cancelled"
    assert not of(collected, "tool.finished")  # the model's tool call was not executed
    assert len(ai_server.chat_requests) == 1
    run = api.client.get(f"{base}/runs/{runs[0]['id']}", headers=api.auth).json()
    assert run["status"] == "cancelled" and run["error"] == "cancelled by admin"


def test_a_stream_closed_by_its_reader_cancels_the_run(api, ai_server):
    ai_server.reply("A long answer that nobody reads to the end.")
    with session_scope() as session:
        admin = session.exec(select(User).where(User.username == "admin")).one()
        instance = session.get(FeatureInstance, workspace_id(api))
        runner = AgentRunner(session, admin, instance, "Hello", profile_name="workspace")
        events = runner.events()
        assert next(events).type == "run.started"
        events.close()  # what the server does when the browser goes away
        session.refresh(runner.run)
        assert runner.run.status == "cancelled" and runner.run.error == "the client went away"


def editor_id(api) -> str:
    return api.instance_id


def test_a_feature_data_sub_agent_answers_from_an_instances_tables(api, ai_server):
    for name in ("Invoices", "Reminders"):
        created = api.client.post(f"{api.base()}/workflows", json={"name": name}, headers=api.auth)
        assert created.status_code == 201
    question = "How many workflows are there, and what are they called?"
    ai_server.reply(None, tool_calls=[call("queryFeatureInstance", {"featureCode": "graphicalEditor",
                                                                   "instanceId": editor_id(api),
                                                                   "question": question}, "q1")])
    ai_server.reply(None, tool_calls=[call("featureData_queryTable", {
        "table": "workflow", "columns": ["name"], "where": [], "orderBy": "name", "descending": None, "limit": 10,
        "offset": None, "maxCellChars": None}, "d1")])
    ai_server.reply("Two workflows: Invoices and Reminders.")
    ai_server.reply("You have two workflows, Invoices and Reminders.")

    events = stream(api, "What workflows do I have?")

    started = of(events, "subagent.started")[0]
    assert started["featureCode"] == "graphicalEditor" and started["question"] == question
    inner = [e for e in of(events, "tool.finished") if e.get("subAgentRunId") == started["runId"]]
    assert [(e["name"], e["ok"]) for e in inner] == [("featureData_queryTable", True)]
    assert of(events, "subagent.finished")[0]["answer"] == "Two workflows: Invoices and Reminders."
    assert of(events, "final")[0]["text"] == "You have two workflows, Invoices and Reminders."

    main_first, child_first, child_second, main_second = ai_server.chat_requests
    assert "queryFeatureInstance" in tool_names(main_first)
    assert f"- {editor_id(api)}: " in main_first.system_text
    assert sorted(tool_names(child_first)) == ["featureData_browseTable", "featureData_listTables",
                                               "featureData_queryTable"]  # no sub-agent of a sub-agent
    assert "## workflow" in child_first.system_text and child_first.user_text == question
    rows = json.loads(tool_results(child_second)["d1"])["rows"]
    assert sorted(r["name"] for r in rows) == ["Invoices", "Reminders"]
    assert tool_results(main_second)["q1"] == "Two workflows: Invoices and Reminders."

    run = api.client.get(f"/api/workspace/{workspace_id(api)}/agent/runs/{events[0][1]['runId']}",
                         headers=api.auth).json()
    (sub,) = run["subRuns"]
    assert sub["profile"] == "featureData" and sub["status"] == "completed"
    assert sub["config"]["maxRounds"] == 5 and sub["config"]["maxCostCHF"] == 0.10
    assert [s["kind"] for s in sub["steps"]] == ["round", "tool_call", "round", "final"]
    assert any(s["kind"] == "sub_agent" and s["ok"] for s in run["steps"])


def test_the_sub_agent_refuses_an_instance_the_user_may_not_read(api, ai_server):
    ai_server.reply(None, tool_calls=[call("queryFeatureInstance", {"featureCode": "graphicalEditor",
                                                                   "instanceId": "someone-elses", "question": "x"},
                                           "q1")])
    ai_server.reply("I could not look.")
    events = stream(api, "Peek")
    assert of(events, "subagent.refused")[0]["instanceId"] == "someone-elses"
    assert "was not found" in json.loads(tool_results(ai_server.chat_requests[1])["q1"])["error"]
    assert len(ai_server.chat_requests) == 2  # no sub-agent ran


def draft_graph(api, workflow_id: str) -> dict[str, Any]:
    versions = api.client.get(f"{api.base()}/workflows/{workflow_id}/versions", headers=api.auth).json()
    return next(v for v in versions if v["status"] == "draft")["graph"]


def test_in_the_workspace_the_agent_creates_a_workflow_draft_from_a_description(api, ai_server):
    """UC-3: the workflow toolbox is preselected for the request (issue 21); the agent creates a
    workflow and builds its draft."""
    ai_server.reply(None, tool_calls=[call("workflow_createWorkflow", {"name": "Greeter", "description": "Greets",
                                                                      "editorInstanceId": None}, "u2")])
    ai_server.reply("I created the workflow Greeter.")
    events_prefix = stream(api, "Build a workflow that greets whoever starts it")
    workflow_id = json.loads(tool_results(ai_server.chat_requests[1])["u2"])["workflowId"]
    assert of(events_prefix, "toolbox.preselected")[0]["toolboxIds"] == ["workflow"]
    assert "workflow_createWorkflow" in tool_names(ai_server.chat_requests[0])

    ai_server.clear()
    trigger = next(n["id"] for n in draft_graph(api, workflow_id)["nodes"] if n["type"] == "trigger.manual")
    ai_server.reply(None, tool_calls=[
        call("workflow_addNode", {"workflowId": workflow_id, "type": "context.transform", "id": "greet",
                                  "label": None, "editorInstanceId": None,
                                  "parameters": json.dumps({"data": "{{ input }}", "template": "Hello {{ name }}"})},
             "v2"),
        call("workflow_connectNodes", {"workflowId": workflow_id, "source": trigger, "target": "greet",
                                       "sourceHandle": None, "editorInstanceId": None}, "v3"),
        call("workflow_validateGraph", {"workflowId": workflow_id, "editorInstanceId": None}, "v4")])
    ai_server.reply("The workflow Greeter is ready as a draft; open it in the Graphical Editor.")
    events = stream(api, "Now add the greeting step", chat_id=events_prefix[0][1]["chatId"])
    assert [(f["name"], f["ok"]) for f in of(events, "tool.finished")] == [
        ("workflow_addNode", True), ("workflow_connectNodes", True), ("workflow_validateGraph", True)]
    assert json.loads(tool_results(ai_server.chat_requests[-1])["v4"])["valid"] is True
    graph = draft_graph(api, workflow_id)
    assert {n["id"] for n in graph["nodes"]} == {trigger, "greet"}
    assert [(e["source"], e["target"]) for e in graph["edges"]] == [(trigger, "greet")]
    run = api.client.post(f"{api.base()}/workflows/{workflow_id}/runs", json={"input": {"name": "Eva"}},
                          headers=api.auth).json()
    assert run["status"] == "completed" and run["output"] == {"greet": {"result": "Hello Eva", "missing": []}}


def test_the_editor_chat_knows_the_graph_and_changes_it_with_validated_tools(api, ai_server):
    """UC-4: POST …/workflows/{id}/agent: workflow tools from round 1, the graph in the prompt."""
    graph = {"nodes": [{"id": "start", "type": "trigger.manual", "parameters": {}}], "edges": []}
    workflow_id = api.client.post(f"{api.base()}/workflows", json={"name": "Edited by chat", "graph": graph},
                                  headers=api.auth).json()["id"]
    ai_server.reply(None, tool_calls=[
        call("workflow_addNode", {"workflowId": workflow_id, "type": "no.suchType", "id": "x", "label": None,
                                  "parameters": None, "editorInstanceId": None}, "e1"),
        call("workflow_addNode", {"workflowId": workflow_id, "type": "flow.wait", "id": "pause", "label": None,
                                  "parameters": json.dumps({"seconds": 5}), "editorInstanceId": None}, "e2"),
        call("workflow_connectNodes", {"workflowId": workflow_id, "source": "start", "target": "pause",
                                       "sourceHandle": None, "editorInstanceId": None}, "e3")])
    ai_server.reply("Added a 5 second wait after the start.")
    with api.client.stream("POST", f"{api.base()}/workflows/{workflow_id}/agent",
                           json={"prompt": "Wait five seconds after the start"}, headers=api.auth) as response:
        assert response.status_code == 200
        events = sse_events(response)
    first = ai_server.chat_requests[0]
    assert "workflow_addNode" in tool_names(first) and "requestToolbox" in tool_names(first)
    # The editor's chat starts with the graph's tools; files and the web (core) come on request.
    assert request_toolbox_enum(first) == ["core", "ai"]
    assert f"workflowId {workflow_id}" in first.system_text and '"type":"trigger.manual"' in first.system_text
    assert "core_readFile" not in tool_names(first) and len(tool_names(first)) <= 20
    results = [(f["name"], f["ok"]) for f in of(events, "tool.finished")]
    assert results == [("workflow_addNode", False), ("workflow_addNode", True), ("workflow_connectNodes", True)]
    assert "no.suchType" in json.loads(tool_results(ai_server.chat_requests[1])["e1"])["error"]
    saved = draft_graph(api, workflow_id)
    assert sorted(n["id"] for n in saved["nodes"]) == ["pause", "start"]
    assert of(events, "final")[0]["text"] == "Added a 5 second wait after the start."
    runs = api.client.get(f"{api.base()}/agent/runs", headers=api.auth).json()
    assert runs[0]["profile"] == "graphicalEditor" and runs[0]["status"] == "completed"


def test_tools_and_toolboxes_follow_the_users_rights(api, ai_server):
    with session_scope() as session:
        instance = session.get(FeatureInstance, workspace_id(api))
        viewer = User(username="vera", display_name="Vera Viewer")
        session.add(viewer)
        session.flush()
        grant_mandate_roles(session, viewer, session.get(Mandate, instance.mandate_id), ["viewer"])
        grant_instance_roles(session, viewer, instance, ["workspace-viewer"])
    with session_scope() as session:
        token = issue_token(session, session.exec(select(User).where(User.username == "vera")).one()).token
    refused = api.client.post(f"/api/workspace/{workspace_id(api)}/agent", json={"prompt": "hi"},
                              headers={"Authorization": f"Bearer {token}"})
    assert refused.status_code == 403 and "useAgent" in refused.text

    ai_server.reply("Hello Vera.")
    with session_scope() as session:
        vera = session.exec(select(User).where(User.username == "vera")).one()
        runner = AgentRunner(session, vera, session.get(FeatureInstance, workspace_id(api)), "hi",
                             profile_name="workspace")
        events = [(e.type, e.data) for e in runner.events()]
    assert of(events, "round.started")[0]["tools"] == []  # viewers may use no toolbox: nothing is offered
    assert "tools" not in ai_server.chat_requests[0].json
    assert "requestToolbox" not in ai_server.chat_requests[0].system_text


def test_chats_can_be_renamed_and_deleted_with_their_runs(api, ai_server):
    ai_server.reply(None, tool_calls=[call("queryFeatureInstance", {"featureCode": "graphicalEditor",
                                                                   "instanceId": editor_id(api),
                                                                   "question": "How many?"}, "q1")])
    ai_server.reply("None.")
    ai_server.reply("You have none.")
    events = stream(api, "Count my workflows")
    chat_id = events[0][1]["chatId"]
    base = f"/api/workspace/{workspace_id(api)}/agent"
    renamed = api.client.patch(f"{base}/chats/{chat_id}", json={"title": "  Counting  "}, headers=api.auth)
    assert renamed.status_code == 200 and renamed.json()["title"] == "Counting"
    empty = api.client.patch(f"{base}/chats/{chat_id}", json={"title": " "}, headers=api.auth)
    assert empty.status_code == 422 and "title" in empty.text
    assert api.client.delete(f"{base}/chats/{chat_id}", headers=api.auth).status_code == 204
    assert api.client.get(f"{base}/runs/{events[0][1]['runId']}", headers=api.auth).status_code == 404
    assert api.client.get(f"{base}/runs", params={"chatId": chat_id}, headers=api.auth).status_code == 404
    assert api.client.delete(f"{base}/chats/{chat_id}", headers=api.auth).status_code == 404


def test_the_chat_doors_list_chats_with_what_each_user_may_do(api):
    from backend.agent.service import AgentChats
    from backend.features.workspace.interface import WorkspaceInterface, get_interface
    from backend.rbac.access import AccessContext
    from backend.rbac.door import permissions_of

    assert [p.as_dict() for p in permissions_of(AgentChats.rename_chat)] == [
        {"kind": "DATA", "item": "data.feature.{featureCode}.chat", "operation": "update"}]
    assert [p.as_dict() for p in permissions_of(WorkspaceInterface.prepare_run)] == [
        {"kind": "RESOURCE", "item": "resource.feature.workspace.useAgent"}]
    with session_scope() as session:
        instance = session.get(FeatureInstance, workspace_id(api))
        uma = User(username="uma", display_name="Uma User")
        session.add(uma)
        session.flush()
        grant_mandate_roles(session, uma, session.get(Mandate, instance.mandate_id), ["user"])
        grant_instance_roles(session, uma, instance, ["workspace-user"])
    with session_scope() as session:
        admin = session.exec(select(User).where(User.username == "admin")).one()
        uma = session.exec(select(User).where(User.username == "uma")).one()
        theirs = get_interface(admin, None, workspace_id(api), session).prepare_run("The admin's question").chat_id
        mine = AgentChats.of(AccessContext(session, uma), workspace_id(api)).prepare_run("Uma's question").chat_id
    with session_scope() as session:
        uma = session.exec(select(User).where(User.username == "uma")).one()
        iface = get_interface(uma, None, workspace_id(api), session)
        assert iface.can_use_agent()
        rows = {c.id: (c.mine, c.can_rename, c.can_delete) for c in iface.chat_rows()}
        assert rows[mine] == (True, True, True) and rows[theirs] == (False, False, False)
        history = iface.chat_history(theirs)
        assert (history.chat.id, history.mine, history.runs) == (theirs, False, [])
