"""The editor's Versions tab against the database: its handlers publish, unpublish, archive and
restore through the Graphical Editor interface, open versions read-only with secrets masked,
switch the workflow active and keep the schedule status line right.

The handlers run on a plain object holding the mixin's vars (no Reflex app): its `_user_session`
is the bootstrap admin's (or a viewer's) session, `_reload` reloads the versions as the page does.
"""

from __future__ import annotations

import uuid
from contextlib import contextmanager

import pytest
from sqlmodel import select

from backend.db import session_scope
from backend.db.models import FeatureInstance, Mandate, User, Workflow
from backend.features.graphical_editor.interface import get_interface
from backend.tenancy import grant_instance_roles, grant_mandate_roles
from backend.triggers.secrets import MASK
from backend.workflows import service
from state.editor_versions import NO_SCHEDULE, NOT_REGISTERED, EditorVersionsMixin
from state.page import PageMixin
from tests.integration.trigger_support import new_secret

SQLITE = pytest.mark.parametrize("db_url", ["sqlite"], indirect=True)
_EDITOR_INSTANCE = select(FeatureInstance).where(FeatureInstance.feature_code == "graphicalEditor")
MIXIN_METHODS = ("_load_versions", "_note_draft_saved", "_keep_readonly", "_change_version", "publish_draft",
                 "unpublish", "archive_published", "restore_version", "open_version", "back_to_draft", "set_active")


def _graph(secret: str, label: str = "Echo", template: str | None = "{{ input }}") -> dict:
    echo = {"id": "echo", "type": "context.transform", "label": label, "parameters": {"data": "{{ input }}"}}
    if template is not None:
        echo["parameters"]["template"] = template
    return {"nodes": [
        {"id": "clock", "type": "trigger.schedule", "parameters": {"cron": "0 7 * * *", "timezone": "Europe/Zurich"}},
        {"id": "hook", "type": "trigger.webhook", "parameters": {"path": "in", "method": "POST", "secret": secret}},
        echo,
    ], "edges": [{"source": "clock", "target": "echo"}, {"source": "hook", "target": "echo"}]}


class FakeEditor:
    """The vars and helpers of EditorState the mixin relies on, with the mixin's methods."""

    def __init__(self, username: str, workflow_id: str):
        self.username, self.workflow_id = username, workflow_id
        self.versions, self.viewing_version, self.viewing_status = [], "", ""
        self.workflow_active = self.can_publish = self.has_draft = self.has_published = False
        self.schedule_text = ""
        self._viewed_graph, self._published_graph, self._published_at, self._event_id = {}, {}, "", ""
        self.error = self.notice = ""
        self.save_status, self.can_edit, self.fit_revision, self.selected_ids = "saved", True, 0, ["echo"]
        self.form_revision = 0
        self.published = 0

    @contextmanager
    def _user_session(self):
        with session_scope() as session:
            yield session, session.exec(select(User).where(User.username == self.username)).one()

    def _editor_interface(self, session, user):
        workflow = session.get(Workflow, self.workflow_id)
        iface = get_interface(user, None, workflow.feature_instance_id, session)
        return iface, iface.get_workflow(self.workflow_id)

    def _reload(self):
        with self._user_session() as (session, user):
            self._load_versions(*self._editor_interface(session, user))
        self.save_status = "saved" if self.can_edit else "readonly"  # as EditorState._refresh does

    def _publish(self):
        self.published += 1

    def _signed_out(self):
        raise AssertionError("signed out")

    def summary(self) -> list[tuple[int, str]]:
        return [(row["number"], row["status"]) for row in self.versions]


for _name in MIXIN_METHODS:
    setattr(FakeEditor, _name, EditorVersionsMixin.__dict__[_name])
FakeEditor._attempt = PageMixin.__dict__["_attempt"]


@pytest.fixture
def workflow_id(app_config) -> str:
    with session_scope() as session:
        admin = session.exec(select(User).where(User.username == "admin")).one()
        instance = session.exec(_EDITOR_INSTANCE).first()
        workflow = service.create_workflow(session, admin, instance, f"versions-{uuid.uuid4().hex[:6]}",
                                           graph=_graph(new_secret()))
        return workflow.id


def _save_draft(workflow_id: str, graph: dict):
    with session_scope() as session:
        admin = session.exec(select(User).where(User.username == "admin")).one()
        workflow = session.get(Workflow, workflow_id)
        iface = get_interface(admin, None, workflow.feature_instance_id, session)
        return iface.save_draft(workflow, graph)  # a VersionView, detached from the session


@SQLITE
def test_the_version_lifecycle_through_the_versions_tab(workflow_id):
    editor = FakeEditor("admin", workflow_id)
    editor._reload()
    assert editor.summary() == [(1, "draft")] and editor.versions[0]["author"] == "admin"
    assert editor.can_publish and editor.has_draft and not editor.has_published and not editor.workflow_active
    assert editor.schedule_text == NOT_REGISTERED

    editor.publish_draft()
    assert editor.error == "" and editor.notice == "Published version 1."
    assert editor.summary() == [(1, "published")] and editor.versions[0]["published"].endswith("UTC")
    assert editor.schedule_text == ("Schedule: every day 07:00 (0 7 * * *, Europe/Zurich) · "
                                    "not registered: switch the workflow active")

    editor.set_active(True)
    assert editor.workflow_active and editor.notice == "Workflow switched active."
    assert "· next run " in editor.schedule_text and "job not registered yet" in editor.schedule_text
    with session_scope() as session:  # what the scheduler writes once it registered the job
        session.get(Workflow, workflow_id).event_id = f"wf:{workflow_id}:clock"
    editor._reload()
    assert editor.schedule_text.endswith(f"job registered (eventId wf:{workflow_id}:clock)")

    # An incomplete draft is saved (a draft may be) but cannot be published: the problems are shown.
    draft = _save_draft(workflow_id, _graph(MASK, template=None))
    editor._note_draft_saved(draft)
    assert editor.summary() == [(2, "draft"), (1, "published")] and editor.has_draft
    assert editor.versions[0]["author"] == "admin"
    editor.publish_draft()
    assert editor.error.startswith("Publish refused: ") and "template" in editor.error, editor.error
    assert editor.summary() == [(2, "draft"), (1, "published")]
    # Unpublishing is refused while there is a draft.
    editor.unpublish()
    assert editor.error.startswith("Unpublish refused: ") and "already has a draft" in editor.error

    # Open the published version read-only: secrets masked, selection cleared, canvas refitted.
    published_id = next(r["id"] for r in editor.versions if r["number"] == 1)
    editor.open_version(published_id)
    assert (editor.viewing_version, editor.viewing_status, editor.save_status) == ("1", "published", "readonly")
    assert editor.selected_ids == [] and editor.fit_revision == 1 and editor.published == 1
    hook = next(n for n in editor._viewed_graph["nodes"] if n["id"] == "hook")
    assert hook["parameters"]["secret"] == MASK

    # Publishing the fixed draft archives v1; the view of v1 follows and stays read only.
    _save_draft(workflow_id, _graph(MASK, label="Fixed"))
    editor.publish_draft()
    assert editor.error == "" and editor.summary() == [(2, "published"), (1, "archived")]
    assert (editor.viewing_version, editor.viewing_status, editor.save_status) == ("1", "archived", "readonly")
    assert not editor.has_draft and editor.has_published

    editor.restore_version(published_id)
    assert editor.notice == "Restored version 1." and editor.summary() == [(2, "archived"), (1, "published")]
    editor.archive_published()
    assert editor.notice == "Archived version 1." and editor.summary() == [(2, "archived"), (1, "archived")]
    assert editor.schedule_text == NO_SCHEDULE and not editor.has_published

    editor.back_to_draft()
    assert (editor.viewing_version, editor.save_status, editor._viewed_graph) == ("", "saved", {})
    assert editor.fit_revision == 2 and editor.published == 2

    v2 = next(r["id"] for r in editor.versions if r["number"] == 2)
    editor.restore_version(v2)
    editor.unpublish()
    assert editor.notice == "Unpublished version 2." and editor.summary() == [(2, "draft"), (1, "archived")]
    assert editor.schedule_text == NOT_REGISTERED

    editor.open_version("no-such-version")
    assert editor.error == "version no-such-version not found" and editor.viewing_version == ""


@SQLITE
def test_a_viewer_may_look_but_not_publish_or_switch(workflow_id):
    with session_scope() as session:
        instance = session.exec(_EDITOR_INSTANCE).first()
        viewer = User(username=f"viewer-{uuid.uuid4().hex[:6]}", display_name="Viewer")
        session.add(viewer)
        session.flush()
        grant_mandate_roles(session, viewer, session.get(Mandate, instance.mandate_id), ["viewer"])
        grant_instance_roles(session, viewer, instance, ["graphicalEditor-viewer"])
        username = viewer.username
    editor = FakeEditor(username, workflow_id)
    editor.can_edit = False
    editor._reload()
    assert editor.summary() == [(1, "draft")] and not editor.can_publish
    editor.publish_draft()
    assert editor.error == ("Publish refused: your roles do not allow resource.feature.graphicalEditor.publish")
    editor.set_active(True)
    assert editor.error.startswith("Switching on refused: ") and not editor.workflow_active
    editor.open_version(editor.versions[0]["id"])
    assert editor.viewing_version == "1" and editor.save_status == "readonly"
    hook = next(n for n in editor._viewed_graph["nodes"] if n["id"] == "hook")
    assert hook["parameters"]["secret"] == MASK
    editor.back_to_draft()
    assert editor.save_status == "readonly"
