"""The door of one CommCoach instance: its coaching persona, its chats with the coach and their summaries.

Every read and write of a CommCoach's data from REST (backend/features/commcoach/routes.py) or
the UI (state/coach.py) goes through :class:`CommCoachInterface`. Its methods declare their
permission with the feature's items (main.py) and enforce it (backend/rbac/door.py). The chats
and runs are the platform's agent chats (backend.agent.service.AgentChats, which applies the
own/all rule); the persona is the instance's own setting (`FeatureInstance.settings`), and a
chat's summary is written by the AI gateway into `AgentChat.summary`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from sqlmodel import Session

from backend.agent.service import chat_history
from backend.ai import AiError, get_ai_client
from backend.db.models import AgentChat, User, utcnow
from backend.errors import Conflict, FieldError, Forbidden, InvalidInput
from backend.features.chat_door import chat_door
from backend.features.commcoach.main import (
    CHAT_DATA,
    CONFIGURE,
    DEFAULT_SYSTEM_PROMPT,
    FEATURE_CODE,
    OPEN,
    SYSTEM_PROMPT_LIMIT,
    USE_AGENT,
)
from backend.rbac.access import AccessContext
from backend.rbac.door import guarded
from backend.rbac.rights import DATA, RESOURCE, UI

SETTING = "systemPrompt"  # the key of the persona in FeatureInstance.settings
NO_TURNS = "this chat has no answered turns yet: talk with the coach first, then summarise the session"
SUMMARY_SYSTEM = (
    "You write the summary of a coaching session on communication skills for the person coached. "
    "Use only what the conversation says. Answer in the language of the conversation, in Markdown, "
    "with three short sections: '**Key topics**', '**What went well**' and '**What to practise next**' "
    "(each two to four bullet points). Address the person as 'you'. At most 180 words."
)


@dataclass(frozen=True)
class CoachSettings:
    """The coaching persona of an instance, as a settings panel shows it."""

    system_prompt: str
    is_default: bool
    can_configure: bool


class CommCoachInterface(chat_door(CHAT_DATA, USE_AGENT)):
    """The persona, chats and summaries of one CommCoach instance, authorised as one user.

    The agent and chat methods (can_use_agent, prepare_run, chat_rows, chat_history, rename_chat,
    delete_chat) come from backend.features.chat_door, guarded with the CommCoach's items.
    """

    # --- the persona (the instance's system prompt) ---------------------------------------------

    def system_prompt(self) -> str:
        """The persona the coach runs with: the instance's own, else the default."""
        own = (self.instance.settings or {}).get(SETTING)
        return own if isinstance(own, str) and own.strip() else DEFAULT_SYSTEM_PROMPT

    def can_configure(self) -> bool:
        """Whether the settings panel may save (configure is granted)."""
        return self.may_call(CommCoachInterface.configure)

    @guarded(UI, OPEN)
    def coach_settings(self) -> CoachSettings:
        """The instance's persona, whether it is the default, and whether the caller may change it."""
        own = (self.instance.settings or {}).get(SETTING)
        return CoachSettings(self.system_prompt(), not (isinstance(own, str) and own.strip()), self.can_configure())

    @guarded(RESOURCE, CONFIGURE)
    def configure(self, system_prompt: Any) -> CoachSettings:
        """Give the instance a new persona; None (or the default text) goes back to the default.

        Raises:
            InvalidInput: `systemPrompt` is not a text of 1 to SYSTEM_PROMPT_LIMIT characters.
        """
        settings = dict(self.instance.settings or {})
        if system_prompt is None or (isinstance(system_prompt, str) and system_prompt.strip() == DEFAULT_SYSTEM_PROMPT):
            settings.pop(SETTING, None)
        else:
            settings[SETTING] = _checked_prompt(system_prompt)
        self.instance.settings = settings  # a new dict: the JSON column sees the change
        self.session.add(self.instance)
        self.session.commit()
        return self.coach_settings()

    # --- the agent ----------------------------------------------------------------------------

    def run_setup(self) -> tuple[str | None, str]:
        """A coach's run gets the commcoach profile and the instance's persona (prepare_run)."""
        return FEATURE_CODE, persona_text(self.system_prompt())

    # --- session summaries ------------------------------------------------------------------------

    @guarded(DATA, CHAT_DATA, "read")
    def chat_summary(self, chat_id: str) -> AgentChat:
        """The chat whose saved summary (`summary`, "" while none) the caller asks for."""
        return self.chats.get_chat(chat_id)

    @guarded(DATA, CHAT_DATA, "update")
    def summarise_chat(self, chat_id: str) -> AgentChat:
        """Ask the AI gateway for a short summary of the chat's answered turns (its last
        HISTORY_TURNS, as the coach itself sees them: key topics, what went well, what to practise
        next) and save it in the chat, replacing an earlier one.

        Raises:
            NotFound: the chat is foreign or not the caller's to read.
            Forbidden: the caller may not change this chat (someone else's, with `own` rights).
            Conflict: the chat has no answered turns (no model call is made).
            AiError: no AI provider, or it failed (nothing is saved).
        """
        chat = self.chats.get_chat(chat_id)
        if not self.may("update", CHAT_DATA, chat):
            raise Forbidden("your roles allow no update on this chat")
        turns = chat_history(self.session, chat.id)
        if not turns:
            raise Conflict(NO_TURNS)
        reply = get_ai_client().chat(transcript(turns), system=SUMMARY_SYSTEM)
        summary = reply.text.strip()
        if not summary:
            raise AiError(f"the AI model ({reply.model}) gave an empty summary; try again")
        chat.summary = summary
        chat.sys_modified_at = utcnow()
        self.session.add(chat)
        self.session.commit()
        return chat


def _checked_prompt(value: Any) -> str:
    if not isinstance(value, str) or not value.strip():
        raise InvalidInput([FieldError("systemPrompt", "must be a non-empty text (null restores the default)")])
    text = value.strip()
    if len(text) > SYSTEM_PROMPT_LIMIT:
        raise InvalidInput([FieldError("systemPrompt",
                                       f"must be at most {SYSTEM_PROMPT_LIMIT:,} characters, not {len(text):,}")])
    return text


def persona_text(system_prompt: str) -> str:
    """The persona as the agent's system prompt carries it (AgentRequest.system_extra)."""
    return f"Your role in this CommCoach instance, as its administrators set it:\n{system_prompt}"


def transcript(turns: list[dict[str, Any]]) -> str:
    """The chat's turns as the text the summary is written from."""
    speaker = {"user": "Person coached", "assistant": "Coach"}
    lines = [f"{speaker.get(t['role'], t['role'])}: {t['content']}" for t in turns]
    return "Summarise this coaching session.\n\n<session>\n" + "\n\n".join(lines) + "\n</session>"


def open_interface(access: AccessContext, feature_instance_id: str, mandate_id: str | None = None
                   ) -> CommCoachInterface:
    """The door of CommCoach instance `feature_instance_id` for `access.user`, else NotFound."""
    return CommCoachInterface(access, access.require_instance(feature_instance_id, FEATURE_CODE, mandate_id))


def get_interface(user: User, mandate_id: str | None, feature_instance_id: str,
                  session: Session) -> CommCoachInterface:
    """The feature's data access (backend/features/registry.py): the door of one instance."""
    return open_interface(AccessContext(session, user), feature_instance_id, mandate_id)
