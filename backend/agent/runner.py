"""The agent loop (spec §5.3–5.5, DESIGN §5 and §7) as named handlers over the agent run state
machine, in the manner of the run engine:

- ``begin`` records the run and fires `start` (idle → thinking);
- ``think`` makes one model call with the round's tools, streaming its text;
- ``execute_calls`` (thinking → executing_tools) runs the batch: ``escalate`` for
  requestToolbox (→ toolbox_escalation), ``call_sub_agent`` for queryFeatureInstance
  (→ sub_agent_call), ``call_tool`` for the action library's tools; `tools_done` → thinking;
- ``force_final`` — when a budget is spent — makes one last call without tools, so the user
  always gets a visible answer from what was found;
- ``complete``, ``fail``, ``cancelled`` end the run.

Every round, call, escalation, sub-agent call and guard intervention is a persisted AgentStep,
committed as it happens, and an :class:`AgentEvent` for the caller (the SSE stream, the UI).
Each event is yielded once its step is durable. The run checks for a cancel (from another
request) before every model call and every tool call: the next state transition fails on the
run's lock_version.
"""

from __future__ import annotations

import json
import time
import traceback
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from sqlmodel import Session, func, select

from backend.actions.base import ActionContext
from backend.actions.openai_tools import execute_tool_call, result_for_agent, truncate_for_agent
from backend.agent import approvals
from backend.agent.config import QUERY_FEATURE_INSTANCE, REQUEST_TOOLBOX, RESULT_LIMIT, AgentConfig, profile
from backend.agent.guards import Budget, budget_state, fit_history, restored_budget
from backend.agent.selector import Selection, request_text
from backend.agent.toolset import Toolset
from backend.ai.client import AiClient, AiError, AiReply, ChatDone, TextDelta, ToolCall, get_ai_client
from backend.db.models import AgentRun, AgentStep, FeatureInstance, HumanTask, User, utcnow
from backend.errors import NotFound
from backend.rbac.access import AccessContext
from backend.statemachines import agent_run as states
from backend.statemachines.base import ConcurrentTransition, IllegalTransition

FINAL_NOTE = ("You cannot use tools any more: {reason}. Answer the user now, visibly and completely, from what "
              "you have found so far; say briefly what is missing, if anything.")


@dataclass(frozen=True)
class AgentEvent:
    """One thing that happened in an agent run, as sent to the browser (server-sent events)."""

    type: str
    data: dict[str, Any] = field(default_factory=dict)

    def to_sse(self) -> str:
        return f"event: {self.type}\ndata: {json.dumps(self.data, ensure_ascii=False, default=str)}\n\n"


class RunCancelled(Exception):
    """The run was cancelled from elsewhere."""


class AwaitingApproval(Exception):  # noqa: N818 - a pause, not an error
    """The run waits for a person to approve a tool call; its stream ends here."""


class AgentRunner:
    """Drives one agent run to completed, failed or cancelled, yielding its events."""

    def __init__(self, session: Session, user: User, instance: FeatureInstance, prompt: str, *,
                 profile_name: str, config: AgentConfig | None = None, history: list[dict[str, Any]] | None = None,
                 chat_id: str | None = None, parent: AgentRunner | None = None, system_extra: str = "",
                 client: AiClient | None = None):
        self.session = session
        self.user = user
        self.instance = instance
        self.prompt = prompt
        self.profile_name = profile_name
        self.config = config or profile(profile_name)
        if parent is not None:
            self.config.sub_agents = False  # spec §5.4: one level deep
        self.parent = parent
        self.client = client
        self.access = AccessContext(session, user)
        self.toolset = Toolset(self.access, instance, self.config)
        # Issue 21: toolboxes matching the request are attached before round 1 (never in a sub-agent).
        self.selection: Selection | None = None
        if parent is None and self.config.max_preselected > 0:
            self.selection = self.toolset.preselect(request_text(prompt, history or []))
        limits = self.toolset.group_limits(self.selection.limits) if self.selection else {}
        self.budget = Budget(self.config, groups=limits)
        self.system_extra = system_extra
        self._required: frozenset[str] | None = None  # consequences that need approval, looked up once
        self.messages: list[dict[str, Any]] = [*(history or []), {"role": "user", "content": prompt}]
        self.seq = 0
        self.run = AgentRun(chat_id=chat_id, parent_run_id=parent.run.id if parent else None,
                            mandate_id=instance.mandate_id, feature_instance_id=instance.id, profile=profile_name,
                            prompt=prompt, status=states.IDLE, sys_created_by=user.id,
                            config=self.config.model_dump(by_alias=True), toolboxes=list(self.toolset.active))
        session.add(self.run)
        session.commit()

    # --- the loop -----------------------------------------------------------------------------

    def events(self) -> Iterator[AgentEvent]:
        """Run the agent; every event is yielded after what it reports is committed."""
        yield from self._driven(self._from_start())

    def resumed_events(self, task: HumanTask) -> Iterator[AgentEvent]:
        """Go on after the approval `task` was decided (a run built by :meth:`resumed`)."""
        yield from self._driven(self._after_decision(task))

    def _from_start(self) -> Iterator[AgentEvent]:
        yield from self.begin()
        yield from self.rounds()

    def rounds(self) -> Iterator[AgentEvent]:
        """Model calls and their tool calls until the model answers or a budget is spent."""
        while True:
            reason = self.budget.spent()
            if reason:
                yield from self.force_final(reason)
                return
            reply = yield from self.think()
            if not reply.tool_calls:
                yield from self.complete(reply.text)
                return
            yield from self.execute_calls(reply)

    def _driven(self, body: Iterator[AgentEvent]) -> Iterator[AgentEvent]:
        """`body` with the run's endings: cancelled, failed, paused for an approval."""
        try:
            yield from body
        except AwaitingApproval:
            return
        except RunCancelled:
            yield from self.cancelled()
        except AiError as exc:
            yield from self.fail(str(exc))
        except GeneratorExit:
            self._cancel_quietly("the client went away")
            raise
        except Exception as exc:  # noqa: BLE001 - an agent run always ends in a final state
            self.session.rollback()
            yield from self.fail(f"{type(exc).__name__}: {exc}", traceback.format_exc())

    def begin(self) -> Iterator[AgentEvent]:
        self.fire("start")
        preselected = self.selection.selected if self.selection else []
        yield self.event("run.started", runId=self.run.id, chatId=self.run.chat_id, profile=self.profile_name,
                         toolboxes=list(self.toolset.active), preselected=preselected,
                         requestable=[t.id for t in self.toolset.requestable()])
        if self.selection is not None:
            detail = self.selection.detail()
            self.record("selection", name=",".join(preselected) or None, detail=detail)
            yield self.event("toolbox.preselected", toolboxIds=preselected, scores=detail["scores"],
                             marketplace=detail["marketplace"], limits=detail["limits"],
                             labels=[self.toolset.registry.toolbox(box).label for box in preselected])

    def think(self) -> Iterator[AgentEvent]:
        """One round: a model call with the round's tools; its text streams as it comes."""
        self.budget.rounds += 1
        self.check_not_cancelled()
        tools = self.toolset.definitions()
        offered = [t["function"]["name"] for t in tools]
        yield self.event("round.started", round=self.budget.rounds, tools=offered)
        started = time.monotonic()
        reply = yield from self._stream(tools)
        self.account(reply)
        self.record("round", commit=False, detail={"toolsOffered": offered, "toolboxes": list(self.toolset.active),
                                     "text": reply.text, "toolCalls": [c.to_dict() for c in reply.tool_calls],
                                     "model": reply.model, "provider": reply.provider,
                                     "failovers": list(reply.failovers)},
                    prompt_tokens=reply.usage.get("prompt_tokens"),
                    completion_tokens=reply.usage.get("completion_tokens"), cost_chf=reply.cost_chf,
                    duration_ms=int((time.monotonic() - started) * 1000))
        return reply

    def _stream(self, tools: list[dict[str, Any]] | None) -> Iterator[AgentEvent]:
        client = self.client or get_ai_client()
        reply: AiReply | None = None
        for piece in client.chat_stream(self.messages, model=self.config.model, system=self.system_prompt(),
                                        temperature=self.config.temperature, tools=tools or None):
            if isinstance(piece, TextDelta):
                yield self.event("text.delta", round=self.budget.rounds, text=piece.text)
            elif isinstance(piece, ChatDone):
                reply = piece.reply
        if reply is None:
            raise AiError("the AI provider's answer ended without its final piece")
        return reply

    def execute_calls(self, reply: AiReply) -> Iterator[AgentEvent]:
        """The batch of tool calls of one answer, in order; a refused call does not stop it."""
        self.fire("call_tools")
        self.messages.append(reply.assistant_message())
        yield from self.run_calls(list(reply.tool_calls), reply.text)

    def run_calls(self, calls: list[ToolCall], reason: str) -> Iterator[AgentEvent]:
        """`calls` in order, then back to thinking; a call that needs approval pauses the run
        (the calls after it wait with it)."""
        for index, call in enumerate(calls):
            self.check_not_cancelled()
            suppressed = self.budget.admit(call.name, call.arguments)
            if suppressed:
                yield from self.guard("suppressed", suppressed, tool=call.name, callId=call.id)
                self.answer_call(call.id, json.dumps({"error": suppressed}))
                continue
            if call.name == REQUEST_TOOLBOX:
                yield from self.escalate(call.id, call.arguments)
            elif call.name == QUERY_FEATURE_INSTANCE:
                yield from self.call_sub_agent(call.id, call.arguments)
            elif needed := self.approval_needed(call.name):
                yield from self.ask_approval(call, needed, calls[index + 1:], reason)
            else:
                yield from self.call_tool(call.id, call.name, call.arguments)
        cut = fit_history(self.messages)
        if cut:
            yield from self.guard("history", f"older tool results shortened by {cut:,} characters to keep all "
                                             "tool results in the history under 64,000 characters")
        self.fire("tools_done")

    # --- tool calls ---------------------------------------------------------------------------

    def call_tool(self, call_id: str, name: str, arguments: str) -> Iterator[AgentEvent]:
        """A tool of the action library, run as the user in their mandate and instance."""
        yield self.event("tool.started", round=self.budget.rounds, callId=call_id, name=name,
                         arguments=_parsed(arguments))
        started = time.monotonic()
        action = self.toolset.action_for(name)
        if action is None:
            box = self.toolset.toolbox_of_tool(name)
            error = (f"tool '{name}' is not offered now; request the toolbox '{box}' first" if box
                     else f"unknown tool '{name}'")
            ok, text = False, json.dumps({"error": error})
        else:
            context = ActionContext(self.session, self.user, self.instance.mandate_id, self.instance.id)
            result = execute_tool_call(name, arguments, context, self.toolset.registry)
            ok, text = result.ok, result_for_agent(result)
        self.answer_call(call_id, text)
        duration_ms = int((time.monotonic() - started) * 1000)
        self.record("tool_call", name=name, call_id=call_id, arguments=_parsed(arguments), result=text, ok=ok,
                    duration_ms=duration_ms)
        yield self.event("tool.finished", round=self.budget.rounds, callId=call_id, name=name, ok=ok,
                         result=truncate_for_agent(text, 2_000), durationMs=duration_ms)

    # --- approvals (backend/agent/approvals.py) -------------------------------------------------

    def approval_needed(self, name: str) -> frozenset[str]:
        """The consequences of the offered tool `name` that need approval here (none in a sub-agent)."""
        action = self.toolset.action_for(name)
        if action is None or self.parent is not None:
            return frozenset()
        if self._required is None:
            self._required = approvals.required_consequences(self.session, self.instance.mandate_id,
                                                             self.profile_name, self.config.approvals)
        return approvals.needs_approval(action, self._required)

    def ask_approval(self, call: ToolCall, consequences: frozenset[str], rest: list[ToolCall],
                     reason: str) -> Iterator[AgentEvent]:
        """Open the approval task for `call` (whose `consequences` need it), keep what the run
        continues from, and pause."""
        action = self.toolset.action_for(call.name)
        arguments = _parsed(call.arguments)
        task = approvals.open_task(self.session, self.run, call.id, call.name, action, arguments, reason,
                                   consequences)
        self.session.flush()
        self.run.resume_state = {"taskId": task.id, "reason": reason, "calls": [c.to_dict() for c in [call, *rest]],
                                 "messages": self.messages, "budget": budget_state(self.budget),
                                 "systemExtra": self.system_extra}
        self.record("approval", commit=False, name=call.name, call_id=call.id, arguments=arguments,
                    detail={"taskId": task.id, "label": action.label, "reason": reason,
                            "consequences": sorted(consequences)})
        self.fire("await_approval")
        yield self.event("approval.required", round=self.budget.rounds, taskId=task.id, callId=call.id,
                         name=call.name, label=action.label, arguments=arguments, reason=reason,
                         consequences=sorted(consequences))
        raise AwaitingApproval()

    def _after_decision(self, task: HumanTask) -> Iterator[AgentEvent]:
        """The decided call runs (approved) or the agent reads why not; then the batch and the
        run go on."""
        state = self.run.resume_state or {}
        calls = [ToolCall(**c) for c in state.get("calls") or []]
        outcome = approvals.outcome_of(task)
        decider = self.session.get(User, task.completed_by) if task.completed_by else None
        by = decider.username if decider else ""
        self.run.resume_state = None
        self.record("approval_decided", commit=False, name=calls[0].name if calls else None,
                    call_id=task.node_id, ok=outcome == approvals.APPROVED,
                    detail={"taskId": task.id, "outcome": outcome, "by": by,
                            "comment": (task.data or {}).get("comment")})
        try:
            self.fire("approval_answered")  # the guarded UPDATE: one resumer goes on
        except (ConcurrentTransition, IllegalTransition):
            return  # another process took it on first
        yield self.event("approval.decided", round=self.budget.rounds, taskId=task.id, callId=task.node_id,
                         outcome=outcome, by=by)
        if calls:
            first = calls[0]
            if outcome == approvals.APPROVED:
                yield from self.call_tool(first.id, first.name, first.arguments)
            else:
                self.answer_call(first.id, approvals.not_run_text(outcome, task, by))
        yield from self.run_calls(calls[1:], str(state.get("reason") or ""))
        yield from self.rounds()

    @classmethod
    def resumed(cls, session: Session, run: AgentRun, client: AiClient | None = None) -> AgentRunner | None:
        """The runner of a run waiting for an approval, rebuilt from the database as it paused
        (the toolset afresh: rights and connections are checked again when the call runs)."""
        state = run.resume_state or {}
        user = session.get(User, run.sys_created_by)
        instance = session.get(FeatureInstance, run.feature_instance_id)
        if user is None or instance is None or not state:
            return None
        self = cls.__new__(cls)
        self.session, self.user, self.instance, self.prompt = session, user, instance, run.prompt
        self.profile_name, self.parent, self.client = run.profile, None, client
        self.config = AgentConfig.model_validate(run.config or {})
        self.access = AccessContext(session, user)
        self.toolset = Toolset(self.access, instance, self.config)
        self.toolset.active = [box for box in run.toolboxes or [] if box in self.toolset._usable]
        self.budget = restored_budget(self.config, state.get("budget") or {})
        self.system_extra = str(state.get("systemExtra") or "")
        self.messages = list(state.get("messages") or [])
        self.selection = None  # chosen before round 1; the run's toolboxes are kept in run.toolboxes
        self.seq = session.exec(select(func.max(AgentStep.seq)).where(AgentStep.run_id == run.id)).one() or 0
        self.run = run
        self._required = None
        return self

    def escalate(self, call_id: str, arguments: str) -> Iterator[AgentEvent]:
        """requestToolbox: activate the toolbox for the next round, or say why not."""
        args = _parsed(arguments)
        box = str(args.get("toolboxId") or "") if isinstance(args, dict) else ""
        reason = args.get("reason") if isinstance(args, dict) else None
        requestable = {t.id for t in self.toolset.requestable()}
        if box in requestable:
            self.fire("escalate_toolbox")
            tools = self.toolset.activate(box)
            self.run.toolboxes = list(self.toolset.active)
            granted: dict[str, Any] = {"activated": box, "tools": tools,
                                       "note": "these tools are offered from your next step on"}
            connections = self.toolset.connections_for(box)
            if connections:  # what the tools' connectionId takes (the user's active connections)
                granted["connections"] = connections
            text = json.dumps(granted)
            self.record("escalation", name=box, call_id=call_id, arguments=args, result=text, ok=True,
                        detail={"reason": reason, "tools": tools})
            self.answer_call(call_id, text)
            yield self.event("toolbox.escalated", round=self.budget.rounds, toolboxId=box, reason=reason,
                             tools=tools, label=self.toolset.registry.toolbox(box).label)
            return
        why = self.toolset.why_not_requestable(box) if box else "toolboxId is missing"
        text = json.dumps({"error": why, "requestable": sorted(requestable)})
        self.record("escalation", name=box or None, call_id=call_id, arguments=args, result=text, ok=False,
                    detail={"reason": reason, "refused": why})
        self.answer_call(call_id, text)
        yield self.event("toolbox.refused", round=self.budget.rounds, toolboxId=box, reason=why)

    def call_sub_agent(self, call_id: str, arguments: str) -> Iterator[AgentEvent]:
        """queryFeatureInstance: a Feature Data Agent answers a question about one instance."""
        from backend.agent.feature_data import sub_agent_system_prompt

        args = _parsed(arguments)
        args = args if isinstance(args, dict) else {}
        instance_id, question = str(args.get("instanceId") or ""), str(args.get("question") or "")
        target = next((t for t in self.toolset.sub_agent_targets()
                       if t.id == instance_id and t.feature_code == args.get("featureCode")), None)
        if target is None or not question.strip():
            error = (f"feature instance '{instance_id}' of '{args.get('featureCode')}' was not found among the "
                     "instances you may ask" if target is None else "question is empty")
            text = json.dumps({"error": error})
            self.record("sub_agent", name=QUERY_FEATURE_INSTANCE, call_id=call_id, arguments=args, result=text,
                        ok=False)
            self.answer_call(call_id, text)
            yield self.event("subagent.refused", round=self.budget.rounds, instanceId=instance_id, reason=error)
            return
        self.fire("call_sub_agent")
        remaining = None
        if self.config.max_cost_chf is not None:
            remaining = max(0.0001, self.config.max_cost_chf - self.budget.cost_chf)
        child_config = profile("featureData")
        if remaining is not None and (child_config.max_cost_chf is None or remaining < child_config.max_cost_chf):
            child_config.max_cost_chf = remaining
        child = AgentRunner(self.session, self.user, target, question, profile_name="featureData",
                            config=child_config, parent=self, client=self.client,
                            system_extra=sub_agent_system_prompt(self.session, self.user, target))
        yield self.event("subagent.started", round=self.budget.rounds, callId=call_id, runId=child.run.id,
                         featureCode=target.feature_code, instanceId=target.id, question=question)
        for event in child.events():
            if event.type in ("tool.started", "tool.finished", "guard", "toolbox.escalated"):
                yield AgentEvent(event.type, {**event.data, "subAgentRunId": child.run.id})
        self.budget.add_cost(child.run.cost_chf)
        self._add_usage(child.run.prompt_tokens, child.run.completion_tokens, child.run.cost_chf)
        if child.run.status == states.COMPLETED:
            text, ok = truncate_for_agent(child.run.answer or "", RESULT_LIMIT), True
        else:
            text, ok = json.dumps({"error": f"the data agent {child.run.status}: {child.run.error}"}), False
        self.record("sub_agent", name=QUERY_FEATURE_INSTANCE, call_id=call_id, arguments=args, result=text, ok=ok,
                    detail={"subAgentRunId": child.run.id, "instanceId": target.id})
        self.answer_call(call_id, text)
        yield self.event("subagent.finished", round=self.budget.rounds, callId=call_id, runId=child.run.id,
                         ok=ok, answer=truncate_for_agent(text, 2_000))

    def answer_call(self, call_id: str, text: str) -> None:
        self.messages.append({"role": "tool", "tool_call_id": call_id, "content": truncate_for_agent(text)})

    # --- guards and endings -------------------------------------------------------------------

    def guard(self, kind: str, message: str, **data: Any) -> Iterator[AgentEvent]:
        self.record("guard", name=kind, result=message, detail=data or None)
        yield self.event("guard", round=self.budget.rounds, kind=kind, message=message, **data)

    def force_final(self, reason: str) -> Iterator[AgentEvent]:
        """A budget is spent: one last call without tools forces a visible answer."""
        yield from self.guard("budget", reason)
        self.check_not_cancelled()
        self.messages.append({"role": "user", "content": FINAL_NOTE.format(reason=reason)})
        started = time.monotonic()
        reply = yield from self._stream(None)
        self.account(reply)
        self.record("round", detail={"toolsOffered": [], "forcedFinal": True, "text": reply.text,
                                     "model": reply.model, "provider": reply.provider},
                    prompt_tokens=reply.usage.get("prompt_tokens"),
                    completion_tokens=reply.usage.get("completion_tokens"), cost_chf=reply.cost_chf,
                    duration_ms=int((time.monotonic() - started) * 1000))
        yield from self.complete(reply.text)

    def complete(self, text: str) -> Iterator[AgentEvent]:
        self.run.answer = text
        self.run.finished_at = utcnow()
        self.record("final", commit=False, result=text)
        self.fire("complete")
        yield self.event("final", text=text, rounds=self.budget.rounds, toolCalls=self.budget.executed,
                         usage={"promptTokens": self.run.prompt_tokens, "completionTokens": self.run.completion_tokens},
                         costChf=self.run.cost_chf)

    def fail(self, message: str, stack: str | None = None) -> Iterator[AgentEvent]:
        self.session.refresh(self.run)
        if self.run.status in states.ACTIVE or self.run.status == states.IDLE:
            self.run.error = message
            self.run.finished_at = utcnow()
            self.record("error", result=message, detail={"stack": stack} if stack else None)
            self.fire("fail")
        yield self.event("error", message=message)

    def cancelled(self) -> Iterator[AgentEvent]:
        self.session.rollback()
        self.session.refresh(self.run)
        yield self.event("cancelled", message=self.run.error or "the run was cancelled")

    def _cancel_quietly(self, reason: str) -> None:
        try:
            self.session.rollback()
            self.session.refresh(self.run)
            if self.run.status in states.ACTIVE:
                self.run.error = reason
                self.run.finished_at = utcnow()
                self.fire("cancel")
        except Exception:  # noqa: BLE001 - the stream is closing; nothing left to tell
            self.session.rollback()

    # --- bookkeeping --------------------------------------------------------------------------

    def fire(self, event: str) -> None:
        """Apply an agent run transition and commit the run with it; a cancel from elsewhere
        shows as a failed guarded update (or an illegal transition from `cancelled`)."""
        changes = {name: getattr(self.run, name) for name in
                   ("answer", "error", "toolboxes", "rounds", "tool_calls", "prompt_tokens", "completion_tokens",
                    "cost_chf", "finished_at")}
        changes["rounds"] = self.budget.rounds
        changes["tool_calls"] = self.budget.executed
        try:
            states.MACHINE.apply(self.session, self.run, event, **changes)
        except (ConcurrentTransition, IllegalTransition):
            self.session.rollback()
            self.session.refresh(self.run)
            if self.run.status == states.CANCELLED:
                raise RunCancelled() from None
            raise
        self.session.commit()

    def check_not_cancelled(self) -> None:
        self.session.refresh(self.run, ["status", "lock_version"])
        if self.run.status == states.CANCELLED:
            raise RunCancelled()

    def account(self, reply: AiReply) -> None:
        self.budget.add_cost(reply.cost_chf)
        self._add_usage(reply.usage.get("prompt_tokens", 0), reply.usage.get("completion_tokens", 0),
                        reply.cost_chf)

    def _add_usage(self, prompt_tokens: int | None, completion_tokens: int | None, cost: float | None) -> None:
        self.run.prompt_tokens += prompt_tokens or 0
        self.run.completion_tokens += completion_tokens or 0
        if cost is not None:
            self.run.cost_chf = (self.run.cost_chf or 0.0) + cost

    def record(self, kind: str, commit: bool = True, **fields: Any) -> AgentStep:
        """One trace entry, committed (with what the tool call wrote) unless the state
        transition that follows commits it."""
        self.seq += 1
        step = AgentStep(run_id=self.run.id, seq=self.seq, round=self.budget.rounds, kind=kind, **fields)
        self.session.add(step)
        if commit:
            self.session.commit()
        return step

    def event(self, type_: str, **data: Any) -> AgentEvent:
        return AgentEvent(type_, {"runId": self.run.id, **data})

    def system_prompt(self) -> str:
        """Who the agent is, the toolbox catalogue (one line each) and, for sub-agents, the schema."""
        now = datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC")
        lines = [f"You are the PowerOn assistant of \"{self.instance.label}\" ({self.instance.feature_code}). "
                 f"You act for {self.user.display_name or self.user.username}, with their rights. Now: {now}.",
                 "Use tools when they help; answer in the user's language; be concise and say what you did."]
        active = ", ".join(self.toolset.active) or "none"
        lines.append(f"Active toolboxes: {active}.")
        requestable = self.toolset.requestable()
        if requestable:
            lines.append("Toolboxes you can request with requestToolbox when your task needs them:")
            lines.extend(f"- {t.id}: {t.description}" for t in requestable)
        targets = self.toolset.sub_agent_targets()
        if targets:
            lines.append("Feature instances whose data you can ask about with queryFeatureInstance:")
            lines.extend(f"- {t.id}: {t.label} ({t.feature_code})" for t in targets)
        if self.system_extra:
            lines.append(self.system_extra)
        return "\n".join(lines)


def _parsed(arguments: str) -> Any:
    """Tool-call arguments as JSON for the trace, or the raw text when they are not JSON."""
    try:
        return json.loads(arguments or "{}")
    except (json.JSONDecodeError, TypeError):
        return arguments


def instance_for(access: AccessContext, instance_id: str) -> FeatureInstance:
    """The instance the user may open, else NotFound."""
    try:
        return access.require_instance(instance_id)
    except NotFound:
        raise NotFound(f"feature instance {instance_id} not found") from None
