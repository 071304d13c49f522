"""The run engine through the REST run API (DESIGN §4–6): branches, switch, loop, merge, actions,
expression errors, retries, onError, step logs, list/get/cancel/continue, and human tasks
(approval pauses the run; completing resumes it once; cancelling the task cancels the run)."""

from __future__ import annotations

import uuid
from typing import Any

import pytest
from sqlmodel import select

from backend.db import session_scope
from backend.db.models import HumanTask, WorkflowRun
from backend.engine.frontier import Frontier, Graph
from backend.engine.steps import cap_output, mask_secrets

# Graph semantics (branches, loops, retries, onError …) do not depend on the database: those tests
# run on SQLite only. What is persisted and read back (step rows, context, human tasks, the REST
# run API, cancel) runs on SQLite and PostgreSQL.
SQLITE = pytest.mark.parametrize("db_url", ["sqlite"], indirect=True)

START = {"id": "start", "type": "trigger.manual", "parameters": {}}


def transform(node_id: str, template: str, data: Any = "{{ input }}", **extra: Any) -> dict[str, Any]:
    """A context.transform node rendering `template` over `data`."""
    return {"id": node_id, "type": "context.transform", "parameters": {"data": data, "template": template}, **extra}


def edge(source: str, target: str, handle: str | None = None) -> dict[str, Any]:
    return {"source": source, "target": target, **({"sourceHandle": handle} if handle else {})}


def run_graph(api, graph: dict[str, Any], input: Any = None, mode: str = "full",  # noqa: A002
              expect: int = 201) -> dict[str, Any]:
    created = api.client.post(f"{api.base()}/workflows", json={"name": f"wf-{uuid.uuid4().hex}", "graph": graph},
                              headers=api.auth)
    assert created.status_code == 201, created.text
    response = api.client.post(f"{api.base()}/workflows/{created.json()['id']}/runs",
                               json={"input": input, "mode": mode}, headers=api.auth)
    assert response.status_code == expect, response.text
    return response.json()


def steps_of(run: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """The last attempt of each node, by node id."""
    return {step["nodeId"]: step for step in run["steps"]}


def ran(run: dict[str, Any]) -> list[str]:
    return [step["nodeId"] for step in run["steps"]]


BRANCH = {
    "nodes": [START,
              {"id": "big", "type": "flow.ifElse", "parameters": {"condition": "{{ input.amount > 1000 }}"}},
              transform("yes", "big {{ amount }}"),
              transform("no", "small {{ amount }}")],
    "edges": [edge("start", "big"), edge("big", "yes", "true"), edge("big", "no", "false")],
}


@SQLITE
def test_if_else_follows_one_branch(api):
    run = run_graph(api, BRANCH, {"amount": 5000})
    assert run["status"] == "completed", run
    assert ran(run) == ["start", "big", "yes"]
    assert run["output"] == {"yes": {"result": "big 5000", "missing": []}}
    small = run_graph(api, BRANCH, {"amount": 5})
    assert ran(small) == ["start", "big", "no"]


@SQLITE
def test_switch_picks_the_case_or_default(api):
    graph = {
        "nodes": [START,
                  {"id": "sw", "type": "flow.switch",
                   "parameters": {"value": "{{ input.kind }}",
                                  "cases": [{"value": "a"}, {"value": "b", "handle": "bee"}]}},
                  transform("on_a", "A"), transform("on_b", "B"), transform("other", "?")],
        "edges": [edge("start", "sw"), edge("sw", "on_a", "a"), edge("sw", "on_b", "bee"),
                  edge("sw", "other", "default")],
    }
    assert ran(run_graph(api, graph, {"kind": "b"}))[-1] == "on_b"
    assert ran(run_graph(api, graph, {"kind": "a"}))[-1] == "on_a"
    assert ran(run_graph(api, graph, {"kind": "zzz"}))[-1] == "other"


LOOP = {
    "nodes": [START,
              {"id": "each", "type": "flow.loop", "parameters": {"items": "{{ input.rows }}"}},
              transform("double", "{{ v * 2 }}", data={"v": "{{ item }}", "i": "{{ index }}"}),
              transform("after", "{{ data | join(',') }}",
                        data="{{ nodes.each.output | map(attribute='result') | list }}")],
    "edges": [edge("start", "each"), edge("each", "double", "each"), edge("double", "each"),
              edge("each", "after", "done")],
}


@SQLITE
def test_loop_runs_its_body_per_item_then_done(api):
    run = run_graph(api, LOOP, {"rows": [1, 2, 3]})
    assert run["status"] == "completed", run
    assert ran(run) == ["start", "each", "double", "double", "double", "after"]
    doubles = [s for s in run["steps"] if s["nodeId"] == "double"]
    assert [s["input"]["data"] for s in doubles] == [{"v": 1, "i": 0}, {"v": 2, "i": 1}, {"v": 3, "i": 2}]
    assert [s["output"]["result"] for s in doubles] == ["2", "4", "6"]
    assert run["output"] == {"after": {"result": "2,4,6", "missing": []}}


@SQLITE
def test_loop_over_no_items_goes_straight_to_done(api):
    run = run_graph(api, LOOP, {"rows": []})
    assert ran(run) == ["start", "each", "after"]


@SQLITE
def test_merge_after_if_is_not_blocked_by_the_dead_branch(api):
    graph = {
        "nodes": [START,
                  {"id": "big", "type": "flow.ifElse", "parameters": {"condition": "{{ input.amount > 1000 }}"}},
                  transform("yes", "big"), transform("no", "small"),
                  {"id": "join", "type": "flow.merge", "parameters": {}},
                  transform("end", "done: {{ data | tojson }}", data="{{ nodes.join.output }}")],
        "edges": [edge("start", "big"), edge("big", "yes", "true"), edge("big", "no", "false"),
                  edge("yes", "join"), edge("no", "join"), edge("join", "end")],
    }
    run = run_graph(api, graph, {"amount": 1})
    assert run["status"] == "completed", run
    assert ran(run) == ["start", "big", "no", "join", "end"]
    assert steps_of(run)["join"]["output"] == {"no": {"result": "small", "missing": []}}


@SQLITE
def test_action_node_output_feeds_later_expressions(api):
    graph = {"nodes": [START, transform("greet", "Hello {{ name }}"),
                       transform("shout", "{{ text | upper }}", data={"text": "{{ nodes.greet.output.result }}"})],
             "edges": [edge("start", "greet"), edge("greet", "shout")]}
    run = run_graph(api, graph, {"name": "Anna"})
    assert run["output"] == {"shout": {"result": "HELLO ANNA", "missing": []}}


@SQLITE
def test_expression_error_fails_the_step_naming_node_and_parameter(api):
    graph = {"nodes": [START, transform("bad", "x", data={"v": "{{ nodes.nope.output }}"})],
             "edges": [edge("start", "bad")]}
    run = run_graph(api, graph)
    assert run["status"] == "failed"
    step = steps_of(run)["bad"]
    assert step["status"] == "failed"
    assert "node 'bad'" in step["error"] and "parameter 'data.v'" in step["error"], step["error"]
    assert "node 'bad'" in run["error"]


@SQLITE
def test_ai_prompt_failing_once_is_retried(api, ai_server):
    ai_server.fail(500, "overloaded")
    ai_server.reply("the answer")
    graph = {"nodes": [START, {"id": "ask", "type": "ai.prompt", "parameters": {"prompt": "Say {{ input.q }}"},
                               "retry": {"maxAttempts": 2, "backoff": "exponential", "delaySeconds": 0}}],
             "edges": [edge("start", "ask")]}
    run = run_graph(api, graph, {"q": "hi"})
    assert run["status"] == "completed", run
    attempts = [s for s in run["steps"] if s["nodeId"] == "ask"]
    assert [(s["attempt"], s["status"]) for s in attempts] == [(1, "failed"), (2, "completed")]
    assert "500" in attempts[0]["error"]
    assert attempts[1]["output"]["text"] == "the answer"
    assert ai_server.last_chat.user_text == "Say hi"


@SQLITE
def test_ai_decide_follows_the_chosen_option_and_refuses_others(api, ai_server):
    graph = {"nodes": [START, {"id": "pick", "type": "ai.decide",
                               "parameters": {"question": "Spam?", "options": ["spam", "ham"]}},
                       transform("s", "S"), transform("h", "H")],
             "edges": [edge("start", "pick"), edge("pick", "s", "spam"), edge("pick", "h", "ham")]}
    ai_server.reply("Ham.")
    assert ran(run_graph(api, graph)) == ["start", "pick", "h"]
    ai_server.reply("maybe")
    run = run_graph(api, graph)
    assert run["status"] == "failed" and "none of the options" in steps_of(run)["pick"]["error"]


def _failing(on_error: str) -> dict[str, Any]:
    bad = transform("bad", "{{ x.y.z }}", data={}, onError=on_error)
    return {"nodes": [START, bad, transform("next", "went on"), transform("handler", "handled {{ e }}",
                                                                          data={"e": "{{ nodes.bad.output.error }}"})],
            "edges": [edge("start", "bad"), edge("bad", "next"),
                      *([edge("bad", "handler", "error")] if on_error == "route" else [])]}


@SQLITE
def test_on_error_continue_and_route(api):
    cont = run_graph(api, _failing("continue"))
    assert cont["status"] == "completed", cont
    assert ran(cont) == ["start", "bad", "next"]
    assert steps_of(cont)["bad"]["status"] == "failed"
    routed = run_graph(api, _failing("route"))
    assert routed["status"] == "completed", routed
    assert ran(routed) == ["start", "bad", "handler"]
    assert steps_of(routed)["handler"]["output"]["result"].startswith("handled ")
    failed = run_graph(api, _failing("fail"))
    assert failed["status"] == "failed" and ran(failed) == ["start", "bad"]


@SQLITE
def test_flow_stop_ends_the_run_with_its_status(api):
    graph = {"nodes": [START, {"id": "halt", "type": "flow.stop", "parameters": {"status": "failed",
                                                                                 "message": "no way"}}],
             "edges": [edge("start", "halt")]}
    run = run_graph(api, graph)
    assert run["status"] == "failed" and run["error"] == "no way"


def test_steps_carry_masked_inputs_outputs_and_durations(api):
    graph = {"nodes": [START, transform("t", "ok", data={"user": "a", "apiKey": "sk-123", "password": "pw"})],
             "edges": [edge("start", "t")]}
    run = run_graph(api, graph, {"x": 1})
    step = steps_of(run)["t"]
    assert step["input"]["data"] == {"user": "a", "apiKey": "***", "password": "***"}
    assert step["output"] == {"result": "ok", "missing": []}
    assert isinstance(step["durationMs"], int) and step["startedAt"] and step["finishedAt"]
    assert steps_of(run)["start"]["output"] == {"x": 1}
    with session_scope() as session:
        context = session.get(WorkflowRun, run["id"]).context
    assert set(context) == {"outputs", "frontier", "loops", "ends", "suspended"}
    assert context["outputs"]["t"]["result"] == "ok" and context["frontier"]["ready"] == []


def test_large_outputs_are_capped_with_a_note():
    capped = cap_output({"text": "x" * 100_000})
    assert capped["truncated"] is True and "64 KB" in capped["note"]
    assert mask_secrets({"a": [{"token": 1}]}) == {"a": [{"token": "***"}]}


@SQLITE
def test_invalid_graph_is_refused_before_running(api):
    graph = {"nodes": [transform("t", "x")], "edges": []}
    errors = run_graph(api, graph, expect=422)
    assert "nodes" in str(errors)


def test_rest_list_get_cancel_and_step_mode(api):
    run = run_graph(api, BRANCH, {"amount": 5}, mode="step")
    assert run["status"] == "paused" and run["pauseReason"] == "step" and ran(run) == ["start"]
    base = api.base()
    resumed = api.client.post(f"{base}/runs/{run['id']}/continue", headers=api.auth)
    assert resumed.status_code == 200, resumed.text
    assert ran(resumed.json()) == ["start", "big"]
    listed = api.client.get(f"{base}/runs", params={"workflowId": run["workflowId"], "status": "paused"},
                            headers=api.auth)
    assert [r["id"] for r in listed.json()] == [run["id"]]
    cancelled = api.client.post(f"{base}/runs/{run['id']}/cancel", headers=api.auth)
    assert cancelled.status_code == 200 and cancelled.json()["status"] == "cancelled"
    again = api.client.post(f"{base}/runs/{run['id']}/cancel", headers=api.auth)
    assert again.status_code == 409
    got = api.client.get(f"{base}/runs/{run['id']}", headers=api.auth).json()
    assert got["status"] == "cancelled" and len(got["steps"]) == 2
    assert api.client.get(f"{base}/runs/{'0' * 32}", headers=api.auth).status_code == 404
    assert api.client.get(f"{base}/runs", params={"status": "weird"}, headers=api.auth).status_code == 422


def test_frontier_kills_untaken_branches_and_hands_out_independent_nodes():
    graph = Graph({"nodes": [START, {"id": "a", "type": "flow.ifElse"}, {"id": "b", "type": "x"},
                             {"id": "c", "type": "x"}, {"id": "d", "type": "x"}, {"id": "m", "type": "flow.merge"}],
                   "edges": [edge("start", "a"), edge("a", "b", "true"), edge("a", "c", "false"),
                             edge("start", "d"), edge("b", "m"), edge("c", "m"), edge("d", "m")]})
    frontier = Frontier(graph)
    frontier.prepare("start")
    frontier.take("start")
    frontier.done("start", ["out"])
    assert set(frontier.get_ready()) == {"a", "d"}  # independent: could run concurrently
    frontier.take("a")
    frontier.done("a", ["true"])
    frontier.take("d")
    frontier.done("d", ["out"])
    frontier.take("b")
    frontier.done("b", ["out"])
    assert frontier.get_ready() == ("m",)
    restored = Frontier(graph, frontier.to_state())
    assert restored.get_ready() == ("m",) and "c" in restored.finished


# --- human tasks (Phase B) ------------------------------------------------------------------


def _me(api) -> str:
    return api.client.get("/api/me", headers=api.auth).json()["id"]


def approval_graph(assignee: dict[str, Any]) -> dict[str, Any]:
    return {"nodes": [START,
                      {"id": "ok", "type": "input.approval",
                       "parameters": {"title": "Approve {{ input.amount }} CHF", "assignee": assignee}},
                      transform("yes", "approved: {{ comment }}", data="{{ nodes.ok.output }}"),
                      transform("no", "rejected")],
            "edges": [edge("start", "ok"), edge("ok", "yes", "approved"), edge("ok", "no", "rejected")]}


def _pending(api, run_id: str) -> dict[str, Any]:
    listed = api.client.get("/api/tasks", params={"status": "pending"}, headers=api.auth)
    assert listed.status_code == 200, listed.text
    return next(t for t in listed.json() if t["runId"] == run_id)


def test_approval_pauses_the_run_and_completing_resumes_it_once(api):
    run = run_graph(api, approval_graph({"user": _me(api)}), {"amount": 50})
    assert run["status"] == "paused" and run["pauseReason"] == "humanTask", run
    assert steps_of(run)["ok"]["status"] == "waiting"
    task = _pending(api, run["id"])
    assert task["title"] == "Approve 50 CHF" and task["kind"] == "approval"
    bad = api.client.post(f"/api/tasks/{task['id']}/complete", json={"data": {"approved": "yes"}}, headers=api.auth)
    assert bad.status_code == 422
    done = api.client.post(f"/api/tasks/{task['id']}/complete", json={"data": {"approved": True, "comment": "fine"}},
                           headers=api.auth)
    assert done.status_code == 200, done.text
    assert done.json()["task"]["status"] == "completed"
    assert done.json()["run"]["status"] == "completed"
    again = api.client.post(f"/api/tasks/{task['id']}/complete", json={"data": {"approved": False}}, headers=api.auth)
    assert again.status_code == 409
    final = api.client.get(f"{api.base()}/runs/{run['id']}", headers=api.auth).json()
    assert ran(final) == ["start", "ok", "yes"]
    assert steps_of(final)["ok"]["status"] == "completed"
    assert steps_of(final)["yes"]["output"]["result"] == "approved: fine"


def test_rejecting_takes_the_rejected_handle_and_cancelling_cancels_the_run(api):
    run = run_graph(api, approval_graph({"role": "no-such-role"}), {"amount": 1})
    assert run["status"] == "paused"
    by_run = run_graph(api, approval_graph({"user": _me(api)}), {"amount": 2})
    task = _pending(api, by_run["id"])
    assert api.client.post(f"{api.base()}/runs/{by_run['id']}/cancel", headers=api.auth).status_code == 200
    gone = api.client.get("/api/tasks", params={"status": "cancelled"}, headers=api.auth).json()
    assert task["id"] in [t["id"] for t in gone]
    listed = api.client.get("/api/tasks", params={"status": "pending"}, headers=api.auth).json()
    assert all(t["runId"] != run["id"] for t in listed)  # not the caller's to complete
    with session_scope() as session:
        task_id = session.exec(select(HumanTask.id).where(HumanTask.run_id == run["id"])).one()
    refused = api.client.post(f"/api/tasks/{task_id}/complete", json={"data": {"approved": True}}, headers=api.auth)
    assert refused.status_code == 403
    cancelled = api.client.post(f"/api/tasks/{task_id}/cancel", headers=api.auth)
    assert cancelled.status_code == 200, cancelled.text
    assert cancelled.json()["run"]["status"] == "cancelled"
    rejected = run_graph(api, approval_graph({"user": _me(api)}), {"amount": 1})
    task = _pending(api, rejected["id"])
    answer = api.client.post(f"/api/tasks/{task['id']}/complete", json={"data": {"approved": False}},
                             headers=api.auth).json()
    assert answer["run"]["status"] == "completed" and list(answer["run"]["output"]) == ["no"]


def assert_step_cancelled(api, run_id: str, node_id: str) -> dict[str, Any]:
    """GET the run: it is cancelled and the node's step, which was waiting, ended as cancelled."""
    run = api.client.get(f"{api.base()}/runs/{run_id}", headers=api.auth).json()
    assert run["status"] == "cancelled", run
    assert "waiting" not in [s["status"] for s in run["steps"]], run["steps"]
    step = steps_of(run)[node_id]
    assert step["status"] == "cancelled", step
    assert step["finishedAt"] and isinstance(step["durationMs"], int) and step["durationMs"] >= 0, step
    return run


def test_cancelling_a_waiting_run_or_its_task_ends_the_waiting_step_as_cancelled(api):
    me = _me(api)
    by_task = run_graph(api, approval_graph({"user": me}), {"amount": 3})
    assert steps_of(by_task)["ok"]["status"] == "waiting"
    task = _pending(api, by_task["id"])
    cancelled = api.client.post(f"/api/tasks/{task['id']}/cancel", headers=api.auth)
    assert cancelled.status_code == 200, cancelled.text
    run = assert_step_cancelled(api, by_task["id"], "ok")
    assert ran(run) == ["start", "ok"] and steps_of(run)["start"]["status"] == "completed"

    by_run = run_graph(api, approval_graph({"user": me}), {"amount": 4})
    answer = api.client.post(f"{api.base()}/runs/{by_run['id']}/cancel", headers=api.auth)
    assert answer.status_code == 200, answer.text
    assert steps_of(answer.json())["ok"]["status"] == "cancelled"  # the cancel answer shows it too
    assert_step_cancelled(api, by_run["id"], "ok")
    too_late = api.client.post(f"/api/tasks/{_task_id(by_run['id'])}/complete", json={"data": {"approved": True}},
                               headers=api.auth)
    assert too_late.status_code == 409, too_late.text


def _task_id(run_id: str) -> str:
    with session_scope() as session:
        return session.exec(select(HumanTask.id).where(HumanTask.run_id == run_id)).one()


def test_branch_loop_approval_and_retried_node_run_to_completion(api, ai_server):
    """The issue's "done when": a branch, a loop with an approval in its body, a failing-then-retried
    node; after the approvals the run completes and its steps show inputs, outputs and durations."""
    ai_server.fail(500, "overloaded")
    ai_server.reply("summary")
    me = _me(api)
    graph = {"nodes": [START,
                       {"id": "big", "type": "flow.ifElse",
                        "parameters": {"condition": "{{ input.rows | length > 1 }}"}},
                       {"id": "rows", "type": "flow.loop", "parameters": {"items": "{{ input.rows }}"}},
                       {"id": "ask", "type": "input.approval",
                        "parameters": {"title": "Row {{ index }}: {{ item }}", "assignee": {"user": me}}},
                       {"id": "sum", "type": "ai.prompt", "parameters": {"prompt": "{{ nodes.rows.output | tojson }}"},
                        "retry": {"maxAttempts": 2, "delaySeconds": 0}},
                       transform("small", "small")],
             "edges": [edge("start", "big"), edge("big", "rows", "true"), edge("big", "small", "false"),
                       edge("rows", "ask", "each"), edge("ask", "rows", "approved"), edge("ask", "rows", "rejected"),
                       edge("rows", "sum", "done")]}
    run = run_graph(api, graph, {"rows": ["a", "b"]})
    for expected in ("Row 0: a", "Row 1: b"):
        task = _pending(api, run["id"])
        assert task["title"] == expected
        answer = api.client.post(f"/api/tasks/{task['id']}/complete",
                                 json={"data": {"approved": expected.endswith("a")}}, headers=api.auth)
        assert answer.status_code == 200, answer.text
    final = api.client.get(f"{api.base()}/runs/{run['id']}", headers=api.auth).json()
    assert final["status"] == "completed", final
    assert ran(final) == ["start", "big", "rows", "ask", "ask", "sum", "sum"]
    assert [s["status"] for s in final["steps"] if s["nodeId"] == "sum"] == ["failed", "completed"]
    assert ai_server.last_chat.user_text == \
        '[{"approved": true, "comment": null}, {"approved": false, "comment": null}]'
    assert all(s["durationMs"] is not None and "input" in s for s in final["steps"])


@SQLITE
def test_script_python_runs_in_the_sandbox_and_reports_errors_with_stack(api, monkeypatch):
    code = "def main(input):\n    return {'sum': sum(input['input']['values']), 'prev': input['nodes']['start']}\n"
    graph = {"nodes": [START, {"id": "py", "type": "script.python", "parameters": {"code": code}}],
             "edges": [edge("start", "py")]}
    run = run_graph(api, graph, {"values": [1, 2, 3]})
    assert run["status"] == "completed", run
    assert steps_of(run)["py"]["output"] == {"sum": 6, "prev": {"output": {"values": [1, 2, 3]}}}
    broken = {**graph, "nodes": [START, {"id": "py", "type": "script.python", "parameters": {"code": "1 / 0"}}]}
    failed = run_graph(api, broken)
    step = steps_of(failed)["py"]
    assert failed["status"] == "failed" and "ZeroDivisionError" in step["error"] and step["stack"]
    from backend import sandbox
    from backend.sandbox import SandboxStatus
    monkeypatch.setattr(sandbox, "probe", lambda: SandboxStatus(False, "bubblewrap is not installed"))
    disabled = run_graph(api, graph, {"values": []})
    # Without the sandbox the run fails as it starts, naming the node and why (backend/workflows/requirements.py).
    assert disabled["status"] == "failed" and disabled["steps"] == []
    assert "needs the Python sandbox (bubblewrap) for node 'py' — not available here: bubblewrap is not installed" \
        in disabled["error"]


def test_a_run_failing_in_one_branch_releases_the_approval_waiting_in_another(api):
    graph = approval_graph({"user": _me(api)})
    graph = {"nodes": [*graph["nodes"], transform("bad", "{{ missing.field }}", data={})],
             "edges": [*graph["edges"], edge("start", "bad")]}
    run = run_graph(api, graph, {"amount": 9})
    assert run["status"] == "failed" and "bad" in run["error"], run
    assert steps_of(run)["ok"]["status"] == "cancelled"
    tasks = api.client.get("/api/tasks", headers=api.auth).json()
    assert [t["status"] for t in tasks if t["runId"] == run["id"]] == ["cancelled"]
