"""Which events a user is told of on which channel (issue 23): task assigned, task expiring, run
failed × in the app, by mail, by Web Push. Without a saved choice the default holds: every event
in the app and by mail, push only once the user subscribed a browser (push is opt-in there).
"""

from __future__ import annotations

from sqlmodel import Session, select

from backend.db.models import NotificationSetting

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
