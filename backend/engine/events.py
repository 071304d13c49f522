"""An in-process event stream of runs for the UI (issue 5, item 11).

Events:

- ``run.started``, ``run.paused`` (with ``reason``), ``run.resumed``, ``run.completed``,
  ``run.failed`` (with ``error``), ``run.cancelled`` (with ``reason``);
- ``node.started`` and ``node.finished`` (``nodeId``, ``nodeType``, ``status``, ``attempt``,
  ``durationMs``, ``error``).

Publishers are the WorkflowRun transition functions (every status change, wherever it is
made: engine, API cancel, task completion) and the step-log writes. Run events and
``node.finished`` are published when the session that wrote them commits (and dropped if it
rolls back), so the stream shows durable state only; ``node.started`` is published at once,
so a long-running node shows up as running. Each step commits before the next one starts,
so a run's events arrive in order.

Subscribers get a queue: :func:`subscribe` for threads (``queue.Queue``), :func:`subscribe_async`
for an asyncio loop (an ``asyncio.Queue`` filled through ``loop.call_soon_threadsafe``, so
worker threads may publish). Both filter by run id and/or workflow id, and optionally by event
type (e.g. only ``run.failed``: the notifier, backend/notifications/). Publishing never
blocks: a subscriber whose queue is full loses the event (counted in ``dropped``).
"""

from __future__ import annotations

import asyncio
import itertools
import queue
import threading
from collections.abc import AsyncIterator, Iterable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import event as sa_event
from sqlalchemy.orm import Session as OrmSession

RUN_STARTED, RUN_PAUSED, RUN_RESUMED = "run.started", "run.paused", "run.resumed"
RUN_COMPLETED, RUN_FAILED, RUN_CANCELLED = "run.completed", "run.failed", "run.cancelled"
NODE_STARTED, NODE_FINISHED = "node.started", "node.finished"
DEFAULT_QUEUE_SIZE = 10_000
_PENDING = "poweron_pending_events"


@dataclass(frozen=True)
class Event:
    """One thing that happened to a run; `seq` orders events across the process."""

    type: str
    run_id: str
    workflow_id: str | None
    data: dict[str, Any] = field(default_factory=dict)
    seq: int = 0
    at: str = ""

    def to_dict(self) -> dict[str, Any]:
        """The JSON form the UI receives."""
        return {"type": self.type, "runId": self.run_id, "workflowId": self.workflow_id, "seq": self.seq,
                "at": self.at, **self.data}


class _Subscriber:
    def __init__(self, bus: EventBus, run_id: str | None, workflow_id: str | None,
                 types: frozenset[str] | None = None):
        self._bus = bus
        self.run_id = run_id
        self.workflow_id = workflow_id
        self.types = types
        self.dropped = 0
        self.closed = False

    def wants(self, event: Event) -> bool:
        return ((self.run_id is None or event.run_id == self.run_id)
                and (self.workflow_id is None or event.workflow_id == self.workflow_id)
                and (self.types is None or event.type in self.types))

    def deliver(self, event: Event) -> None:  # pragma: no cover - overridden
        raise NotImplementedError

    def close(self) -> None:
        """Stop receiving events."""
        self.closed = True
        self._bus.unsubscribe(self)


class Subscription(_Subscriber):
    """A thread-side subscriber: events land in `queue` (a ``queue.Queue``)."""

    def __init__(self, bus: EventBus, run_id: str | None, workflow_id: str | None, maxsize: int,
                 types: frozenset[str] | None = None):
        super().__init__(bus, run_id, workflow_id, types)
        self.queue: queue.Queue[Event] = queue.Queue(maxsize)

    def deliver(self, event: Event) -> None:
        try:
            self.queue.put_nowait(event)
        except queue.Full:
            self.dropped += 1

    def get(self, timeout: float | None = None) -> Event:
        """The next event; raises ``queue.Empty`` after `timeout` seconds."""
        return self.queue.get(timeout=timeout)

    def drain(self) -> list[Event]:
        """Every event queued now, without waiting."""
        events = []
        while True:
            try:
                events.append(self.queue.get_nowait())
            except queue.Empty:
                return events

    def __enter__(self) -> Subscription:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __iter__(self) -> Iterator[Event]:
        while not self.closed:
            yield self.queue.get()


class AsyncSubscription(_Subscriber):
    """An asyncio subscriber: events are put on `queue` in its loop's thread."""

    def __init__(self, bus: EventBus, run_id: str | None, workflow_id: str | None, maxsize: int,
                 loop: asyncio.AbstractEventLoop):
        super().__init__(bus, run_id, workflow_id)
        self.loop = loop
        self.queue: asyncio.Queue[Event] = asyncio.Queue(maxsize)

    def _put(self, event: Event) -> None:
        try:
            self.queue.put_nowait(event)
        except asyncio.QueueFull:
            self.dropped += 1

    def deliver(self, event: Event) -> None:
        try:
            self.loop.call_soon_threadsafe(self._put, event)
        except RuntimeError:  # the loop is closed: nobody listens any more
            self.close()

    async def get(self) -> Event:
        return await self.queue.get()

    async def __aenter__(self) -> AsyncSubscription:
        return self

    async def __aexit__(self, *exc: object) -> None:
        self.close()

    async def __aiter__(self) -> AsyncIterator[Event]:
        while not self.closed:
            yield await self.queue.get()


class EventBus:
    """Thread-safe publish/subscribe of :class:`Event`."""

    def __init__(self) -> None:
        self._lock = threading.RLock()
        self._subscribers: list[_Subscriber] = []
        self._seq = itertools.count(1)

    def subscribe(self, run_id: str | None = None, workflow_id: str | None = None,
                  maxsize: int = DEFAULT_QUEUE_SIZE, types: Iterable[str] | None = None) -> Subscription:
        """A queue of the events of `run_id` / `workflow_id` (all runs when both are None),
        only those of the given `types` when given."""
        subscription = Subscription(self, run_id, workflow_id, maxsize,
                                    frozenset(types) if types is not None else None)
        with self._lock:
            self._subscribers.append(subscription)
        return subscription

    def subscribe_async(self, run_id: str | None = None, workflow_id: str | None = None,
                        maxsize: int = DEFAULT_QUEUE_SIZE,
                        loop: asyncio.AbstractEventLoop | None = None) -> AsyncSubscription:
        """Like :meth:`subscribe` for an event loop (the running one unless `loop` is given)."""
        subscription = AsyncSubscription(self, run_id, workflow_id, maxsize, loop or asyncio.get_running_loop())
        with self._lock:
            self._subscribers.append(subscription)
        return subscription

    def unsubscribe(self, subscriber: _Subscriber) -> None:
        with self._lock:
            if subscriber in self._subscribers:
                self._subscribers.remove(subscriber)

    def publish(self, type: str, run_id: str, workflow_id: str | None, **data: Any) -> Event:  # noqa: A002
        """Number the event and hand it to every interested subscriber; never blocks."""
        with self._lock:
            event = Event(type, run_id, workflow_id, data, next(self._seq), datetime.now(UTC).isoformat())
            # Delivered under the lock, so every subscriber sees events in `seq` order.
            for subscriber in list(self._subscribers):
                if subscriber.wants(event):
                    subscriber.deliver(event)
        return event


BUS = EventBus()
subscribe = BUS.subscribe
subscribe_async = BUS.subscribe_async


def publish_on_commit(session: OrmSession, type: str, run_id: str, workflow_id: str | None,  # noqa: A002
                      **data: Any) -> None:
    """Publish when `session` commits; forget it if the session rolls back."""
    if not session.in_transaction():
        session.begin()  # what the next statement would do anyway; a rollback must see the events
    session.info.setdefault(_PENDING, []).append((type, run_id, workflow_id, data))


def _flush(session: OrmSession) -> None:
    for type_, run_id, workflow_id, data in session.info.pop(_PENDING, []):
        BUS.publish(type_, run_id, workflow_id, **data)


def _discard(session: OrmSession, previous_transaction: Any) -> None:
    if not getattr(previous_transaction, "nested", False):
        session.info.pop(_PENDING, None)


sa_event.listen(OrmSession, "after_commit", _flush)
sa_event.listen(OrmSession, "after_soft_rollback", _discard)
