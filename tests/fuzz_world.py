"""A seeded mandate for fuzzing the REST API with real ids (tests/integration/test_schemathesis.py).

`seed_world()` needs the configured application (the `app_config` fixture) and creates, in a
fresh mandate: a mandate admin (not a system administrator) who signs in through
POST /api/auth/login, a member, one instance of every feature, a Graphical Editor workflow
with a published version and a newer draft, a paused run with a pending human task, a file in
the Workspace's file store, a chat and an agent run per agent feature, a personal API token and
a notification.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from fastapi import FastAPI
from fastapi.testclient import TestClient

from backend.api.app import create_api
from backend.auth import create_api_token, hash_password, issue_token
from backend.db import session_scope
from backend.db.models import AgentChat, AgentRun, HumanTask, Notification, User, WorkflowRun
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

    def path_values(self, path: str, generated: dict[str, Any] | None) -> dict[str, Any]:
        """`generated` path parameters with every id parameter replaced by the world's object."""
        values = dict(generated or {})
        feature = path.split("/")[2]
        for name in values:
            known = self.ids.get(name)
            if isinstance(known, dict):
                values[name] = known.get(feature, known["default"])
            elif known is not None:
                values[name] = known
        return values

    def headers_for(self, method: str, path: str) -> dict[str, str]:
        """The admin's bearer header; logout gets a token of its own each time it is called."""
        token = self.token
        if (method.lower(), path) == LOGOUT:
            with session_scope() as session:
                token = issue_token(session, session.get(User, self.ids["adminId"])).token
        return {"Authorization": f"Bearer {token}"}


def seed_world(monkeypatch) -> FuzzWorld:
    """Create the mandate and its objects, sign the admin in; see the module docstring."""
    for name, value in ENVIRONMENT.items():
        monkeypatch.setenv(name, value)
    for name in OFFLINE:
        monkeypatch.delenv(name, raising=False)
    from backend.config import reset_settings_cache

    reset_settings_cache()
    ids = _seed()
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
