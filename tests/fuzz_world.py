"""A seeded mandate for fuzzing the REST API with real ids (tests/integration/test_schemathesis.py).

`seed_world()` needs the configured application (the `app_config` fixture) and creates, in a
fresh mandate: a mandate admin (not a system administrator) who signs in through
POST /api/auth/login, a member, one instance of every feature, a Graphical Editor workflow
with a published version and a newer draft, a paused run with a pending human task, a file in
the Workspace's file store, a chat and an agent run per agent feature, a personal API token and
a notification.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from fastapi import FastAPI
from fastapi.testclient import TestClient

from backend.api.app import create_api
from backend.auth import create_api_token, hash_password, issue_token
from backend.db import session_scope
from backend.db.models import (
    AgentChat,
    AgentRun,
    FeatureInstance,
    HumanTask,
    Mandate,
    Notification,
    User,
    WorkflowRun,
)
from backend.features.registry import get_features
from backend.files import service as files
from backend.tenancy import create_feature_instance, create_mandate, grant_mandate_roles
from backend.workflows import service
from backend.workflows.graph import default_graph

EDITOR = "graphicalEditor"
WORKSPACE = "workspace"
ADMIN = ("fuzz-admin", "fuzz-admin-pass-1")
LOGOUT = ("post", "/api/auth/logout")
# Environment for a fast, offline run: runs come to rest quickly, no AI provider is reachable.
ENVIRONMENT = {"POWERON_RUN_WAIT_SECONDS": "0.2", "POWERON_SCHEDULER": "off"}
OFFLINE = ("OPENAI_API_KEY", "OPENAI_BASE_URL", "POWERON_AI_PROVIDERS", "POWERON_SEARCH_URL")


@dataclass
class FuzzWorld:
    """The app under test, the admin's bearer token and the ids path parameters take."""

    app: FastAPI
    token: str
    ids: dict[str, Any]

    def path_values(self, method: str, path: str, generated: dict[str, Any] | None) -> dict[str, Any]:
        """`generated` path parameters with every id parameter replaced by the world's object.

        A DELETE gets a fresh object of its own to delete, so the seeded one stays for the
        operations after it.
        """
        values = dict(generated or {})
        feature = path.split("/")[2]
        for name in values:
            known = self.ids.get(name)
            if isinstance(known, dict):
                values[name] = known.get(feature, known["default"])
            elif known is not None:
                values[name] = known
        doomed = DOOMED.get(path) if method.lower() == "delete" else None
        if doomed is not None:
            with session_scope() as session:
                values[doomed[0]] = doomed[1](session, self.ids, feature)
        return values

    def parameter_config(self) -> dict[str, Any]:
        """Schemathesis configuration fixing every id path parameter, in every phase.

        The `map_path_parameters` hook (path_values) is not applied by the coverage phase, so
        the ids are fixed by configuration as well: features by path prefix, and DELETE
        operations aim at objects seeded to be deleted (the first DELETE succeeds, later ones
        answer 404 while the seeded objects stay for every other operation).
        """
        ids, doomed = self.ids, self.ids["doomed"]

        def on(code: str) -> dict[str, str]:
            return {"path.instanceId": ids["instanceId"][code], "path.chatId": ids["chatId"][code],
                    "path.agentRunId": ids["agentRunId"][code]}

        shared = {f"path.{name}": ids[name] for name in SHARED_PATH_IDS}
        deleting = {**shared, "path.workflowId": doomed["workflowId"], "path.fileId": doomed["fileId"],
                    "path.tokenId": doomed["tokenId"], "path.userId": doomed["userId"]}
        return {
            "parameters": {**shared, **on(EDITOR)},
            "operations": [
                {"include-method": "DELETE", "include-path-regex": f"^/api/{WORKSPACE}/",
                 "parameters": {**deleting, **on(WORKSPACE), "path.chatId": doomed["chatId"][WORKSPACE]}},
                {"include-method": "DELETE", "exclude-path-regex": f"^/api/{WORKSPACE}/",
                 "parameters": {**deleting, **on(EDITOR), "path.chatId": doomed["chatId"][EDITOR]}},
                {"include-path-regex": f"^/api/{WORKSPACE}/", "parameters": {**shared, **on(WORKSPACE)}},
            ],
        }

    def headers_for(self, method: str, path: str) -> dict[str, str]:
        """The admin's bearer header; logout gets a token of its own each time it is called."""
        token = self.token
        if (method.lower(), path) == LOGOUT:
            with session_scope() as session:
                token = issue_token(session, session.get(User, self.ids["adminId"])).token
        return {"Authorization": f"Bearer {token}"}


def _doomed_workflow(session, ids: dict[str, Any], _feature: str) -> str:
    instance = session.get(FeatureInstance, ids["instanceId"][EDITOR])
    admin = session.get(User, ids["adminId"])
    return service.create_workflow(session, admin, instance, f"Doomed {uuid.uuid4().hex}").id


def _doomed_file(session, ids: dict[str, Any], _feature: str) -> str:
    scope = files.FileScope(session, session.get(User, ids["adminId"]), ids["mandateId"], ids["instanceId"][WORKSPACE])
    return files.write_text(scope, f"/doomed/{uuid.uuid4().hex}.txt", "to be deleted").id


def _doomed_chat(session, ids: dict[str, Any], feature: str) -> str:
    chat = AgentChat(mandate_id=ids["mandateId"], feature_instance_id=ids["instanceId"][feature], title="Doomed chat",
                     sys_created_by=ids["adminId"])
    session.add(chat)
    session.flush()
    return chat.id


def _doomed_token(session, ids: dict[str, Any], _feature: str) -> str:
    return create_api_token(session, session.get(User, ids["adminId"]), f"doomed {uuid.uuid4().hex}")[0].id


def _doomed_member(session, ids: dict[str, Any], _feature: str) -> str:
    user = User(username=f"doomed-{uuid.uuid4().hex[:12]}", display_name="Doomed member")
    session.add(user)
    session.flush()
    grant_mandate_roles(session, user, session.get(Mandate, ids["mandateId"]), ["user"])
    return user.id


# Id path parameters that name the same seeded object on every route.
SHARED_PATH_IDS = ("mandateId", "userId", "workflowId", "runId", "taskId", "tokenId", "fileId", "notificationId")
# DELETE path → (the parameter naming what is deleted, a factory of a fresh object to delete).
DOOMED: dict[str, tuple[str, Callable[..., str]]] = {
    "/api/graphicalEditor/{instanceId}/workflows/{workflowId}": ("workflowId", _doomed_workflow),
    "/api/workspace/{instanceId}/files/{fileId}": ("fileId", _doomed_file),
    "/api/graphicalEditor/{instanceId}/agent/chats/{chatId}": ("chatId", _doomed_chat),
    "/api/workspace/{instanceId}/agent/chats/{chatId}": ("chatId", _doomed_chat),
    "/api/me/tokens/{tokenId}": ("tokenId", _doomed_token),
    "/api/mandates/{mandateId}/users/{userId}": ("userId", _doomed_member),
}


def seed_world(monkeypatch) -> FuzzWorld:
    """Create the mandate and its objects, sign the admin in; see the module docstring."""
    for name, value in ENVIRONMENT.items():
        monkeypatch.setenv(name, value)
    for name in OFFLINE:
        monkeypatch.delenv(name, raising=False)
    from backend.config import reset_settings_cache

    reset_settings_cache()
    ids = _seed()
    with session_scope() as session:
        ids["doomed"] = {name: factory(session, ids, EDITOR) for name, factory in DOOMED.values()
                         if name != "chatId"}
        ids["doomed"]["chatId"] = {code: _doomed_chat(session, ids, code) for code in (EDITOR, WORKSPACE)}
    app = create_api()
    with TestClient(app) as client:
        answer = client.post("/api/auth/login", json={"username": ADMIN[0], "password": ADMIN[1]})
        assert answer.status_code == 200, answer.text
    return FuzzWorld(app=app, token=answer.json()["token"], ids=ids)


def _seed() -> dict[str, Any]:
    with session_scope() as session:
        mandate = create_mandate(session, "Fuzz Corp")
        admin = User(username=ADMIN[0], display_name="Fuzz Admin", password_hash=hash_password(ADMIN[1]))
        member = User(username="fuzz-member", display_name="Fuzz Member",
                      password_hash=hash_password("fuzz-member-pass-1"))
        session.add_all([admin, member])
        session.flush()
        grant_mandate_roles(session, admin, mandate, ["admin"])
        grant_mandate_roles(session, member, mandate, ["user"])
        instances = {code: create_feature_instance(session, mandate, code, f"{code} of Fuzz")
                     for code in sorted(get_features())}
        editor, workspace = instances[EDITOR], instances[WORKSPACE]
        workflow = service.create_workflow(session, admin, editor, "Fuzzed workflow")
        service.save_draft(session, admin, workflow, default_graph())
        published = service.publish(session, admin, workflow)
        service.save_draft(session, admin, workflow, default_graph())
        run = WorkflowRun(workflow_id=workflow.id, version_id=published.id, mandate_id=mandate.id,
                          feature_instance_id=editor.id, status="paused", sys_created_by=admin.id)
        session.add(run)
        session.flush()
        task = HumanTask(run_id=run.id, node_id="approve", mandate_id=mandate.id, feature_instance_id=editor.id,
                         title="Approve the fuzzed run")
        session.add(task)
        token_row, _ = create_api_token(session, admin, "fuzz token")
        stored = files.write_text(files.FileScope(session, admin, mandate.id, workspace.id),
                                  "/notes/fuzz.txt", "Notes of the fuzzed mandate")
        chats, agent_runs = {}, {}
        for code in (WORKSPACE, EDITOR):
            chat = AgentChat(mandate_id=mandate.id, feature_instance_id=instances[code].id, title="Fuzz chat",
                             sys_created_by=admin.id)
            session.add(chat)
            session.flush()
            agent_run = AgentRun(chat_id=chat.id, mandate_id=mandate.id, feature_instance_id=instances[code].id,
                                 profile=code, prompt="A question", status="completed", answer="An answer",
                                 sys_created_by=admin.id)
            session.add(agent_run)
            session.flush()
            chats[code], agent_runs[code] = chat.id, agent_run.id
        notification = Notification(user_id=admin.id, mandate_id=mandate.id, kind="run.failed",
                                    title="Fuzzed workflow failed", message="An error",
                                    workflow_id=workflow.id, run_id=run.id)
        session.add(notification)
        session.flush()
        instance_ids = {code: i.id for code, i in instances.items()}
        return {
            "adminId": admin.id,
            "mandateId": mandate.id,
            "instanceId": {**instance_ids, "default": editor.id},
            "userId": member.id,
            "workflowId": workflow.id,
            "runId": run.id,
            "taskId": task.id,
            "tokenId": token_row.id,
            "fileId": stored.id,
            "chatId": {**chats, "default": chats[WORKSPACE]},
            "agentRunId": {**agent_runs, "default": agent_runs[WORKSPACE]},
            "notificationId": notification.id,
        }
