"""The agent's REST routes, shared by every feature with an agent (Workspace, Graphical Editor):
{base} = /api/<featureCode>/{instanceId}.

POST {base}/agent streams a run's events as server-sent events; chats and runs (with their
trace) are read back, and a working run can be cancelled. The checks live in
backend.agent.service; these routes only translate.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from typing import Annotated, Any

from fastapi import APIRouter, Path, Query, Response
from fastapi.responses import StreamingResponse

from backend.agent import service as agent_service
from backend.agent.service import AgentRequest
from backend.api.deps import CurrentUser, DbSession
from backend.api.permissions import permission
from backend.api.schemas import CamelModel
from backend.db.models import AgentRun
from backend.rbac.access import AccessContext

AgentRunId = Annotated[str, Path(alias="agentRunId")]
ChatId = Annotated[str, Path(alias="chatId")]
InstanceId = Annotated[str, Path(alias="instanceId")]
SSE_HEADERS = {"Cache-Control": "no-cache", "X-Accel-Buffering": "no"}
SSE_RESPONSES = {200: {"content": {"text/event-stream": {}}, "description": "server-sent events of the agent run: "
                       "run.started, round.started, text.delta, tool.started, tool.finished, toolbox.escalated, "
                       "toolbox.refused, subagent.started, subagent.finished, guard, final, error, cancelled"}}


class AgentPrompt(CamelModel):
    prompt: str
    chat_id: str | None = None


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


def run_out(access: AccessContext, run: AgentRun, with_steps: bool = False) -> AgentRunOut:
    out = AgentRunOut.model_validate(run)
    if not with_steps:
        return out
    return out.model_copy(update={
        "steps": [AgentStepOut.model_validate(s) for s in agent_service.run_steps(access, run)],
        "sub_runs": [run_out(access, sub, True) for sub in agent_service.sub_runs(access, run)]})


def event_stream(request: AgentRequest) -> StreamingResponse:
    """The run of `request`, streamed as server-sent events."""
    events = (event.to_sse() for event in agent_service.stream_run(request))
    return StreamingResponse(events, media_type="text/event-stream", headers=SSE_HEADERS)


def add_agent_routes(router: APIRouter, feature_code: str,
                     system_extra: Callable[[AccessContext, str], str] | None = None) -> None:
    """Add the agent routes of `feature_code` to its instance router (prefix /{instanceId})."""
    chat = f"data.feature.{feature_code}.chat"
    use_agent = f"resource.feature.{feature_code}.useAgent"

    @router.post("/agent", response_class=StreamingResponse, responses=SSE_RESPONSES,
                 **permission("RESOURCE", use_agent))
    def run_agent(instance_id: InstanceId, body: AgentPrompt, user: CurrentUser,
                  session: DbSession) -> StreamingResponse:
        """Run the agent on `prompt` (continuing chat `chatId` when given) and stream its events."""
        access = AccessContext(session, user)
        request = agent_service.prepare_run(access, instance_id, body.prompt, body.chat_id,
                                            system_extra=system_extra(access, instance_id) if system_extra else "")
        return event_stream(request)

    @router.get("/agent/chats", response_model=list[AgentChatOut], **permission("DATA", chat, "read"))
    def list_agent_chats(instance_id: InstanceId, user: CurrentUser, session: DbSession) -> list[AgentChatOut]:
        chats = agent_service.list_chats(AccessContext(session, user), instance_id)
        return [AgentChatOut.model_validate(c) for c in chats]

    @router.patch("/agent/chats/{chatId}", response_model=AgentChatOut, **permission("DATA", chat, "update"))
    def rename_agent_chat(instance_id: InstanceId, chat_id: ChatId, body: AgentChatRename, user: CurrentUser,
                          session: DbSession) -> AgentChatOut:
        return AgentChatOut.model_validate(
            agent_service.rename_chat(AccessContext(session, user), instance_id, chat_id, body.title))

    @router.delete("/agent/chats/{chatId}", status_code=204, response_class=Response,
                   **permission("DATA", chat, "delete"))
    def delete_agent_chat(instance_id: InstanceId, chat_id: ChatId, user: CurrentUser, session: DbSession) -> Response:
        """Delete a chat with its runs and their traces (409 while one of them still works)."""
        agent_service.delete_chat(AccessContext(session, user), instance_id, chat_id)
        return Response(status_code=204)

    @router.get("/agent/runs", response_model=list[AgentRunOut], **permission("DATA", chat, "read"))
    def list_agent_runs(instance_id: InstanceId, user: CurrentUser, session: DbSession,
                        chat_id: Annotated[str | None, Query(alias="chatId")] = None) -> list[AgentRunOut]:
        access = AccessContext(session, user)
        return [run_out(access, run) for run in agent_service.list_runs(access, instance_id, chat_id)]

    @router.get("/agent/runs/{agentRunId}", response_model=AgentRunOut, **permission("DATA", chat, "read"))
    def get_agent_run(instance_id: InstanceId, run_id: AgentRunId, user: CurrentUser,
                      session: DbSession) -> AgentRunOut:
        """A run with its trace: rounds (tools offered, tokens, cost), tool calls with arguments
        and results, escalations, guard interventions, and its sub-agent runs."""
        access = AccessContext(session, user)
        return run_out(access, agent_service.get_run(access, instance_id, run_id), with_steps=True)

    @router.post("/agent/runs/{agentRunId}/cancel", response_model=AgentRunOut, **permission("DATA", chat, "update"))
    def cancel_agent_run(instance_id: InstanceId, run_id: AgentRunId, user: CurrentUser,
                         session: DbSession) -> AgentRunOut:
        """Cancel a run still working (409 when it has ended); it stops before its next step."""
        access = AccessContext(session, user)
        return run_out(access, agent_service.cancel_run(access, instance_id, run_id))
