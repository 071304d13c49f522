"""The Graphical Editor's AI chat sidebar (UC-4): the agent with the core and workflow toolboxes,
told the graph being edited in its system prompt. What its workflow tools change in the draft
appears on the canvas as the events arrive, and each change can be undone like the user's own.

Mixed into state.editor.EditorState, which provides `workflow_id`, `instance_id`, `panel_tab`
and `_graph_changed_elsewhere()` (reload the draft, push the previous graph on the undo stack,
republish the canvas).
"""

from __future__ import annotations

from typing import Any, TypedDict

import reflex as rx

from backend import auth
from backend.agent.runner import AgentEvent
from backend.agent.service import AgentRequest
from backend.config import get_settings
from backend.db import session_scope
from backend.errors import DomainError
from backend.features.graphical_editor.interface import GraphicalEditorInterface as Door
from backend.features.graphical_editor.interface import get_interface, interface_of_workflow
from state.agent_chat import NO_PROVIDER, AgentChatMixin
from state.auth import NotSignedIn
from state.chat_items import ChatItem, items_of_run
from state.page import user_message
from state.permissions import requires, requires_door

NO_USE_AGENT = "Your roles do not let you use the AI assistant in this editor (useAgent is not granted)."
ASK_AI_NO_PROVIDER = "Asking the AI about this error needs an AI provider. " + NO_PROVIDER
# The workflow toolbox's tools that change a draft (backend/actions/methods/workflow.py), by tool name.
GRAPH_TOOLS = frozenset({"workflow_addNode", "workflow_removeNode", "workflow_connectNodes",
                         "workflow_disconnectNodes", "workflow_setNodeParameter"})


class EditorChatRow(TypedDict):
    id: str
    title: str
    modified: str


def ai_help(providers: Any, can_use_agent: bool) -> tuple[bool, str]:
    """Whether the editor offers its AI help ("Ask AI about this error") and, when it does not,
    what it says instead: without an AI provider (`providers`, Settings.ai_providers) the missing
    provider is explained; without the useAgent right nothing is shown (the role says so)."""
    if not can_use_agent:
        return False, ""
    if not providers:
        return False, ASK_AI_NO_PROVIDER
    return True, ""


def changes_graph(event_type: str, data: dict[str, Any]) -> bool:
    """Whether an agent event says a workflow tool has just changed a draft."""
    return event_type == "tool.finished" and bool(data.get("ok")) and str(data.get("name") or "") in GRAPH_TOOLS


def editor_chat_rows(chats: list[Any], user_id: str) -> list[EditorChatRow]:
    """The user's own chats (AgentChat rows, newest first as listed) as the sidebar lists them."""
    return [EditorChatRow(id=c.id, title=c.title or "(untitled)", modified=c.sys_modified_at.strftime("%Y-%m-%d %H:%M"))
            for c in chats if c.sys_created_by == user_id]


def prepare_editor_run(token: str, workflow_id: str, prompt: str, chat_id: str) -> AgentRequest:
    """Check and prepare the editor agent's run about one workflow, as POST …/workflows/{id}/agent does:
    its system prompt holds the graph being edited (draft, else published; webhook secrets masked)."""
    with session_scope() as session:
        user = auth.user_for_token(session, token)
        if user is None:
            raise NotSignedIn()
        iface, workflow = interface_of_workflow(user, workflow_id, session)
        return iface.prepare_agent_run(workflow, prompt, chat_id or None)


class EditorChatMixin(AgentChatMixin, mixin=True):
    """The chat sidebar of the editor: the open chat, the user's chats in the instance, the rights."""

    chats: list[EditorChatRow] = []
    # "Ask AI about this error": offered, or why not (no AI provider configured).
    ai_help_offered: bool = False
    ai_help_note: str = ""

    _no_agent_reason = NO_USE_AGENT

    # --- loading (EditorState calls it while it loads the workflow) -----------------------------

    def _load_chat_rights(self, iface: Door, can_use_agent: bool) -> None:
        """The agent right in the workflow's instance, the provider, and the user's chats there."""
        providers = get_settings().ai_providers
        self.provider_configured = bool(providers)
        self.can_use_agent = can_use_agent
        self.ai_help_offered, self.ai_help_note = ai_help(providers, can_use_agent)
        self._load_editor_chats(iface)
        if self.chat_id and self.chat_id not in {c["id"] for c in self.chats} and not self.streaming:
            self._start_chat()

    def _load_editor_chats(self, iface: Door) -> None:
        try:
            chats = iface.own_chats()
        except DomainError:  # no read right on chats: none listed
            chats = []
        self.chats = editor_chat_rows(chats, iface.user.id)

    # --- AgentChatMixin's hooks -----------------------------------------------------------------

    def _agent_request(self, token: str, prompt: str, chat_id: str) -> AgentRequest:
        return prepare_editor_run(token, self.workflow_id, prompt, chat_id)

    def _on_agent_event(self, event: AgentEvent) -> None:
        if changes_graph(event.type, event.data):
            self._graph_changed_elsewhere()

    def _on_agent_finished(self) -> None:
        self._graph_changed_elsewhere()
        self._reload_chats()

    def _reload_chats(self) -> None:
        try:
            with self._user_session() as (session, user):
                self._load_editor_chats(get_interface(user, None, self.instance_id, session))
        except (NotSignedIn, DomainError):
            pass

    # --- asking from elsewhere on the page ------------------------------------------------------

    def _ask_ai(self, prompt: str):
        """Show the chat tab and send `prompt` (e.g. the test runner's "Ask AI about this error")."""
        self.panel_tab = "chat"
        return type(self).send({"prompt": prompt})

    # --- chats ----------------------------------------------------------------------------------

    @rx.event
    @requires("ui")
    def new_editor_chat(self):
        """Start an empty chat; it is created with its first prompt."""
        if self.streaming:
            self.error = "Wait for the answer or stop it before starting a new chat."
            return
        self._start_chat()
        self.error = self.notice = ""

    @rx.event
    @requires_door(Door.own_chat)
    def open_editor_chat(self, chat_id: str):
        """Show one of the user's chats with its history; sending continues it."""
        if self.streaming:
            self.error = "Wait for the answer or stop it before opening another chat."
            return None
        self.error = self.notice = ""
        try:
            with self._user_session() as (session, user):
                history = get_interface(user, None, self.instance_id, session).own_chat(chat_id)
                chat = history.chat
                messages: list[ChatItem] = []
                for run, steps in history.runs:
                    messages += items_of_run(run, steps)
                self.chat_id, self.chat_title, self.messages = chat.id, chat.title, messages
        except NotSignedIn:
            return self._signed_out()
        except DomainError as exc:
            self.error = user_message(exc)
        return None
