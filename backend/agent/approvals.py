"""Approval of consequential tool calls in agent runs (issue 21).

Actions declare their consequences (backend.actions.base.CONSEQUENCES: send, write, delete,
external). A profile names those that need a person's approval (AgentConfig.approvals); a
mandate's admins may choose otherwise per profile (:class:`ApprovalPolicies`, one row of
AgentApprovalPolicy per mandate and profile).

When the agent calls such a tool, the runner (backend.agent.runner) opens a HumanTask of kind
`approval` for the run's user (`agent_run_id`, `node_id` = the tool call's id), keeps what the run
continues from in `AgentRun.resume_state` and moves the run to `waiting_approval`; its stream
ends. A decision — in the chat, in the Inbox, by REST — completes the task through the task's
guarded transition (so two clicks decide once) and the run goes on (:func:`resume_stream`):
approved, the call runs exactly once (the run's own guarded transition `approval_answered` lets
one resumer through); declined, cancelled or expired, the agent is told and finishes. Nothing of
this lives in memory, so a waiting run survives a restart, and :func:`resume_decided` picks up a
run whose decision was taken but not yet acted on.
"""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from sqlmodel import Session, select

from backend.actions.base import CONSEQUENCES, Action
from backend.agent.config import PROFILES, SUB_AGENT_PROFILE, profile
from backend.config import get_settings
from backend.db import get_engine
from backend.db.models import AgentApprovalPolicy, AgentRun, HumanTask, User, utcnow
from backend.errors import Conflict, FieldError, Forbidden, InvalidInput, NotFound
from backend.notifications.service import notify_task_created
from backend.rbac.access import AccessContext
from backend.rbac.door import Door, guarded
from backend.rbac.rights import RESOURCE
from backend.rbac.templates import MANAGE_AGENT_APPROVALS
from backend.statemachines import ConcurrentTransition
from backend.statemachines import agent_run as states
from backend.statemachines import human_task as task_lifecycle

log = logging.getLogger(__name__)

APPROVED, DECLINED, CANCELLED, EXPIRED = "approved", "declined", "cancelled", "expired"
# What the agent reads as the call's result when it did not run.
NOT_RUN = {
    DECLINED: "The user declined this tool call; it was not run. Do not call it again unless the user asks; "
              "tell the user what you would have done instead.",
    CANCELLED: "The request for approval was withdrawn ({by}); the tool call was not run. Tell the user.",
    EXPIRED: "Nobody approved this tool call in time (the approval expired); it was not run. Tell the user.",
}
COMMENT_MAX = 1000


# --- the policy ---------------------------------------------------------------------------------


def agent_profiles() -> list[str]:
    """The profiles a mandate can set approvals for (not the read-only Feature Data Agent's)."""
    return [name for name in PROFILES if name != SUB_AGENT_PROFILE]


def required_consequences(session: Session, mandate_id: str, profile_name: str,
                          default: list[str] | tuple[str, ...]) -> frozenset[str]:
    """The consequences that need approval in `profile_name`'s runs in the mandate: the mandate's
    choice when its admins made one, else `default` (the profile's)."""
    row = session.exec(select(AgentApprovalPolicy).where(AgentApprovalPolicy.mandate_id == mandate_id,
                                                         AgentApprovalPolicy.profile == profile_name)).first()
    return frozenset(row.consequences if row is not None else default)


def needs_approval(action: Action, required: frozenset[str]) -> frozenset[str]:
    """The consequences of `action` that need approval (empty: it runs at once)."""
    return frozenset(action.consequences or ()) & required


@dataclass(frozen=True)
class PolicyView:
    """One profile's approval setting in a mandate."""

    profile: str
    consequences: list[str]
    default: list[str]
    customised: bool


class ApprovalPolicies(Door):
    """Which consequences need approval in the agent runs of one mandate, per profile (the door).

    Everyone in the mandate may read the setting (the chat says why a call waits); changing it
    takes `resource.mandate.manageAgentApprovals`.
    """

    def __init__(self, access: AccessContext, mandate_id: str):
        self.access = access
        self.session = access.session
        self.mandate_id = access.require_mandate(mandate_id).id

    @guarded("authenticated")
    def list(self) -> list[PolicyView]:
        """Every agent profile's setting in the mandate."""
        return [self._view(name) for name in agent_profiles()]

    @guarded("authenticated")
    def may_manage(self) -> bool:
        return self.access.resolve(RESOURCE, MANAGE_AGENT_APPROVALS, self.mandate_id).allowed

    @guarded(RESOURCE, MANAGE_AGENT_APPROVALS)
    def set(self, profile_name: Any, consequences: Any) -> PolicyView:
        """Choose the consequences that need approval in `profile_name`'s runs (a list, maybe empty)."""
        name = self._profile(profile_name)
        if not isinstance(consequences, list) or not all(isinstance(c, str) for c in consequences):
            raise InvalidInput([FieldError("consequences", f"must be a list of {', '.join(CONSEQUENCES)}")])
        unknown = sorted(set(consequences) - set(CONSEQUENCES))
        if unknown:
            raise InvalidInput([FieldError("consequences", f"unknown {', '.join(unknown)}; "
                                                            f"expected any of {', '.join(CONSEQUENCES)}")])
        row = self._row(name) or AgentApprovalPolicy(mandate_id=self.mandate_id, profile=name, consequences=[])
        row.consequences = [c for c in CONSEQUENCES if c in consequences]
        row.sys_modified_by, row.sys_modified_at = self.access.user.id, utcnow()
        self.session.add(row)
        self.session.commit()
        return self._view(name)

    @guarded(RESOURCE, MANAGE_AGENT_APPROVALS)
    def reset(self, profile_name: Any) -> PolicyView:
        """Back to the profile's default."""
        row = self._row(self._profile(profile_name))
        if row is not None:
            self.session.delete(row)
            self.session.commit()
        return self._view(str(profile_name))

    def _profile(self, name: Any) -> str:
        if name not in agent_profiles():
            raise NotFound(f"agent profile {name!r} not found (known: {', '.join(agent_profiles())})")
        return str(name)

    def _row(self, name: str) -> AgentApprovalPolicy | None:
        return self.session.exec(select(AgentApprovalPolicy).where(
            AgentApprovalPolicy.mandate_id == self.mandate_id, AgentApprovalPolicy.profile == name)).first()

    def _view(self, name: str) -> PolicyView:
        default = profile(name).approvals
        row = self._row(name)
        chosen = list(row.consequences) if row is not None else list(default)
        return PolicyView(name, chosen, list(default), row is not None)


# --- asking -------------------------------------------------------------------------------------


def open_task(session: Session, run: AgentRun, call_id: str, tool: str, action: Action, arguments: Any,
              reason: str, consequences: frozenset[str]) -> HumanTask:
    """The Inbox task asking the run's user to approve one tool call (added, not committed)."""
    hours = get_settings().agent_approval_hours
    task = HumanTask(
        run_id=None, agent_run_id=run.id, node_id=call_id, mandate_id=run.mandate_id,
        feature_instance_id=run.feature_instance_id, kind="approval",
        title=f"Approve: {action.label}"[:500],
        message=reason or None, assignee={"user": run.sys_created_by},
        data={"tool": tool, "actionId": action.id, "label": action.label, "arguments": arguments,
              "consequences": [c for c in CONSEQUENCES if c in consequences], "reason": reason},
        due_at=utcnow() + timedelta(hours=hours), on_timeout="expire")
    session.add(task)
    notify_task_created(session, task)
    return task


# --- deciding -----------------------------------------------------------------------------------


def is_agent_task(task: HumanTask) -> bool:
    return task.agent_run_id is not None


def decide(access: AccessContext, task: HumanTask, approved: Any, comment: Any = None, via: str = "app") -> HumanTask:
    """Approve or decline an agent's tool call as the task's assignee; commits. The run is not
    resumed here: :func:`resume_stream` (the chat) or :func:`resume_in_background` does that.

    Raises:
        Forbidden: the caller is not the task's assignee.
        Conflict: the task was decided, withdrawn or expired already (says who and when).
        InvalidInput: `approved` is not a boolean or the comment is too long.
    """
    from backend.engine.tasks import finished_message, may_complete

    if not isinstance(approved, bool):
        raise InvalidInput([FieldError("data.approved", "must be true or false")])
    if comment is not None and (not isinstance(comment, str) or len(comment) > COMMENT_MAX):
        raise InvalidInput([FieldError("data.comment", f"must be a text of at most {COMMENT_MAX} characters")])
    session = access.session
    if not may_complete(access, task):
        raise Forbidden("only the user the agent acts for may approve its tool calls")
    if task.status != task_lifecycle.PENDING:
        raise Conflict(finished_message(session, task))
    answer = {**(task.data or {}), "approved": approved, "comment": comment}
    try:
        task_lifecycle.complete(session, task, answer, access.user.id, via)
    except ConcurrentTransition:
        session.rollback()
        session.refresh(task)
        raise Conflict(finished_message(session, task)) from None
    session.commit()
    return task


def withdraw(session: Session, task: HumanTask, user: User | None, reason: str | None) -> HumanTask:
    """Cancel the approval task (the Inbox's cancel); the agent is told when the run goes on."""
    task_lifecycle.cancel(session, task, user.id if user else None, reason)
    session.commit()
    return task


def outcome_of(task: HumanTask) -> str | None:
    """approved / declined / cancelled / expired, or None while the task is pending."""
    if task.status == task_lifecycle.COMPLETED:
        return APPROVED if (task.data or {}).get("approved") is True else DECLINED
    if task.status == task_lifecycle.CANCELLED:
        return CANCELLED
    if task.status == task_lifecycle.EXPIRED:
        return EXPIRED
    return None


def not_run_text(outcome: str, task: HumanTask, by: str) -> str:
    """The tool result the agent reads for a call that was not run."""
    return json.dumps({"error": NOT_RUN[outcome].format(by=f"by {by}" if by else "cancelled"),
                       "approval": outcome, "comment": (task.data or {}).get("comment")}, ensure_ascii=False)


# --- going on -----------------------------------------------------------------------------------


def waiting_task(session: Session, run: AgentRun) -> HumanTask | None:
    """The approval task a waiting run waits for."""
    state = run.resume_state or {}
    task_id = state.get("taskId")
    return session.get(HumanTask, task_id) if task_id else None


def resume_stream(run_id: str, client: Any = None) -> Iterator[Any]:
    """Go on with a run whose approval task was decided, in a session of its own, yielding its
    events (:class:`backend.agent.runner.AgentEvent`). Yields nothing when the run is not
    waiting or its task is still pending, or when another process took it on first."""
    from backend.agent.runner import AgentRunner

    with Session(get_engine(), expire_on_commit=False) as session:
        run = session.get(AgentRun, run_id)
        if run is None or run.status != states.WAITING_APPROVAL:
            return
        task = waiting_task(session, run)
        if task is None or outcome_of(task) is None:
            return
        runner = AgentRunner.resumed(session, run, client=client)
        if runner is None:
            return
        yield from runner.resumed_events(task)


def _drain(run_id: str) -> None:
    try:
        for _event in resume_stream(run_id):
            pass
    except Exception:  # noqa: BLE001 - a background continuation logs; the run records its own failure
        log.exception("agent run %s could not go on after its approval", run_id)


def resume_in_background(run_id: str) -> threading.Thread:
    """Go on with the run on a thread of its own (a decision from the Inbox or REST: nobody reads
    its events; the chat shows the trace when opened)."""
    thread = threading.Thread(target=_drain, args=(run_id,), name=f"agent-resume-{run_id[:8]}", daemon=True)
    thread.start()
    return thread


def resume_decided() -> int:
    """Start-up: go on with every run still waiting whose task was decided meanwhile (a decision
    taken just before a restart, an expiry while the app was down). Returns how many."""
    with Session(get_engine()) as session:
        waiting = session.exec(select(AgentRun).where(AgentRun.status == states.WAITING_APPROVAL)).all()
        decided = [run.id for run in waiting if (task := waiting_task(session, run)) is not None
                   and outcome_of(task) is not None]
    for run_id in decided:
        resume_in_background(run_id)
    return len(decided)
