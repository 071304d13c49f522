"""Human-task routes (DESIGN §6): the caller's task list, completing and cancelling a task.

Completing resumes the run at the task's node and answers once the run has run on to its next
resting state (synchronously, as starting a run does); a task someone else completed first is a
409 saying who and when. Cancelling a task (optionally with a reason) cancels its run.
"""

from __future__ import annotations

from typing import Annotated, Literal

from fastapi import APIRouter, Path, Query

from backend.api.deps import CurrentUser, DbSession
from backend.api.permissions import declared_by
from backend.api.schemas import RunOut, TaskCancel, TaskComplete, TaskOut, TaskResult
from backend.engine import tasks
from backend.rbac.access import AccessContext

router = APIRouter(prefix="/api/tasks", tags=["tasks"])

TaskId = Annotated[str, Path(alias="taskId")]


@router.get("", response_model=list[TaskOut], **declared_by(tasks.Inbox.completable))
def list_tasks(user: CurrentUser, session: DbSession,
               status: Annotated[Literal[tasks.STATUSES] | None, Query()] = None) -> list[TaskOut]:
    """Tasks the caller may complete (as assignee, role holder, or for unassigned tasks with the
    right to update tasks), in every Graphical Editor instance they may open."""
    return [TaskOut.model_validate(t) for t in tasks.Inbox(AccessContext(session, user)).completable(status)]


@router.post("/{taskId}/complete", response_model=TaskResult, **declared_by(tasks.Inbox.complete))
def complete_task(task_id: TaskId, body: TaskComplete, user: CurrentUser, session: DbSession) -> TaskResult:
    """Complete the task as its assignee (a user, a held role, or anyone who may update tasks)."""
    task, run = tasks.Inbox(AccessContext(session, user)).complete(task_id, body.data)
    return TaskResult(task=TaskOut.model_validate(task), run=RunOut.model_validate(run) if run else None)


@router.post("/{taskId}/cancel", response_model=TaskResult, **declared_by(tasks.Inbox.cancel))
def cancel_task(task_id: TaskId, user: CurrentUser, session: DbSession,
                body: TaskCancel | None = None) -> TaskResult:
    """Withdraw the task and cancel its run; an optional `{"reason"}` (at most 1000 characters)
    is kept in the task's data as cancelReason and in the run's cancel message."""
    task, run = tasks.Inbox(AccessContext(session, user)).cancel(task_id, body.reason if body else None)
    return TaskResult(task=TaskOut.model_validate(task), run=RunOut.model_validate(run) if run else None)
