"""What the AI calls of one piece of work cost: a usage meter carried in a context variable.

    with usage_meter() as meter:
        ...                      # any AI calls through the gateway, at any depth
    meter.cost_chf               # CHF of the replies whose price is known

The gateway (backend.ai.gateway) adds every successful reply to the meters that are open in the
current context: the innermost one and each one around it, so a meter opened around a whole
run step also counts the calls of a nested meter (e.g. an agent inside the step). A context
variable is per thread (and per asyncio task): open the meter in the thread that makes the
calls. With no meter open, recording does nothing.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field


@dataclass
class UsageMeter:
    """The calls and cost counted while the meter was open."""

    parent: UsageMeter | None = None
    calls: int = 0            # successful replies
    priced_calls: int = 0     # of which the cost was known
    cost_chf: float = 0.0     # the sum of the known costs
    prompt_tokens: int = 0
    completion_tokens: int = 0
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False, compare=False)

    @property
    def recorded_cost(self) -> float | None:
        """The cost when at least one call had a known price, else None (unknown, not free)."""
        return self.cost_chf if self.priced_calls else None

    def add(self, cost_chf: float | None, usage: dict[str, int] | None = None) -> None:
        with self._lock:
            self.calls += 1
            if cost_chf is not None:
                self.priced_calls += 1
                self.cost_chf += float(cost_chf)
            if usage:
                self.prompt_tokens += int(usage.get("prompt_tokens") or 0)
                self.completion_tokens += int(usage.get("completion_tokens") or 0)


_current: ContextVar[UsageMeter | None] = ContextVar("poweron_ai_usage_meter", default=None)


@contextmanager
def usage_meter() -> Iterator[UsageMeter]:
    """Open a meter for the block (nested in the one already open, if any)."""
    meter = UsageMeter(parent=_current.get())
    token = _current.set(meter)
    try:
        yield meter
    finally:
        _current.reset(token)


def current_meter() -> UsageMeter | None:
    return _current.get()


def record(cost_chf: float | None, usage: dict[str, int] | None = None) -> None:
    """Count one successful AI reply in every meter open in this context."""
    meter = _current.get()
    while meter is not None:
        meter.add(cost_chf, usage)
        meter = meter.parent
