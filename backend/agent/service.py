"""Agent runs as users start and read them: chats, starting a run (streamed), the trace, cancel.

:class:`AgentChats` is the door (backend/rbac/door.py) to the chats and runs of an instance of
any feature with an agent: the user must open the feature instance (else 404), hold
`resource.feature.{featureCode}.useAgent` to run the agent, and reads chats and runs with
their DATA level on `data.feature.{featureCode}.chat` (own: their own; all: everyone's in the
instance), through AccessContext.visible/may. A foreign chat or run answers 404. The module
functions taking an AccessContext call the door.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlmodel import Session, delete, select

from backend.agent import approvals
from backend.agent.config import PROFILES
from backend.agent.runner import AgentEvent, AgentRunner
from backend.db import get_engine
from backend.db.models import AgentChat, AgentRun, AgentStep, FeatureInstance, HumanTask, User, utcnow
from backend.errors import Conflict, FieldError, Forbidden, InvalidInput, NotFound
from backend.names import clean_name
from backend.rbac.access import AccessContext
from backend.rbac.door import Door, FeatureItem, guarded
from backend.rbac.rights import DATA, RESOURCE
from backend.statemachines import agent_run as states
from backend.statemachines import human_task as task_lifecycle

PROMPT_LIMIT = 20_000
HISTORY_TURNS = 20


@dataclass(frozen=True)
class AgentRequest:
    """A checked request to run the agent: who, where, what, in which chat."""

    user_id: str
    instance_id: str
    prompt: str
    chat_id: str
    profile_name: str
    history: list[dict[str, Any]]
    system_extra: str = ""


CHAT = FeatureItem.data("chat")  # data.feature.{featureCode}.chat of the door's instance
USE_AGENT = FeatureItem.resource("useAgent")  # resource.feature.{featureCode}.useAgent


@dataclass(frozen=True)
class ChatSummary:
    """A chat as a list shows it, with what the caller may do to it."""

    id: str
    title: str
    sys_created_by: str
    sys_created_at: datetime
    sys_modified_at: datetime
    mine: bool
    can_rename: bool
    can_delete: bool


@dataclass(frozen=True)
class ChatHistory:
    """A chat with its top-level runs (oldest first), each with its trace."""

    chat: AgentChat
    mine: bool
    runs: list[tuple[AgentRun, list[AgentStep]]]


class AgentChats(Door):
    """The agent chats and runs of one feature instance, as one user may use them (the door).

    Serves every feature with an agent: its items are those of the instance's feature
    (``CHAT``, ``USE_AGENT``). Build it with :meth:`of`, which checks the instance (NotFound).
    """

    def __init__(self, access: AccessContext, instance: FeatureInstance):
        self.access = access
        self.instance = instance
        self.session: Session = access.session
        self.user: User = access.user

    @classmethod
    def of(cls, access: AccessContext, instance_id: str, feature_code: str | None = None) -> AgentChats:
        """The chats of instance `instance_id` (of feature `feature_code` when given: another
        feature's instance is not found either), else NotFound (as for any foreign id)."""
        return cls(access, access.require_instance(instance_id, feature_code))

    # --- rows ---

    def _readable(self, row: AgentChat | AgentRun | None) -> bool:
        """Whether `row` is of this instance and the caller may read it."""
        return row is not None and row.feature_instance_id == self.instance.id and self.may("read", CHAT, row)

    def _chat(self, chat_id: str) -> AgentChat:
        chat = self.session.get(AgentChat, chat_id)
        if not self._readable(chat):
            raise NotFound(f"chat {chat_id} not found")
        return chat

    def _run(self, run_id: str) -> AgentRun:
        run = self.session.get(AgentRun, run_id)
        if not self._readable(run):
            raise NotFound(f"agent run {run_id} not found")
        return run

    def _require_change(self, chat: AgentChat, operation: str) -> None:
        if not self.may(operation, CHAT, chat):
            raise Forbidden(f"your roles allow no {operation} on this chat")

    # --- running the agent ---

    @guarded(RESOURCE, USE_AGENT)
    def prepare_run(self, prompt: Any, chat_id: str | None = None, profile_name: str | None = None,
                    system_extra: str = "") -> AgentRequest:
        """Check a request to run the agent and create (or continue) its chat; commits the chat.

        Raises:
            NotFound: the chat is unknown or not the caller's to see.
            Forbidden: the caller may not run the agent in this instance.
            InvalidInput: the prompt is empty or too long.
        """
        if not isinstance(prompt, str) or not prompt.strip():
            raise InvalidInput([FieldError("prompt", "must be a non-empty text")])
        if len(prompt) > PROMPT_LIMIT:
            raise InvalidInput([FieldError("prompt",
                                           f"must be at most {PROMPT_LIMIT:,} characters, not {len(prompt):,}")])
        instance = self.instance
        if chat_id:
            chat = self._chat(chat_id)
            if chat.sys_created_by != self.user.id:
                raise NotFound(f"chat {chat_id} not found")  # one may read others' chats, not talk in them
        else:
            chat = AgentChat(mandate_id=instance.mandate_id, feature_instance_id=instance.id,
                             title=prompt.strip().splitlines()[0][:200], sys_created_by=self.user.id)
            self.session.add(chat)
        chat.sys_modified_at = utcnow()
        self.session.commit()
        name = profile_name or (instance.feature_code if instance.feature_code in PROFILES else "workspace")
        return AgentRequest(self.user.id, instance.id, prompt, chat.id, name, chat_history(self.session, chat.id),
                            system_extra)

    # --- reading ---

    @guarded(DATA, CHAT, "read")
    def list_chats(self) -> list[AgentChat]:
        """The chats of the instance the caller may read, last continued first."""
        query = select(AgentChat).where(AgentChat.feature_instance_id == self.instance.id)
        query = self.visible(query, AgentChat, CHAT)
        return list(self.session.exec(query.order_by(AgentChat.sys_modified_at.desc())).all())

    @guarded(DATA, CHAT, "read")
    def chat_summaries(self) -> list[ChatSummary]:
        """:meth:`list_chats` with whether each chat is the caller's and may be renamed or deleted."""
        return [ChatSummary(id=c.id, title=c.title, sys_created_by=c.sys_created_by,
                            sys_created_at=c.sys_created_at, sys_modified_at=c.sys_modified_at,
                            mine=c.sys_created_by == self.user.id, can_rename=self.may("update", CHAT, c),
                            can_delete=self.may("delete", CHAT, c))
                for c in self.list_chats()]

    @guarded(DATA, CHAT, "read")
    def get_chat(self, chat_id: str) -> AgentChat:
        """One chat (NotFound when foreign or not the caller's to read)."""
        return self._chat(chat_id)

    @guarded(DATA, CHAT, "read")
    def chat_history(self, chat_id: str) -> ChatHistory:
        """A chat with its runs, oldest first, and their traces (to show it again)."""
        chat = self._chat(chat_id)
        runs = list(reversed(self.list_runs(chat.id)))
        return ChatHistory(chat, chat.sys_created_by == self.user.id, [(r, self.run_steps(r)) for r in runs])

    @guarded(DATA, CHAT, "read")
    def list_runs(self, chat_id: str | None = None) -> list[AgentRun]:
        """Top-level runs of the instance the caller may read, newest first (optionally of one chat)."""
        query = select(AgentRun).where(AgentRun.feature_instance_id == self.instance.id,
                                       AgentRun.parent_run_id.is_(None))
        if chat_id:
            query = query.where(AgentRun.chat_id == self._chat(chat_id).id)
        query = self.visible(query, AgentRun, CHAT)
        return list(self.session.exec(query.order_by(AgentRun.started_at.desc())).all())

    @guarded(DATA, CHAT, "read")
    def get_run(self, run_id: str) -> AgentRun:
        """One run (NotFound when foreign or not the caller's to read)."""
        return self._run(run_id)

    @guarded(DATA, CHAT, "read")
    def run_steps(self, run: AgentRun) -> list[AgentStep]:
        """The trace of `run` (one this door gave out, or its sub-agent run) in order."""
        return list(self.session.exec(select(AgentStep).where(AgentStep.run_id == run.id)
                                      .order_by(AgentStep.seq)).all())

    @guarded(DATA, CHAT, "read")
    def sub_runs(self, run: AgentRun) -> list[AgentRun]:
        """The sub-agent runs `run` (one this door gave out) started, in order."""
        return list(self.session.exec(select(AgentRun).where(AgentRun.parent_run_id == run.id)
                                      .order_by(AgentRun.started_at)).all())

    # --- changing ---

    @guarded(DATA, CHAT, "read")
    def cancel_run(self, run_id: str) -> AgentRun:
        """Cancel a run that is still working; the runner stops before its next model or tool call.

        Only its starter, or who may update it (all chats of the instance), may cancel it.
        """
        run = self._run(run_id)
        if run.sys_created_by != self.user.id and not self.may("update", CHAT, run):
            raise Forbidden("only the run's starter may cancel it")
        task = approvals.waiting_task(self.session, run) if run.status == states.WAITING_APPROVAL else None
        states.MACHINE.apply(self.session, run, "cancel", error=f"cancelled by {self.user.username}",
                             finished_at=utcnow(), resume_state=None)
        if task is not None and task.status == task_lifecycle.PENDING:  # its approval is no longer asked for
            task_lifecycle.cancel(self.session, task, self.user.id, "the agent run was cancelled")
        self.session.commit()
        return run

    @guarded(DATA, CHAT, "read")
    def decide_approval(self, run_id: str, approved: Any, comment: Any = None) -> str:
        """Approve or decline the tool call run `run_id` waits for (its user only); returns the
        run's id for :func:`backend.agent.approvals.resume_stream`.

        Raises:
            NotFound: the run is foreign.
            Conflict: the run waits for no approval, or it was decided already (who and when).
            Forbidden: the caller is not the user the agent acts for.
        """
        run = self._run(run_id)
        task = approvals.waiting_task(self.session, run) if run.status == states.WAITING_APPROVAL else None
        if task is None:
            raise Conflict(f"agent run {run_id} is {run.status}; it waits for no approval")
        approvals.decide(self.access, task, approved, comment)
        return run.id

    @guarded(DATA, CHAT, "update")
    def rename_chat(self, chat_id: str, title: Any) -> AgentChat:
        """Give a chat a new title (1–200 characters)."""
        chat = self._chat(chat_id)
        self._require_change(chat, "update")
        if not isinstance(title, str) or not title.strip() or len(title.strip()) > 200:
            raise InvalidInput([FieldError("title", "must be a text of 1 to 200 characters")])
        chat.title = clean_name(title, "title")
        chat.sys_modified_at = utcnow()
        self.session.add(chat)
        self.session.commit()
        return chat

    @guarded(DATA, CHAT, "delete")
    def delete_chat(self, chat_id: str) -> None:
        """Delete a chat with its runs, their sub-agent runs and traces; refused while a run works."""
        chat = self._chat(chat_id)
        self._require_change(chat, "delete")
        session = self.session
        runs = list(session.exec(select(AgentRun).where(AgentRun.chat_id == chat.id)).all())
        if any(run.status in states.ACTIVE for run in runs):
            raise Conflict(f"chat {chat_id} has a run that is still working; cancel it first")
        subs = list(session.exec(select(AgentRun).where(AgentRun.parent_run_id.in_([r.id for r in runs])))) \
            if runs else []
        for run in [*subs, *runs]:
            session.execute(delete(AgentStep).where(AgentStep.run_id == run.id))
        if runs:  # the approvals its runs asked for go with them (a waiting one leaves the Inbox)
            session.execute(delete(HumanTask).where(HumanTask.agent_run_id.in_([r.id for r in runs])))
        session.flush()
        for run in [*subs, *runs]:
            session.delete(run)
            session.flush()
        session.delete(chat)
        session.commit()


# --- the door for callers holding an AccessContext (kept for the pages and routes) -----------------


def prepare_run(access: AccessContext, instance_id: str, prompt: Any, chat_id: str | None = None,
                profile_name: str | None = None, system_extra: str = "") -> AgentRequest:
    """:meth:`AgentChats.prepare_run` in instance `instance_id` (NotFound when it is not the caller's)."""
    return AgentChats.of(access, instance_id).prepare_run(prompt, chat_id, profile_name, system_extra)


def chat_history(session: Session, chat_id: str) -> list[dict[str, Any]]:
    """The chat's earlier turns as messages: each completed run's prompt and answer."""
    runs = session.exec(select(AgentRun).where(AgentRun.chat_id == chat_id, AgentRun.parent_run_id.is_(None),
                                               AgentRun.status == states.COMPLETED)
                        .order_by(AgentRun.started_at.desc()).limit(HISTORY_TURNS)).all()
    messages: list[dict[str, Any]] = []
    for run in reversed(runs):
        messages += [{"role": "user", "content": run.prompt}, {"role": "assistant", "content": run.answer or ""}]
    return messages


def stream_run(request: AgentRequest) -> Iterator[AgentEvent]:
    """Run the agent in a session of its own (the stream outlives the request's session)."""
    with Session(get_engine(), expire_on_commit=False) as session:
        user = session.get(User, request.user_id)
        instance = session.get(FeatureInstance, request.instance_id)
        runner = AgentRunner(session, user, instance, request.prompt, profile_name=request.profile_name,
                             history=request.history, chat_id=request.chat_id, system_extra=request.system_extra)
        yield from runner.events()


def _door(access: AccessContext, instance: FeatureInstance | str) -> AgentChats:
    if isinstance(instance, FeatureInstance):
        return AgentChats(access, instance)
    return AgentChats.of(access, instance)


def get_chat(access: AccessContext, instance: FeatureInstance, chat_id: str) -> AgentChat:
    return _door(access, instance).get_chat(chat_id)


def list_chats(access: AccessContext, instance_id: str) -> list[AgentChat]:
    return _door(access, instance_id).list_chats()


def list_runs(access: AccessContext, instance_id: str, chat_id: str | None = None) -> list[AgentRun]:
    """Top-level runs of the instance the caller may read, newest first (optionally of one chat)."""
    return _door(access, instance_id).list_runs(chat_id)


def get_run(access: AccessContext, instance_id: str, run_id: str) -> AgentRun:
    return _door(access, instance_id).get_run(run_id)


def _run_door(access: AccessContext, run: AgentRun) -> AgentChats:
    instance = access.session.get(FeatureInstance, run.feature_instance_id)
    if instance is None:
        raise NotFound(f"agent run {run.id} not found")
    return AgentChats(access, instance)


def run_steps(access: AccessContext, run: AgentRun) -> list[AgentStep]:
    """The run's trace in order (a sub-agent's runs are readable by their own id)."""
    return _run_door(access, run).run_steps(run)


def sub_runs(access: AccessContext, run: AgentRun) -> list[AgentRun]:
    return _run_door(access, run).sub_runs(run)


def cancel_run(access: AccessContext, instance_id: str, run_id: str) -> AgentRun:
    """Cancel a run that is still working (:meth:`AgentChats.cancel_run`)."""
    return _door(access, instance_id).cancel_run(run_id)


def rename_chat(access: AccessContext, instance_id: str, chat_id: str, title: Any) -> AgentChat:
    """Give a chat a new title (1–200 characters)."""
    return _door(access, instance_id).rename_chat(chat_id, title)


def delete_chat(access: AccessContext, instance_id: str, chat_id: str) -> None:
    """Delete a chat with its runs, their sub-agent runs and traces; refused while a run works."""
    _door(access, instance_id).delete_chat(chat_id)
