"""Agent runs as users start and read them: chats, starting a run (streamed), the trace, cancel.

Who may do what is decided here, server-side: the user must open the feature instance (else
404), hold `resource.feature.<code>.useAgent` to run the agent, and reads chats and runs with
their DATA level on `data.feature.<code>.chat` (own: their own; all: everyone's in the
instance). A foreign chat or run answers 404.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from sqlmodel import Session, delete, select

from backend.agent.config import PROFILES
from backend.agent.runner import AgentEvent, AgentRunner
from backend.db import get_engine
from backend.db.models import AgentChat, AgentRun, AgentStep, FeatureInstance, User, utcnow
from backend.errors import Conflict, FieldError, Forbidden, InvalidInput, NotFound
from backend.names import clean_name
from backend.rbac.access import AccessContext
from backend.rbac.rights import Level
from backend.statemachines import agent_run as states

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


def _chat_item(instance: FeatureInstance) -> str:
    return f"data.feature.{instance.feature_code}.chat"


def _read_level(access: AccessContext, instance: FeatureInstance) -> Level:
    return access.data_level(_chat_item(instance), "read", instance.mandate_id, instance.id)


def prepare_run(access: AccessContext, instance_id: str, prompt: Any, chat_id: str | None = None,
                profile_name: str | None = None, system_extra: str = "") -> AgentRequest:
    """Check a request to run the agent and create (or continue) its chat; commits the chat.

    Raises:
        NotFound: the instance or the chat is unknown or not the caller's to see.
        Forbidden: the caller may not run the agent in this instance.
        InvalidInput: the prompt is empty or too long.
    """
    instance = access.require_instance(instance_id)
    access.require_resource(f"resource.feature.{instance.feature_code}.useAgent", instance.mandate_id, instance.id)
    if not isinstance(prompt, str) or not prompt.strip():
        raise InvalidInput([FieldError("prompt", "must be a non-empty text")])
    if len(prompt) > PROMPT_LIMIT:
        raise InvalidInput([FieldError("prompt", f"must be at most {PROMPT_LIMIT:,} characters, not {len(prompt):,}")])
    session = access.session
    if chat_id:
        chat = get_chat(access, instance, chat_id)
        if chat.sys_created_by != access.user.id:
            raise NotFound(f"chat {chat_id} not found")  # one may read others' chats, not talk in them
    else:
        chat = AgentChat(mandate_id=instance.mandate_id, feature_instance_id=instance.id,
                         title=prompt.strip().splitlines()[0][:200], sys_created_by=access.user.id)
        session.add(chat)
    chat.sys_modified_at = utcnow()
    session.commit()
    name = profile_name or (instance.feature_code if instance.feature_code in PROFILES else "workspace")
    return AgentRequest(access.user.id, instance.id, prompt, chat.id, name, chat_history(session, chat.id),
                        system_extra)


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


def _readable(access: AccessContext, instance: FeatureInstance, row: AgentChat | AgentRun | None) -> bool:
    """Whether `row` is of `instance` and the caller's DATA read level covers it."""
    level = _read_level(access, instance)
    return (row is not None and row.feature_instance_id == instance.id and level != Level.NONE
            and (level == Level.ALL or row.sys_created_by == access.user.id))


def _require_read(access: AccessContext, instance: FeatureInstance) -> Level:
    level = _read_level(access, instance)
    if level == Level.NONE:
        raise Forbidden(f"your roles allow no read on chat in this {instance.feature_code} instance")
    return level


def get_chat(access: AccessContext, instance: FeatureInstance, chat_id: str) -> AgentChat:
    chat = access.session.get(AgentChat, chat_id)
    if not _readable(access, instance, chat):
        raise NotFound(f"chat {chat_id} not found")
    return chat


def list_chats(access: AccessContext, instance_id: str) -> list[AgentChat]:
    instance = access.require_instance(instance_id)
    level = _require_read(access, instance)
    query = select(AgentChat).where(AgentChat.feature_instance_id == instance.id)
    if level == Level.OWN:
        query = query.where(AgentChat.sys_created_by == access.user.id)
    return list(access.session.exec(query.order_by(AgentChat.sys_modified_at.desc())).all())


def list_runs(access: AccessContext, instance_id: str, chat_id: str | None = None) -> list[AgentRun]:
    """Top-level runs of the instance the caller may read, newest first (optionally of one chat)."""
    instance = access.require_instance(instance_id)
    level = _require_read(access, instance)
    query = select(AgentRun).where(AgentRun.feature_instance_id == instance.id, AgentRun.parent_run_id.is_(None))
    if chat_id:
        query = query.where(AgentRun.chat_id == get_chat(access, instance, chat_id).id)
    if level == Level.OWN:
        query = query.where(AgentRun.sys_created_by == access.user.id)
    return list(access.session.exec(query.order_by(AgentRun.started_at.desc())).all())


def get_run(access: AccessContext, instance_id: str, run_id: str) -> AgentRun:
    instance = access.require_instance(instance_id)
    run = access.session.get(AgentRun, run_id)
    if not _readable(access, instance, run):
        raise NotFound(f"agent run {run_id} not found")
    return run


def run_steps(access: AccessContext, run: AgentRun) -> list[AgentStep]:
    """The run's trace in order (a sub-agent's runs are readable by their own id)."""
    return list(access.session.exec(select(AgentStep).where(AgentStep.run_id == run.id)
                                    .order_by(AgentStep.seq)).all())


def sub_runs(access: AccessContext, run: AgentRun) -> list[AgentRun]:
    return list(access.session.exec(select(AgentRun).where(AgentRun.parent_run_id == run.id)
                                    .order_by(AgentRun.started_at)).all())


def cancel_run(access: AccessContext, instance_id: str, run_id: str) -> AgentRun:
    """Cancel a run that is still working; the runner stops before its next model or tool call.

    Only its starter (or who may update chats in the instance) may cancel it.
    """
    run = get_run(access, instance_id, run_id)
    instance = access.session.get(FeatureInstance, run.feature_instance_id)
    may_update = access.data_level(_chat_item(instance), "update", instance.mandate_id, instance.id)
    if run.sys_created_by != access.user.id and may_update != Level.ALL:
        raise Forbidden("only the run's starter may cancel it")
    states.MACHINE.apply(access.session, run, "cancel", error=f"cancelled by {access.user.username}",
                         finished_at=utcnow())
    access.session.commit()
    return run


def _require_change(access: AccessContext, instance: FeatureInstance, chat: AgentChat, operation: str) -> None:
    level = access.data_level(_chat_item(instance), operation, instance.mandate_id, instance.id)
    if level == Level.NONE or (level == Level.OWN and chat.sys_created_by != access.user.id):
        raise Forbidden(f"your roles allow no {operation} on this chat")


def rename_chat(access: AccessContext, instance_id: str, chat_id: str, title: Any) -> AgentChat:
    """Give a chat a new title (1–200 characters)."""
    instance = access.require_instance(instance_id)
    chat = get_chat(access, instance, chat_id)
    _require_change(access, instance, chat, "update")
    if not isinstance(title, str) or not title.strip() or len(title.strip()) > 200:
        raise InvalidInput([FieldError("title", "must be a text of 1 to 200 characters")])
    chat.title = clean_name(title, "title")
    chat.sys_modified_at = utcnow()
    access.session.add(chat)
    access.session.commit()
    return chat


def delete_chat(access: AccessContext, instance_id: str, chat_id: str) -> None:
    """Delete a chat with its runs, their sub-agent runs and traces; refused while a run works."""
    instance = access.require_instance(instance_id)
    chat = get_chat(access, instance, chat_id)
    _require_change(access, instance, chat, "delete")
    session = access.session
    runs = list(session.exec(select(AgentRun).where(AgentRun.chat_id == chat.id)).all())
    if any(run.status in states.ACTIVE for run in runs):
        raise Conflict(f"chat {chat_id} has a run that is still working; cancel it first")
    subs = list(session.exec(select(AgentRun).where(AgentRun.parent_run_id.in_([r.id for r in runs])))) if runs else []
    for run in [*subs, *runs]:
        session.execute(delete(AgentStep).where(AgentStep.run_id == run.id))
    session.flush()
    for run in [*subs, *runs]:
        session.delete(run)
        session.flush()
    session.delete(chat)
    session.commit()
