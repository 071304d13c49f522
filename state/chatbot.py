"""State of the Chatbot page: the user's Chatbot instance, its chats, the agent's stream and, for those
who may configure it, its settings.

The Chatbot's door (backend/features/chatbot/interface.py) checks every right server-side and hands
over the rows; this state only shows them. Sending, streaming, retrying and stopping are
state.agent_chat.AgentChatMixin's, shared with the Workspace.
"""

from __future__ import annotations

import io
from typing import TypedDict

import reflex as rx

from backend import auth
from backend.agent.service import AgentRequest
from backend.config import get_settings
from backend.connectors.kinds.sql import TYPE_ID as SQL_TYPE
from backend.connectors.store import usable_connections
from backend.db import session_scope
from backend.errors import DomainError
from backend.features.chatbot.interface import ChatbotInterface, get_interface
from backend.features.chatbot.source import table_name
from state.agent_chat import AgentChatMixin
from state.auth import CHATBOT, AuthState, NotSignedIn
from state.chat_items import ChatItem, items_of_run
from state.instance_choice import InstanceChoiceMixin
from state.page import PageMixin, user_message
from state.permissions import requires, requires_door

NO_USE_AGENT = "Your roles let you read the chats here but not ask the chatbot (useAgent is not granted)."
FOREIGN_CHAT = "This chat belongs to another user: you can read it but not continue it."


class ChatRow(TypedDict):
    id: str
    title: str
    modified: str


class Option(TypedDict):
    value: str
    label: str


def _prepare(token: str, instance_id: str, prompt: str, chat_id: str) -> AgentRequest:
    with session_scope() as session:
        user = auth.user_for_token(session, token)
        if user is None:
            raise NotSignedIn()
        return get_interface(user, None, instance_id, session).prepare_run(prompt, chat_id or None)


class ChatbotState(InstanceChoiceMixin, AgentChatMixin, PageMixin, AuthState):
    """What the Chatbot page shows: chats, the open chat, the stream, the chat bar and the settings."""

    instance_id: str = ""
    instance_label: str = ""
    chats: list[ChatRow] = []
    chat_is_mine: bool = True
    can_configure: bool = False
    show_settings: bool = False
    # the settings form
    system_prompt: str = ""
    data_source: str = "tables"
    connection_id: str = ""
    allowed_tables: str = ""
    row_limit: str = "200"
    time_limit: str = "5"
    connection_options: list[Option] = []
    table_files: list[str] = []
    embed_enabled: bool = False

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
            self.chats, self.can_use_agent, self.can_configure = [], False, False
            if iface is None:
                self.chat_id, self.messages = "", []
                return
            self.can_use_agent = iface.can_use_agent()
            self.can_configure = iface.can_configure()
            self._load_chats(iface)
            if self.chat_id and self.chat_id not in {c["id"] for c in self.chats}:
                self.chat_id, self.chat_title, self.messages, self.chat_is_mine = "", "", [], True
            if self.can_configure:
                self._load_settings(iface, session, user)
        self.loaded = True

    def _load_chats(self, iface: ChatbotInterface) -> None:
        try:
            chats = iface.chat_rows()
        except DomainError:  # no read right on chats: the page shows none
            chats = []
        self.chats = [ChatRow(id=c.id, title=c.title or "(untitled)",
                              modified=c.sys_modified_at.strftime("%Y-%m-%d %H:%M")) for c in chats]

    def _load_settings(self, iface: ChatbotInterface, session, user) -> None:
        view = iface.get_config()
        config = view.config
        self.system_prompt, self.data_source = config.system_prompt, config.data_source
        self.connection_id = config.connection_id or ""
        self.allowed_tables = ", ".join(config.allowed_tables)
        self.row_limit, self.time_limit = str(config.row_limit), f"{config.time_limit_seconds:g}"
        self.embed_enabled = view.embed_enabled
        self.connection_options = [Option(value=c.id, label=c.label)
                                   for c in usable_connections(session, user, [SQL_TYPE], active_only=True)]
        self.table_files = [f"{e.name} → {table_name(e.name)}" for e in iface.table_files()]

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
    @requires_door(ChatbotInterface.chat_rows)
    def load(self):
        """on_load: check the sign-in, then the user's current Chatbot instance, its chats and the open chat."""
        previous = self.instance_id
        if not self.streaming:
            self.instance_id = ""
        event = self._reload()
        if previous and self.instance_id != previous:
            self._leave_instance()
        return event

    # --- the header's instance (InstanceChoiceMixin's hooks) -------------------------------------

    def _instance_feature_code(self) -> str:
        return CHATBOT

    def _instance_switch_blocked(self) -> str:
        return "Wait for the answer or stop it before switching to another Chatbot." if self.streaming else ""

    def _instance_switched(self, instance_id: str):
        self._leave_instance()
        self.instance_id = instance_id
        return self._reload()

    def _leave_instance(self) -> None:
        self.chat_id, self.chat_title, self.messages, self.chat_is_mine = "", "", [], True
        self.show_settings = False

    @rx.event
    @requires_door(ChatbotInterface.chat_history)
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

    def _on_agent_finished(self) -> None:
        self._reload_chats()

    def _reload_chats(self) -> None:
        try:
            with self._user_session() as (session, user):
                self._load_chats(get_interface(user, None, self.instance_id, session))
        except (NotSignedIn, DomainError):
            pass

    # --- settings ---------------------------------------------------------------------------------

    @rx.event
    @requires("ui")
    def toggle_settings(self):
        self.show_settings = not self.show_settings

    @rx.event
    @requires("ui")
    def set_system_prompt(self, value: str):
        self.system_prompt = value

    @rx.event
    @requires("ui")
    def set_data_source(self, value: str):
        self.data_source = value

    @rx.event
    @requires("ui")
    def set_connection_id(self, value: str):
        self.connection_id = value

    @rx.event
    @requires("ui")
    def set_allowed_tables(self, value: str):
        self.allowed_tables = value

    @rx.event
    @requires("ui")
    def set_row_limit(self, value: str):
        self.row_limit = value

    @rx.event
    @requires("ui")
    def set_time_limit(self, value: str):
        self.time_limit = value

    def _settings_body(self) -> dict:
        def number(text: str) -> object:
            try:
                return float(text) if "." in text else int(text)
            except ValueError:
                return text  # the door names the field and the expected form
        return {"systemPrompt": self.system_prompt, "dataSource": self.data_source,
                "connectionId": self.connection_id or None,
                "allowedTables": [t.strip() for t in self.allowed_tables.split(",") if t.strip()],
                "rowLimit": number(self.row_limit.strip()), "timeLimitSeconds": number(self.time_limit.strip())}

    @rx.event
    @requires_door(ChatbotInterface.upload_table)
    async def upload_table(self, uploads: list[rx.UploadFile]):
        """Store dropped CSV/XLSX files in /tables (the door checks type, content and size)."""
        stored, problems = [], []
        for upload in uploads or []:
            name = (upload.name or "upload").replace("\\", "/").rsplit("/", 1)[-1]
            data = io.BytesIO(await upload.read())
            ok, _event = self._attempt(
                lambda session, user, data=data, name=name: get_interface(
                    user, None, self.instance_id, session).upload_table(data, name))
            (stored if ok else problems).append(name if ok else f"{name}: {self.error}")
        self.error = " ".join(problems)
        self.notice = f"Uploaded {', '.join(stored)}." if stored else ""

    @rx.event
    @requires_door(ChatbotInterface.configure)
    def save_settings(self):
        """Save the settings form (the door checks every field and names a wrong one)."""
        body = self._settings_body()
        _ok, event = self._attempt(
            lambda session, user: get_interface(user, None, self.instance_id, session).configure(body),
            success="Settings saved.")
        return event
