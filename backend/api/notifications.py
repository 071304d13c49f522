"""The caller's notifications (issue 7, item 5): list, unread count, mark read.

Every route reads or changes the signed-in user's own rows only; anybody else's notification
answers 404 like a missing one.
"""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Path, Query

from backend.api.deps import CurrentUser, DbSession
from backend.api.permissions import permission
from backend.api.schemas import NotificationOut, ReadAllResult, UnreadCount
from backend.notifications import service

router = APIRouter(prefix="/api/notifications", tags=["notifications"])

NotificationId = Annotated[str, Path(alias="notificationId")]


@router.get("", response_model=list[NotificationOut], **permission("authenticated"))
def list_notifications(user: CurrentUser, session: DbSession,
                       unread: Annotated[bool, Query(description="only the unread ones")] = False,
                       limit: Annotated[int, Query(ge=1, le=service.LIST_LIMIT_MAX)] = 50,
                       ) -> list[NotificationOut]:
    """The caller's notifications, newest first."""
    return [NotificationOut.model_validate(n) for n in service.list_notifications(session, user, unread, limit)]


@router.get("/count", response_model=UnreadCount, **permission("authenticated"))
def count_unread(user: CurrentUser, session: DbSession) -> UnreadCount:
    """How many of the caller's notifications are unread (the shell's bell)."""
    return UnreadCount(unread=service.unread_count(session, user))


@router.post("/read-all", response_model=ReadAllResult, **permission("authenticated"))
def read_all(user: CurrentUser, session: DbSession) -> ReadAllResult:
    """Mark every unread notification of the caller read."""
    marked = service.mark_all_read(session, user)
    return ReadAllResult(marked=marked, unread=service.unread_count(session, user))


@router.post("/{notificationId}/read", response_model=NotificationOut, **permission("authenticated"))
def read_one(notification_id: NotificationId, user: CurrentUser, session: DbSession) -> NotificationOut:
    """Mark one of the caller's notifications read (404 for anybody else's)."""
    return NotificationOut.model_validate(service.mark_read(session, user, notification_id))
