"""State of the Workspace page: the user's Workspace instance, its chats and the agent's stream.

The Workspace's door (backend/features/workspace/interface.py) checks every right server-side
and hands over the rows with what the user may do to them; this state only shows them.
Sending, streaming (in a background event handler), retrying and stopping are
state.agent_chat.AgentChatMixin's, shared with the Graphical Editor's chat sidebar.
"""

from __future__ import annotations

from typing import TypedDict

import reflex as rx

from backend import auth
from backend.agent.service import AgentRequest
from backend.config import get_settings
from backend.db import session_scope
from backend.errors import DomainError
from backend.features.workspace.interface import WorkspaceInterface, get_interface
from state.agent_chat import AgentChatMixin
from state.auth import WORKSPACE, AuthState, NotSignedIn
from state.chat_items import ChatItem, items_of_run
from state.instance_choice import InstanceChoiceMixin
from state.page import PageMixin, RenameMixin, user_message
from state.permissions import requires, requires_door
from state.sources import SourcesMixin
from state.workspace_files import FilesMixin, attachment_appendix

NO_USE_AGENT = "Your roles let you read the chats here but not talk to the agent (useAgent is not granted)."
FOREIGN_CHAT = "This chat belongs to another user: you can read it but not continue it."


class ChatRow(TypedDict):
    id: str
    title: str
    modified: str
    may_rename: bool
    may_delete: bool


def _prepare(token: str, instance_id: str, prompt: str, chat_id: str) -> AgentRequest:
    with session_scope() as session:
        user = auth.user_for_token(session, token)
        if user is None:
            raise NotSignedIn()
        return get_interface(user, None, instance_id, session).prepare_run(prompt, chat_id or None)


class WorkspaceState(InstanceChoiceMixin, AgentChatMixin, FilesMixin, SourcesMixin, RenameMixin, PageMixin, AuthState):
    """What the Workspace page shows: chats, the open chat, the stream, the chat bar and the UDB's files,
    of the Workspace instance its header names."""

    instance_id: str = ""
    instance_label: str = ""
    chats: list[ChatRow] = []
    chat_is_mine: bool = True
    delete_id: str = ""
    delete_title: str = ""

    _no_agent_reason = NO_USE_AGENT

    def _chat_closed_reason(self) -> str:
        return "" if self.chat_is_mine else FOREIGN_CHAT

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
                    self.chat_id, self.chat_title, self.messages, self.chat_is_mine = "", "", [], True
        if self.udb_tab == "files":
            self._refresh_files()
        self.loaded = True

    def _load_chats(self, iface: WorkspaceInterface) -> None:
        try:
            chats = iface.chat_rows()
        except DomainError:  # no read right on chats: the page shows none
            chats = []
        self.chats = [
            ChatRow(id=c.id, title=c.title or "(untitled)", modified=c.sys_modified_at.strftime("%Y-%m-%d %H:%M"),
                    may_rename=c.can_rename, may_delete=c.can_delete)
            for c in chats
        ]

    def _load_history(self, chat_id: str) -> None:
        with self._user_session() as (session, user):
            history = get_interface(user, None, self.instance_id, session).chat_history(chat_id)
            messages: list[ChatItem] = []
            for run, steps in history.runs:
                messages += items_of_run(run, steps)
            self.chat_id, self.chat_title = history.chat.id, history.chat.title
            self.chat_is_mine = history.mine
            self.messages = messages

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
        self.chat_id, self.chat_title, self.messages, self.chat_is_mine = "", "", [], True
        self.attachments = []
        self.rename_id = self.delete_id = ""
        self.folder = "/"
        self.search_query, self.search_hits, self.searched = "", [], False
        self.preview_path = self.file_rename_path = self.file_delete_path = ""

    @rx.event
    @requires_door(WorkspaceInterface.chat_history)
    def open_chat(self, chat_id: str):
        """Show a chat with its history; sending continues it."""
        if self.streaming:
            self.error = "Wait for the answer or stop it before opening another chat."
            return None
        self.error = self.notice = ""
        try:
            self._load_history(chat_id)
        except NotSignedIn:
            return self._signed_out()
        except DomainError as exc:
            self.error = user_message(exc)
        return None

    @rx.event
    @requires("ui")
    def new_chat(self):
        """Start an empty chat; it is created with its first prompt."""
        if self.streaming:
            self.error = "Wait for the answer or stop it before starting a new chat."
            return
        self.chat_id, self.chat_title, self.messages, self.chat_is_mine = "", "", [], True
        self.error = self.notice = ""

    # --- the agent chat (AgentChatMixin's hooks) ------------------------------------------------

    def _agent_request(self, token: str, prompt: str, chat_id: str) -> AgentRequest:
        return _prepare(token, self.instance_id, prompt, chat_id)

    def _prompt_appendix(self) -> str:
        appendix = attachment_appendix(self.attachments)
        self.attachments = []
        return appendix

    def _on_agent_finished(self) -> None:
        self._reload_chats()

    def _reload_chats(self) -> None:
        try:
            with self._user_session() as (session, user):
                self._load_chats(get_interface(user, None, self.instance_id, session))
        except (NotSignedIn, DomainError):
            pass

    # --- rename and delete ----------------------------------------------------------------------


    @rx.event
    @requires_door(WorkspaceInterface.rename_chat)
    def save_rename(self):
        """Give the chat being edited its new title."""
        chat_id, title = self.rename_id, self.rename_value
        ok, event = self._attempt(
            lambda session, user: get_interface(user, None, self.instance_id, session).rename_chat(chat_id, title),
            success=f"Renamed to '{title.strip()}'.")
        if ok:
            self.rename_id = ""
            if chat_id == self.chat_id:
                self.chat_title = title.strip()
        return event

    @rx.event
    @requires("ui")
    def ask_delete(self, chat_id: str, title: str):
        self.delete_id, self.delete_title = chat_id, title

    @rx.event
    @requires("ui")
    def cancel_delete(self):
        self.delete_id, self.delete_title = "", ""

    @rx.event
    @requires_door(WorkspaceInterface.delete_chat)
    def confirm_delete(self):
        """Delete the chat the dialog asked about, with its runs and traces."""
        chat_id, title = self.delete_id, self.delete_title
        self.delete_id = ""
        if chat_id == self.chat_id and self.streaming:
            self.error = "This chat's answer is still streaming: stop it first."
            return None
        ok, event = self._attempt(
            lambda session, user: get_interface(user, None, self.instance_id, session).delete_chat(chat_id),
            success=f"Deleted '{title}'.")
        if ok and chat_id == self.chat_id:
            self.chat_id, self.chat_title, self.messages, self.chat_is_mine = "", "", [], True
        return event
