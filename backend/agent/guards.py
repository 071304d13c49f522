"""The agent's budgets and the history limit of seed 004 ("Agentische Grenzen").

:class:`Budget` counts rounds, executed tool calls, calls per tool name, identical calls and
cost; it answers whether another round may start and whether one call may run. A refused call
is not an error: the agent gets a tool result saying why and the other calls of its batch
still run. :func:`fit_history` keeps all tool results in the history under 64,000 characters
by shortening the oldest first.
"""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from backend.agent.config import (
    CALL_LIMIT,
    HISTORY_RESULTS_LIMIT,
    IDENTICAL_CALLS_ALLOWED,
    ROUND_LIMIT,
    AgentConfig,
)

SHORTENED_KEEP = 300  # characters an old, shortened tool result still shows


def _canonical(arguments: Any) -> str:
    """Arguments as one comparable text: parsed JSON with sorted keys, else the raw text."""
    if isinstance(arguments, str):
        try:
            arguments = json.loads(arguments or "{}")
        except json.JSONDecodeError:
            return arguments
    return json.dumps(arguments, sort_keys=True, ensure_ascii=False, default=str)


@dataclass
class Budget:
    """What one agent run has used, against its configuration and the hard limits."""

    config: AgentConfig
    rounds: int = 0
    executed: int = 0
    cost_chf: float = 0.0
    per_tool: Counter[str] = field(default_factory=Counter)
    identical: Counter[tuple[str, str]] = field(default_factory=Counter)
    # Budgets over several tool names together, e.g. seed 004's marketplace rule: group →
    # (its tool names, calls at most); see backend.agent.selector.group_limits.
    groups: dict[str, tuple[frozenset[str], int]] = field(default_factory=dict)
    per_group: Counter[str] = field(default_factory=Counter)

    @property
    def max_rounds(self) -> int:
        return min(self.config.max_rounds, ROUND_LIMIT)

    def spent(self) -> str | None:
        """Why no further round with tools may start, or None while one may."""
        if self.rounds >= self.max_rounds:
            return f"the round budget is spent ({self.rounds} of {self.max_rounds} rounds)"
        if self.executed >= CALL_LIMIT:
            return f"the tool call budget is spent ({self.executed} of {CALL_LIMIT} calls)"
        if self.config.max_cost_chf is not None and self.cost_chf >= self.config.max_cost_chf:
            return f"the cost budget is spent ({self.cost_chf:.4f} of {self.config.max_cost_chf:.2f} CHF)"
        return None

    def add_cost(self, cost_chf: float | None) -> None:
        if cost_chf:
            self.cost_chf += cost_chf

    def admit(self, tool: str, arguments: Any) -> str | None:
        """Count the call and return None when it may run, else say why it is suppressed."""
        key = (tool, _canonical(arguments))
        if self.identical[key] >= IDENTICAL_CALLS_ALLOWED:
            return (f"suppressed: {tool} was already called {self.identical[key]} times with exactly these "
                    "arguments; use the results you have or call it differently")
        if self.executed >= CALL_LIMIT:
            return f"suppressed: the run's budget of {CALL_LIMIT} tool calls is spent"
        allowed = self.config.calls_allowed(tool)
        if self.per_tool[tool] >= allowed:
            return f"suppressed: {tool} may be called at most {allowed} times in one run"
        mine = {group: (names, limit) for group, (names, limit) in self.groups.items() if tool in names}
        for group, (names, limit) in mine.items():
            if self.per_group[group] >= limit:
                return (f"suppressed: this request allows at most {limit} calls of {', '.join(sorted(names))} "
                        f"together ({group}); answer from what you found")
        self.executed += 1
        self.per_tool[tool] += 1
        self.per_group.update(mine.keys())
        self.identical[key] += 1
        return None


def budget_state(budget: Budget) -> dict[str, Any]:
    """What a run has used, as JSON (kept while it waits for an approval)."""
    return {"rounds": budget.rounds, "executed": budget.executed, "costChf": budget.cost_chf,
            "perTool": dict(budget.per_tool),
            "identical": [[tool, arguments, count] for (tool, arguments), count in budget.identical.items()],
            "groups": {group: [sorted(names), limit] for group, (names, limit) in budget.groups.items()},
            "perGroup": dict(budget.per_group)}


def restored_budget(config: AgentConfig, state: dict[str, Any]) -> Budget:
    """The Budget :func:`budget_state` wrote, under `config`."""
    groups = {str(g): (frozenset(names), int(limit)) for g, (names, limit) in (state.get("groups") or {}).items()}
    budget = Budget(config, rounds=int(state.get("rounds") or 0), executed=int(state.get("executed") or 0),
                    cost_chf=float(state.get("costChf") or 0.0), groups=groups)
    budget.per_tool.update({str(k): int(v) for k, v in (state.get("perTool") or {}).items()})
    budget.identical.update({(str(t), str(a)): int(n) for t, a, n in state.get("identical") or []})
    budget.per_group.update({str(k): int(v) for k, v in (state.get("perGroup") or {}).items()})
    return budget


def fit_history(messages: list[dict[str, Any]], limit: int = HISTORY_RESULTS_LIMIT) -> int:
    """Shorten tool results in `messages` (in place), oldest first, until all of them together
    are at most `limit` characters; returns how many characters were cut."""
    results = [m for m in messages if m.get("role") == "tool" and isinstance(m.get("content"), str)]
    excess = sum(len(m["content"]) for m in results) - limit
    cut = 0
    for message in results:
        if excess <= 0:
            break
        content = message["content"]
        keep = max(SHORTENED_KEEP, len(content) - excess)
        if keep >= len(content):
            continue
        note = f"\n[… older result shortened: {len(content) - keep:,} of {len(content):,} characters omitted]"
        shortened = content[: max(0, keep - len(note))] + note
        removed = len(content) - len(shortened)
        if removed <= 0:
            continue
        message["content"] = shortened
        excess -= removed
        cut += removed
    return cut
