"""The chats list of a page with an agent chat (the Workspace, the CommCoach, the Chatbot): loading
the header's instance with its chats, the rows with what the user may do to them, opening a chat
with its history, a new chat, rename and delete, and starting the agent's run.

The page's state mixes :class:`ChatListMixin` in before state.agent_chat.AgentChatMixin and
implements `_chat_door(session, user)`: its feature's door (backend/features/<code>/interface.py,
built on backend.features.chat_door), which has `can_use_agent()`, `prepare_run(prompt, chat_id)`,
`chat_rows()`, `chat_history(chat_id)`, `rename_chat(chat_id, title)` and `delete_chat(chat_id)`
and checks every right server-side. The handlers declare the agent chats' items
(backend.agent.service.AgentChats, `data.feature.{featureCode}.chat`), which those door methods
enforce for the page's feature.
"""

from __future__ import annotations

from typing import Any, TypedDict

import reflex as rx
from sqlmodel import Session

from backend import auth
from backend.agent.service import AgentChats, AgentRequest, ChatHistory
from backend.config import get_settings
from backend.db import session_scope
from backend.db.models import User
from backend.errors import DomainError
from state.auth import NotSignedIn
from state.chat_items import ChatItem, items_of_run
from state.page import user_message
from state.permissions import requires, requires_door

FOREIGN_CHAT = "This chat belongs to another user: you can read it but not continue it."


class ChatRow(TypedDict):
    id: str
    title: str
    modified: str
    may_rename: bool
    may_delete: bool


def chat_rows(door: Any) -> list[ChatRow]:
    """The chats `door` lets the user read, as the list shows them (none without the read right)."""
    try:
        chats = door.chat_rows()
    except DomainError:  # no read right on chats: the page shows none
        chats = []
    return [ChatRow(id=c.id, title=c.title or "(untitled)", modified=c.sys_modified_at.strftime("%Y-%m-%d %H:%M"),
                    may_rename=c.can_rename, may_delete=c.can_delete)
            for c in chats]


class ChatListMixin(rx.State, mixin=True):
    """`class XState(ChatListMixin, InstanceChoiceMixin, AgentChatMixin, RenameMixin, PageMixin, AuthState)`
    (first, so its InstanceChoiceMixin hooks are the ones used).

    Hooks: `_chat_door(session, user)` (required); `_chat_shown(history)`, called with the chat
    just opened, or None when no chat is open any more (default: nothing); `_leave_instance()`,
    forgetting what belonged to the instance shown so far (default: the open chat, a rename or
    delete under way); `_instance_changed()`, after `load` found another instance chosen
    meanwhile (default: nothing). The page's `_refresh` calls :meth:`_show_instance_chats`, and
    `_instance_noun` names its instances where the header may not switch yet.
    """

    instance_id: str = ""
    instance_label: str = ""
    chats: list[ChatRow] = []
    chat_is_mine: bool = True
    delete_id: str = ""
    delete_title: str = ""

    # --- hooks ----------------------------------------------------------------------------------

    def _chat_door(self, session: Session, user: User) -> Any:
        raise NotImplementedError

    def _chat_shown(self, history: ChatHistory | None) -> None:
        return None

    def _chat_closed_reason(self) -> str:
        return "" if self.chat_is_mine else FOREIGN_CHAT

    def _leave_instance(self) -> None:
        self._close_chat()
        self.rename_id = self.delete_id = ""

    def _instance_changed(self) -> None:
        return None

    _instance_noun = "instance"

    # --- the header's instance (InstanceChoiceMixin's hooks) -------------------------------------

    def _instance_switch_blocked(self) -> str:
        return f"Wait for the answer or stop it before switching to another {self._instance_noun}." \
            if self.streaming else ""

    def _instance_switched(self, instance_id: str):
        """The header switched to another instance: its chats (and the page's own data), no open chat."""
        self._leave_instance()
        self.instance_id = instance_id
        return self._reload()

    # --- AgentChatMixin's hooks -------------------------------------------------------------------

    def _agent_request(self, token: str, prompt: str, chat_id: str) -> AgentRequest:
        """Check the prompt and create (or continue) its chat through the door, as the token's user."""
        with session_scope() as session:
            user = auth.user_for_token(session, token)
            if user is None:
                raise NotSignedIn()
            return self._chat_door(session, user).prepare_run(prompt, chat_id or None)

    def _on_agent_finished(self) -> None:
        self._reload_chats()

    # --- loading --------------------------------------------------------------------------------

    @rx.event
    @requires_door(AgentChats.chat_summaries)
    def load(self):
        """on_load: check the sign-in, then the user's current instance (the one they chose or used
        last: the header names it), its chats and the open chat."""
        previous = self.instance_id
        if not self.streaming:
            self.instance_id = ""
        event = self._reload()
        if previous and self.instance_id != previous:  # chosen in another tab or page meanwhile
            self._leave_instance()
            self._instance_changed()
        return event

    def _show_instance_chats(self, session: Session, user: User) -> Any:
        """Show the header's instance (InstanceChoiceMixin) with its chats and whether the user may
        talk to the agent; a chat no longer listed is closed. Its door, or None without an instance."""
        self._load_navigation(session, user)
        chosen = self._current_instance(session, user, self.instance_id)
        self.instance_id = chosen.id if chosen else ""
        door = self._chat_door(session, user) if chosen else None
        self.instance_label = door.instance.label if door else ""
        self.provider_configured = bool(get_settings().ai_providers)
        self.chats, self.can_use_agent = [], False
        if door is None:
            self._close_chat()
            return None
        self.can_use_agent = door.can_use_agent()
        self._load_chats(door)
        if self.chat_id and self.chat_id not in {c["id"] for c in self.chats}:
            self._close_chat()
        return door

    def _close_chat(self) -> None:
        """No chat open: the next prompt starts a new one."""
        self.chat_id, self.chat_title, self.messages, self.chat_is_mine = "", "", [], True
        self._chat_shown(None)

    def _load_chats(self, door: Any) -> None:
        self.chats = chat_rows(door)

    def _load_history(self, chat_id: str) -> None:
        with self._user_session() as (session, user):
            history = self._chat_door(session, user).chat_history(chat_id)
            messages: list[ChatItem] = []
            for run, steps in history.runs:
                messages += items_of_run(run, steps)
            self.chat_id, self.chat_title = history.chat.id, history.chat.title
            self.chat_is_mine = history.mine
            self.messages = messages
            self._chat_shown(history)

    def _reload_chats(self) -> None:
        try:
            with self._user_session() as (session, user):
                self._load_chats(self._chat_door(session, user))
        except (NotSignedIn, DomainError):
            pass

    # --- opening and starting -------------------------------------------------------------------

    @rx.event
    @requires_door(AgentChats.chat_history)
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
        self._close_chat()
        self.error = self.notice = ""

    # --- rename and delete ----------------------------------------------------------------------

    @rx.event
    @requires_door(AgentChats.rename_chat)
    def save_rename(self):
        """Give the chat being edited its new title."""
        chat_id, title = self.rename_id, self.rename_value
        ok, event = self._attempt(lambda session, user: self._chat_door(session, user).rename_chat(chat_id, title),
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
    @requires_door(AgentChats.delete_chat)
    def confirm_delete(self):
        """Delete the chat the dialog asked about, with its runs and traces."""
        chat_id, title = self.delete_id, self.delete_title
        self.delete_id = ""
        if chat_id == self.chat_id and self.streaming:
            self.error = "This chat's answer is still streaming: stop it first."
            return None
        ok, event = self._attempt(lambda session, user: self._chat_door(session, user).delete_chat(chat_id),
                                  success=f"Deleted '{title}'.")
        if ok and chat_id == self.chat_id:
            self._close_chat()
        return event
