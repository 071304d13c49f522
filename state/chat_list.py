"""The chats list of a page with an agent chat (the Workspace, the CommCoach): the rows with what the
user may do to them, opening a chat with its history, a new chat, rename and delete.

The page's state mixes :class:`ChatListMixin` in before state.agent_chat.AgentChatMixin and
implements `_chat_door(session, user)`: its feature's door (backend/features/<code>/interface.py),
which has `chat_rows()`, `chat_history(chat_id)`, `rename_chat(chat_id, title)` and
`delete_chat(chat_id)` and checks every right server-side. The handlers declare the agent
chats' items (backend.agent.service.AgentChats, `data.feature.{featureCode}.chat`), which those
door methods enforce for the page's feature.
"""

from __future__ import annotations

from typing import Any, TypedDict

import reflex as rx
from sqlmodel import Session

from backend.agent.service import AgentChats, ChatHistory
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
    """`class XState(InstanceChoiceMixin, ChatListMixin, AgentChatMixin, RenameMixin, PageMixin, AuthState)`.

    Hooks: `_chat_door(session, user)` (required) and `_chat_shown(history)`, called with the chat
    just opened, or None when no chat is open any more (default: nothing).
    """

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

    # --- loading --------------------------------------------------------------------------------

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
