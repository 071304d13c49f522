"""The agent's REST routes, shared by every feature with an agent (Workspace, Graphical Editor):
{base} = /api/<featureCode>/{instanceId}.

POST {base}/agent streams a run's events as server-sent events; chats and runs (with their
trace) are read back, and a working run can be cancelled. The checks live in the door
backend.agent.service.AgentChats, whose declarations the routes carry (declared_by, items in
the pattern form `data.feature.{featureCode}.chat`); these routes only translate.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from typing import Annotated, Any

from fastapi import APIRouter, Path, Query, Response
from fastapi.responses import StreamingResponse

from backend.agent import approvals
from backend.agent import service as agent_service
from backend.agent.service import AgentChats, AgentRequest
from backend.api.deps import CurrentUser, DbSession
from backend.api.permissions import declared_by
from backend.api.schemas import CamelModel
from backend.db.models import AgentRun
from backend.rbac.access import AccessContext

AgentRunId = Annotated[str, Path(alias="agentRunId")]
ChatId = Annotated[str, Path(alias="chatId")]
InstanceId = Annotated[str, Path(alias="instanceId")]
SSE_HEADERS = {"Cache-Control": "no-cache", "X-Accel-Buffering": "no"}
SSE_RESPONSES = {200: {"content": {"text/event-stream": {}}, "description": "server-sent events of the agent run: "
                       "run.started, round.started, text.delta, tool.started, tool.finished, toolbox.escalated, "
                       "toolbox.refused, subagent.started, subagent.finished, guard, approval.required (the run "
                       "waits for a person to approve a tool call; the stream ends), approval.decided, final, error, "
                       "cancelled"}}


class AgentPrompt(CamelModel):
    prompt: str
    chat_id: str | None = None


class AgentApproval(CamelModel):
    approved: bool
    comment: str | None = None


class AgentChatRename(CamelModel):
    title: str


class AgentChatOut(CamelModel):
    id: str
    title: str
    sys_created_by: str
    sys_created_at: datetime
    sys_modified_at: datetime


class AgentStepOut(CamelModel):
    seq: int
    round: int
    kind: str
    name: str | None
    call_id: str | None
    arguments: Any
    result: str | None
    ok: bool | None
    detail: Any
    prompt_tokens: int | None
    completion_tokens: int | None
    cost_chf: float | None
    duration_ms: int | None
    created_at: datetime


class AgentRunOut(CamelModel):
    id: str
    chat_id: str | None
    parent_run_id: str | None
    profile: str
    prompt: str
    status: str
    answer: str | None
    error: str | None
    config: Any
    toolboxes: Any
    rounds: int
    tool_calls: int
    prompt_tokens: int
    completion_tokens: int
    cost_chf: float | None
    sys_created_by: str
    started_at: datetime
    finished_at: datetime | None
    steps: list[AgentStepOut] | None = None
    sub_runs: list[AgentRunOut] | None = None


def run_out(chats: AgentChats, run: AgentRun, with_steps: bool = False) -> AgentRunOut:
    """`run` as the API shows it; `with_steps`: with its trace and its sub-agent runs (read through `chats`)."""
    out = AgentRunOut.model_validate(run)
    if not with_steps:
        return out
    return out.model_copy(update={
        "steps": [AgentStepOut.model_validate(s) for s in chats.run_steps(run)],
        "sub_runs": [run_out(chats, sub, True) for sub in chats.sub_runs(run)]})


def _chats(session: DbSession, user: CurrentUser, instance_id: str, feature_code: str) -> AgentChats:
    return AgentChats.of(AccessContext(session, user), instance_id, feature_code)


def event_stream(request: AgentRequest) -> StreamingResponse:
    """The run of `request`, streamed as server-sent events."""
    events = (event.to_sse() for event in agent_service.stream_run(request))
    return StreamingResponse(events, media_type="text/event-stream", headers=SSE_HEADERS)


def add_agent_routes(router: APIRouter, feature_code: str,
                     system_extra: Callable[[AccessContext, str], str] | None = None) -> None:
    """Add the agent routes of `feature_code` to its instance router (prefix /{instanceId})."""

    @router.post("/agent", response_class=StreamingResponse, responses=SSE_RESPONSES,
                 **declared_by(AgentChats.prepare_run))
    def run_agent(instance_id: InstanceId, body: AgentPrompt, user: CurrentUser,
                  session: DbSession) -> StreamingResponse:
        """Run the agent on `prompt` (continuing chat `chatId` when given) and stream its events."""
        chats = _chats(session, user, instance_id, feature_code)
        extra = system_extra(chats.access, instance_id) if system_extra else ""
        return event_stream(chats.prepare_run(body.prompt, body.chat_id, system_extra=extra))

    @router.get("/agent/chats", response_model=list[AgentChatOut], **declared_by(AgentChats.list_chats))
    def list_agent_chats(instance_id: InstanceId, user: CurrentUser, session: DbSession) -> list[AgentChatOut]:
        return [AgentChatOut.model_validate(c) for c in _chats(session, user, instance_id, feature_code).list_chats()]

    @router.patch("/agent/chats/{chatId}", response_model=AgentChatOut, **declared_by(AgentChats.rename_chat))
    def rename_agent_chat(instance_id: InstanceId, chat_id: ChatId, body: AgentChatRename, user: CurrentUser,
                          session: DbSession) -> AgentChatOut:
        chats = _chats(session, user, instance_id, feature_code)
        return AgentChatOut.model_validate(chats.rename_chat(chat_id, body.title))

    @router.delete("/agent/chats/{chatId}", status_code=204, response_class=Response,
                   **declared_by(AgentChats.delete_chat))
    def delete_agent_chat(instance_id: InstanceId, chat_id: ChatId, user: CurrentUser, session: DbSession) -> Response:
        """Delete a chat with its runs and their traces (409 while one of them still works)."""
        _chats(session, user, instance_id, feature_code).delete_chat(chat_id)
        return Response(status_code=204)

    @router.get("/agent/runs", response_model=list[AgentRunOut], **declared_by(AgentChats.list_runs))
    def list_agent_runs(instance_id: InstanceId, user: CurrentUser, session: DbSession,
                        chat_id: Annotated[str | None, Query(alias="chatId")] = None) -> list[AgentRunOut]:
        chats = _chats(session, user, instance_id, feature_code)
        return [run_out(chats, run) for run in chats.list_runs(chat_id)]

    @router.get("/agent/runs/{agentRunId}", response_model=AgentRunOut,
                **declared_by(AgentChats.get_run))
    def get_agent_run(instance_id: InstanceId, run_id: AgentRunId, user: CurrentUser,
                      session: DbSession) -> AgentRunOut:
        """A run with its trace: rounds (tools offered, tokens, cost), tool calls with arguments
        and results, escalations, guard interventions, and its sub-agent runs."""
        chats = _chats(session, user, instance_id, feature_code)
        return run_out(chats, chats.get_run(run_id), with_steps=True)

    @router.post("/agent/runs/{agentRunId}/approval", response_class=StreamingResponse, responses=SSE_RESPONSES,
                 **declared_by(AgentChats.decide_approval))
    def decide_agent_approval(instance_id: InstanceId, run_id: AgentRunId, body: AgentApproval, user: CurrentUser,
                              session: DbSession) -> StreamingResponse:
        """Approve (the tool call runs, once) or decline (the agent is told) the tool call a run in
        `waiting_approval` waits for, and stream the run as it goes on (409 when it waits for
        nothing or was decided already). The Inbox's task does the same."""
        decided = _chats(session, user, instance_id, feature_code).decide_approval(run_id, body.approved, body.comment)
        events = (event.to_sse() for event in approvals.resume_stream(decided))
        return StreamingResponse(events, media_type="text/event-stream", headers=SSE_HEADERS)

    @router.post("/agent/runs/{agentRunId}/cancel", response_model=AgentRunOut,
                 **declared_by(AgentChats.cancel_run))
    def cancel_agent_run(instance_id: InstanceId, run_id: AgentRunId, user: CurrentUser,
                         session: DbSession) -> AgentRunOut:
        """Cancel a run still working (409 when it has ended); it stops before its next step.
        Its starter may cancel it, and whoever may update every chat of the instance."""
        chats = _chats(session, user, instance_id, feature_code)
        return run_out(chats, chats.cancel_run(run_id))
