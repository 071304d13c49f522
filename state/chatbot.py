"""State of the Chatbot page: the user's Chatbot instance, its chats, the agent's stream and, for those
who may configure it, its settings.

The Chatbot's door (backend/features/chatbot/interface.py) checks every right server-side and hands
over the rows; this state only shows them. The chats list (open, new, rename, delete) is
state.chat_list.ChatListMixin's and sending, streaming, retrying and stopping are
state.agent_chat.AgentChatMixin's, shared with the Workspace and the CommCoach.
"""

from __future__ import annotations

import io
from typing import TypedDict

import reflex as rx
from sqlmodel import Session

from backend.connectors.kinds.sql import TYPE_ID as SQL_TYPE
from backend.connectors.store import usable_connections
from backend.db.models import User
from backend.features.chatbot.interface import ChatbotInterface, get_interface
from backend.features.chatbot.source import table_name
from state.agent_chat import AgentChatMixin
from state.auth import CHATBOT, AuthState
from state.chat_list import ChatListMixin
from state.instance_choice import InstanceChoiceMixin
from state.page import PageMixin, RenameMixin
from state.permissions import requires, requires_door

NO_USE_AGENT = "Your roles let you read the chats here but not ask the chatbot (useAgent is not granted)."


class Option(TypedDict):
    value: str
    label: str


class ChatbotState(ChatListMixin, InstanceChoiceMixin, AgentChatMixin, RenameMixin, PageMixin, AuthState):
    """What the Chatbot page shows: chats, the open chat, the stream, the chat bar and the settings."""

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
    _instance_noun = "Chatbot"

    def _chat_door(self, session: Session, user: User) -> ChatbotInterface:
        """The Chatbot's door (ChatListMixin's hook)."""
        return get_interface(user, None, self.instance_id, session)

    # --- loading --------------------------------------------------------------------------------

    def _refresh(self) -> None:
        with self._user_session() as (session, user):
            iface = self._show_instance_chats(session, user)
            self.can_configure = iface.can_configure() if iface else False
            if self.can_configure:
                self._load_settings(iface, session, user)
        self.loaded = True

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

    # --- the header's instance (InstanceChoiceMixin's hooks) -------------------------------------

    def _instance_feature_code(self) -> str:
        return CHATBOT

    def _leave_instance(self) -> None:
        """Forget the open chat, a rename or delete under way and the settings panel."""
        super()._leave_instance()
        self.show_settings = False

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
                lambda session, user, data=data, name=name: self._chat_door(session, user).upload_table(data, name))
            (stored if ok else problems).append(name if ok else f"{name}: {self.error}")
        self.error = " ".join(problems)
        self.notice = f"Uploaded {', '.join(stored)}." if stored else ""

    @rx.event
    @requires_door(ChatbotInterface.configure)
    def save_settings(self):
        """Save the settings form (the door checks every field and names a wrong one)."""
        body = self._settings_body()
        _ok, event = self._attempt(
            lambda session, user: self._chat_door(session, user).configure(body),
            success="Settings saved.")
        return event
