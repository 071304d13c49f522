"""The chat methods every feature door with an agent shares, guarded with the feature's own items.

A feature with an agent chat (Workspace, CommCoach, Chatbot) builds its door on
:func:`chat_door`, naming its chat DATA item and its useAgent RESOURCE item (constants of its
main.py). The methods read and change the instance's chats through the platform door
:class:`backend.agent.service.AgentChats` (which applies the own/all rule) and declare the
feature's concrete items (``data.feature.workspace.chat``, not the pattern), so REST routes
(``declared_by``) and UI handlers (``requires_door``) show, and the enforcement walks check,
each feature's own right.

Example::

    class WorkspaceInterface(chat_door(CHAT_DATA, USE_AGENT)):
        def run_setup(self) -> tuple[str | None, str]:
            return None, ""  # the default: the feature's profile, no extra system prompt
"""

from __future__ import annotations

from typing import Any

from sqlmodel import Session

from backend.agent.service import AgentChats, AgentRequest, ChatHistory, ChatSummary
from backend.db.models import AgentChat, FeatureInstance, User
from backend.rbac.access import AccessContext
from backend.rbac.door import Door, guarded
from backend.rbac.rights import DATA, RESOURCE


class ChatDoor(Door):
    """Base of a feature door with an agent chat (see :func:`chat_door`, which adds its methods)."""

    def __init__(self, access: AccessContext, instance: FeatureInstance):
        self.access = access
        self.instance = instance
        self.session: Session = access.session
        self.user: User = access.user
        self.chats = AgentChats(access, instance)

    def run_setup(self) -> tuple[str | None, str]:
        """The agent profile (None: the feature's own, else `workspace`) and the extra system
        prompt a run of this instance gets; a feature with a persona or a schema overrides it."""
        return None, ""


def chat_door(chat_data: str, use_agent: str) -> type[ChatDoor]:
    """A door base class whose chat methods are guarded with a feature's `chat_data` and `use_agent`.

    Args:
        chat_data: the feature's DATA item of its chats (``data.feature.<code>.chat``).
        use_agent: the feature's RESOURCE item that lets a user run its agent.
    """

    class FeatureChatDoor(ChatDoor):
        def can_use_agent(self) -> bool:
            """Whether the chat bar may send here (useAgent is granted)."""
            return self.may_call(type(self).prepare_run)

        @guarded(RESOURCE, use_agent)
        def prepare_run(self, prompt: Any, chat_id: str | None = None) -> AgentRequest:
            """Check a prompt for the agent and create (or continue) its chat; the run gets the
            profile and system prompt of :meth:`run_setup` (AgentChats.prepare_run)."""
            profile, system_extra = self.run_setup()
            return self.chats.prepare_run(prompt, chat_id, profile, system_extra)

        @guarded(DATA, chat_data, "read")
        def chat_rows(self) -> list[ChatSummary]:
            """The chats the user may read, last continued first, with rename/delete flags."""
            return self.chats.chat_summaries()

        @guarded(DATA, chat_data, "read")
        def chat_history(self, chat_id: str) -> ChatHistory:
            """One chat with its runs and their traces, oldest first (its summary is `chat.summary`)."""
            return self.chats.chat_history(chat_id)

        @guarded(DATA, chat_data, "update")
        def rename_chat(self, chat_id: str, title: Any) -> AgentChat:
            """Give a chat a new title."""
            return self.chats.rename_chat(chat_id, title)

        @guarded(DATA, chat_data, "delete")
        def delete_chat(self, chat_id: str) -> None:
            """Delete a chat with its runs and traces (Conflict while one still works)."""
            self.chats.delete_chat(chat_id)

    FeatureChatDoor.__qualname__ = FeatureChatDoor.__name__ = f"ChatDoor[{chat_data}]"
    return FeatureChatDoor
