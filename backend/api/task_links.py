"""A task's mail links (issue 23): what a link is for, and deciding with it.

- ``GET /api/task-links/{token}``: the link's state (open, signIn, foreign, finished, used,
  expired, invalid) with the sentence the page shows, and the task as its mail showed it;
- ``POST /api/task-links/{token}/decision {approved, comment?}``: approve or reject. 401 when the
  visitor must sign in first, 403 when the signed-in visitor may not complete the task, 404 for a
  link that does not exist (mistyped, altered), 409 for a used or expired link or a task answered
  already (saying by whom), 422 for a form task or a bad body.

Both are public: the token is the credential. A bearer token, when sent, says who the visitor is
(backend/engine/task_links.py decides what that allows).
"""

from __future__ import annotations

from datetime import datetime
from typing import Annotated

from fastapi import APIRouter, HTTPException, Path, Request
from pydantic import Field

from backend.api.deps import DbSession, bearer_token
from backend.api.permissions import permission
from backend.api.schemas import CamelModel, StrictCamelModel
from backend.auth import token_and_user
from backend.engine.task_links import COMMENT_MAX, LinkView, SignInRequired, TaskLinks

router = APIRouter(prefix="/api/task-links", tags=["tasks"])
LinkToken = Annotated[str, Path(alias="token", max_length=200)]


class TaskLinkOut(CamelModel):
    """What a mail's link is for (task fields only for a link that exists)."""

    state: str
    reason: str
    task_id: str | None = None
    kind: str | None = None
    title: str = ""
    message: str = ""
    context: str = ""
    recipient: str = ""
    signed_in_as: str | None = None
    due_at: datetime | None = None
    expires_at: datetime | None = None
    status: str | None = None
    outcome: str | None = None
    decided_by: str | None = None
    decided_at: datetime | None = None
    decided_via: str | None = None
    one_click: bool = False


class TaskLinkDecision(StrictCamelModel):
    approved: bool
    comment: str | None = Field(default=None, max_length=COMMENT_MAX)


def _door(request: Request, session: DbSession) -> TaskLinks:
    found = token_and_user(session, bearer_token(request))
    return TaskLinks(session, found[1] if found else None)


def _out(view: LinkView) -> TaskLinkOut:
    return TaskLinkOut.model_validate(view, from_attributes=True)


@router.get("/{token}", response_model=TaskLinkOut, **permission("public"))
def view_link(token: LinkToken, request: Request, session: DbSession) -> TaskLinkOut:
    """What the link is for and whether the visitor may decide with it now."""
    return _out(_door(request, session).view(token))


@router.post("/{token}/decision", response_model=TaskLinkOut, **permission("public"))
def decide_with_link(token: LinkToken, body: TaskLinkDecision, request: Request, session: DbSession) -> TaskLinkOut:
    """Approve or reject the link's task; the link is used up."""
    try:
        return _out(_door(request, session).decide(token, body.approved, body.comment))
    except SignInRequired as exc:
        raise HTTPException(status_code=401, detail=str(exc), headers={"WWW-Authenticate": "Bearer"}) from None
