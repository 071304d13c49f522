"""A circuit breaker per AI provider: stop calling a provider that keeps failing, for a while.

closed ──(`failure_threshold` consecutive failures)──▶ open ──(`cooldown_seconds` pass)──▶
half-open: exactly one trial call is let through; it succeeding closes the circuit, it failing
opens it again for another cool-down. A trial that never reports back (the caller vanished)
does not block the provider forever: after another cool-down the next trial is let through.

The clock is injectable (any `() -> float` in seconds, `time.monotonic` by default) so tests
move time instead of sleeping. Thread-safe.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Literal

State = Literal["closed", "open", "half_open"]


class CircuitBreaker:
    """See the module docstring.

    Args:
        failure_threshold: Consecutive failures that open the circuit.
        cooldown_seconds: How long an open circuit refuses calls before a trial.
        clock: Seconds from any fixed origin; `time.monotonic` unless a test gives its own.
    """

    def __init__(self, failure_threshold: int = 3, cooldown_seconds: float = 30.0,
                 clock: Callable[[], float] = time.monotonic):
        if failure_threshold < 1:
            raise ValueError("failure_threshold must be at least 1")
        if cooldown_seconds < 0:
            raise ValueError("cooldown_seconds must not be negative")
        self.failure_threshold = failure_threshold
        self.cooldown_seconds = cooldown_seconds
        self.clock = clock
        self._lock = threading.Lock()
        self._failures = 0
        self._opened_at: float | None = None  # set while open or half-open
        self._trial_started: float | None = None  # set while a half-open trial is out

    @property
    def state(self) -> State:
        with self._lock:
            return self._state()

    @property
    def consecutive_failures(self) -> int:
        return self._failures

    def _state(self) -> State:
        if self._opened_at is None:
            return "closed"
        if self._trial_started is not None or self.clock() - self._opened_at >= self.cooldown_seconds:
            return "half_open"
        return "open"

    def retry_in(self) -> float:
        """Seconds until an open circuit lets a trial through (0 when it would now)."""
        with self._lock:
            if self._opened_at is None:
                return 0.0
            start = self._trial_started if self._trial_started is not None else self._opened_at
            return max(0.0, start + self.cooldown_seconds - self.clock())

    def allow(self) -> bool:
        """May a call go to the provider now? In half-open state this claims the one trial."""
        with self._lock:
            if self._opened_at is None:
                return True
            now = self.clock()
            if self._trial_started is not None:
                if now - self._trial_started < self.cooldown_seconds:
                    return False  # a trial is out
            elif now - self._opened_at < self.cooldown_seconds:
                return False
            self._trial_started = now
            return True

    def force_trial(self) -> None:
        """Let one call through whatever the state (the gateway's last resort when every
        provider's circuit is open); it reports back like any trial."""
        with self._lock:
            if self._opened_at is not None:
                self._trial_started = self.clock()

    def record_success(self) -> None:
        """The provider answered: close the circuit."""
        with self._lock:
            self._failures = 0
            self._opened_at = None
            self._trial_started = None

    def record_failure(self) -> None:
        """The provider failed (timeout, 5xx, 429, unreachable): count it; open when due."""
        with self._lock:
            self._failures += 1
            if self._trial_started is not None or self._failures >= self.failure_threshold:
                self._opened_at = self.clock()
                self._trial_started = None
