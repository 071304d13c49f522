"""State of the Workspace page: the user's Workspace instance, its chats and the agent's stream.

The Workspace's door (backend/features/workspace/interface.py) checks every right server-side
and hands over the rows with what the user may do to them; this state only shows them.
Sending, streaming (in a background event handler), retrying and stopping are
state.agent_chat.AgentChatMixin's, shared with the Graphical Editor's chat sidebar; the chats list
(open, new, rename, delete) is state.chat_list.ChatListMixin's, shared with the CommCoach and the Chatbot.
"""

from __future__ import annotations

from sqlmodel import Session

from backend.db.models import User
from backend.features.workspace.interface import WorkspaceInterface, get_interface
from state.agent_chat import AgentChatMixin
from state.auth import WORKSPACE, AuthState
from state.chat_list import FOREIGN_CHAT, ChatListMixin, ChatRow
from state.instance_choice import InstanceChoiceMixin
from state.page import PageMixin, RenameMixin
from state.sources import SourcesMixin
from state.workspace_files import FilesMixin, attachment_appendix

NO_USE_AGENT = "Your roles let you read the chats here but not talk to the agent (useAgent is not granted)."
__all__ = ["FOREIGN_CHAT", "NO_USE_AGENT", "ChatRow", "WorkspaceState"]


class WorkspaceState(ChatListMixin, InstanceChoiceMixin, AgentChatMixin, FilesMixin, SourcesMixin, RenameMixin,
                     PageMixin, AuthState):
    """What the Workspace page shows: chats, the open chat, the stream, the chat bar and the UDB's files,
    of the Workspace instance its header names."""

    _no_agent_reason = NO_USE_AGENT
    _instance_noun = "Workspace"

    def _chat_door(self, session: Session, user: User) -> WorkspaceInterface:
        """The Workspace's door (ChatListMixin's hook)."""
        return get_interface(user, None, self.instance_id, session)

    # --- loading --------------------------------------------------------------------------------

    def _refresh(self) -> None:
        with self._user_session() as (session, user):
            self._show_instance_chats(session, user)
        if self.udb_tab == "files":
            self._refresh_files()
        self.loaded = True

    def _instance_changed(self) -> None:
        """`load` found another instance chosen meanwhile: show its files from the top folder."""
        if self.udb_tab == "files":
            self._refresh_files()

    # --- the header's instance (InstanceChoiceMixin's hooks) -------------------------------------

    def _instance_feature_code(self) -> str:
        return WORKSPACE

    def _leave_instance(self) -> None:
        """Forget what belonged to the instance shown so far: the open chat, the attachments, the
        open folder, a search, a preview, a rename or delete under way."""
        self._close_chat()
        self.attachments = []
        self.rename_id = self.delete_id = ""
        self.folder = "/"
        self.search_query, self.search_hits, self.searched = "", [], False
        self.preview_path = self.file_rename_path = self.file_delete_path = ""

    # --- the agent chat (AgentChatMixin's hook) -------------------------------------------------

    def _prompt_appendix(self) -> str:
        appendix = attachment_appendix(self.attachments)
        self.attachments = []
        return appendix
