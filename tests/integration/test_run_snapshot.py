"""A run executes the graph it started with (issue 15, item 1), whatever is saved to the draft later.

Test runs of the draft used to read the draft's WorkflowVersion row, which every draft save
overwrites: a run waiting on an approval whose node was then removed from the draft failed with
a 500 when the task was completed. Each run now keeps a snapshot of its graph (WorkflowRun.graph_id);
completing a task, continuing a step-mode run and waking a flow.wait go on with that snapshot;
retrying a failed run takes the current graph (the fix) unless asked for the original.
Runs from before the snapshot (graph_id NULL) read their version's graph.
"""

from __future__ import annotations

import uuid
from datetime import timedelta
from typing import Any

from sqlalchemy import update
from sqlmodel import func, select

from backend.db import session_scope
from backend.db.models import WorkflowGraphSnapshot, WorkflowRun, utcnow
from backend.engine import queue as run_queue
from backend.engine.timers import wake_due_runs
from tests.integration.test_engine import START, approval_graph, edge, ran, transform


def create(api, graph: dict[str, Any]) -> str:
    created = api.client.post(f"{api.base()}/workflows", json={"name": f"wf-{uuid.uuid4().hex}", "graph": graph},
                              headers=api.auth)
    assert created.status_code == 201, created.text
    return created.json()["id"]


def start(api, workflow_id: str, input: Any = None, mode: str = "full") -> dict[str, Any]:  # noqa: A002
    response = api.client.post(f"{api.base()}/workflows/{workflow_id}/runs",
                               json={"input": input, "mode": mode, "version": "draft"}, headers=api.auth)
    assert response.status_code == 201, response.text
    return response.json()


def save_draft(api, workflow_id: str, graph: dict[str, Any]) -> None:
    saved = api.client.put(f"{api.base()}/workflows/{workflow_id}/draft", json={"graph": graph}, headers=api.auth)
    assert saved.status_code == 200, saved.text


def get_run(api, run_id: str) -> dict[str, Any]:
    run_queue.wait_for_rest(run_id, 30)  # a woken or resumed run executes on a run thread or a worker
    response = api.client.get(f"{api.base()}/runs/{run_id}", headers=api.auth)
    assert response.status_code == 200, response.text
    return response.json()


def pending_task(api, run_id: str) -> dict[str, Any]:
    listed = api.client.get("/api/tasks", params={"status": "pending"}, headers=api.auth)
    assert listed.status_code == 200, listed.text
    return next(t for t in listed.json() if t["runId"] == run_id)


def me(api) -> str:
    return api.client.get("/api/me", headers=api.auth).json()["id"]


# The approval and both of its branches are gone; a new node stands where they were.
EDITED_APPROVAL = {"nodes": [START, transform("other", "something else")], "edges": [edge("start", "other")]}


def test_completing_a_task_after_the_draft_changed_finishes_the_run_with_its_own_graph(api):
    workflow_id = create(api, approval_graph({"user": me(api)}))
    run = start(api, workflow_id, {"amount": 5})
    assert run["status"] == "paused" and run["pauseReason"] == "humanTask", run
    save_draft(api, workflow_id, EDITED_APPROVAL)

    task = pending_task(api, run["id"])
    done = api.client.post(f"/api/tasks/{task['id']}/complete", json={"data": {"approved": True, "comment": "fine"}},
                           headers=api.auth)
    assert done.status_code == 200, done.text

    final = get_run(api, run["id"])
    assert final["status"] == "completed", final
    assert ran(final) == ["start", "ok", "yes"]
    assert final["output"] == {"yes": {"result": "approved: fine", "missing": []}}
    # A new run of the draft runs what the draft holds now.
    assert ran(start(api, workflow_id)) == ["start", "other"]


# start -> a -> b: in step mode the run pauses after each node.
CHAIN = {"nodes": [START, transform("a", "a{{ n }}"), transform("b", "{{ result }}b", data="{{ nodes.a.output }}")],
         "edges": [edge("start", "a"), edge("a", "b")]}
# b renamed to c, a's template changed.
EDITED_CHAIN = {"nodes": [START, transform("a", "changed"), transform("c", "c")],
                "edges": [edge("start", "a"), edge("a", "c")]}


def continue_to_the_end(api, run: dict[str, Any]) -> dict[str, Any]:
    for _ in range(10):
        if run["status"] != "paused":
            return run
        response = api.client.post(f"{api.base()}/runs/{run['id']}/continue", headers=api.auth)
        assert response.status_code == 200, response.text
        run = response.json()
    raise AssertionError(f"run did not finish: {run}")


def test_a_step_mode_run_continued_after_an_edit_runs_its_original_graph(api):
    workflow_id = create(api, CHAIN)
    run = start(api, workflow_id, {"n": 1}, mode="step")
    assert run["status"] == "paused" and run["pauseReason"] == "step", run
    assert ran(run) == ["start"]
    save_draft(api, workflow_id, EDITED_CHAIN)

    final = continue_to_the_end(api, run)
    assert final["status"] == "completed", final
    assert ran(final) == ["start", "a", "b"]
    assert final["output"] == {"b": {"result": "a1b", "missing": []}}


def test_a_run_without_a_snapshot_reads_its_version_graph(api):
    """Runs started before migration 0009 have no graph of their own: they go on as before."""
    workflow_id = create(api, CHAIN)
    run = start(api, workflow_id, {"n": 2}, mode="step")
    with session_scope() as session:
        session.execute(update(WorkflowRun).where(WorkflowRun.id == run["id"]).values(graph_id=None))

    final = continue_to_the_end(api, run)
    assert final["status"] == "completed", final
    assert final["output"] == {"b": {"result": "a2b", "missing": []}}


WAIT = {"nodes": [START, {"id": "nap", "type": "flow.wait", "parameters": {"seconds": 3600}},
                  transform("after", "woke {{ n }}")],
        "edges": [edge("start", "nap"), edge("nap", "after")]}


def test_a_flow_wait_woken_after_an_edit_goes_on_with_the_original_graph(api):
    workflow_id = create(api, WAIT)
    run = start(api, workflow_id, {"n": 3})
    assert run["status"] == "paused" and run["pauseReason"] == "wait", run
    save_draft(api, workflow_id, EDITED_APPROVAL)

    assert wake_due_runs(utcnow() + timedelta(hours=2)) == 1

    final = get_run(api, run["id"])
    assert final["status"] == "completed", final
    assert ran(final) == ["start", "nap", "after"]
    assert final["output"] == {"after": {"result": "woke 3", "missing": []}}


FLAKY_AI = {
    "nodes": [START, transform("a", "topic {{ n }}"),
              {"id": "p", "type": "ai.prompt", "parameters": {"prompt": "{{ nodes.a.output.result }}"}},
              transform("z", "said: {{ text }}", data="{{ nodes.p.output }}")],
    "edges": [edge("start", "a"), edge("a", "p"), edge("p", "z")],
}
# p and z gone; a leads to a new node.
EDITED_AI = {"nodes": [START, transform("a", "other"), transform("q", "q")], "edges": [edge("start", "a"),
                                                                                     edge("a", "q")]}


# The failing prompt fixed in place: same nodes and edges, another parameter.
FIXED_AI = {**FLAKY_AI, "nodes": [START, transform("a", "topic {{ n }}"),
                                  {"id": "p", "type": "ai.prompt",
                                   "parameters": {"prompt": "fixed {{ nodes.a.output.result }}"}},
                                  transform("z", "said: {{ text }}", data="{{ nodes.p.output }}")]}


def test_retrying_after_fixing_the_failed_node_runs_the_fix_and_reuses_what_ran(api, ai_server):
    """n8n's "retry with the currently saved workflow": the default of the editor's button."""
    ai_server.fail(500, times=50)
    workflow_id = create(api, FLAKY_AI)
    failed = start(api, workflow_id, {"n": 7})
    assert failed["status"] == "failed", failed
    save_draft(api, workflow_id, FIXED_AI)

    ai_server.clear()
    ai_server.reply("fine")
    retried = api.client.post(f"{api.base()}/runs/{failed['id']}/retry", headers=api.auth)
    assert retried.status_code == 201, retried.text
    run = retried.json()
    assert run["status"] == "completed", run
    assert ran(run) == ["p", "z"]  # start and a are reused, not run again
    assert ai_server.last_chat.user_text == "fixed topic 7"


def test_retrying_with_the_current_graph_refuses_a_change_around_what_already_ran(api, ai_server):
    ai_server.fail(500, times=50)
    workflow_id = create(api, FLAKY_AI)
    failed = start(api, workflow_id, {"n": 7})
    save_draft(api, workflow_id, EDITED_AI)
    before = api.client.get(f"{api.base()}/runs", headers=api.auth).json()

    refused = api.client.post(f"{api.base()}/runs/{failed['id']}/retry", headers=api.auth)
    assert refused.status_code == 409, refused.text
    assert "p" in refused.json()["detail"] and "original graph" in refused.json()["detail"]
    assert len(api.client.get(f"{api.base()}/runs", headers=api.auth).json()) == len(before)


def test_retrying_a_failed_run_after_the_draft_changed_continues_its_original_graph(api, ai_server):
    ai_server.fail(500, times=50)
    workflow_id = create(api, FLAKY_AI)
    failed = start(api, workflow_id, {"n": 7})
    assert failed["status"] == "failed", failed
    save_draft(api, workflow_id, EDITED_AI)

    ai_server.clear()
    ai_server.reply("fine")
    retried = api.client.post(f"{api.base()}/runs/{failed['id']}/retry", params={"graph": "original"},
                              headers=api.auth)
    assert retried.status_code == 201, retried.text
    run = retried.json()
    assert run["status"] == "completed", run
    assert ran(run) == ["p", "z"]
    assert ai_server.last_chat.user_text == "topic 7"
    assert run["output"] == {"z": {"result": "said: fine", "missing": []}}


def test_runs_of_the_same_graph_share_one_stored_snapshot(api):
    """A snapshot is stored once per workflow and distinct graph, however many runs start with it."""
    def snapshots() -> int:
        with session_scope() as session:
            return session.exec(select(func.count()).select_from(WorkflowGraphSnapshot)).one()

    workflow_id = create(api, CHAIN)
    before = snapshots()
    runs = [start(api, workflow_id, {"n": n}) for n in range(3)]
    assert all(run["status"] == "completed" for run in runs), runs
    assert snapshots() == before + 1
    save_draft(api, workflow_id, EDITED_CHAIN)
    assert ran(start(api, workflow_id, {"n": 9})) == ["start", "a", "c"]
    assert snapshots() == before + 2
    # Snapshots belong to their workflow (never shared with another) and go with it.
    deleted = api.client.delete(f"{api.base()}/workflows/{workflow_id}", headers=api.auth)
    assert deleted.status_code == 204, deleted.text
    assert snapshots() == before


def test_a_failed_run_is_retried_once_unless_its_retry_failed_too(api, ai_server):
    """Retrying a run twice would run its later steps (and ask its people) twice."""
    ai_server.fail(500, times=50)
    workflow_id = create(api, FLAKY_AI)
    failed = start(api, workflow_id, {"n": 7})
    assert failed["status"] == "failed", failed

    again = api.client.post(f"{api.base()}/runs/{failed['id']}/retry", headers=api.auth)
    assert again.status_code == 201 and again.json()["status"] == "failed", again.text  # the provider still fails
    ai_server.clear()
    ai_server.reply("fine")
    retried = api.client.post(f"{api.base()}/runs/{failed['id']}/retry", headers=api.auth)
    assert retried.status_code == 201 and retried.json()["status"] == "completed", retried.text
    runs_before = len(api.client.get(f"{api.base()}/runs", headers=api.auth).json())

    refused = api.client.post(f"{api.base()}/runs/{failed['id']}/retry", headers=api.auth)
    assert refused.status_code == 409, refused.text
    assert retried.json()["id"] in refused.json()["detail"]
    assert len(api.client.get(f"{api.base()}/runs", headers=api.auth).json()) == runs_before
