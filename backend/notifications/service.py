"""Notification rows: created for failed unattended runs and for human tasks waiting for someone,
read by their own user only.

Every read and change takes the signed-in user and touches only that user's rows; another
user's notification is "not found", exactly like a missing one. :class:`Notifications` is the
door the bell, the notifications page and /api/notifications call.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from sqlalchemy import func, or_, union, update
from sqlmodel import Session, select

from backend.db.after_commit import call_after_commit
from backend.db.models import (
    FeatureAccess,
    FeatureAccessRole,
    FeatureInstance,
    HumanTask,
    Notification,
    Role,
    User,
    UserMandate,
    UserMandateRole,
    Workflow,
    WorkflowRun,
    utcnow,
)
from backend.engine.steps import split_error
from backend.errors import FieldError, InvalidInput, NotFound
from backend.notifications.preferences import APP, MAIL, RUN_FAILED, TASK_ASSIGNED, TASK_EXPIRING, wants
from backend.rbac.access import AccessContext
from backend.rbac.door import Door, guarded
from backend.statemachines import workflow_run as run_lifecycle

# Runs nobody watched start: their failure is told to the workflow's owner. Manual runs (and the
# editor's test runs) are not: the person who started them sees the result.
NOTIFIED_TRIGGERS = ("schedule", "webhook", "event")
TITLE_MAX = 300
MESSAGE_MAX = 4000
LIST_LIMIT_MAX = 200


@dataclass(frozen=True)
class RunFailure:
    """What a failure notification says, for the in-app row and the e-mail alike."""

    notification: Notification
    workflow_name: str
    trigger: str
    email: str | None
    recipient_name: str


def _clip(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def notify_run_failed(session: Session, run_id: str) -> RunFailure | None:
    """The notification of the failed run `run_id` for its workflow's owner (added, flushed).

    None when nobody is to be told: the run is unknown or not failed, was not started by a
    schedule, webhook or event, its workflow has no (enabled) owner, or the owner was told
    already (one notification per run, however often this is called).
    """
    run = session.get(WorkflowRun, run_id)
    if run is None or run.status != run_lifecycle.FAILED or run.trigger not in NOTIFIED_TRIGGERS:
        return None
    workflow = session.get(Workflow, run.workflow_id)
    owner = session.get(User, workflow.sys_created_by) if workflow and workflow.sys_created_by else None
    if workflow is None or owner is None or owner.disabled:
        return None
    told = session.exec(select(Notification.id).where(Notification.user_id == owner.id,
                                                      Notification.kind == RUN_FAILED,
                                                      Notification.run_id == run.id)).first()
    if told is not None:
        return None
    message, _stack = split_error(run.error)
    notification = Notification(
        user_id=owner.id, mandate_id=run.mandate_id, kind=RUN_FAILED,
        title=_clip(f"Workflow '{workflow.name}' failed ({run.trigger} run)", TITLE_MAX),
        message=_clip(message or "the run failed without an error message", MESSAGE_MAX),
        workflow_id=workflow.id, run_id=run.id,
    )
    if wants(session, owner.id, RUN_FAILED, APP):  # else only the mail and the push tell them
        session.add(notification)
        session.flush()
    email = owner.email if wants(session, owner.id, RUN_FAILED, MAIL) else None
    return RunFailure(notification, workflow.name, run.trigger, email,
                      owner.display_name or owner.username)


def _role_holders(task: HumanTask, label: str | None) -> Any:
    """Ids of the users who hold a role (with `label`, when given) in the task's mandate or
    instance — nobody else can have rights there, so only they are checked one by one."""
    by_mandate = (select(UserMandate.user_id)
                  .join(UserMandateRole, UserMandateRole.user_mandate_id == UserMandate.id)
                  .join(Role, Role.id == UserMandateRole.role_id)
                  .where(UserMandate.mandate_id == task.mandate_id))
    by_instance = (select(FeatureAccess.user_id)
                   .join(FeatureAccessRole, FeatureAccessRole.feature_access_id == FeatureAccess.id)
                   .join(Role, Role.id == FeatureAccessRole.role_id)
                   .where(FeatureAccess.feature_instance_id == task.feature_instance_id))
    if label is not None:
        by_mandate = by_mandate.where(Role.role_label == label)
        by_instance = by_instance.where(Role.role_label == label)
    return union(by_mandate, by_instance)


def task_recipients(session: Session, task: HumanTask) -> list[User]:
    """Who is told of `task`: the enabled members of its mandate who may open its instance and
    complete it — the assignee user, every holder of the assignee role, or, for an unassigned
    task, everyone whose roles allow updating the instance's human tasks."""
    from backend.engine.tasks import may_complete  # the engine imports this module's callers

    instance = session.get(FeatureInstance, task.feature_instance_id)
    if instance is None:
        return []
    assignee = task.assignee if isinstance(task.assignee, dict) else {}
    query = select(User).join(UserMandate, UserMandate.user_id == User.id).where(
        UserMandate.mandate_id == task.mandate_id, User.disabled.is_(False))
    if assignee.get("user"):
        query = query.where(User.id == assignee["user"])
    else:
        query = query.where(or_(User.is_sysadmin.is_(True),
                                User.id.in_(_role_holders(task, assignee.get("role") or None))))
    found = []
    for user in session.exec(query.order_by(User.username)).all():
        access = AccessContext(session, user)
        if access.can_open_instance(instance) and may_complete(access, task):
            found.append(user)
    return found


def _notify_task(session: Session, task: HumanTask, event: str, title: str) -> list[Notification]:
    """Tell everyone who may complete `task` of `event`: in the app, by mail and by Web Push, as
    each chose (rows added to the session, so they are written with the task or not at all; mails
    and pushes leave after the commit)."""
    from backend.notifications import push, task_mail  # they import the engine, which imports this module

    recipients = task_recipients(session, task)
    if recipients:
        user_ids, body = [u.id for u in recipients], task.message or "Open the Inbox to answer it."
        call_after_commit(session, lambda: push.notify_in_background(user_ids, event, _clip(title, TITLE_MAX),
                                                                     body, f"/inbox?task={task.id}"))
    notifications = []
    for user in recipients:
        if not wants(session, user.id, event, APP):
            continue
        notification = Notification(
            user_id=user.id, mandate_id=task.mandate_id, kind=event, title=_clip(title, TITLE_MAX),
            message=_clip(f"{task.message or ''}\nOpen the Inbox to answer it.".strip(), MESSAGE_MAX),
            run_id=task.run_id, task_id=task.id,
        )
        session.add(notification)
        notifications.append(notification)
    task_mail.mail_recipients(session, task, recipients, event, reminder=event == TASK_EXPIRING)
    return notifications


def notify_task_created(session: Session, task: HumanTask) -> list[Notification]:
    """The new `task` is told to each person who may complete it (in the app, by mail)."""
    what = "Approval" if task.kind == "approval" else "Task"
    return _notify_task(session, task, TASK_ASSIGNED, f"{what} waiting for you: {task.title or 'untitled'}")


def notify_task_expiring(session: Session, task: HumanTask) -> list[Notification]:
    """The reminder that `task` expires soon, to each person who may complete it."""
    due = f" (due {task.due_at:%Y-%m-%d %H:%M} UTC)" if task.due_at else ""
    return _notify_task(session, task, TASK_EXPIRING, f"Expires soon: {task.title or 'untitled'}{due}")


def list_notifications(session: Session, user: User, unread: bool = False, limit: int = 50) -> list[Notification]:
    """The user's notifications, newest first (only the unread ones when `unread`)."""
    if not 1 <= limit <= LIST_LIMIT_MAX:
        raise InvalidInput([FieldError("limit", f"must be between 1 and {LIST_LIMIT_MAX}")])
    query = select(Notification).where(Notification.user_id == user.id)
    if unread:
        query = query.where(Notification.read_at.is_(None))
    query = query.order_by(Notification.created_at.desc(), Notification.id.desc()).limit(limit)
    return list(session.exec(query).all())


def unread_count(session: Session, user: User) -> int:
    """How many of the user's notifications are unread."""
    query = select(func.count()).select_from(Notification).where(Notification.user_id == user.id,
                                                                  Notification.read_at.is_(None))
    return int(session.exec(query).one())


def get_notification(session: Session, user: User, notification_id: str) -> Notification:
    """One of the user's notifications; NotFound for a missing one and for anybody else's."""
    notification = session.get(Notification, notification_id)
    if notification is None or notification.user_id != user.id:
        raise NotFound(f"notification {notification_id} not found")
    return notification


def mark_read(session: Session, user: User, notification_id: str) -> Notification:
    """Mark one of the user's notifications read (once read, its time stays)."""
    notification = get_notification(session, user, notification_id)
    if notification.read_at is None:
        notification.read_at = utcnow()
        session.add(notification)
        session.flush()
    return notification


def mark_all_read(session: Session, user: User) -> int:
    """Mark every unread notification of the user read; how many were."""
    result = session.execute(update(Notification)
                          .where(Notification.user_id == user.id, Notification.read_at.is_(None))
                          .values(read_at=utcnow())
                          .execution_options(synchronize_session="fetch"))
    return int(result.rowcount or 0)


class Notifications(Door):
    """The door to the signed-in user's own notifications: any signed-in user, their rows only."""

    def __init__(self, access: AccessContext):
        self.access = access

    @guarded("authenticated")
    def list(self, unread: bool = False, limit: int = 50) -> list[Notification]:
        """The user's notifications, newest first (only the unread ones when `unread`)."""
        return list_notifications(self.access.session, self.access.user, unread, limit)

    @guarded("authenticated")
    def unread_count(self) -> int:
        """How many of the user's notifications are unread (the bell)."""
        return unread_count(self.access.session, self.access.user)

    @guarded("authenticated")
    def mark_read(self, notification_id: str) -> Notification:
        """Mark one of the user's notifications read; NotFound for anybody else's."""
        return mark_read(self.access.session, self.access.user, notification_id)

    @guarded("authenticated")
    def mark_all_read(self) -> int:
        """Mark every unread notification of the user read; how many were."""
        return mark_all_read(self.access.session, self.access.user)
