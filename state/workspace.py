"""State of the Workspace page: the user's Workspace instance, its chats and the agent's stream.

The agent service (backend/agent/service.py) checks every right server-side; this state only
mirrors them so the page hides what the user may not do. A run streams in a background event
handler: a worker thread drives the service's synchronous event iterator and hands the events
to the handler through an asyncio queue, so the UI stays responsive while the agent works.
"""

from __future__ import annotations

import asyncio
import threading
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import TypedDict

import reflex as rx

from backend import auth
from backend.agent import service as agent_service
from backend.agent.runner import AgentEvent
from backend.agent.service import AgentRequest
from backend.config import get_settings
from backend.db import session_scope
from backend.db.models import FeatureInstance
from backend.errors import DomainError
from backend.rbac.access import AccessContext
from backend.rbac.rights import RESOURCE, Level
from backend.statemachines import ConcurrentTransition, IllegalTransition
from state.auth import WORKSPACE, AuthState, NotSignedIn
from state.chat_items import ChatItem, apply_event, item, items_of_run
from state.page import PageMixin, RenameMixin, user_message
from state.permissions import requires
from state.workspace_files import FilesMixin, attachment_appendix

USE_AGENT = "resource.feature.workspace.useAgent"
CHAT_DATA = "data.feature.workspace.chat"
NO_PROVIDER = ("No AI provider is configured: set OPENAI_API_KEY (and OPENAI_BASE_URL for another endpoint) "
               "or POWERON_AI_PROVIDERS on the server.")
NO_USE_AGENT = "Your roles let you read the chats here but not talk to the agent (useAgent is not granted)."
FOREIGN_CHAT = "This chat belongs to another user: you can read it but not continue it."


class ChatRow(TypedDict):
    id: str
    title: str
    modified: str
    may_rename: bool
    may_delete: bool


@dataclass
class _Stream:
    """One run being read: the worker thread puts events (None at the end) into `queue`."""

    loop: asyncio.AbstractEventLoop
    queue: asyncio.Queue
    stopped: threading.Event = field(default_factory=threading.Event)

    def put(self, event: AgentEvent | None) -> None:
        try:
            self.loop.call_soon_threadsafe(self.queue.put_nowait, event)
        except RuntimeError:  # the event loop is closed: the app is stopping
            pass


_STREAMS: dict[str, _Stream] = {}  # by WorkspaceState.stream_key


def _pump(events: Iterator[AgentEvent], stream: _Stream) -> None:
    """Worker thread: drive the agent run, hand its events over; stop reading when told to."""
    try:
        for event in events:
            if stream.stopped.is_set():
                break
            stream.put(event)
    except Exception as exc:  # noqa: BLE001 - shown in the chat instead of lost in a thread
        stream.put(AgentEvent("error", {"message": f"{type(exc).__name__}: {exc}"}))
    finally:
        close = getattr(events, "close", None)
        if close is not None:
            try:
                close()  # a run left working is cancelled by the runner ("the client went away")
            except Exception:  # noqa: BLE001 - nothing left to tell
                pass
        stream.put(None)


def _prepare(token: str, instance_id: str, prompt: str, chat_id: str) -> AgentRequest:
    with session_scope() as session:
        user = auth.user_for_token(session, token)
        if user is None:
            raise NotSignedIn()
        return agent_service.prepare_run(AccessContext(session, user), instance_id, prompt, chat_id or None)


class WorkspaceState(FilesMixin, RenameMixin, PageMixin, AuthState):
    """What the Workspace page shows: chats, the open chat, the stream, the chat bar and the UDB's files."""

    instance_id: str = ""
    instance_label: str = ""
    chats: list[ChatRow] = []
    chat_id: str = ""
    chat_title: str = ""
    messages: list[ChatItem] = []
    streaming: bool = False
    stream_key: str = ""
    run_id: str = ""
    can_use_agent: bool = False
    chat_is_mine: bool = True
    provider_configured: bool = False
    delete_id: str = ""
    delete_title: str = ""
    _pending_prompt: str = ""

    @rx.var
    def disabled_reason(self) -> str:
        """Why the chat bar cannot send now ("" when it can)."""
        if not self.loaded or not self.instance_id:
            return ""
        if not self.provider_configured:
            return NO_PROVIDER
        if not self.can_use_agent:
            return NO_USE_AGENT
        if not self.chat_is_mine:
            return FOREIGN_CHAT
        return ""

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

    # --- sending and streaming ------------------------------------------------------------------

    @rx.event
    @requires("RESOURCE", USE_AGENT)
    def send(self, form_data: dict):
        """The chat bar's submit: show the prompt, then stream the answer in the background."""
        prompt = str(form_data.get("prompt") or "")
        if self.streaming:
            self.error = "An answer is still streaming: wait for it or stop it before sending the next prompt."
            return None
        if not prompt.strip():
            return None
        if self.disabled_reason:
            self.error = self.disabled_reason
            return None
        self.error = self.notice = ""
        prompt += attachment_appendix(self.attachments)
        self.attachments = []
        self.messages = [*self.messages, item("user", prompt)]
        self.streaming = True
        self.stream_key = uuid.uuid4().hex
        self.run_id = ""
        self._pending_prompt = prompt
        return [rx.set_value("chat-input", ""), WorkspaceState.stream_answer]

    @rx.event
    @requires("RESOURCE", USE_AGENT)
    def retry(self):
        """Send the chat's last prompt again (after an error shown in place)."""
        last = next((m["text"] for m in reversed(self.messages) if m["kind"] == "user"), "")
        if not last or self.streaming:
            return None
        return WorkspaceState.send({"prompt": last})

    @rx.event(background=True)
    @requires("RESOURCE", USE_AGENT)
    async def stream_answer(self):
        """Run the agent on the pending prompt and stream its events into the chat."""
        async with self:
            key, token, instance_id = self.stream_key, self.token, self.instance_id
            chat_id, prompt = self.chat_id, self._pending_prompt
        try:
            request = await asyncio.to_thread(_prepare, token, instance_id, prompt, chat_id)
        except (NotSignedIn, DomainError) as exc:
            async with self:
                if self.stream_key == key:
                    self.messages = [*self.messages, item("error", "Not signed in." if isinstance(exc, NotSignedIn)
                                                          else user_message(exc))]
                    self.streaming, self.stream_key = False, ""
            return
        stream = _Stream(asyncio.get_running_loop(), asyncio.Queue())
        _STREAMS[key] = stream
        async with self:
            if self.stream_key != key:  # stopped before the run began
                _STREAMS.pop(key, None)
                return
            self.chat_id = request.chat_id
            if not self.chat_title:
                self.chat_title = prompt.strip().splitlines()[0][:200]
            self._reload_chats()
        threading.Thread(target=_pump, args=(agent_service.stream_run(request), stream),
                         name=f"agent-stream-{key[:8]}", daemon=True).start()
        try:
            while True:
                event = await stream.queue.get()
                if event is None:
                    break
                async with self:
                    if self.stream_key != key:
                        break  # stopped: the stop handler has said so in the chat
                    if event.type == "run.started":
                        self.run_id = str(event.data.get("runId") or "")
                    self.messages = apply_event(self.messages, event.type, event.data)
        finally:
            stream.stopped.set()
            _STREAMS.pop(key, None)
            async with self:
                if self.stream_key == key:
                    self.streaming, self.stream_key, self.run_id = False, "", ""
                    self._reload_chats()

    def _reload_chats(self) -> None:
        try:
            with self._user_session() as (session, user):
                access = AccessContext(session, user)
                self._load_chats(access, access.require_instance(self.instance_id))
        except (NotSignedIn, DomainError):
            pass

    @rx.event
    @requires("DATA", CHAT_DATA)
    def stop(self):
        """Cancel the streaming run (the runner stops before its next step) and stop reading it."""
        if not self.streaming:
            return None
        key, run_id = self.stream_key, self.run_id
        message = "Stopped by you."
        if run_id:
            try:
                with self._user_session() as (session, user):
                    agent_service.cancel_run(AccessContext(session, user), self.instance_id, run_id)
            except NotSignedIn:
                return self._signed_out()
            except (DomainError, ConcurrentTransition, IllegalTransition) as exc:
                message = f"Stopped reading; the run could not be cancelled: {user_message(exc)}"
        stream = _STREAMS.get(key)
        if stream is not None:
            stream.stopped.set()
            stream.put(None)
        self.messages = apply_event(self.messages, "cancelled", {"runId": run_id, "message": message})
        self.streaming, self.stream_key, self.run_id = False, "", ""
        return None

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
