"""State of the Workspace page: the user's Workspace instance, its chats and the agent's stream.

The agent service (backend/agent/service.py) checks every right server-side; this state only
mirrors them so the page hides what the user may not do. Sending, streaming (in a background
event handler), retrying and stopping are state.agent_chat.AgentChatMixin's, shared with the
Graphical Editor's chat sidebar.
"""

from __future__ import annotations

from typing import TypedDict

import reflex as rx

from backend import auth
from backend.agent import service as agent_service
from backend.agent.service import AgentRequest
from backend.config import get_settings
from backend.db import session_scope
from backend.db.models import FeatureInstance
from backend.errors import DomainError
from backend.rbac.access import AccessContext
from backend.rbac.rights import RESOURCE, Level
from state.agent_chat import AgentChatMixin
from state.auth import WORKSPACE, AuthState, NotSignedIn
from state.chat_items import ChatItem, items_of_run
from state.page import PageMixin, RenameMixin, user_message
from state.permissions import requires
from state.workspace_files import FilesMixin, attachment_appendix

USE_AGENT = "resource.feature.workspace.useAgent"
CHAT_DATA = "data.feature.workspace.chat"
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
        return agent_service.prepare_run(AccessContext(session, user), instance_id, prompt, chat_id or None)


class WorkspaceState(AgentChatMixin, FilesMixin, RenameMixin, PageMixin, AuthState):
    """What the Workspace page shows: chats, the open chat, the stream, the chat bar and the UDB's files."""

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
            access = AccessContext(session, user)
            instances = access.visible_instances(WORKSPACE)
            instance = next((i for i in instances if i.id == self.instance_id), instances[0] if instances else None)
            self.instance_id = instance.id if instance else ""
            self.instance_label = instance.label if instance else ""
            self.provider_configured = bool(get_settings().ai_providers)
            self.chats = []
            self.can_use_agent = False
            if instance is None:
                self.chat_id, self.messages = "", []
            else:
                self.can_use_agent = access.resolve(RESOURCE, USE_AGENT, instance.mandate_id, instance.id).allowed
                self._load_chats(access, instance)
                if self.chat_id and self.chat_id not in {c["id"] for c in self.chats}:
                    self.chat_id, self.chat_title, self.messages, self.chat_is_mine = "", "", [], True
        if self.udb_tab == "files":
            self._refresh_files()
        self.loaded = True

    def _load_chats(self, access: AccessContext, instance: FeatureInstance) -> None:
        try:
            chats = agent_service.list_chats(access, instance.id)
        except DomainError:  # no read right on chats: the page shows none
            chats = []
        update = access.data_level(CHAT_DATA, "update", instance.mandate_id, instance.id)
        delete = access.data_level(CHAT_DATA, "delete", instance.mandate_id, instance.id)

        def allowed(level: Level, mine: bool) -> bool:
            return level == Level.ALL or (level == Level.OWN and mine)

        self.chats = [
            ChatRow(id=c.id, title=c.title or "(untitled)", modified=c.sys_modified_at.strftime("%Y-%m-%d %H:%M"),
                    may_rename=allowed(update, c.sys_created_by == access.user.id),
                    may_delete=allowed(delete, c.sys_created_by == access.user.id))
            for c in chats
        ]

    def _load_history(self, chat_id: str) -> None:
        with self._user_session() as (session, user):
            access = AccessContext(session, user)
            instance = access.require_instance(self.instance_id)
            chat = agent_service.get_chat(access, instance, chat_id)
            runs = list(reversed(agent_service.list_runs(access, self.instance_id, chat_id)))
            messages: list[ChatItem] = []
            for run in runs:
                messages += items_of_run(run, agent_service.run_steps(access, run))
            self.chat_id, self.chat_title = chat.id, chat.title
            self.chat_is_mine = chat.sys_created_by == user.id
            self.messages = messages

    @rx.event
    @requires("DATA", CHAT_DATA)
    def load(self):
        """on_load: check the sign-in, then the instance, its chats and the open chat."""
        return self._reload()

    @rx.event
    @requires("DATA", CHAT_DATA)
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
                access = AccessContext(session, user)
                self._load_chats(access, access.require_instance(self.instance_id))
        except (NotSignedIn, DomainError):
            pass

    # --- rename and delete ----------------------------------------------------------------------


    @rx.event
    @requires("DATA", CHAT_DATA)
    def save_rename(self):
        """Give the chat being edited its new title."""
        chat_id, title = self.rename_id, self.rename_value
        ok, event = self._attempt(
            lambda session, user: agent_service.rename_chat(AccessContext(session, user), self.instance_id,
                                                            chat_id, title),
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
    @requires("DATA", CHAT_DATA)
    def confirm_delete(self):
        """Delete the chat the dialog asked about, with its runs and traces."""
        chat_id, title = self.delete_id, self.delete_title
        self.delete_id = ""
        if chat_id == self.chat_id and self.streaming:
            self.error = "This chat's answer is still streaming: stop it first."
            return None
        ok, event = self._attempt(
            lambda session, user: agent_service.delete_chat(AccessContext(session, user), self.instance_id, chat_id),
            success=f"Deleted '{title}'.")
        if ok and chat_id == self.chat_id:
            self.chat_id, self.chat_title, self.messages, self.chat_is_mine = "", "", [], True
        return event
