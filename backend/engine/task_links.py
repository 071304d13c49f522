"""Deciding a human task from its mail (issue 23): the links' tokens, what the confirmation page
shows, and the decision.

A task's mail carries one link per recipient, ``/act/<token>?do=approve|reject|open``. Only the
SHA-256 of the token is stored (:class:`~backend.db.models.TaskLink`); a link is bound to its task
and its recipient, works until the task's due time or POWERON_TASK_LINK_HOURS after the mail
(whichever is first) and decides once. Opening a link never decides — mail scanners open links —
the page shows the task and the person confirms.

Who decides: a signed-in visitor who may complete the task (the recipient, or a colleague the mail
was forwarded to who may complete it as well); without sign-in, the recipient — but only when a
mandate admin allowed one-click decisions for the task's workflow (``Workflow.mail_one_click``;
never for an agent's approval). Anyone else is refused, and nothing changes.

:class:`TaskLinks` is the door the REST routes ``/api/task-links/{token}`` and the page
/act/[token] call.
"""

from __future__ import annotations

import hashlib
import re
import secrets
from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta

from sqlalchemy import update
from sqlmodel import Session, select

from backend.agent import approvals
from backend.config import get_settings
from backend.db.models import FeatureInstance, HumanTask, TaskLink, User, Workflow, WorkflowRun, utcnow
from backend.engine import tasks
from backend.errors import Conflict, DomainError, FieldError, Forbidden, InvalidInput, NotFound
from backend.rbac.access import AccessContext
from backend.statemachines import human_task as task_lifecycle

TOKEN_SHAPE = re.compile(r"^[A-Za-z0-9_-]{20,100}$")
COMMENT_MAX = 1000

# What a link can be when it is opened.
OPEN = "open"  # the visitor may decide now
SIGN_IN = "signIn"  # a decision needs the visitor to sign in first
FOREIGN = "foreign"  # the signed-in visitor may not complete the task
FINISHED = "finished"  # the task is no longer pending (says by whom, when, how)
USED = "used"  # this link decided already
EXPIRED = "expired"
INVALID = "invalid"  # no such link: mistyped, cut off or altered


class SignInRequired(DomainError):
    """The link is valid, but deciding needs the visitor to sign in (REST: 401)."""


def _aware(moment: datetime | None) -> datetime | None:
    return moment.replace(tzinfo=UTC) if moment is not None and moment.tzinfo is None else moment


def token_hash(token: str) -> str:
    return hashlib.sha256(token.encode("utf-8")).hexdigest()


def issue_link(session: Session, task: HumanTask, user: User) -> str:
    """A new link token for `user` to decide `task` (its hash added to the session, so it is
    written with the task); it expires at the task's due time or after POWERON_TASK_LINK_HOURS."""
    token = secrets.token_urlsafe(32)
    expires = utcnow() + timedelta(hours=get_settings().task_link_hours)
    due = _aware(task.due_at)
    session.add(TaskLink(token_hash=token_hash(token), task_id=task.id, user_id=user.id,
                         expires_at=min(expires, due) if due else expires))
    return token


@dataclass(frozen=True)
class LinkView:
    """What the confirmation page shows for a link: its state with the sentence that explains it,
    and (for a valid link) the task as its mail showed it."""

    state: str
    reason: str
    task_id: str | None = None
    kind: str | None = None
    title: str = ""
    message: str = ""
    context: str = ""  # where the task comes from: workflow or chat, and instance
    recipient: str = ""
    signed_in_as: str | None = None
    due_at: datetime | None = None
    expires_at: datetime | None = None
    status: str | None = None
    outcome: str | None = None  # approved | rejected | completed | cancelled | expired
    decided_by: str | None = None
    decided_at: datetime | None = None
    decided_via: str | None = None
    one_click: bool = False


def _name(user: User | None) -> str:
    return (user.display_name or user.username) if user else ""


def _outcome(task: HumanTask) -> str:
    if task.status == task_lifecycle.COMPLETED and task.kind == "approval":
        return "approved" if (task.data or {}).get("approved") is True else "rejected"
    return task.status


def task_context(session: Session, task: HumanTask) -> tuple[str, Workflow | None]:
    """'Workflow "X" in <instance>' (or the agent chat's), and the workflow."""
    instance = session.get(FeatureInstance, task.feature_instance_id)
    where = f" in {instance.label}" if instance else ""
    if task.agent_run_id:
        return f"An AI agent asks for approval{where}", None
    run = session.get(WorkflowRun, task.run_id) if task.run_id else None
    workflow = session.get(Workflow, run.workflow_id) if run else None
    return (f"Workflow \"{workflow.name}\"{where}" if workflow else f"A workflow{where}"), workflow


class _Found:
    """A link with its task, recipient and the workflow, read once."""

    def __init__(self, session: Session, token: str):
        self.session = session
        self.link = None
        if isinstance(token, str) and TOKEN_SHAPE.match(token):
            self.link = session.exec(select(TaskLink).where(TaskLink.token_hash == token_hash(token))).first()
        self.task = session.get(HumanTask, self.link.task_id) if self.link else None
        self.recipient = session.get(User, self.link.user_id) if self.link else None
        self.context, self.workflow = task_context(session, self.task) if self.task else ("", None)

    @property
    def one_click(self) -> bool:
        return bool(self.workflow and self.workflow.mail_one_click and not self.task.agent_run_id)

    def may_decide(self, user: User | None) -> bool:
        """Whether `user` (enabled, in the task's mandate) may open the instance and complete the task."""
        if user is None or user.disabled:
            return False
        access = AccessContext(self.session, user)
        instance = self.session.get(FeatureInstance, self.task.feature_instance_id)
        return instance is not None and access.can_open_instance(instance) and tasks.may_complete(access, self.task)

    def assess(self, viewer: User | None) -> tuple[str, str]:
        """(state, sentence) of the link for `viewer` (None: not signed in)."""
        if self.link is None or self.task is None:
            return INVALID, ("This link is not valid: it may be incomplete or altered. "
                             "Open the Inbox in PowerOn to find your tasks.")
        if self.task.status != task_lifecycle.PENDING:
            return FINISHED, self._finished_sentence()
        if self.link.used_at is not None:
            return USED, "This link was used already; each link decides once."
        if _aware(self.link.expires_at) <= utcnow():
            return EXPIRED, (f"This link expired on {self.link.expires_at:%Y-%m-%d %H:%M} UTC. "
                             "Open the Inbox in PowerOn to answer the task.")
        if viewer is not None:
            if self.may_decide(viewer):
                return OPEN, f"You decide as {_name(viewer)}."
            return FOREIGN, (f"This link was sent to {_name(self.recipient)}. You are signed in as "
                             f"{_name(viewer)}, who may not complete this task; nothing was changed.")
        if self.one_click and self.may_decide(self.recipient):
            return OPEN, f"You decide as {_name(self.recipient)}, to whom this link was sent."
        return SIGN_IN, "Sign in to decide: only people who may complete this task can answer it."

    def _finished_sentence(self) -> str:
        task = self.task
        who = self.session.get(User, task.completed_by) if task.completed_by else None
        by = f" by {_name(who)}" if who else ""
        when = f" on {task.finished_at:%Y-%m-%d %H:%M} UTC" if task.finished_at else ""
        via = {"mail": " from the mail", "app": " in the app"}.get(task.decided_via or "", "")
        return f"This task was already {_outcome(task)}{by}{when}{via}; nothing was changed."

    def view(self, viewer: User | None) -> LinkView:
        state, reason = self.assess(viewer)
        if state == INVALID:
            return LinkView(state, reason)
        task = self.task
        finished = task.status != task_lifecycle.PENDING
        decider = self.session.get(User, task.completed_by) if task.completed_by else None
        return LinkView(
            state, reason, task_id=task.id, kind=task.kind, title=task.title or "untitled",
            message=task.message or "", context=self.context, recipient=_name(self.recipient),
            signed_in_as=viewer.username if viewer else None, due_at=task.due_at,
            expires_at=self.link.expires_at, status=task.status, outcome=_outcome(task) if finished else None,
            decided_by=_name(decider) or None, decided_at=task.finished_at, decided_via=task.decided_via,
            one_click=self.one_click,
        )


class TaskLinks:
    """The door to a task's mail links: anyone holding a link may see what it is for; deciding
    takes the link plus a visitor who may complete the task (or, with one-click allowed for the
    workflow, the link alone, acting as its recipient)."""

    def __init__(self, session: Session, viewer: User | None = None):
        self.session = session
        self.viewer = viewer

    def view(self, token: str) -> LinkView:
        """What the link is for and whether the visitor may decide now."""
        return _Found(self.session, token).view(self.viewer)

    def decide(self, token: str, approved: object, comment: object = None) -> LinkView:
        """Approve or reject the link's task; the link is used up in the same transaction.

        Raises:
            NotFound: no such link.
            SignInRequired: the visitor must sign in first.
            Forbidden: the signed-in visitor may not complete the task.
            Conflict: the link was used, expired, or the task is no longer pending (says by whom).
            InvalidInput: `approved` is not a boolean, the comment too long, or a form task (answered
                in the Inbox).
        """
        if not isinstance(approved, bool):
            raise InvalidInput([FieldError("approved", "must be true or false")])
        if comment is not None and (not isinstance(comment, str) or len(comment) > COMMENT_MAX):
            raise InvalidInput([FieldError("comment", f"must be a text of at most {COMMENT_MAX} characters")])
        found = _Found(self.session, token)
        state, reason = found.assess(self.viewer)
        if state == INVALID:
            raise NotFound(reason)
        if state == SIGN_IN:
            raise SignInRequired(reason)
        if state == FOREIGN:
            raise Forbidden(reason)
        if state != OPEN:
            raise Conflict(reason)
        if found.task.kind != "approval":
            raise InvalidInput([FieldError("approved", "a form task is answered with its fields in the Inbox")])
        self._use(found.link)
        actor = self.viewer or found.recipient
        access = AccessContext(self.session, actor)
        data = {"approved": approved, "comment": (comment or "").strip() or None}
        if found.task.agent_run_id:
            approvals.decide(access, found.task, approved, data["comment"], via="mail")
            approvals.resume_in_background(found.task.agent_run_id)
        else:
            tasks.complete_task(access, found.task, data, via="mail")
        self.session.refresh(found.task)
        view = found.view(self.viewer)
        goes_on = " The workflow goes on." if found.task.run_id else " The agent goes on."
        return replace(view, reason=f"Done: {view.outcome} by {_name(actor)}.{goes_on}")

    def _use(self, link: TaskLink) -> None:
        """Mark the link used (a guarded UPDATE: of two clicks at once, one gets through)."""
        result = self.session.execute(update(TaskLink).where(TaskLink.id == link.id, TaskLink.used_at.is_(None))
                                      .values(used_at=utcnow()).execution_options(synchronize_session=False))
        if result.rowcount != 1:
            raise Conflict("This link was used already; each link decides once.")
