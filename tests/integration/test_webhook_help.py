"""Issue 16, item 5: webhook answers that say why, the call log the editor shows, and the webhook help
(address, live state, a curl example with a valid signature, last calls) through the editor's door.

Calls are signed with the `standardwebhooks` reference library (tests/integration/trigger_support.py).
"""

from __future__ import annotations

import base64
import json
import threading
import uuid

import pytest
from sqlmodel import select

from backend.config import get_settings, reset_settings_cache
from backend.db import session_scope
from backend.db.models import FeatureInstance, Mandate, User, WebhookCall, Workflow
from backend.engine import worker
from backend.engine.worker import shutdown_worker
from backend.errors import Forbidden
from backend.features.graphical_editor.interface import get_interface
from backend.tenancy import create_feature_instance, create_mandate, grant_instance_roles, grant_mandate_roles
from backend.triggers import secrets, webhook_help, webhooks
from backend.triggers.secrets import MASK
from backend.workflows.validation import validate_graph
from tests.integration.trigger_support import (
    create_published,
    curl_parts,
    echo_graph,
    new_secret,
    runs_of,
    sign,
    wait_for_run,
)

SQLITE = pytest.mark.parametrize("db_url", ["sqlite"], indirect=True)


def trigger(secret: str | None, path: str = "orders", method: str = "POST") -> dict:
    parameters = {"path": path, "method": method, **({"secret": secret} if secret else {})}
    return {"type": "trigger.webhook", "parameters": parameters}


def call(api, workflow_id: str, body: bytes, headers: dict, path: str = "orders", method: str = "POST"):
    return api.client.request(method, f"/api/hooks/{workflow_id}/{path}", content=body, headers=headers)


def logged(workflow_id: str) -> list[webhook_help.CallView]:
    """The workflow's call log as the help shows it, newest first (accepted calls and the others)."""
    with session_scope() as session:
        return webhook_help.last_calls(session, workflow_id)


def stored_calls(workflow_id: str) -> int:
    """How many webhook_call rows (calls that started no run) the workflow holds."""
    with session_scope() as session:
        return len(session.exec(select(WebhookCall.id).where(WebhookCall.workflow_id == workflow_id)).all())


def user_in(instance_id: str, mandate_roles: list[str], instance_roles: list[str], name: str = "") -> User:
    with session_scope() as session:
        instance = session.get(FeatureInstance, instance_id)
        user = User(username=f"{name or 'u'}-{uuid.uuid4().hex[:6]}", display_name=name.title() or None)
        session.add(user)
        session.flush()
        grant_mandate_roles(session, user, session.get(Mandate, instance.mandate_id), mandate_roles)
        if instance_roles:
            grant_instance_roles(session, user, instance, instance_roles)
        return user


def help_for(username_or_user, workflow_id: str, node_id: str = "start") -> webhook_help.WebhookHelp:
    with session_scope() as session:
        user = session.get(User, username_or_user.id) if isinstance(username_or_user, User) else \
            session.exec(select(User).where(User.username == username_or_user)).one()
        workflow = session.get(Workflow, workflow_id)
        iface = get_interface(user, None, workflow.feature_instance_id, session)
        return iface.webhook_help(iface.get_workflow(workflow_id), node_id)


# --- answers and the call log ------------------------------------------------------------------


def test_each_answer_of_a_known_workflow_is_logged_and_says_why(api):
    secret = new_secret()
    unpublished = create_published(api, echo_graph(trigger(secret)), publish=False)
    inactive = create_published(api, echo_graph(trigger(secret)), active=False)
    live = create_published(api, echo_graph(trigger(secret)))
    body = b'{"order": 1}'

    unknown = uuid.uuid4().hex
    answer = call(api, unknown, body, sign(secret, body))
    assert answer.status_code == 404 and answer.json()["detail"] == f"workflow {unknown} not found"

    answer = call(api, unpublished, body, sign(secret, body))
    assert answer.status_code == 404
    assert answer.json()["detail"] == f"workflow {unpublished} has no published version: publish it in the editor"

    answer = call(api, inactive, body, sign(secret, body))
    assert answer.status_code == 410
    assert answer.json()["detail"] == (f"workflow {inactive} is switched off (inactive): switch it on in the editor")

    refusals = [
        (call(api, live, body, sign(secret, body), path="refunds"), 404, "no webhook on path 'refunds'"),
        (call(api, live, body, sign(secret, body), method="PUT"), 405, "this webhook accepts POST"),
        (call(api, live, body, sign(new_secret(), body)), 401, "webhook signature not accepted"),
        (call(api, live, body, sign(secret, body, webhook_id="m" * 201)), 422, "webhook-id"),
    ]
    for answer, status, words in refusals:
        assert answer.status_code == status, answer.text
        assert words in answer.json()["detail"]
    accepted = call(api, live, body, sign(secret, body, webhook_id="msg_once"))
    repeated = call(api, live, body, sign(secret, body, webhook_id="msg_once"))
    assert accepted.status_code == repeated.status_code == 202
    run_id = accepted.json()["runId"]
    assert repeated.json()["runId"] == run_id

    with session_scope() as session:
        assert session.exec(select(WebhookCall).where(WebhookCall.workflow_id == unknown)).all() == []
    (row,) = logged(unpublished)
    assert (row.status_code, row.method, row.path) == (404, "POST", "orders") and "no published version" in row.message
    (row,) = logged(inactive)
    assert row.status_code == 410 and "switched off" in row.message and row.run_id is None
    rows = list(reversed(logged(live)))  # oldest first
    assert [r.status_code for r in rows] == [404, 405, 401, 422, 202, 202]
    assert [r.path for r in rows] == ["refunds", "orders", "orders", "orders", "orders", "orders"]
    assert rows[1].method == "PUT" and "accepts POST" in rows[1].message
    assert rows[4].run_id == rows[5].run_id == run_id
    assert rows[4].message == webhooks.ACCEPTED and rows[5].message == webhooks.REPEATED
    assert all(r.run_id is None for r in rows[:4])
    assert all(secret.removeprefix("whsec_") not in r.message for r in rows)
    assert len(runs_of(live)) == 1


@SQLITE
def test_a_too_large_body_and_a_creator_without_rights_are_logged(api, monkeypatch):
    monkeypatch.setenv("POWERON_WEBHOOK_MAX_BYTES", "100")
    reset_settings_cache()
    secret = new_secret()
    workflow_id = create_published(api, echo_graph(trigger(secret)))
    big = json.dumps({"blob": "x" * 200}).encode()
    assert call(api, workflow_id, big, sign(secret, big)).status_code == 413
    viewer = user_in(api.instance_id, ["viewer"], [], "viewer")
    with session_scope() as session:
        workflow = session.get(Workflow, workflow_id)
        workflow.sys_created_by = viewer.id
        session.add(workflow)
    small = b"{}"
    assert call(api, workflow_id, small, sign(secret, small)).status_code == 403
    rows = logged(workflow_id)
    assert [r.status_code for r in rows] == [403, 413]
    assert "may no longer execute" in rows[0].message and "larger than 100 bytes" in rows[1].message
    assert runs_of(workflow_id) == []


@SQLITE
def test_an_overloaded_refusal_is_logged(api, monkeypatch):
    monkeypatch.setenv("POWERON_RUN_THREADS", "1")
    monkeypatch.setenv("POWERON_MAX_QUEUED_RUNS", "1")
    reset_settings_cache()
    shutdown_worker()
    secret = new_secret()
    workflow_id = create_published(api, echo_graph(trigger(secret)))
    release, started = threading.Event(), threading.Event()
    real = worker.execute_run

    def held(run_id, session=None):  # keeps the one run thread busy, so calls queue up
        started.set()
        release.wait(20)
        return real(run_id, session)

    monkeypatch.setattr(worker, "execute_run", held)
    statuses = []
    try:
        for n in range(3):
            body = json.dumps({"n": n}).encode()
            statuses.append(call(api, workflow_id, body, sign(secret, body)).status_code)
            if n == 0:
                assert started.wait(5)
    finally:
        release.set()
    assert statuses == [202, 202, 429]
    assert [r.status_code for r in logged(workflow_id)] == [429, 202, 202]
    assert "runs are waiting to start" in logged(workflow_id)[0].message


def test_the_log_keeps_the_newest_calls_of_each_workflow(api):
    secret = new_secret()
    workflow_id = create_published(api, echo_graph(trigger(secret)))
    other_id = create_published(api, echo_graph(trigger(secret)))
    body = b"{}"
    assert call(api, other_id, body, sign(secret, body), path="other").status_code == 404
    kept, every = webhooks.WEBHOOK_CALLS_KEPT, webhooks.PRUNE_EVERY
    total = every * -(-2 * kept // every)  # a multiple of PRUNE_EVERY (at least 2 × kept): the last call prunes
    assert total <= webhooks.REFUSALS_LOGGED  # all within the cap of one minute
    for n in range(total):
        assert call(api, workflow_id, body, sign(secret, body), path=f"p{n}").status_code == 404
        assert stored_calls(workflow_id) <= kept + every - 1  # pruned in the transaction of every few calls
    assert [r.path for r in logged(workflow_id)] == [f"p{n}" for n in reversed(range(total - kept, total))]
    assert [r.path for r in logged(other_id)] == ["other"]  # another workflow's log is its own
    accepted = call(api, workflow_id, body, sign(secret, body))  # accepted calls are their delivery rows
    assert accepted.status_code == 202
    shown = help_for("admin", workflow_id).calls  # the newest WEBHOOK_CALLS_KEPT, newest first
    assert len(shown) == kept
    assert shown[0].status_code == 202 and shown[0].run_id == accepted.json()["runId"]
    assert shown[0].path == "orders" and shown[0].method == "POST"
    assert [c.path for c in shown[1:]] == [f"p{n}" for n in reversed(range(total - kept + 1, total))]


def test_the_openapi_document_names_every_webhook_answer():
    from backend.api.app import create_api

    operations = create_api().openapi()["paths"]["/api/hooks/{workflowId}/{path}"]
    assert set(operations) == {"get", "post", "put", "patch", "delete"}
    for operation in operations.values():
        responses = operation["responses"]
        assert {"202", "401", "403", "404", "405", "410", "413", "422", "429"} <= set(responses)
        assert "switched off (inactive)" in responses["410"]["description"]
        assert "no published version" in responses["404"]["description"]


# --- the webhook help through the door ---------------------------------------------------------


def test_the_example_carries_a_valid_signature_for_those_who_may_change_the_workflow(api):
    secret = new_secret()
    workflow_id = create_published(api, echo_graph(trigger(secret, path="/in/orders/")))
    shown = help_for("admin", workflow_id)
    api_url = get_settings().api_url  # POWERON_API_URL: the address shown is on the public API URL
    assert shown.url == f"{api_url}/api/hooks/{workflow_id}/in/orders"
    assert (shown.method, shown.state, shown.signed_with, shown.secret_set) == ("POST", webhook_help.LIVE,
                                                                                "published", True)
    assert secret not in shown.example and secret.removeprefix("whsec_") not in shown.example
    method, url, headers, body = curl_parts(shown.example)
    assert url == shown.url and set(headers) >= {"webhook-id", "webhook-timestamp", "webhook-signature"}
    assert shown.valid_until is not None
    assert (shown.valid_until.timestamp() - int(headers["webhook-timestamp"])) == webhook_help.TOLERANCE_SECONDS
    answer = api.client.request(method, url.removeprefix(api_url), content=body, headers=headers)
    assert answer.status_code == 202, answer.text
    run = wait_for_run(api, answer.json()["runId"])
    assert run["status"] == "completed" and run["input"]["body"] == webhook_help.DEFAULT_BODY

    later = help_for("admin", workflow_id)
    (logged_call,) = later.calls
    assert (logged_call.status_code, logged_call.run_id, logged_call.path) == (202, run["id"], "in/orders")
    assert curl_parts(later.example)[2]["webhook-id"] != headers["webhook-id"]  # a fresh message each time


def test_readers_see_the_example_without_a_signature_and_only_runs_they_may_read(api):
    secret = new_secret()
    workflow_id = create_published(api, echo_graph(trigger(secret)))
    body = b'{"a": 1}'
    accepted = call(api, workflow_id, body, sign(secret, body))
    assert accepted.status_code == 202
    reader = user_in(api.instance_id, ["viewer"], ["graphicalEditor-viewer"], "reader")
    shown = help_for(reader, workflow_id)
    assert shown.signed_with == "" and shown.valid_until is None
    assert curl_parts(shown.example)[2]["webhook-signature"] == webhook_help.SIGNATURE_PLACEHOLDER
    assert [c.status_code for c in shown.calls] == [202]
    with session_scope() as session:
        user = session.get(User, reader.id)
        workflow = session.get(Workflow, workflow_id)
        iface = get_interface(user, None, workflow.feature_instance_id, session)
        readable = iface.may_call(type(iface).get_run)
    assert (shown.calls[0].run_id == accepted.json()["runId"]) == readable


@SQLITE
def test_the_live_state_follows_publishing_the_switch_and_the_draft(api):
    secret = new_secret()
    workflow_id = create_published(api, echo_graph(trigger(secret)), publish=False, active=False)
    assert help_for("admin", workflow_id).state == webhook_help.UNPUBLISHED
    assert help_for("admin", workflow_id).signed_with == "draft"  # signed with the node's own secret
    url = f"{api.base()}/workflows/{workflow_id}"
    assert api.client.post(f"{url}/publish", headers=api.auth).status_code == 200
    shown = help_for("admin", workflow_id)
    assert shown.state == webhook_help.INACTIVE and "410" in shown.state_text
    assert api.client.patch(url, json={"active": True}, headers=api.auth).status_code == 200
    assert help_for("admin", workflow_id).state == webhook_help.LIVE

    # A new secret in the draft: the published one still signs, and the page says publish to apply.
    graph = api.client.get(url, headers=api.auth).json()["graph"]
    graph["nodes"][0]["parameters"]["secret"] = new_secret()
    assert api.client.put(f"{url}/draft", json={"graph": graph}, headers=api.auth).status_code == 200
    shown = help_for("admin", workflow_id)
    assert (shown.state, shown.draft_differs, shown.signed_with) == (webhook_help.LIVE, True, "published")
    method, path, headers, body = curl_parts(shown.example)
    assert call(api, workflow_id, body, headers).status_code == 202

    # Another path in the draft: not published there yet.
    graph["nodes"][0]["parameters"]["path"] = "elsewhere"
    assert api.client.put(f"{url}/draft", json={"graph": graph}, headers=api.auth).status_code == 200
    assert help_for("admin", workflow_id).state == webhook_help.NOT_PUBLISHED_HERE
    # No secret published: refused (401) until one is.
    no_secret = create_published(api, echo_graph(trigger(None)))
    shown = help_for("admin", no_secret)
    assert (shown.state, shown.secret_set, shown.signed_with) == (webhook_help.NO_SECRET, False, "")


@SQLITE
def test_the_help_is_only_for_webhook_nodes_of_the_workflow(api):
    workflow_id = create_published(api, echo_graph(trigger(new_secret())))
    with session_scope() as session:
        admin = session.exec(select(User).where(User.username == "admin")).one()
        iface = get_interface(admin, None, api.instance_id, session)
        workflow = iface.get_workflow(workflow_id)
        for node_id in ("echo", "missing"):
            with pytest.raises(Exception, match="no webhook trigger|not found"):
                iface.webhook_help(workflow, node_id)


# --- secrets -----------------------------------------------------------------------------------


@SQLITE
def test_generated_secrets_are_standard_webhooks_keys_and_typed_ones_are_checked(api):
    made = {secrets.generate() for _ in range(5)}
    assert len(made) == 5
    for secret in made:
        assert secret.startswith("whsec_") and len(base64.b64decode(secret.removeprefix("whsec_"))) >= 24
        assert secrets.usable(secret)
    sealed = secrets.sealed_new_secret(next(iter(made)))
    assert sealed.startswith("sealed:v1:") and secrets.usable(sealed)
    for bad in ("", "whsec_", "whsec_%%%", "not-a-secret", None, "  "):
        with pytest.raises(ValueError, match="whsec_ followed by base64") as refused:
            secrets.sealed_new_secret(bad)
        if bad in ("whsec_%%%", "not-a-secret"):
            assert bad not in str(refused.value)  # the typed value is never repeated
    # The mask in a graph stands for the stored secret: no validation error for it.
    graph = echo_graph(trigger(MASK))
    assert [e for e in validate_graph(graph) if e.field == "parameters.secret"] == []
    assert [e.field for e in validate_graph(echo_graph(trigger("whsec_%%%")))] == ["parameters.secret"]


# --- the assignee picker's choices ----------------------------------------------------------------


def test_assignee_choices_are_the_roles_and_users_of_this_instance_only(api):
    anna = user_in(api.instance_id, ["user"], ["graphicalEditor-user"], "anna")
    disabled = user_in(api.instance_id, ["user"], [], "gone")
    with session_scope() as session:
        session.get(User, disabled.id).disabled = True
        instance = session.get(FeatureInstance, api.instance_id)
        mandate = session.get(Mandate, instance.mandate_id)
        sibling = create_feature_instance(session, mandate, "workspace", f"Other {uuid.uuid4().hex[:4]}")
        foreign_mandate = create_mandate(session, f"Foreign {uuid.uuid4().hex[:6]}")
        foreign_instance = create_feature_instance(session, foreign_mandate, "graphicalEditor", "Theirs")
        stranger = User(username=f"stranger-{uuid.uuid4().hex[:6]}", display_name="Stranger")
        session.add(stranger)
        session.flush()
        grant_mandate_roles(session, stranger, foreign_mandate, ["admin"])
        grant_instance_roles(session, stranger, foreign_instance, ["graphicalEditor-admin"])
        admin = session.exec(select(User).where(User.username == "admin")).one()
        choices = get_interface(admin, None, api.instance_id, session).assignee_options()
    assert {"admin", "user", "viewer", "graphicalEditor-admin", "graphicalEditor-user",
            "graphicalEditor-viewer"} <= set(choices.roles)
    assert not any(r.startswith("workspace-") for r in choices.roles), sibling
    names = {u.id: u.name for u in choices.users}
    assert names[anna.id] == f"Anna ({anna.username})" and "System administrator (admin)" in names.values()
    assert disabled.id not in names and stranger.id not in names
    assert choices.describe({"role": "graphicalEditor-user"}) == ("graphicalEditor-user", True)
    assert choices.describe({"user": anna.id}) == (f"Anna ({anna.username})", True)
    assert choices.describe({"user": stranger.id})[1] is False
    assert choices.describe({"role": "graphicalEditor-admin-old"})[1] is False


def test_only_people_who_may_change_workflows_get_the_assignee_choices(api):
    reader = user_in(api.instance_id, ["viewer"], ["graphicalEditor-viewer"], "reader")
    with session_scope() as session:
        iface = get_interface(session.get(User, reader.id), None, api.instance_id, session)
        with pytest.raises(Forbidden):
            iface.assignee_options()


def test_a_flood_of_unsigned_calls_is_answered_but_logged_only_up_to_the_cap(api):
    from backend.triggers.webhooks import REFUSALS_LOGGED, WEBHOOK_CALLS_KEPT

    secret = new_secret()
    live = create_published(api, echo_graph(trigger(secret)))
    body = b'{"order": 1}'
    flood = REFUSALS_LOGGED + 5
    for n in range(flood):  # nobody signed these: each is refused, only the first ones are written
        answer = call(api, live, body, sign(new_secret(), body), path=f"f{n}")
        assert answer.status_code == 404
    recorded = [f"f{n}" for n in reversed(range(REFUSALS_LOGGED - WEBHOOK_CALLS_KEPT, REFUSALS_LOGGED))]
    assert [r.path for r in logged(live)] == recorded  # the last five of the minute were not written
    accepted = call(api, live, body, sign(secret, body))  # a signed call is still logged at once
    assert accepted.status_code == 202, accepted.text
    assert logged(live)[0].status_code == 202 and logged(live)[0].run_id == accepted.json()["runId"]
