"""The editor's issue-16 fixes against the database: a node of every palette type, added as a drop
adds it, is a draft the Graphical Editor interface stores (a schedule is never refused); right
after Publish the Test run runs the published version on the canvas; the agent's addNode gets
the same defaults; and the editor's AI help follows the configured providers.
"""

from __future__ import annotations

import json
import uuid
from contextlib import contextmanager

from sqlmodel import select

from backend.config import reset_settings_cache
from backend.db import session_scope
from backend.db.models import FeatureInstance, User, Workflow
from backend.features.graphical_editor.interface import get_interface
from backend.workflows import graph_edit, service
from backend.workflows.node_types import palette
from state.editor_chat import ASK_AI_NO_PROVIDER, EditorChatMixin
from state.editor_runs import run_version
from tests.integration.test_workflow_toolbox import ok, tool

_EDITOR_INSTANCE = select(FeatureInstance).where(FeatureInstance.feature_code == "graphicalEditor")


@contextmanager
def admin_door():
    """The bootstrap admin's Graphical Editor interface, in one transaction."""
    with session_scope() as session:
        admin = session.exec(select(User).where(User.username == "admin")).one()
        instance = session.exec(_EDITOR_INSTANCE.order_by(FeatureInstance.sys_created_at)).first()
        yield get_interface(admin, None, instance.id, session)


def _new_workflow(graph: dict | None = None) -> str:
    with admin_door() as iface:
        return iface.create_workflow(f"first hour {uuid.uuid4().hex[:6]}", graph=graph).id


def test_a_node_of_every_palette_type_is_stored_in_the_draft(app_config):
    workflow_id = _new_workflow()
    with admin_door() as iface:
        workflow = iface.get_workflow(workflow_id)
        graph = iface.workflow_view(workflow).graph
        for kind in palette():  # as the canvas's drops add them, in the browser's time zone
            graph_edit.add_node(graph, kind.type, {"x": 0, "y": 0}, time_zone="Asia/Tokyo")
        saved = iface.save_draft(workflow, graph)
    stored = [n["type"] for n in saved.graph["nodes"]]
    assert sorted(stored) == sorted(["trigger.manual", *(k.type for k in palette())])
    schedule = next(n for n in saved.graph["nodes"] if n["type"] == "trigger.schedule")
    assert schedule["parameters"] == {"cron": "0 8 * * *", "timezone": "Asia/Tokyo"}


def test_right_after_publish_the_test_run_runs_the_published_graph(app_config):
    graph = {"nodes": [{"id": "start", "type": "trigger.manual"},
                       {"id": "shape", "type": "context.transform",
                        "parameters": {"data": "{{ input }}", "template": "got {{ n }}"}}],
             "edges": [{"source": "start", "target": "shape"}]}
    workflow_id = _new_workflow(graph)
    with admin_door() as iface:
        iface.change_version(iface.get_workflow(workflow_id), "publish")
    with admin_door() as iface:
        workflow = iface.get_workflow(workflow_id)
        edited = iface.workflow_view(workflow).edited  # what the reloaded editor shows: the published one
        assert edited.status == "published" and service.draft_version(iface.session, workflow) is None
        run = iface.start_run(workflow, {"n": 3}, run_version(edited.status), "full", wait_seconds=30)
        assert (run.status, run.version_id) == ("completed", edited.id)


def test_the_agents_add_node_gets_the_same_defaults(app_config):
    created = ok(tool("createWorkflow", name=f"agent first hour {uuid.uuid4().hex[:6]}", description=None))
    added = ok(tool("addNode", workflowId=created["workflowId"], type="trigger.schedule"))
    assert added["node"]["parameters"] == {"cron": "0 8 * * *", "timezone": "UTC"}
    with session_scope() as session:
        workflow = session.get(Workflow, created["workflowId"])
        stored = service.draft_version(session, workflow).graph
    assert json.dumps(stored).count("0 8 * * *") == 1


class FakeChat:
    """The vars EditorChatMixin._load_chat_rights sets and reads, with its methods."""

    _load_chat_rights = EditorChatMixin.__dict__["_load_chat_rights"]
    _load_editor_chats = EditorChatMixin.__dict__["_load_editor_chats"]

    def __init__(self):
        self.chat_id, self.streaming, self.chats = "", False, []
        self.provider_configured = self.can_use_agent = self.ai_help_offered = False
        self.ai_help_note = ""


def _chat_rights(monkeypatch, **environment: str) -> FakeChat:
    for name, value in {"OPENAI_API_KEY": "", "OPENAI_BASE_URL": "", "POWERON_AI_PROVIDERS": "",
                        **environment}.items():
        monkeypatch.setenv(name, value)
    reset_settings_cache()
    chat = FakeChat()
    with admin_door() as iface:
        chat._load_chat_rights(iface, True)
    return chat


def test_the_ai_help_follows_the_configured_providers(app_config, monkeypatch):
    without = _chat_rights(monkeypatch)
    assert not without.provider_configured and not without.ai_help_offered
    assert without.ai_help_note == ASK_AI_NO_PROVIDER
    with_one = _chat_rights(monkeypatch, OPENAI_API_KEY="sk-test", OPENAI_BASE_URL="http://127.0.0.1:9")
    assert with_one.provider_configured and with_one.ai_help_offered and with_one.ai_help_note == ""
