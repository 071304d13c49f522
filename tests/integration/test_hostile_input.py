"""Hostile input (issue 15): lone UTF-16 surrogates, JSON nested deeper than 64 levels, bodies
that are not UTF-8 and names with control characters are refused with the field named, before
anything is written, and nothing a caller sends can make a later answer fail."""

from __future__ import annotations

import json
import uuid
from typing import Any

import pytest
from sqlmodel import select

from backend.db import session_scope
from backend.db.models import AgentChat, FeatureInstance, HumanTask, User, Workflow, WorkflowRun
from backend.engine import tasks
from backend.engine.executor import start_run
from backend.errors import InvalidInput
from backend.files import service as files
from backend.files.service import FileScope
from backend.json_limits import MAX_DEPTH
from backend.rbac.access import AccessContext
from backend.workflows import graph_io
from backend.workflows import service as workflows
from tests.integration.test_workflow_toolbox import tool
from tests.integration.trigger_support import create_published, new_secret, runs_of, sign

SQLITE = pytest.mark.parametrize("db_url", ["sqlite"], indirect=True)
LONE = "\ud800"
START = {"id": "start", "type": "trigger.manual", "parameters": {}}
APPROVAL = {"nodes": [START, {"id": "ask", "type": "input.approval", "parameters": {"title": "Approve it"}}],
            "edges": [{"source": "start", "target": "ask"}]}
FORM = {"nodes": [{"id": "start", "type": "trigger.form",
                   "parameters": {"fields": [{"name": "note", "type": "text", "required": True}]}}],
        "edges": []}
JSON = {"content-type": "application/json"}
CONTROL_NAMES = ["two\nlines", "tab\there", "nul\x00", "del\x7f", "c1\x85", "bidi\u202ecod.exe", f"lone{LONE}"]


def raw(value: Any) -> bytes:
    """`value` as JSON bytes the way a hostile client may send them: surrogates as \\u escapes, NaN as is."""
    return json.dumps(value).encode("ascii")


def nested(depth: int, leaf: Any = "deep") -> Any:
    """`depth` levels of objects {"a": …} around `leaf`."""
    value = leaf
    for _ in range(depth):
        value = {"a": value}
    return value


def refused(response, field: str, status: int = 422) -> str:
    """Assert the answer refuses the request naming `field`; returns its message."""
    assert response.status_code == status, response.text
    errors = response.json()["errors"]
    assert [e["field"] for e in errors] == [field], errors
    assert errors[0]["nodeId"] is None
    return errors[0]["message"]


def all_runs() -> list[WorkflowRun]:
    with session_scope() as session:
        return list(session.exec(select(WorkflowRun)).all())


def workflow(api, graph: dict[str, Any] | None = None) -> str:
    body: dict[str, Any] = {"name": f"wf-{uuid.uuid4().hex}"}
    if graph is not None:
        body["graph"] = graph
    created = api.client.post(f"{api.base()}/workflows", json=body, headers=api.auth)
    assert created.status_code == 201, created.text
    return created.json()["id"]


def pending_task(api) -> str:
    run = api.client.post(f"{api.base()}/workflows/{workflow(api, APPROVAL)}/runs", json={"input": {}},
                          headers=api.auth)
    assert run.status_code == 201 and run.json()["status"] == "paused", run.text
    tasks = api.client.get("/api/tasks", params={"status": "pending"}, headers=api.auth).json()
    return next(t["id"] for t in tasks if t["runId"] == run.json()["id"])


# --- 1. lone surrogates ---------------------------------------------------------------------------


def test_a_lone_surrogate_in_a_public_form_is_refused_and_the_run_list_stays_readable(api):
    workflow_id = create_published(api, FORM)
    url = f"/api/forms/{workflow_id}"
    assert "surrogate" in refused(api.client.post(url, content=raw({"note": f"hi {LONE}"}), headers=JSON), "note")
    # The form reads its body whatever the content type: the same limits apply.
    plain = {"content-type": "text/plain"}
    refused(api.client.post(url, content=raw({"note": LONE}), headers=plain), "note")
    assert runs_of(workflow_id) == []
    listed = api.client.get(f"{api.base()}/runs", headers=api.auth)
    assert listed.status_code == 200, listed.text
    # A valid surrogate pair (an emoji written as two escapes) is text and is accepted.
    accepted = api.client.post(url, content=raw({"note": "\U0001f600"}), headers=JSON)
    assert accepted.status_code == 202, accepted.text
    assert api.client.get(f"{api.base()}/runs", headers=api.auth).status_code == 200


def test_lone_surrogates_anywhere_in_a_json_body_are_refused_naming_the_path(api):
    workflow_id = workflow(api)
    runs = f"{api.base()}/workflows/{workflow_id}/runs"
    assert refused(api.client.post(runs, content=raw({"input": {"note": LONE}}), headers={**api.auth, **JSON}),
                   "input.note")
    refused(api.client.post(runs, content=raw({"input": {"items": ["ok", {"x": LONE}]}}),
                            headers={**api.auth, **JSON}), "input.items.1.x")
    refused(api.client.post(runs, content=raw({"input": {LONE: 1}}), headers={**api.auth, **JSON}), "input")
    assert runs_of(workflow_id) == []
    refused(api.client.post(f"{api.base()}/workflows", content=raw({"name": f"a{LONE}"}),
                            headers={**api.auth, **JSON}), "name")
    refused(api.client.post("/api/events", content=raw({"type": "order.created", "payload": {"id": LONE}}),
                            headers={**api.auth, **JSON}), "payload.id")
    task_id = pending_task(api)
    refused(api.client.post(f"/api/tasks/{task_id}/complete",
                            content=raw({"data": {"approved": True, "comment": LONE}}), headers={**api.auth, **JSON}),
            "data.comment")
    pending = api.client.get("/api/tasks", params={"status": "pending"}, headers=api.auth)
    assert pending.status_code == 200 and task_id in [t["id"] for t in pending.json()]
    # NaN and Infinity are no JSON numbers: stored, they would break every answer showing them.
    refused(api.client.post(runs, content=raw({"input": {"amount": float("nan")}}), headers={**api.auth, **JSON}),
            "input.amount")
    assert runs_of(workflow_id) == []
    assert api.client.get(f"{api.base()}/runs", headers=api.auth).status_code == 200


def test_a_signed_webhook_with_a_lone_surrogate_is_refused_after_its_signature_check(api):
    secret = new_secret()
    workflow_id = create_published(api, {"nodes": [{"id": "start", "type": "trigger.webhook",
                                                    "parameters": {"path": "in", "secret": secret}}], "edges": []})
    url = f"/api/hooks/{workflow_id}/in"
    body = raw({"order": {"note": LONE}})
    unsigned = api.client.post(url, content=body, headers=JSON)
    assert unsigned.status_code == 401, unsigned.text  # no signature, no hint about the body
    refused(api.client.post(url, content=body, headers=sign(secret, body)), "body.order.note")
    deep = raw(nested(MAX_DEPTH + 1))
    refused(api.client.post(url, content=deep, headers=sign(secret, deep)), "body" + ".a" * MAX_DEPTH)
    assert runs_of(workflow_id) == []
    fine = raw({"order": {"note": "ok"}})
    assert api.client.post(url, content=fine, headers=sign(secret, fine)).status_code == 202
    assert api.client.get(f"{api.base()}/runs", headers=api.auth).status_code == 200


@SQLITE
def test_the_services_behind_the_ui_refuse_the_same_input(api):
    """The Reflex UI calls the engine and the task service directly: they apply the limits too."""
    workflow_id = workflow(api)
    task_id = pending_task(api)
    with session_scope() as session:
        admin = session.exec(select(User).where(User.username == "admin")).one()
        flow = session.get(Workflow, workflow_id)
        with pytest.raises(InvalidInput) as caught:
            start_run(session, admin, flow, workflows.draft_version(session, flow), {"note": LONE})
        assert caught.value.errors[0].field == "input.note"
        with pytest.raises(InvalidInput) as caught:
            tasks.complete_task(AccessContext(session, admin), session.get(HumanTask, task_id),
                                {"approved": True, "comment": nested(70)})
        assert caught.value.errors[0].field == "data.comment" + ".a" * (MAX_DEPTH - 1)
    assert runs_of(workflow_id) == []
    pending = api.client.get("/api/tasks", params={"status": "pending"}, headers=api.auth).json()
    assert task_id in [t["id"] for t in pending]


# --- 2. nesting depth -----------------------------------------------------------------------------


def test_json_nested_deeper_than_64_levels_is_refused_and_nothing_is_written(api):
    workflow_id = workflow(api)
    runs = f"{api.base()}/workflows/{workflow_id}/runs"
    accepted = api.client.post(runs, content=raw({"input": nested(MAX_DEPTH - 1)}), headers={**api.auth, **JSON})
    assert accepted.status_code == 201, accepted.text  # body → input → 63 more: exactly 64 levels
    message = refused(api.client.post(runs, content=raw({"input": nested(900)}), headers={**api.auth, **JSON}),
                      "input" + ".a" * (MAX_DEPTH - 1))
    assert "deeper than 64 levels" in message
    refused(api.client.post(runs, content=b'{"input": ' + b"[" * 100_000 + b"]" * 100_000 + b"}",
                            headers={**api.auth, **JSON}), "body")  # too deep for the parser itself
    assert len(runs_of(workflow_id)) == 1
    graph = {"nodes": [{**START, "parameters": {"x": nested(300)}}], "edges": []}
    draft = api.client.put(f"{api.base()}/workflows/{workflow_id}/draft", json={"graph": graph}, headers=api.auth)
    assert refused(draft, "graph.nodes.0.parameters" + ".x" + ".a" * (MAX_DEPTH - 5))
    task_id = pending_task(api)
    refused(api.client.post(f"/api/tasks/{task_id}/complete", json={"data": {"approved": True, "c": nested(80)}},
                            headers=api.auth), "data.c" + ".a" * (MAX_DEPTH - 2))
    assert api.client.get(f"{api.base()}/workflows/{workflow_id}", headers=api.auth).status_code == 200
    assert api.client.get(f"{api.base()}/runs", headers=api.auth).status_code == 200


@SQLITE
def test_brackets_quotes_and_words_inside_texts_are_just_text(api):
    workflow_id = workflow(api)
    runs = f"{api.base()}/workflows/{workflow_id}/runs"
    texts = {"open": "[{" * 100, "quoted": '\\"[[[' * 40, "words": "NaN Infinity \\ud800", "list": ["]"] * 70}
    accepted = api.client.post(runs, content=raw({"input": texts}), headers={**api.auth, **JSON})
    assert accepted.status_code == 201, accepted.text
    assert accepted.json()["input"] == texts
    noisy = nested(MAX_DEPTH, leaf='"]]]}}}')
    refused(api.client.post(runs, content=raw({"input": {"n": noisy, "t": "{{{" * 30}}), headers={**api.auth, **JSON}),
            "input.n" + ".a" * (MAX_DEPTH - 2))
    assert len(runs_of(workflow_id)) == 1


@SQLITE
def test_graph_import_and_the_agents_workflow_tools_refuse_deep_graphs_too(api):
    deep_file = json.dumps({"nodes": [{**START, "parameters": {"x": nested(300)}}], "edges": []})
    with pytest.raises(InvalidInput) as caught:
        graph_io.parse_import(deep_file)
    assert caught.value.errors[0].field.startswith("file.nodes.0.parameters.x.a")
    with pytest.raises(InvalidInput) as caught:
        graph_io.parse_import(json.dumps({"nodes": [{**START, "label": LONE}], "edges": []}))
    assert caught.value.errors[0].field == "file.nodes.0.label"

    with session_scope() as session:
        editor = session.exec(select(FeatureInstance).where(FeatureInstance.feature_code == "graphicalEditor")).first()
        editor_id = editor.id
    echo = {"id": "echo", "type": "context.transform", "parameters": {"data": {}, "template": "x"}}
    workflow_id = workflow(api, {"nodes": [START, echo], "edges": [{"source": "start", "target": "echo"}]})
    before = api.client.get(f"{api.base()}/workflows/{workflow_id}", headers=api.auth).json()
    result = tool("setNodeParameter", workflowId=workflow_id, nodeId="echo", name="data",
                  value=json.dumps(nested(300)), editorInstanceId=editor_id)
    assert not result.ok and "deeper than 64 levels" in result.error, result.error
    after = api.client.get(f"{api.base()}/workflows/{workflow_id}", headers=api.auth).json()
    assert after == before


# --- 3. bodies that are not UTF-8, malformed JSON -------------------------------------------------


def test_a_body_that_is_not_utf8_is_a_400_naming_the_body(api):
    workflow_id = create_published(api, FORM)
    latin1 = '{"note": "Zürich"}'.encode("latin-1")
    for url, headers in ((f"/api/forms/{workflow_id}", JSON),
                         (f"{api.base()}/workflows/{workflow_id}/runs", {**api.auth, **JSON}),
                         (f"{api.base()}/workflows", {**api.auth, **JSON})):
        answer = api.client.post(url, content=latin1, headers=headers)
        assert answer.status_code == 400, answer.text
        assert answer.json()["detail"].startswith("request body is not valid UTF-8 (byte 0xfc at offset 11)")
    malformed = api.client.post(f"{api.base()}/workflows", content=b'{"name": "x",}', headers={**api.auth, **JSON})
    assert "is not valid JSON" in refused(malformed, "body")
    assert runs_of(workflow_id) == []


# --- 4. names -------------------------------------------------------------------------------------


def test_workflow_names_refuse_control_characters(api):
    url = f"{api.base()}/workflows"
    for name in CONTROL_NAMES:
        message = refused(api.client.post(url, content=raw({"name": name}), headers={**api.auth, **JSON}), "name")
        assert "must not contain" in message or "surrogate" in message, (name, message)
    workflow_id = workflow(api)
    refused(api.client.patch(f"{url}/{workflow_id}", json={"name": "new\tname"}, headers=api.auth), "name")
    assert api.client.get(f"{url}/{workflow_id}", headers=api.auth).json()["name"].startswith("wf-")
    renamed = api.client.patch(f"{url}/{workflow_id}", json={"name": "  Zürich 🚆 orders  "}, headers=api.auth)
    assert renamed.status_code == 200 and renamed.json()["name"] == "Zürich 🚆 orders"


@SQLITE
def test_mandate_instance_file_folder_and_chat_names_refuse_control_characters(api):
    message = refused(api.client.post("/api/mandates", json={"name": "Acme\nAG"}, headers=api.auth), "name")
    assert message == "must not contain control characters (U+000A at position 5)"
    mandate = api.client.post("/api/mandates", json={"name": "Acme AG"}, headers=api.auth)
    assert mandate.status_code == 201, mandate.text
    instances = f"/api/mandates/{mandate.json()['id']}/instances"
    refused(api.client.post(instances, json={"featureCode": "workspace", "label": "Files\x00"}, headers=api.auth),
            "label")
    assert api.client.get(instances, headers=api.auth).json() == []

    with session_scope() as session:
        admin = session.exec(select(User).where(User.username == "admin")).one()
        workspace = session.exec(select(FeatureInstance).where(FeatureInstance.feature_code == "workspace")).one()
        chat = AgentChat(mandate_id=workspace.mandate_id, feature_instance_id=workspace.id, title="Counting",
                         sys_created_by=admin.id)
        session.add(chat)
        session.commit()
        ids = (admin.id, workspace.mandate_id, workspace.id, chat.id)
    admin_id, mandate_id, instance_id, chat_id = ids

    files_url = f"/api/workspace/{instance_id}/files"
    upload = api.client.post(files_url, files={"file": ("a.txt", b"hello", "text/plain")},
                             data={"name": "a\tb.txt"}, headers=api.auth)
    refused(upload, "name")
    refused(api.client.post(files_url, files={"file": ("a.txt", b"hello", "text/plain")},
                            data={"folder": "/in\x85box"}, headers=api.auth), "folder")
    assert api.client.get(files_url, headers=api.auth).json() == []
    with session_scope() as session:
        scope = FileScope(session, session.get(User, admin_id), mandate_id, instance_id)
        files.write_text(scope, "/notes.txt", "x")
        with pytest.raises(InvalidInput) as caught:
            files.rename_file(scope, "/notes.txt", "notes\u2028.txt")
        assert caught.value.errors[0].field == "newName"
        with pytest.raises(InvalidInput) as caught:
            files.create_folder(scope, "/reports/\x1b[31mred")
        assert caught.value.errors[0].field == "path"

    chat_url = f"/api/workspace/{instance_id}/agent/chats/{chat_id}"
    refused(api.client.patch(chat_url, json={"title": "Count\ning"}, headers=api.auth), "title")
    renamed = api.client.patch(chat_url, json={"title": " Counting sheep "}, headers=api.auth)
    assert renamed.status_code == 200 and renamed.json()["title"] == "Counting sheep"


@SQLITE
def test_usernames_display_names_token_names_and_long_names_are_refused_naming_the_field(api):
    mandate = api.client.post("/api/mandates", json={"name": "Names AG"}, headers=api.auth).json()
    users = f"/api/mandates/{mandate['id']}/users"
    body = {"password": "a-long-password-1", "roles": ["viewer"]}
    refused(api.client.post(users, json={**body, "username": "nl\nuser"}, headers=api.auth), "username")
    refused(api.client.post(users, json={**body, "username": "evil\u202eadmin"}, headers=api.auth), "username")
    refused(api.client.post(users, json={**body, "username": "u" * 151}, headers=api.auth), "username")
    refused(api.client.post(users, json={**body, "username": "bell", "displayName": "x\x07y"}, headers=api.auth),
            "displayName")
    refused(api.client.post("/api/me/tokens", json={"name": "ci\ttoken"}, headers=api.auth), "name")
    refused(api.client.post("/api/me/tokens", json={"name": "t" * 201}, headers=api.auth), "name")
    refused(api.client.post("/api/mandates", json={"name": "M" * 201}, headers=api.auth), "name")
    members = api.client.get(users, headers=api.auth).json()
    assert all(m["username"] in ("admin",) or "\n" not in m["username"] for m in members)
    assert api.client.get("/api/me/tokens", headers=api.auth).json() == []


@pytest.mark.parametrize("path", ["/api/connections/oauth/%C3%BCber/callback?state=x",
                                  "/api/connections/oauth/%E2%82%AC/start?ticket=x"])
def test_an_oauth_route_with_a_stranger_type_answers_422_not_500(api, path):
    """Schemathesis found it: a type that is no short lower-case name went into the callback's cookie
    header (latin-1 only) and failed with 500. Now the path is refused naming the parameter."""
    response = api.client.get(path, follow_redirects=False)
    assert response.status_code == 422, response.text
    assert "type" in json.dumps(response.json()["detail"])
