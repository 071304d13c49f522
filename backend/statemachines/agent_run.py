"""AI agent run lifecycle (spec §5.5, DESIGN §5); lives in memory for one agent call.

    idle --start--> thinking
    thinking --call_tools--> executing_tools
    executing_tools --escalate_toolbox--> toolbox_escalation --tools_done--> thinking
    executing_tools --call_sub_agent--> sub_agent_call --tools_done--> thinking
    executing_tools --tools_done--> thinking
    thinking --complete--> completed
    (any active state) --fail--> failed, --cancel--> cancelled
"""

from __future__ import annotations

from dataclasses import dataclass, field

from backend.statemachines.base import StateMachine, Transition

IDLE, THINKING, EXECUTING_TOOLS = "idle", "thinking", "executing_tools"
TOOLBOX_ESCALATION, SUB_AGENT_CALL = "toolbox_escalation", "sub_agent_call"
COMPLETED, FAILED, CANCELLED = "completed", "failed", "cancelled"
ACTIVE = (THINKING, EXECUTING_TOOLS, TOOLBOX_ESCALATION, SUB_AGENT_CALL)

MACHINE = StateMachine(
    "AgentRun",
    [
        Transition("start", (IDLE,), THINKING),
        Transition("call_tools", (THINKING,), EXECUTING_TOOLS),
        Transition("escalate_toolbox", (EXECUTING_TOOLS, TOOLBOX_ESCALATION, SUB_AGENT_CALL), TOOLBOX_ESCALATION),
        Transition("call_sub_agent", (EXECUTING_TOOLS, TOOLBOX_ESCALATION), SUB_AGENT_CALL),
        Transition("tools_done", (EXECUTING_TOOLS, TOOLBOX_ESCALATION, SUB_AGENT_CALL), THINKING),
        Transition("complete", (THINKING,), COMPLETED),
        Transition("fail", (IDLE, *ACTIVE), FAILED),
        Transition("cancel", (IDLE, *ACTIVE), CANCELLED),
    ],
)


@dataclass
class AgentRunState:
    """The state of one agent run and the transitions it went through."""

    id: str
    status: str = IDLE
    history: list[str] = field(default_factory=list)

    def fire(self, event: str) -> str:
        """Apply `event`, remember it, and return the new state."""
        MACHINE.apply(None, self, event)
        self.history.append(event)
        return self.status
