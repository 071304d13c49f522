"""Human-task routes (DESIGN §6): the caller's task list, completing and cancelling a task.

Completing resumes the run at the task's node and answers once the run has run on to its next
resting state (synchronously, as starting a run does); a task someone else completed first is a
409 saying who and when. Cancelling a task (optionally with a reason) cancels its run.
"""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Path, Query

from backend.api.deps import CurrentUser, DbSession
from backend.api.permissions import permission
from backend.api.schemas import RunOut, TaskCancel, TaskComplete, TaskOut, TaskResult
from backend.engine import tasks
from backend.rbac.access import AccessContext

router = APIRouter(prefix="/api/tasks", tags=["tasks"])

TaskId = Annotated[str, Path(alias="taskId")]


@router.get("", response_model=list[TaskOut], **permission("DATA", tasks.TASK_TABLE, "read"))
def list_tasks(user: CurrentUser, session: DbSession,
               status: Annotated[str | None, Query()] = None) -> list[TaskOut]:
    """Tasks the caller may complete (as assignee, role holder, or for unassigned tasks with the
    right to update tasks), in every Graphical Editor instance they may open."""
    return [TaskOut.model_validate(t) for t in tasks.list_tasks(AccessContext(session, user), status)]


@router.post("/{taskId}/complete", response_model=TaskResult, **permission("DATA", tasks.TASK_TABLE, "update"))
def complete_task(task_id: TaskId, body: TaskComplete, user: CurrentUser, session: DbSession) -> TaskResult:
    access = AccessContext(session, user)
    task = tasks.get_task(access, task_id)
    run = tasks.complete_task(access, task, body.data)
    return TaskResult(task=TaskOut.model_validate(task), run=RunOut.model_validate(run))


@router.post("/{taskId}/cancel", response_model=TaskResult, **permission("DATA", tasks.TASK_TABLE, "update"))
def cancel_task(task_id: TaskId, user: CurrentUser, session: DbSession,
                body: TaskCancel | None = None) -> TaskResult:
    """Withdraw the task and cancel its run; an optional `{"reason"}` (at most 1000 characters)
    is kept in the task's data as cancelReason and in the run's cancel message."""
    access = AccessContext(session, user)
    task = tasks.get_task(access, task_id)
    run = tasks.cancel_task(access, task, body.reason if body else None)
    return TaskResult(task=TaskOut.model_validate(task), run=RunOut.model_validate(run))
