"""trigger.webhook (issue 7, item 4; DESIGN §6): POST /api/hooks/{workflowId}/{path}, Standard
Webhooks signatures, ±5 minutes, repeated webhook-id, 404/405/413, back-pressure 429."""

from __future__ import annotations

import json
import threading
import time
import uuid
from concurrent.futures import ThreadPoolExecutor

import pytest
from sqlmodel import select

from backend.config import reset_settings_cache
from backend.db import session_scope
from backend.db.models import User, WebhookDelivery, Workflow, WorkflowVersion
from backend.engine import worker
from backend.engine.worker import shutdown_worker
from backend.tenancy import grant_mandate_roles
from backend.triggers import webhooks
from tests.integration.trigger_support import create_published, echo_graph, new_secret, runs_of, sign, wait_for_run

SQLITE = pytest.mark.parametrize("db_url", ["sqlite"], indirect=True)


def webhook_trigger(secret: str | None, path: str = "orders/new", method: str = "POST") -> dict:
    parameters = {"path": path, "method": method}
    if secret is not None:
        parameters["secret"] = secret
    return {"type": "trigger.webhook", "parameters": parameters}


def hook(api, workflow_id: str, body: bytes, headers: dict, path: str = "orders/new", method: str = "POST",
         query: str = ""):
    return api.client.request(method, f"/api/hooks/{workflow_id}/{path}{query}", content=body, headers=headers)


@pytest.fixture
def secret() -> str:
    return new_secret()


def test_a_signed_call_starts_a_run_of_the_published_version(api, secret):
    workflow_id = create_published(api, echo_graph(webhook_trigger(secret)))
    body = json.dumps({"order": 42, "items": ["a", "b"]}).encode()
    response = hook(api, workflow_id, body, {**sign(secret, body), "authorization": "Bearer not-for-runs"},
                    query="?source=shop")
    assert response.status_code == 202, response.text
    run_id = response.json()["runId"]
    run = wait_for_run(api, run_id)
    assert run["status"] == "completed", run
    assert run["trigger"] == "webhook"
    assert run["input"]["body"] == {"order": 42, "items": ["a", "b"]}
    assert run["input"]["query"] == {"source": "shop"}
    assert run["input"]["headers"]["webhook-id"].startswith("msg_")
    assert "authorization" not in run["input"]["headers"]
    assert run["output"]["echo"]["result"] == '{"order": 42, "items": ["a", "b"]}'
    with session_scope() as session:
        workflow = session.get(Workflow, workflow_id)
        stored = session.exec(select(WebhookDelivery).where(WebhookDelivery.workflow_id == workflow_id)).one()
        assert stored.run_id == run_id
        assert run["versionId"] != "" and workflow.active


def test_unsigned_badly_signed_and_stale_calls_are_refused_and_start_nothing(api, secret):
    workflow_id = create_published(api, echo_graph(webhook_trigger(secret)))
    body = b'{"x": 1}'
    good = sign(secret, body)
    other = new_secret()
    cases = {
        "unsigned": {"content-type": "application/json"},
        "missing signature": {k: v for k, v in good.items() if k != "webhook-signature"},
        "missing id": {k: v for k, v in good.items() if k != "webhook-id"},
        "other secret": sign(other, body),
        "tampered body": {**good},  # signed for another body below
        "malformed signature": {**good, "webhook-signature": "garbage"},
        "bad base64": {**good, "webhook-signature": "v1,%%%"},
        "v2 only": {**good, "webhook-signature": "v2," + good["webhook-signature"].split(",", 1)[1]},
        "stale": sign(secret, body, timestamp=int(time.time()) - 360),
        "future": sign(secret, body, timestamp=int(time.time()) + 360),
        "bad timestamp": {**good, "webhook-timestamp": "yesterday"},
    }
    for name, headers in cases.items():
        sent = b'{"x": 2}' if name == "tampered body" else body
        response = hook(api, workflow_id, sent, headers)
        assert response.status_code == 401, (name, response.text)
    assert runs_of(workflow_id) == []
    with session_scope() as session:
        assert session.exec(select(WebhookDelivery)).all() == []
    # Just inside the window is accepted.
    response = hook(api, workflow_id, body, sign(secret, body, timestamp=int(time.time()) - 290))
    assert response.status_code == 202, response.text


@SQLITE
def test_a_trigger_without_a_secret_accepts_nothing(api):
    workflow_id = create_published(api, echo_graph(webhook_trigger(None)))
    response = hook(api, workflow_id, b"{}", sign(new_secret(), b"{}"))
    assert response.status_code == 401 and "no secret" in response.json()["detail"]
    assert runs_of(workflow_id) == []


def test_a_repeated_webhook_id_answers_the_same_run_and_starts_nothing_new(api, secret):
    workflow_id = create_published(api, echo_graph(webhook_trigger(secret)))
    body = b'{"n": 1}'
    headers = sign(secret, body, webhook_id="msg_repeat")
    first = hook(api, workflow_id, body, headers)
    again = hook(api, workflow_id, body, sign(secret, body, webhook_id="msg_repeat"))
    assert first.status_code == again.status_code == 202
    assert first.json() == again.json()
    assert len(runs_of(workflow_id)) == 1
    # The same id for another workflow is another delivery.
    other_id = create_published(api, echo_graph(webhook_trigger(secret)))
    third = hook(api, other_id, body, headers)
    assert third.status_code == 202 and third.json() != first.json()


def test_concurrent_deliveries_of_one_webhook_id_start_one_run(api, secret):
    workflow_id = create_published(api, echo_graph(webhook_trigger(secret)))
    body = b'{"race": true}'
    headers = sign(secret, body, webhook_id=f"msg_{uuid.uuid4().hex}")
    barrier = threading.Barrier(8)

    def deliver(_: int) -> str:
        barrier.wait()
        return webhooks.receive(workflow_id, "orders/new", "POST", body, headers, {}).run_id

    with ThreadPoolExecutor(8) as pool:
        run_ids = set(pool.map(deliver, range(8)))
    assert len(run_ids) == 1
    assert [r.id for r in runs_of(workflow_id)] == list(run_ids)
    with session_scope() as session:
        assert len(session.exec(select(WebhookDelivery).where(WebhookDelivery.workflow_id == workflow_id)).all()) == 1


@SQLITE
def test_key_rotation_accepts_any_of_several_signatures(api, secret):
    old = new_secret()
    workflow_id = create_published(api, echo_graph(webhook_trigger(secret)))
    body = b'{"rotated": true}'
    new_headers = sign(secret, body, webhook_id="msg_rot")
    old_headers = sign(old, body, webhook_id="msg_rot", timestamp=int(new_headers["webhook-timestamp"]))
    both = f"{old_headers['webhook-signature']} {new_headers['webhook-signature']}"
    response = hook(api, workflow_id, body, {**new_headers, "webhook-signature": both})
    assert response.status_code == 202, response.text
    only_old = hook(api, workflow_id, body, sign(old, body))
    assert only_old.status_code == 401


@SQLITE
def test_unknown_inactive_unpublished_and_wrong_path_answers_say_why(api, secret):
    """Issue 16: a known workflow's refusal names the reason; an unknown id stays a plain 404
    (tests/integration/test_webhook_help.py covers the answers and the call log in depth)."""
    body = b"{}"
    unknown = uuid.uuid4().hex
    inactive = create_published(api, echo_graph(webhook_trigger(secret)), active=False)
    unpublished = create_published(api, echo_graph(webhook_trigger(secret)), publish=False)
    active = create_published(api, echo_graph(webhook_trigger(secret)))
    answers = [hook(api, unknown, body, sign(secret, body)),
               hook(api, inactive, body, sign(secret, body)),
               hook(api, unpublished, body, sign(secret, body)),
               hook(api, active, body, sign(secret, body), path="other/path")]
    assert [a.status_code for a in answers] == [404, 410, 404, 404]
    details = [a.json()["detail"] for a in answers]
    assert details[0] == f"workflow {unknown} not found"
    assert "switched off (inactive)" in details[1]
    assert "no published version" in details[2]
    assert "no webhook on path 'other/path'" in details[3]
    manual = create_published(api, {"nodes": [{"id": "start", "type": "trigger.manual", "parameters": {}}],
                                     "edges": []})
    assert hook(api, manual, body, sign(secret, body)).status_code == 404
    # The path exists, for another method.
    wrong_method = hook(api, active, body, sign(secret, body), method="PUT")
    assert wrong_method.status_code == 405 and wrong_method.headers["allow"] == "POST"
    for workflow_id in (inactive, unpublished, active, manual):
        assert runs_of(workflow_id) == []


@SQLITE
def test_other_methods_and_nested_paths_follow_the_trigger(api, secret):
    workflow_id = create_published(api, echo_graph(webhook_trigger(secret, path="/a/b/c", method="GET")))
    response = hook(api, workflow_id, b"", sign(secret, b""), path="a/b/c", method="GET", query="?id=7")
    assert response.status_code == 202, response.text
    run = wait_for_run(api, response.json()["runId"])
    assert run["input"]["body"] is None and run["input"]["query"] == {"id": "7"}


@SQLITE
def test_a_body_over_the_limit_is_refused_with_413(api, secret, monkeypatch):
    monkeypatch.setenv("POWERON_WEBHOOK_MAX_BYTES", "1000")
    reset_settings_cache()
    workflow_id = create_published(api, echo_graph(webhook_trigger(secret)))
    body = json.dumps({"blob": "x" * 2000}).encode()
    assert hook(api, workflow_id, body, sign(secret, body)).status_code == 413
    small = b'{"blob": "x"}'
    assert hook(api, workflow_id, small, sign(secret, small)).status_code == 202
    assert len(runs_of(workflow_id)) == 1


@SQLITE
def test_a_text_body_is_kept_as_text(api, secret):
    workflow_id = create_published(api, echo_graph(webhook_trigger(secret)))
    body = b"plain text, not JSON"
    response = hook(api, workflow_id, body, {**sign(secret, body), "content-type": "text/plain"})
    assert response.status_code == 202
    assert wait_for_run(api, response.json()["runId"])["input"]["body"] == "plain text, not JSON"


@SQLITE
def test_a_creator_without_the_execute_right_starts_nothing(api, secret):
    workflow_id = create_published(api, echo_graph(webhook_trigger(secret)))
    with session_scope() as session:
        workflow = session.get(Workflow, workflow_id)
        from backend.db.models import Mandate

        viewer = User(username=f"viewer-{uuid.uuid4().hex[:6]}", display_name="Viewer")
        session.add(viewer)
        session.flush()
        grant_mandate_roles(session, viewer, session.get(Mandate, workflow.mandate_id), ["viewer"])
        workflow.sys_created_by = viewer.id
        session.add(workflow)
    body = b"{}"
    response = hook(api, workflow_id, body, sign(secret, body))
    assert response.status_code == 403, response.text
    assert runs_of(workflow_id) == []
    with session_scope() as session:
        assert session.exec(select(WebhookDelivery)).all() == []


@SQLITE
def test_back_pressure_refuses_with_429_and_runs_everything_accepted(api, secret, monkeypatch):
    """One run thread held busy: one run waits in the queue, the next call is refused."""
    monkeypatch.setenv("POWERON_RUN_THREADS", "1")
    monkeypatch.setenv("POWERON_MAX_QUEUED_RUNS", "1")
    reset_settings_cache()
    shutdown_worker()
    workflow_id = create_published(api, echo_graph(webhook_trigger(secret)))
    release = threading.Event()
    started = threading.Event()
    real = worker.execute_run

    def held(run_id, session=None):
        started.set()
        release.wait(20)
        return real(run_id, session)

    monkeypatch.setattr(worker, "execute_run", held)
    accepted, refused = [], []
    try:
        for n in range(4):
            body = json.dumps({"n": n}).encode()
            response = hook(api, workflow_id, body, sign(secret, body))
            if n == 0:
                assert started.wait(5)
            (accepted if response.status_code == 202 else refused).append(response)
        assert len(accepted) == 2, [r.text for r in accepted + refused]
        assert [r.status_code for r in refused] == [429, 429]
        assert int(refused[0].headers["retry-after"]) >= 1
        assert worker.queued() == 1
    finally:
        release.set()
    for response in accepted:
        assert wait_for_run(api, response.json()["runId"])["status"] == "completed"
    assert len(runs_of(workflow_id)) == 2
    assert worker.queued() == 0
    # Room again: accepted.
    body = b'{"n": 9}'
    assert hook(api, workflow_id, body, sign(secret, body)).status_code == 202


@SQLITE
def test_the_secret_is_shown_only_to_those_who_may_change_the_workflow(api, secret, caplog):
    from backend.auth import issue_token
    from backend.db.models import FeatureInstance, Mandate
    from backend.tenancy import grant_instance_roles

    workflow_id = create_published(api, echo_graph(webhook_trigger(secret)))
    with session_scope() as session:
        instance = session.get(FeatureInstance, api.instance_id)
        viewer = User(username=f"reader-{uuid.uuid4().hex[:6]}", display_name="Reader")
        session.add(viewer)
        session.flush()
        grant_mandate_roles(session, viewer, session.get(Mandate, instance.mandate_id), ["viewer"])
        grant_instance_roles(session, viewer, instance, ["graphicalEditor-viewer"])
        reader = {"Authorization": f"Bearer {issue_token(session, viewer).token}"}

    def secrets_in(headers) -> set[str]:
        detail = api.client.get(f"{api.base()}/workflows/{workflow_id}", headers=headers)
        versions = api.client.get(f"{api.base()}/workflows/{workflow_id}/versions", headers=headers)
        assert detail.status_code == versions.status_code == 200, (detail.text, versions.text)
        graphs = [detail.json()["graph"]] + [v["graph"] for v in versions.json()]
        return {n["parameters"].get("secret") for g in graphs for n in g["nodes"] if n["type"] == "trigger.webhook"}

    assert secrets_in(api.auth) == {secret}
    assert secrets_in(reader) == {"********"}
    # Refused calls never log the secret.
    with caplog.at_level("DEBUG"):
        hook(api, workflow_id, b"{}", sign(new_secret(), b"{}"))
    assert secret not in caplog.text and secret.removeprefix("whsec_") not in caplog.text


@SQLITE
def test_a_secret_that_is_no_standard_webhooks_key_is_refused_by_validation(api):
    graph = echo_graph(webhook_trigger("whsec_%%%"))
    created = api.client.post(f"{api.base()}/workflows", json={"name": f"wf-{uuid.uuid4().hex}", "graph": graph},
                              headers=api.auth)
    workflow_id = created.json()["id"]
    report = api.client.post(f"{api.base()}/workflows/{workflow_id}/validate", headers=api.auth).json()
    assert not report["valid"]
    assert [e["field"] for e in report["errors"]] == ["parameters.secret"]
    assert "%%%" not in json.dumps(report)


def test_the_run_starts_at_the_webhook_trigger_whose_path_was_called(api, secret):
    graph = {"nodes": [{"id": "orders", **webhook_trigger(secret, path="orders")},
                       {"id": "refunds", **webhook_trigger(secret, path="refunds")},
                       {"id": "on_order", "type": "context.transform",
                        "parameters": {"data": {}, "template": "order"}},
                       {"id": "on_refund", "type": "context.transform",
                        "parameters": {"data": {}, "template": "refund"}}],
             "edges": [{"source": "orders", "target": "on_order"}, {"source": "refunds", "target": "on_refund"}]}
    workflow_id = create_published(api, graph)
    body = b"{}"
    response = hook(api, workflow_id, body, sign(secret, body), path="refunds")
    assert response.status_code == 202, response.text
    run = wait_for_run(api, response.json()["runId"])
    assert run["status"] == "completed", run
    assert [s["nodeId"] for s in run["steps"]] == ["refunds", "on_refund"]


def test_the_secret_is_sealed_at_rest_and_a_masked_one_keeps_it(api, secret):
    workflow_id = create_published(api, echo_graph(webhook_trigger(secret)))
    with session_scope() as session:
        stored = [v.graph for v in session.exec(select(WorkflowVersion)
                                                .where(WorkflowVersion.workflow_id == workflow_id)).all()]
    stored_secrets = [n["parameters"]["secret"] for g in stored for n in g["nodes"] if n["type"] == "trigger.webhook"]
    assert stored_secrets and all(s.startswith("sealed:v1:") and secret.removeprefix("whsec_") not in s
                                  for s in stored_secrets)
    url = f"{api.base()}/workflows/{workflow_id}"
    # The editor gets it in clear, sends the graph back with the secret masked: it is kept.
    versions = api.client.get(f"{url}/versions", headers=api.auth).json()
    graph = next(v["graph"] for v in versions if v["status"] == "published")
    assert next(n for n in graph["nodes"] if n["type"] == "trigger.webhook")["parameters"]["secret"] == secret
    for node in graph["nodes"]:
        if node["type"] == "trigger.webhook":
            node["parameters"]["secret"] = "********"
    assert api.client.put(f"{url}/draft", json={"graph": graph}, headers=api.auth).status_code == 200
    assert api.client.post(f"{url}/publish", headers=api.auth).status_code == 200
    body = b'{"still": "signed"}'
    response = hook(api, workflow_id, body, sign(secret, body))
    assert response.status_code == 202, response.text
    assert wait_for_run(api, response.json()["runId"])["status"] == "completed"
