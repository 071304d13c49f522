"""The caller's notifications (issue 7, item 5): list, unread count, mark read; and which events
the caller is told of on which channel (issue 23: ``/api/notifications/settings``).

Every route reads or changes the signed-in user's own rows only; anybody else's notification
answers 404 like a missing one.
"""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Path, Query

from backend.api.deps import CurrentUser, DbSession
from backend.api.permissions import declared_by
from backend.api.schemas import CamelModel, NotificationOut, ReadAllResult, StrictCamelModel, UnreadCount
from backend.notifications import service
from backend.notifications.preferences import NotificationSettings
from backend.notifications.service import Notifications
from backend.rbac.access import AccessContext

router = APIRouter(prefix="/api/notifications", tags=["notifications"])

NotificationId = Annotated[str, Path(alias="notificationId")]


def _door(user, session) -> Notifications:
    return Notifications(AccessContext(session, user))


@router.get("", response_model=list[NotificationOut], **declared_by(Notifications.list))
def list_notifications(user: CurrentUser, session: DbSession,
                       unread: Annotated[bool, Query(description="only the unread ones")] = False,
                       limit: Annotated[int, Query(ge=1, le=service.LIST_LIMIT_MAX)] = 50,
                       ) -> list[NotificationOut]:
    """The caller's notifications, newest first."""
    return [NotificationOut.model_validate(n) for n in _door(user, session).list(unread, limit)]


@router.get("/count", response_model=UnreadCount, **declared_by(Notifications.unread_count))
def count_unread(user: CurrentUser, session: DbSession) -> UnreadCount:
    """How many of the caller's notifications are unread (the shell's bell)."""
    return UnreadCount(unread=_door(user, session).unread_count())


@router.post("/read-all", response_model=ReadAllResult, **declared_by(Notifications.mark_all_read))
def read_all(user: CurrentUser, session: DbSession) -> ReadAllResult:
    """Mark every unread notification of the caller read."""
    door = _door(user, session)
    marked = door.mark_all_read()
    return ReadAllResult(marked=marked, unread=door.unread_count())


@router.post("/{notificationId}/read", response_model=NotificationOut, **declared_by(Notifications.mark_read))
def read_one(notification_id: NotificationId, user: CurrentUser, session: DbSession) -> NotificationOut:
    """Mark one of the caller's notifications read (404 for anybody else's)."""
    return NotificationOut.model_validate(_door(user, session).mark_read(notification_id))


class SettingOut(CamelModel):
    event: str
    channel: str
    enabled: bool


class SettingIn(StrictCamelModel):
    event: str
    channel: str
    enabled: bool


class SettingsIn(StrictCamelModel):
    """The choices to save; events and channels not named keep theirs."""

    settings: list[SettingIn]


def _settings(user, session) -> NotificationSettings:
    return NotificationSettings(AccessContext(session, user))


@router.get("/settings", response_model=list[SettingOut], **declared_by(NotificationSettings.list))
def list_settings(user: CurrentUser, session: DbSession) -> list[SettingOut]:
    """Every event (task.assigned, task.expiring, run.failed) × channel (app, mail, push) of the caller."""
    return [SettingOut(event=s.event, channel=s.channel, enabled=s.enabled) for s in _settings(user, session).list()]


@router.put("/settings", response_model=list[SettingOut], **declared_by(NotificationSettings.change))
def change_settings(body: SettingsIn, user: CurrentUser, session: DbSession) -> list[SettingOut]:
    """Switch events on channels on or off for the caller (an unknown event or channel: 422 naming it)."""
    changed = _settings(user, session).change([(s.event, s.channel, s.enabled) for s in body.settings])
    return [SettingOut(event=s.event, channel=s.channel, enabled=s.enabled) for s in changed]
