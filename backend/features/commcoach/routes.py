"""REST routes of one CommCoach instance: {base} = /api/commcoach/{instanceId}.

Mounted automatically under /api/commcoach by the feature registry. The agent routes are the
platform's (backend/api/agent.py: POST {base}/agent streams a coaching turn, chats, runs,
cancel), with the instance's persona added to the agent's system prompt. The persona
(GET|PUT {base}/settings) and a chat's session summary (GET|POST
{base}/agent/chats/{chatId}/summary) go through the CommCoach's door
(backend/features/commcoach/interface.py), whose methods declare and enforce the rights; the
routes carry those declarations (declared_by) and only translate.
"""

from __future__ import annotations

from datetime import datetime
from typing import Annotated

from fastapi import APIRouter, Depends, HTTPException, Path
from pydantic import Field

from backend.ai import AiError
from backend.api.agent import add_agent_routes
from backend.api.deps import CurrentUser, DbSession
from backend.api.permissions import declared_by
from backend.api.schemas import CamelModel, StrictCamelModel
from backend.db.models import AgentChat
from backend.features.commcoach.interface import CommCoachInterface, get_interface, open_interface, persona_text
from backend.features.commcoach.main import FEATURE_CODE
from backend.rbac.access import AccessContext

router = APIRouter(prefix="/{instanceId}", tags=["commcoach"])
AI_UNAVAILABLE = {503: {"description": "No AI provider is configured, or it failed; `detail` says which (nothing "
                                       "is saved).",
                        "content": {"application/json": {"schema": {"$ref": "#/components/schemas/ErrorOut"}}}}}


class CoachSettingsOut(CamelModel):
    system_prompt: str
    is_default: bool
    can_configure: bool


class CoachSettingsIn(StrictCamelModel):
    system_prompt: str | None = Field(..., description="The coach's persona and goal (1–8,000 characters); "
                                                       "null restores the default")


class ChatSummaryOut(CamelModel):
    chat_id: str
    summary: str
    sys_modified_at: datetime


def commcoach(
    instance_id: Annotated[str, Path(alias="instanceId")], user: CurrentUser, session: DbSession
) -> CommCoachInterface:
    """The caller's door to the instance; 404 when they may not open it (or it is no CommCoach)."""
    return get_interface(user, None, instance_id, session)


Coach = Annotated[CommCoachInterface, Depends(commcoach)]
ChatId = Annotated[str, Path(alias="chatId")]


def _summary_out(chat: AgentChat) -> ChatSummaryOut:
    return ChatSummaryOut(chat_id=chat.id, summary=chat.summary or "", sys_modified_at=chat.sys_modified_at)


@router.get("/settings", response_model=CoachSettingsOut, **declared_by(CommCoachInterface.coach_settings))
def get_settings(iface: Coach) -> CoachSettingsOut:
    """The coach's persona and goal (the instance's system prompt) and whether the caller may change it."""
    return CoachSettingsOut.model_validate(iface.coach_settings())


@router.put("/settings", response_model=CoachSettingsOut, **declared_by(CommCoachInterface.configure))
def put_settings(iface: Coach, body: CoachSettingsIn) -> CoachSettingsOut:
    """Set the coach's persona and goal (1–8,000 characters); `systemPrompt: null` restores the default."""
    return CoachSettingsOut.model_validate(iface.configure(body.system_prompt))


@router.get("/agent/chats/{chatId}/summary", response_model=ChatSummaryOut,
            **declared_by(CommCoachInterface.chat_summary))
def get_summary(iface: Coach, chat_id: ChatId) -> ChatSummaryOut:
    """The chat's saved session summary ("" while none was made)."""
    return _summary_out(iface.chat_summary(chat_id))


@router.post("/agent/chats/{chatId}/summary", response_model=ChatSummaryOut, responses=AI_UNAVAILABLE,
             **declared_by(CommCoachInterface.summarise_chat))
def summarise(iface: Coach, chat_id: ChatId) -> ChatSummaryOut:
    """Summarise the session (key topics, what went well, what to practise next) with the AI model and
    save it, replacing an earlier summary; 409 when the chat has no answered turns, 503 when the AI
    provider is missing or fails (nothing is saved)."""
    try:
        return _summary_out(iface.summarise_chat(chat_id))
    except AiError as exc:
        raise HTTPException(status_code=503, detail=f"the session could not be summarised: {exc}") from None


def _persona(access: AccessContext, instance_id: str) -> str:
    """The instance's persona for POST {base}/agent (the route's AgentChats has checked the instance)."""
    return persona_text(open_interface(access, instance_id).system_prompt())


# --- the coach (the agent): POST {base}/agent streams a turn; chats, runs, cancel -------------

add_agent_routes(router, FEATURE_CODE, system_extra=_persona)
