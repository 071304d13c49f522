"""State of the CommCoach page: the user's CommCoach instance, its chats, the open chat with its
session summary, the coach's stream and the persona's settings panel.

The CommCoach's door (backend/features/commcoach/interface.py) checks every right server-side;
this state only shows what it answers. The chats list is state.chat_list.ChatListMixin's and the
chat (sending, streaming, stopping) state.agent_chat.AgentChatMixin's — the Workspace's.
"""

from __future__ import annotations

import asyncio

import reflex as rx
from sqlmodel import Session

from backend import auth
from backend.agent.service import ChatHistory
from backend.db import session_scope
from backend.db.models import User
from backend.errors import DomainError
from backend.features.commcoach.interface import CommCoachInterface, get_interface
from state.agent_chat import AgentChatMixin
from state.auth import COMMCOACH, AuthState, NotSignedIn
from state.chat_list import ChatListMixin
from state.instance_choice import InstanceChoiceMixin
from state.page import PageMixin, RenameMixin, user_message
from state.permissions import requires, requires_door

NO_USE_AGENT = "Your roles let you read the coaching chats here but not talk to the coach (useAgent is not granted)."


def _summarise(token: str, instance_id: str, chat_id: str) -> str:
    """Write the chat's session summary with the AI model (a worker thread); the summary saved."""
    with session_scope() as session:
        user = auth.user_for_token(session, token)
        if user is None:
            raise NotSignedIn()
        return get_interface(user, None, instance_id, session).summarise_chat(chat_id).summary


class CoachState(ChatListMixin, InstanceChoiceMixin, AgentChatMixin, RenameMixin, PageMixin, AuthState):
    """What the Coach page shows: chats, the open chat and its summary, the stream, the chat bar and the
    persona, of the CommCoach instance its header names."""

    summary: str = ""
    summarising: bool = False
    can_summarise: bool = False
    persona: str = ""
    persona_draft: str = ""
    persona_is_default: bool = True
    can_configure: bool = False
    settings_open: bool = False

    _no_agent_reason = NO_USE_AGENT
    _instance_noun = "coach"

    def _chat_door(self, session: Session, user: User) -> CommCoachInterface:
        """The CommCoach's door (ChatListMixin's hook)."""
        return get_interface(user, None, self.instance_id, session)

    def _chat_shown(self, history: ChatHistory | None) -> None:
        """A chat was opened (its summary shows above it), or none is open any more."""
        self.summary = history.chat.summary if history else ""
        self._check_summarise()

    # --- loading --------------------------------------------------------------------------------

    def _refresh(self) -> None:
        with self._user_session() as (session, user):
            iface = self._show_instance_chats(session, user)
            self.can_configure = False
            if iface is not None:
                self._show_persona(iface)
                self._check_summarise()
        self.loaded = True

    def _check_summarise(self) -> None:
        """Whether the open chat may be summarised: the user may change it (as the list says)."""
        self.can_summarise = any(c["id"] == self.chat_id and c["may_rename"] for c in self.chats)

    def _show_persona(self, iface: CommCoachInterface) -> None:
        settings = iface.coach_settings()
        self.persona, self.persona_is_default = settings.system_prompt, settings.is_default
        self.can_configure = settings.can_configure
        if not self.settings_open:
            self.persona_draft = settings.system_prompt

    # --- the header's instance (InstanceChoiceMixin's hooks) -------------------------------------

    def _instance_feature_code(self) -> str:
        return COMMCOACH

    def _leave_instance(self) -> None:
        """Forget the open chat, a rename or delete under way and the settings panel."""
        super()._leave_instance()
        self.settings_open = False

    # --- the agent chat (AgentChatMixin's hooks) ------------------------------------------------

    def _on_agent_finished(self) -> None:
        self._reload_chats()
        self._check_summarise()

    # --- the session summary ----------------------------------------------------------------------

    @rx.event
    @requires_door(CommCoachInterface.summarise_chat)
    def summarise(self):
        """"Summarise session": ask the model for the open chat's summary (in the background)."""
        if not self.chat_id:
            self.error = "Open a chat to summarise its session."
            return None
        if self.streaming or self.summarising:
            self.error = "Wait for the answer before summarising the session."
            return None
        self.error = self.notice = ""
        self.summarising = True
        return CoachState.write_summary

    @rx.event(background=True)
    @requires_door(CommCoachInterface.summarise_chat)
    async def write_summary(self):
        """Write and save the open chat's summary; it replaces the one shown."""
        async with self:
            token, instance_id, chat_id = self.token, self.instance_id, self.chat_id
        summary, error = "", ""
        try:
            summary = await asyncio.to_thread(_summarise, token, instance_id, chat_id)
        except NotSignedIn:
            error = "Not signed in."
        except DomainError as exc:
            error = f"The session could not be summarised: {user_message(exc)}"
        async with self:
            self.summarising = False
            if self.chat_id != chat_id:  # another chat was opened meanwhile: its own summary stays
                return
            if error:
                self.error = error
            else:
                self.summary, self.notice = summary, "Session summarised."

    # --- the persona (settings panel) ---------------------------------------------------------------

    @rx.event
    @requires("ui")
    def open_settings(self):
        self.persona_draft, self.settings_open = self.persona, True
        self.error = self.notice = ""

    @rx.event
    @requires("ui")
    def close_settings(self):
        self.settings_open = False

    @rx.event
    @requires("ui")
    def settings_open_changed(self, is_open: bool):
        """The dialog's own closing (Escape, a click outside): nothing is saved."""
        self.settings_open = bool(is_open)

    @rx.event
    @requires("ui")
    def set_persona_draft(self, value: str):
        self.persona_draft = value

    @rx.event
    @requires_door(CommCoachInterface.configure)
    def save_persona(self):
        """Save the draft as the instance's persona; the coach's next turn uses it."""
        draft = self.persona_draft
        ok, event = self._attempt(lambda session, user: self._chat_door(session, user).configure(draft),
                                  success="The coach's persona is saved; the next answer uses it.")
        if ok:
            self.settings_open = False
        return event

    @rx.event
    @requires_door(CommCoachInterface.configure)
    def restore_persona(self):
        """Go back to the default persona."""
        ok, event = self._attempt(lambda session, user: self._chat_door(session, user).configure(None),
                                  success="The coach uses the default persona again.")
        if ok:
            self.settings_open = False
        return event
