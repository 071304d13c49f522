"""What every page with an agent chat shares (the Workspace, the Editor's sidebar): the messages,
sending a prompt, streaming the answer, retrying and stopping.

A run streams in a background event handler: a worker thread drives the service's synchronous
event iterator and hands the events to the handler through an asyncio queue, so the UI stays
responsive while the agent works. The page's state mixes :class:`AgentChatMixin` in and
implements its hooks (the request, why sending is refused, what to do with events).
"""

from __future__ import annotations

import asyncio
import threading
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field

import reflex as rx

from backend import auth
from backend.agent import approvals
from backend.agent import service as agent_service
from backend.agent.runner import AgentEvent
from backend.agent.service import PROMPT_LIMIT, AgentChats, AgentRequest
from backend.db import session_scope
from backend.errors import DomainError
from backend.rbac.access import AccessContext
from backend.statemachines import ConcurrentTransition, IllegalTransition
from state.auth import NotSignedIn
from state.chat_items import ChatItem, apply_event, item
from state.page import user_message
from state.permissions import requires_door

# The agent's right is checked server-side by the door (AgentChats.prepare_run, or the page's
# own door that calls it) for the instance's feature; the declarations name the pattern
# resource.feature.{featureCode}.useAgent / data.feature.{featureCode}.chat.
NO_PROVIDER = ("No AI provider is configured: set OPENAI_API_KEY (and OPENAI_BASE_URL for another endpoint) "
               "or POWERON_AI_PROVIDERS on the server.")
STREAMING = "An answer is still streaming: wait for it or stop it before sending the next prompt."


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


_STREAMS: dict[str, _Stream] = {}  # by AgentChatMixin.stream_key


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


def _decide(token: str, instance_id: str, run_id: str, approved: bool) -> str:
    """Decide the approval run `run_id` waits for, as the token's user (the door checks)."""
    with session_scope() as session:
        user = auth.user_for_token(session, token)
        if user is None:
            raise NotSignedIn()
        return AgentChats.of(AccessContext(session, user), instance_id).decide_approval(run_id, approved)


def chat_title_of(prompt: str) -> str:
    """The title a new chat gets from its first prompt (as agent_service.prepare_run names it)."""
    lines = prompt.strip().splitlines()
    return lines[0][:200] if lines else ""


def last_prompt(messages: list[ChatItem]) -> str:
    """The text of the chat's last prompt ("" when there is none)."""
    return next((m["text"] for m in reversed(messages) if m["kind"] == "user"), "")


class AgentChatMixin(rx.State, mixin=True):
    """The chat with the agent: `class XState(AgentChatMixin, PageMixin, AuthState)`.

    The page's state has `instance_id`, `chat_id` and `chat_title` and implements:

    - `_agent_request(token, prompt, chat_id) -> AgentRequest`: check and prepare the run
      (agent_service.prepare_run); runs in a worker thread, so it reads only plain values of
      `self` set before the stream began; may raise NotSignedIn or DomainError.
    - `_no_agent_reason` (class attribute) and `_chat_closed_reason() -> str`: what the chat bar
      says when useAgent is not granted, and why this chat cannot be continued ("" when it can).
    - `_on_agent_event(event)`: called inside `async with self` for each event (default: nothing).
    - `_on_agent_finished()`: called inside `async with self` when a stream ended — answered,
      failed or stopped (default: nothing).
    - `_prompt_appendix() -> str`: appended to the prompt when it is sent (default "").
    - `_reload_chats()`: refresh the list of chats (default: nothing); called when the run's
      chat exists.
    """

    chat_id: str = ""
    chat_title: str = ""
    can_use_agent: bool = False
    provider_configured: bool = False
    messages: list[ChatItem] = []
    streaming: bool = False
    stream_key: str = ""
    agent_run_id: str = ""  # the agent run streaming now (not a workflow run)
    _pending_prompt: str = ""
    _pending_decision: dict = {}  # {"run_id", "approved"}: the stream goes on with a decided approval

    # --- hooks ----------------------------------------------------------------------------------

    def _agent_request(self, token: str, prompt: str, chat_id: str) -> AgentRequest:
        raise NotImplementedError

    _no_agent_reason = "Your roles do not let you talk to the agent here (useAgent is not granted)."

    @rx.var
    def disabled_reason(self) -> str:
        """Why the chat bar cannot send now ("" when it can)."""
        return self._chat_disabled_reason()

    def _chat_disabled_reason(self) -> str:
        if not self.loaded or not self.instance_id:
            return ""
        if not self.can_use_agent:  # a missing right first: only who may use the agent needs a provider
            return self._no_agent_reason
        if not self.provider_configured:
            return NO_PROVIDER
        return self._chat_closed_reason()

    def _chat_closed_reason(self) -> str:
        return ""

    def _on_agent_event(self, event: AgentEvent) -> None:
        return None

    def _on_agent_finished(self) -> None:
        return None

    def _prompt_appendix(self) -> str:
        return ""

    def _reload_chats(self) -> None:
        return None

    # --- sending and streaming ------------------------------------------------------------------

    def _start_chat(self) -> None:
        """An empty chat: it is created with its first prompt."""
        self.chat_id, self.chat_title, self.messages = "", "", []

    @rx.event
    @requires_door(AgentChats.prepare_run)
    def send(self, form_data: dict):
        """The chat bar's submit: show the prompt, then stream the answer in the background."""
        prompt = str(form_data.get("prompt") or "")
        if self.streaming:
            self.error = STREAMING
            return None
        if not prompt.strip():
            return None
        reason = self._chat_disabled_reason()
        if reason:
            self.error = reason
            return None
        if len(prompt) > PROMPT_LIMIT:  # refused here as the door would: the text stays in the box
            self.error = (f"Your message has {len(prompt):,} characters; the agent takes at most {PROMPT_LIMIT:,}. "
                          "Shorten it, or save the text as a file and attach it.")
            return None
        self.error = self.notice = ""
        prompt += self._prompt_appendix()
        self.messages = [*self.messages, item("user", prompt)]
        self.streaming = True
        self.stream_key = uuid.uuid4().hex
        self.agent_run_id = ""
        self._pending_prompt = prompt
        return [rx.set_value("chat-input", ""), type(self).stream_answer]

    @rx.event
    @requires_door(AgentChats.prepare_run)
    def retry(self):
        """Send the chat's last prompt again (after an error shown in place)."""
        last = last_prompt(self.messages)
        if not last or self.streaming:
            return None
        return type(self).send({"prompt": last})

    @rx.event
    @requires_door(AgentChats.decide_approval)
    def decide(self, run_id: str, approved: bool):
        """An approval card's Approve / Decline: decide it and stream the run as it goes on."""
        if self.streaming:
            self.error = STREAMING
            return None
        self.error = self.notice = ""
        self.streaming = True
        self.stream_key = uuid.uuid4().hex
        self.agent_run_id = run_id
        self._pending_decision = {"run_id": run_id, "approved": bool(approved)}
        return type(self).stream_answer

    def _events(self, token: str, prompt: str, chat_id: str, decision: dict) -> tuple[str, Iterator[AgentEvent]]:
        """(the chat's id, the events to stream): a new run on `prompt`, or the run `decision` decides."""
        if decision:
            run_id = _decide(token, self.instance_id, decision["run_id"], decision["approved"])
            return chat_id, approvals.resume_stream(run_id)
        request = self._agent_request(token, prompt, chat_id)
        return request.chat_id, agent_service.stream_run(request)

    @rx.event(background=True)
    @requires_door(AgentChats.prepare_run)
    async def stream_answer(self):
        """Run the agent on the pending prompt (or go on after a decided approval) and stream its
        events into the chat."""
        async with self:
            key, token = self.stream_key, self.token
            chat_id, prompt, decision = self.chat_id, self._pending_prompt, dict(self._pending_decision)
            self._pending_decision = {}
        try:
            chat_id, events = await asyncio.to_thread(self._events, token, prompt, chat_id, decision)
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
            self.chat_id = chat_id
            if not self.chat_title:
                self.chat_title = chat_title_of(prompt)
            self._reload_chats()
        threading.Thread(target=_pump, args=(events, stream),
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
                        self.agent_run_id = str(event.data.get("runId") or "")
                    self.messages = apply_event(self.messages, event.type, event.data)
                    self._on_agent_event(event)
        finally:
            stream.stopped.set()
            _STREAMS.pop(key, None)
            async with self:
                if self.stream_key == key:
                    self.streaming, self.stream_key, self.agent_run_id = False, "", ""
                self._on_agent_finished()

    @rx.event
    @requires_door(AgentChats.cancel_run)
    def stop(self):
        """Cancel the streaming run (the runner stops before its next step) and stop reading it."""
        if not self.streaming:
            return None
        key, run_id = self.stream_key, self.agent_run_id
        message = "Stopped by you."
        if run_id:
            try:
                with self._user_session() as (session, user):
                    AgentChats.of(AccessContext(session, user), self.instance_id).cancel_run(run_id)
            except NotSignedIn:
                return self._signed_out()
            except (DomainError, ConcurrentTransition, IllegalTransition) as exc:
                message = f"Stopped reading; the run could not be cancelled: {user_message(exc)}"
        stream = _STREAMS.get(key)
        if stream is not None:
            stream.stopped.set()
            stream.put(None)
        self.messages = apply_event(self.messages, "cancelled", {"runId": run_id, "message": message})
        self.streaming, self.stream_key, self.agent_run_id = False, "", ""
        return None
