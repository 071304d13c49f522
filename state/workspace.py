"""State of the Workspace page: the user's Workspace instance, its chats and the agent's stream.

The Workspace's door (backend/features/workspace/interface.py) checks every right server-side
and hands over the rows with what the user may do to them; this state only shows them.
Sending, streaming (in a background event handler), retrying and stopping are
state.agent_chat.AgentChatMixin's, shared with the Graphical Editor's chat sidebar; the chats list
(open, new, rename, delete) is state.chat_list.ChatListMixin's, shared with the CommCoach.
"""

from __future__ import annotations

import reflex as rx
from sqlmodel import Session

from backend import auth
from backend.agent.service import AgentRequest
from backend.config import get_settings
from backend.db import session_scope
from backend.db.models import User
from backend.features.workspace.interface import WorkspaceInterface, get_interface
from state.agent_chat import AgentChatMixin
from state.auth import WORKSPACE, AuthState, NotSignedIn
from state.chat_list import FOREIGN_CHAT, ChatListMixin, ChatRow
from state.instance_choice import InstanceChoiceMixin
from state.page import PageMixin, RenameMixin
from state.permissions import requires_door
from state.sources import SourcesMixin
from state.workspace_files import FilesMixin, attachment_appendix

NO_USE_AGENT = "Your roles let you read the chats here but not talk to the agent (useAgent is not granted)."
__all__ = ["FOREIGN_CHAT", "NO_USE_AGENT", "ChatRow", "WorkspaceState"]


def _prepare(token: str, instance_id: str, prompt: str, chat_id: str) -> AgentRequest:
    with session_scope() as session:
        user = auth.user_for_token(session, token)
        if user is None:
            raise NotSignedIn()
        return get_interface(user, None, instance_id, session).prepare_run(prompt, chat_id or None)


class WorkspaceState(InstanceChoiceMixin, ChatListMixin, AgentChatMixin, FilesMixin, SourcesMixin, RenameMixin,
                     PageMixin, AuthState):
    """What the Workspace page shows: chats, the open chat, the stream, the chat bar and the UDB's files,
    of the Workspace instance its header names."""

    instance_id: str = ""
    instance_label: str = ""

    _no_agent_reason = NO_USE_AGENT

    def _chat_door(self, session: Session, user: User) -> WorkspaceInterface:
        """The Workspace's door (ChatListMixin's hook)."""
        return get_interface(user, None, self.instance_id, session)

    # --- loading --------------------------------------------------------------------------------

    def _refresh(self) -> None:
        with self._user_session() as (session, user):
            self._load_navigation(session, user)
            chosen = self._current_instance(session, user, self.instance_id)
            iface = get_interface(user, None, chosen.id, session) if chosen else None
            self.instance_id = iface.instance.id if iface else ""
            self.instance_label = iface.instance.label if iface else ""
            self.provider_configured = bool(get_settings().ai_providers)
            self.chats = []
            self.can_use_agent = False
            if iface is None:
                self.chat_id, self.messages = "", []
            else:
                self.can_use_agent = iface.can_use_agent()
                self._load_chats(iface)
                if self.chat_id and self.chat_id not in {c["id"] for c in self.chats}:
                    self._close_chat()
        if self.udb_tab == "files":
            self._refresh_files()
        self.loaded = True

    @rx.event
    @requires_door(WorkspaceInterface.chat_rows)
    def load(self):
        """on_load: check the sign-in, then the user's current instance (the one they chose or used
        last: the header names it), its chats and the open chat."""
        previous = self.instance_id
        if not self.streaming:
            self.instance_id = ""
        event = self._reload()
        if previous and self.instance_id != previous:  # chosen in another tab or page meanwhile
            self._leave_instance()
            if self.udb_tab == "files":
                self._refresh_files()
        return event

    # --- the header's instance (InstanceChoiceMixin's hooks) -------------------------------------

    def _instance_feature_code(self) -> str:
        return WORKSPACE

    def _instance_switch_blocked(self) -> str:
        return "Wait for the answer or stop it before switching to another Workspace." if self.streaming else ""

    def _instance_switched(self, instance_id: str):
        """The header switched to another Workspace instance: its chats and files, no open chat."""
        self._leave_instance()
        self.instance_id = instance_id
        return self._reload()

    def _leave_instance(self) -> None:
        """Forget what belonged to the instance shown so far: the open chat, the attachments, the
        open folder, a search, a preview, a rename or delete under way."""
        self._close_chat()
        self.attachments = []
        self.rename_id = self.delete_id = ""
        self.folder = "/"
        self.search_query, self.search_hits, self.searched = "", [], False
        self.preview_path = self.file_rename_path = self.file_delete_path = ""

    # --- the agent chat (AgentChatMixin's hooks) ------------------------------------------------

    def _agent_request(self, token: str, prompt: str, chat_id: str) -> AgentRequest:
        return _prepare(token, self.instance_id, prompt, chat_id)

    def _prompt_appendix(self) -> str:
        appendix = attachment_appendix(self.attachments)
        self.attachments = []
        return appendix

    def _on_agent_finished(self) -> None:
        self._reload_chats()
