"""A small, explicit state-machine kernel shared by every lifecycle in DESIGN §5.

Each lifecycle module declares its transitions as a table and exposes one function per
transition. Applying a transition checks that it is legal from the object's current state
and then writes the new state with a guarded UPDATE on `lock_version`: of two concurrent
transitions of the same object only the first to commit wins, the other gets
:class:`ConcurrentTransition` (PostgreSQL blocks the second UPDATE on the row lock and then
finds the version moved on; SQLite serialises the writers the same way).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from sqlalchemy import update
from sqlalchemy.orm.attributes import set_committed_value
from sqlmodel import Session


class IllegalTransition(Exception):
    """A transition that the object's current state does not allow."""

    def __init__(self, object_name: str, object_id: Any, current: str, event: str, allowed: Iterable[str]):
        self.object_name = object_name
        self.object_id = object_id
        self.current = current
        self.event = event
        allowed_text = ", ".join(sorted(allowed)) or "no state"
        super().__init__(
            f"{object_name} {object_id} is '{current}': cannot {event} "
            f"(allowed only from: {allowed_text})"
        )


class ConcurrentTransition(Exception):
    """Somebody else changed the object between reading it and writing the transition."""

    def __init__(self, object_name: str, object_id: Any, event: str):
        self.object_name = object_name
        self.object_id = object_id
        self.event = event
        super().__init__(
            f"{object_name} {object_id} was changed concurrently: {event} was not applied; "
            "reload and try again"
        )


@dataclass(frozen=True)
class Transition:
    """`event` moves an object from any of `sources` to `target`."""

    event: str
    sources: tuple[str, ...]
    target: str


class StateMachine:
    """The transition table of one lifecycle and the means to apply it.

    Args:
        object_name: Name used in error messages (e.g. "WorkflowRun").
        transitions: The legal transitions.
        state_attr: Attribute holding the state; None when the state is derived.
        state_of: Reads a derived state (used when `state_attr` is None).
    """

    def __init__(
        self,
        object_name: str,
        transitions: Iterable[Transition],
        state_attr: str | None = "status",
        state_of: Callable[[Any], str] | None = None,
    ):
        self.object_name = object_name
        self.transitions = {t.event: t for t in transitions}
        self.state_attr = state_attr
        self._state_of = state_of

    @property
    def states(self) -> set[str]:
        """Every state that appears in the table."""
        found: set[str] = set()
        for t in self.transitions.values():
            found.update(t.sources)
            found.add(t.target)
        return found

    def state(self, obj: Any) -> str:
        """The current state of `obj`."""
        if self._state_of is not None:
            return self._state_of(obj)
        return getattr(obj, self.state_attr)

    def check(self, obj: Any, event: str) -> Transition:
        """Return the transition for `event`, or raise IllegalTransition."""
        transition = self.transitions.get(event)
        current = self.state(obj)
        if transition is None or current not in transition.sources:
            allowed = transition.sources if transition else ()
            raise IllegalTransition(self.object_name, getattr(obj, "id", None), current, event, allowed)
        return transition

    def apply(self, session: Session | None, obj: Any, event: str, **changes: Any) -> Any:
        """Check and perform `event` on `obj`, writing `changes` with the new state.

        With a session the write is a guarded UPDATE inside the caller's transaction;
        without one (in-memory objects such as an agent run) the attributes are set.
        """
        transition = self.check(obj, event)
        values = dict(changes)
        if self.state_attr is not None:
            values[self.state_attr] = transition.target
        if session is None:
            for name, value in values.items():
                setattr(obj, name, value)
            return obj
        model = type(obj)
        values["lock_version"] = obj.lock_version + 1
        result = session.execute(
            update(model)
            .where(model.id == obj.id, model.lock_version == obj.lock_version)
            .values(**values)
            .execution_options(synchronize_session=False)
        )
        if result.rowcount != 1:
            raise ConcurrentTransition(self.object_name, obj.id, event)
        for name, value in values.items():
            set_committed_value(obj, name, value)
        return obj
