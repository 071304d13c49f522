"""Which events a user is told of on which channel (issue 23): task assigned, task expiring, run
failed × in the app, by mail, by Web Push. Without a saved choice the default holds: every event
in the app and by mail, push only once the user subscribed a browser (push is opt-in there).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from sqlalchemy.exc import IntegrityError
from sqlmodel import Session, select

from backend.db.models import NotificationSetting
from backend.errors import FieldError, InvalidInput
from backend.rbac.access import AccessContext
from backend.rbac.door import Door, guarded

TASK_ASSIGNED = "task.assigned"
TASK_EXPIRING = "task.expiring"
RUN_FAILED = "run.failed"
EVENTS = (TASK_ASSIGNED, TASK_EXPIRING, RUN_FAILED)
APP, MAIL, PUSH = "app", "mail", "push"
CHANNELS = (APP, MAIL, PUSH)


def settings_of(session: Session, user_id: str) -> dict[tuple[str, str], bool]:
    """Every (event, channel) of the user with its choice, the defaults filled in."""
    chosen = {(row.event, row.channel): row.enabled for row in session.exec(
        select(NotificationSetting).where(NotificationSetting.user_id == user_id)).all()}
    return {(event, channel): chosen.get((event, channel), True) for event in EVENTS for channel in CHANNELS}


def wants(session: Session, user_id: str, event: str, channel: str) -> bool:
    """Whether the user is told of `event` on `channel` (True unless they switched it off)."""
    row = session.exec(select(NotificationSetting.enabled).where(
        NotificationSetting.user_id == user_id, NotificationSetting.event == event,
        NotificationSetting.channel == channel)).first()
    return True if row is None else bool(row)


# --- the settings door (issue 23, part 5) -------------------------------------------------------

EVENT_LABELS = {TASK_ASSIGNED: "Task assigned", TASK_EXPIRING: "Task expiring", RUN_FAILED: "Run failed"}
CHANNEL_LABELS = {APP: "In the app", MAIL: "E-mail", PUSH: "Push"}


@dataclass(frozen=True)
class Setting:
    """One event on one channel and whether the user is told there."""

    event: str
    channel: str
    enabled: bool


def all_settings(session: Session, user_id: str) -> list[Setting]:
    """Every event × channel of the user (events, then channels, in their fixed order)."""
    chosen = settings_of(session, user_id)
    return [Setting(event, channel, chosen[(event, channel)]) for event in EVENTS for channel in CHANNELS]


def _check(changes: Sequence[tuple[object, object, object]]) -> list[tuple[str, str, bool]]:
    """The changes as (event, channel, enabled); InvalidInput naming every bad entry's field."""
    errors = []
    for index, (event, channel, enabled) in enumerate(changes):
        if event not in EVENTS:
            errors.append(FieldError(f"settings[{index}].event",
                                     f"unknown event {event!r}: one of {', '.join(EVENTS)}"))
        if channel not in CHANNELS:
            errors.append(FieldError(f"settings[{index}].channel",
                                     f"unknown channel {channel!r}: one of {', '.join(CHANNELS)}"))
        if not isinstance(enabled, bool):
            errors.append(FieldError(f"settings[{index}].enabled", "must be true or false"))
    if errors:
        raise InvalidInput(errors)
    return [(str(event), str(channel), bool(enabled)) for event, channel, enabled in changes]


def change_settings(session: Session, user_id: str,
                    changes: Sequence[tuple[object, object, object]]) -> list[Setting]:
    """Save the user's choices (all or none: a bad entry changes nothing); every setting after."""
    for event, channel, enabled in _check(changes):
        query = select(NotificationSetting).where(NotificationSetting.user_id == user_id,
                                                  NotificationSetting.event == event,
                                                  NotificationSetting.channel == channel)
        row = session.exec(query).first()
        if row is None:
            try:
                with session.begin_nested():  # a second request saving the same choice at once
                    session.add(NotificationSetting(user_id=user_id, event=event, channel=channel, enabled=enabled))
                continue
            except IntegrityError:
                row = session.exec(query.execution_options(populate_existing=True)).one()
        row.enabled = enabled
        session.add(row)
    session.flush()
    return all_settings(session, user_id)


class NotificationSettings(Door):
    """The door to the signed-in user's own notification settings (any signed-in user)."""

    def __init__(self, access: AccessContext):
        self.access = access

    @guarded("authenticated")
    def list(self) -> list[Setting]:
        """Every event × channel with the user's choice (defaults: on)."""
        return all_settings(self.access.session, self.access.user.id)

    @guarded("authenticated")
    def change(self, changes: Sequence[tuple[object, object, object]]) -> list[Setting]:
        """Save (event, channel, enabled) choices of the user; InvalidInput naming a bad entry."""
        return change_settings(self.access.session, self.access.user.id, changes)
