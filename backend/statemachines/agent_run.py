"""AI agent run lifecycle (spec §5.5, DESIGN §5), persisted on AgentRun.status.

    idle --start--> thinking
    thinking --call_tools--> executing_tools
    executing_tools --escalate_toolbox--> toolbox_escalation --tools_done--> thinking
    executing_tools --call_sub_agent--> sub_agent_call --tools_done--> thinking
    executing_tools --tools_done--> thinking
    executing_tools --await_approval--> waiting_approval --approval_answered--> executing_tools
    thinking --complete--> completed
    (any active state, waiting_approval) --fail--> failed, --cancel--> cancelled

waiting_approval (issue 21): a consequential tool call waits for a person's decision (a
HumanTask); the run holds no stream meanwhile and goes on in whichever process the decision
reaches. It is not ACTIVE: nothing works on it, and a client going away does not cancel it.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from backend.statemachines.base import StateMachine, Transition

IDLE, THINKING, EXECUTING_TOOLS = "idle", "thinking", "executing_tools"
TOOLBOX_ESCALATION, SUB_AGENT_CALL = "toolbox_escalation", "sub_agent_call"
WAITING_APPROVAL = "waiting_approval"
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
        Transition("await_approval", (EXECUTING_TOOLS, TOOLBOX_ESCALATION, SUB_AGENT_CALL), WAITING_APPROVAL),
        Transition("approval_answered", (WAITING_APPROVAL,), EXECUTING_TOOLS),
        Transition("complete", (THINKING,), COMPLETED),
        Transition("fail", (IDLE, *ACTIVE, WAITING_APPROVAL), FAILED),
        Transition("cancel", (IDLE, *ACTIVE, WAITING_APPROVAL), CANCELLED),
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
