"""The editor's Files tab against the database: it shows the Graphical Editor instance's own
file store (the one a workflow run's file actions use, ActionContext of the run's instance), with
the rights of `data.feature.graphicalEditor.file`; "Use in node" puts a path into a parameter
(as text) through the editor's set_parameter; the pickable fields follow the node's schema.

The handlers run on a plain object holding the mixins' vars (no Reflex app), as in
test_editor_versions_state.py.
"""

from __future__ import annotations

import uuid
from contextlib import contextmanager
from types import SimpleNamespace

import pytest
from sqlmodel import select

from backend.actions import ActionContext
from backend.db import session_scope
from backend.db.models import FeatureInstance, Mandate, User
from backend.files import service as files
from backend.tenancy import grant_instance_roles, grant_mandate_roles
from backend.workflows.node_types import palette
from state.editor_files import EditorFilesMixin, file_fields
from state.param_fields import fields_of
from state.workspace_files import FilesMixin

SQLITE = pytest.mark.parametrize("db_url", ["sqlite"], indirect=True)
_EDITOR_INSTANCE = select(FeatureInstance).where(FeatureInstance.feature_code == "graphicalEditor")


class FakeEditorFiles:
    """The vars of EditorState the Files tab relies on, with the mixins' methods."""

    def __init__(self, username: str, instance_id: str):
        self.username, self.instance_id = username, instance_id
        self.folder, self.folders, self.files = "/", [], []
        self.files_error = self.files_notice = self.error = ""
        self.can_read_files = self.can_upload = False
        self.file_max_bytes, self.file_limit = 0, ""
        self.selected_node, self.param_fields, self.form_revision = "", [], 0
        self.can_edit, self.viewing_version = True, ""
        self.set_calls: list[tuple[str, str, str]] = []

    @contextmanager
    def _user_session(self):
        with session_scope() as session:
            yield session, session.exec(select(User).where(User.username == self.username)).one()

    def _set_parameter(self, name: str, kind: str, text: str):
        self.set_calls.append((name, kind, text))


FakeEditorFiles.event_handlers = {"set_parameter": SimpleNamespace(fn=FakeEditorFiles._set_parameter)}
for _name in ("_with_scope", "_files_attempt", "_load_folder", "_refresh_files"):
    setattr(FakeEditorFiles, _name, FilesMixin.__dict__[_name])
FakeEditorFiles.use_file = EditorFilesMixin.__dict__["use_file"]
for _name in ("_field_problem", "_put_path"):
    setattr(FakeEditorFiles, _name, EditorFilesMixin.__dict__[_name])


def _fields(type_id: str, parameters: dict | None = None):
    node_type = next(t for t in palette() if t.type == type_id)
    return fields_of(node_type.params_model.model_json_schema(), parameters or {})


@pytest.fixture
def editor_instance(app_config) -> tuple[str, str]:
    """The editor instance's id, with a file a run wrote there, and a graphicalEditor-user's name."""
    with session_scope() as session:
        admin = session.exec(select(User).where(User.username == "admin")).one()
        instance = session.exec(_EDITOR_INSTANCE).first()
        run_context = ActionContext(session, admin, instance.mandate_id, instance.id)  # as the engine builds it
        files.write_text(run_context, "/in/receipt.txt", "Total 42 CHF")
        user = User(username=f"user-{uuid.uuid4().hex[:6]}", display_name="Ursula")
        session.add(user)
        session.flush()
        grant_mandate_roles(session, user, session.get(Mandate, instance.mandate_id), ["viewer"])
        grant_instance_roles(session, user, instance, ["graphicalEditor-user"])
        return instance.id, user.username


@SQLITE
def test_the_files_tab_shows_the_editor_instances_store_with_its_rights(editor_instance):
    instance_id, username = editor_instance
    editor = FakeEditorFiles(username, instance_id)
    editor._refresh_files()
    assert editor.files_error == ""
    assert editor.can_read_files and editor.can_upload  # data.feature.graphicalEditor.file, not the Workspace's
    assert [f["path"] for f in editor.folders] == ["/in"]
    editor.folder = "/in"
    editor._refresh_files()
    [row] = editor.files
    assert row["path"] == "/in/receipt.txt"
    assert not row["may_delete"] and not row["may_rename"]  # the admin's file: a user changes only their own


@SQLITE
def test_use_file_puts_the_path_into_the_selected_nodes_parameter_as_text(editor_instance):
    editor = FakeEditorFiles("admin", editor_instance[0])
    editor.use_file("/in/receipt.txt", "path")
    assert editor.set_calls == []  # no node selected
    editor.selected_node, editor.param_fields = "look", _fields("ai.describeImage")
    editor.use_file("/in/receipt.txt", "path")
    assert editor.set_calls == [("path", "text", "/in/receipt.txt")]
    assert editor.files_notice == "/in/receipt.txt is now the node's path." and editor.form_revision == 1
    editor.selected_node, editor.param_fields = "shape", _fields("context.transform")
    editor.use_file("/in/receipt.txt", "data")  # a field of kind any: still stored as text
    assert editor.set_calls[-1] == ("data", "text", "/in/receipt.txt")
    editor.use_file("/in/receipt.txt", "nope")
    assert editor.files_error == "The selected node has no parameter 'nope'." and len(editor.set_calls) == 2


def test_the_pickable_fields_are_the_ones_taking_a_file():
    assert file_fields(_fields("ai.describeImage")) == ["path"]  # not imageBase64
    assert file_fields(_fields("ai.speechToText")) == ["path"]  # not the format's filename
    assert file_fields(_fields("ai.generateImage")) == ["saveAs"]
    assert file_fields(_fields("file.create")) == ["path"]
    assert file_fields(_fields("ai.renderDocument")) == ["folder"]
    assert file_fields(_fields("trigger.webhook"), trigger=True) == []  # its path is a URL
    assert file_fields(_fields("core.readUrl")) == ["url"]  # no file field: every text field
    assert "folder" in file_fields(_fields("email.checkEmail"))
