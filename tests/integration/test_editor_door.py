"""The Graphical Editor's door (backend/features/graphical_editor/interface.py): what it hands the
editor and Workflows pages for an admin, a user and a viewer of one instance — rights flags,
graphs shown for the caller (webhook secrets), version authors, own rows — and that routes and
handlers declare exactly what its methods enforce."""

from __future__ import annotations

import uuid

import pytest
from sqlmodel import select

from backend.api.app import create_api
from backend.db import session_scope
from backend.db.models import FeatureInstance, Mandate, User, Workflow
from backend.errors import Forbidden, NotFound
from backend.features.graphical_editor.interface import (
    GraphicalEditorInterface,
    get_interface,
    interface_of_workflow,
    last_changed_workflow,
)
from backend.features.graphical_editor.main import PUBLISH, WORKFLOW_DATA
from backend.rbac.door import permissions_of
from backend.tenancy import grant_instance_roles, grant_mandate_roles
from backend.triggers.secrets import MASK
from tests.integration.trigger_support import new_secret

SQLITE = pytest.mark.parametrize("db_url", ["sqlite"], indirect=True)
_EDITOR_INSTANCE = select(FeatureInstance).where(FeatureInstance.feature_code == "graphicalEditor")


def _graph(secret: str) -> dict:
    return {"nodes": [{"id": "hook", "type": "trigger.webhook",
                       "parameters": {"path": "in", "method": "POST", "secret": secret}}], "edges": []}


def _member(session, instance: FeatureInstance, role: str) -> User:
    user = User(username=f"{role}-{uuid.uuid4().hex[:6]}", display_name=role)
    session.add(user)
    session.flush()
    grant_mandate_roles(session, user, session.get(Mandate, instance.mandate_id), ["viewer"])
    grant_instance_roles(session, user, instance, [f"graphicalEditor-{role}"])
    return user


@pytest.fixture
def world(app_config) -> dict[str, str]:
    """An admin's workflow with a webhook secret, and a user and a viewer of the same instance."""
    secret = new_secret()
    with session_scope() as session:
        admin = session.exec(select(User).where(User.username == "admin")).one()
        instance = session.exec(_EDITOR_INSTANCE).first()
        workflow = get_interface(admin, None, instance.id, session).create_workflow(
            f"door-{uuid.uuid4().hex[:6]}", graph=_graph(secret))
        return {"secret": secret, "workflow": workflow.id, "instance": instance.id,
                "user": _member(session, instance, "user").id, "viewer": _member(session, instance, "viewer").id}


def _door(session, world, who: str) -> tuple[GraphicalEditorInterface, Workflow]:
    user = session.exec(select(User).where(User.username == "admin")).one() if who == "admin" \
        else session.get(User, world[who])
    return interface_of_workflow(user, world["workflow"], session)


def _secret(graph: dict) -> str:
    return graph["nodes"][0]["parameters"]["secret"]


@SQLITE
def test_rights_flags_follow_the_roles(world):
    with session_scope() as session:
        for who, page, editor in (("admin", (True, True, True), (True, True, True, True)),
                                  ("user", (True, True, True), (False, False, True, True)),
                                  ("viewer", (False, False, False), (False, False, False, False))):
            iface, workflow = _door(session, world, who)
            rights = iface.page_rights()
            assert (rights.can_create, rights.can_rename, rights.can_delete) == page, who
            flags = iface.editor_rights(workflow)
            assert (flags.can_edit, flags.can_publish, flags.can_execute, flags.can_use_agent) == editor, who
            assert iface.may_change(workflow) == editor[0]


@SQLITE
def test_graphs_leave_the_door_shown_for_the_caller(world):
    with session_scope() as session:
        iface, workflow = _door(session, world, "admin")
        assert _secret(iface.workflow_view(workflow).graph) == world["secret"]  # who may change it
        assert _secret(iface.workflow_view(workflow, masked=True).graph) == MASK  # the page, agent prompts
        assert world["secret"] not in iface.agent_context(workflow)
        [version] = iface.list_versions(workflow)
        assert _secret(version.graph) == world["secret"] and version.author == "admin"
        assert _secret(iface.get_version(workflow, version.id, masked=True).graph) == MASK
        viewer, workflow = _door(session, world, "viewer")
        assert _secret(viewer.workflow_view(workflow).graph) == MASK
        assert {_secret(v.graph) for v in viewer.list_versions(workflow)} == {MASK}
        with pytest.raises(NotFound):
            viewer.get_version(workflow, "no-such-version")


@SQLITE
def test_own_rows_and_guarded_methods(world):
    with session_scope() as session:
        user, workflow = _door(session, world, "user")
        with pytest.raises(Forbidden):  # a user changes only what they created
            user.update_workflow(workflow, name="taken over")
        mine = user.create_workflow(f"mine-{uuid.uuid4().hex[:6]}")
        user.update_workflow(mine, description="changed")
        assert {w.id for w in user.list_workflows()} >= {mine.id, workflow.id}
        assert last_changed_workflow(user.user, session).id == mine.id
        viewer, workflow = _door(session, world, "viewer")
        for refused in (lambda: viewer.save_draft(workflow, _graph(MASK)),
                        lambda: viewer.change_version(workflow, "publish"),
                        lambda: viewer.start_run(workflow),
                        lambda: viewer.check_may_run()):
            with pytest.raises(Forbidden):
                refused()
        assert viewer.last_outputs(workflow) == {}


def test_routes_declare_what_the_door_enforces():
    document = create_api().openapi()
    base = "/api/graphicalEditor/{instanceId}"
    publish = document["paths"][f"{base}/workflows/{{workflowId}}/publish"]["post"]
    assert [p.as_dict() for p in permissions_of(GraphicalEditorInterface.change_version)] == publish["x-permissions"]
    assert publish["x-permission"] == {"kind": "RESOURCE", "item": PUBLISH}
    listing = document["paths"][f"{base}/workflows"]["get"]
    assert listing["x-permission"] == {"kind": "DATA", "item": WORKFLOW_DATA, "operation": "read"}
