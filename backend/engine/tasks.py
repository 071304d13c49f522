"""Human tasks of input.approval / input.form nodes: who may complete them, completing (which
resumes the run at that node) and cancelling (which cancels the run). DESIGN §4–5, spec §7.3.

A HumanTask is created by the node handler (backend.engine.nodes.human_task); the run then
pauses with pauseReason humanTask once nothing else is ready. The task's own transitions refuse
completing twice, so the run advances exactly once.
"""

from __future__ import annotations

from typing import Any

from sqlmodel import Session, select

from backend.db.models import FeatureInstance, HumanTask, WorkflowRun
from backend.engine import worker
from backend.engine.executor import RunEngine
from backend.errors import Conflict, FieldError, Forbidden, InvalidInput, NotFound
from backend.rbac.access import AccessContext
from backend.rbac.rights import Level
from backend.statemachines import human_task as task_lifecycle
from backend.statemachines import workflow_run as run_lifecycle
from backend.workflows.node_types import DEFAULT_HANDLE

FEATURE_CODE = "graphicalEditor"
TASK_TABLE = f"data.feature.{FEATURE_CODE}.human_task"
STATUSES = (task_lifecycle.PENDING, task_lifecycle.COMPLETED, task_lifecycle.CANCELLED, task_lifecycle.EXPIRED)


def may_complete(access: AccessContext, task: HumanTask) -> bool:
    """The assignee user, a holder of the assignee role, or — for an unassigned task — anyone
    whose roles allow updating human tasks in the task's instance."""
    assignee = task.assignee if isinstance(task.assignee, dict) else {}
    if assignee.get("user"):
        return assignee["user"] == access.user.id
    if assignee.get("role"):
        held = access.resolver.held_roles(task.mandate_id, task.feature_instance_id)
        return assignee["role"] in {role.label for role in held}
    level = access.data_level(TASK_TABLE, "update", task.mandate_id, task.feature_instance_id)
    return level != Level.NONE


def get_task(access: AccessContext, task_id: str) -> HumanTask:
    """The task if the caller may open its instance, else NotFound (as for a missing id)."""
    task = access.session.get(HumanTask, task_id)
    if task is None:
        raise NotFound(f"task {task_id} not found")
    try:
        access.require_instance(task.feature_instance_id, FEATURE_CODE)
    except NotFound:
        raise NotFound(f"task {task_id} not found") from None
    return task


def list_tasks(access: AccessContext, status: str | None = None) -> list[HumanTask]:
    """Tasks the caller may complete, in every Graphical Editor instance they may open."""
    if status is not None and status not in STATUSES:
        raise InvalidInput([FieldError("status", f"must be one of {', '.join(STATUSES)}")])
    instances: list[FeatureInstance] = access.visible_instances(FEATURE_CODE)
    if not instances:
        return []
    query = select(HumanTask).where(HumanTask.feature_instance_id.in_([i.id for i in instances]))
    if status:
        query = query.where(HumanTask.status == status)
    tasks = access.session.exec(query.order_by(HumanTask.sys_created_at.desc())).all()
    return [task for task in tasks if may_complete(access, task)]


def _answer(task: HumanTask, data: Any) -> tuple[Any, tuple[str, ...]]:
    """The node's output and handle for the submitted data (approval: approved/rejected)."""
    if task.kind == "approval":
        if not isinstance(data, dict) or not isinstance(data.get("approved"), bool):
            raise InvalidInput([FieldError("data.approved", "must be true or false")])
        output = {"approved": data["approved"], "comment": data.get("comment")}
        return output, ("approved" if data["approved"] else "rejected",)
    if data is not None and not isinstance(data, dict):
        raise InvalidInput([FieldError("data", "must be an object with the form's fields")])
    missing = [f["name"] for f in task.fields or [] if isinstance(f, dict) and f.get("required")
               and (data or {}).get(f["name"]) in (None, "")]
    if missing:
        raise InvalidInput([FieldError(f"data.{name}", "required") for name in missing])
    return data or {}, (DEFAULT_HANDLE,)


def complete_task(access: AccessContext, task: HumanTask, data: Any) -> WorkflowRun:
    """Record the answer and resume the run at the task's node; returns the run after it ran on
    (on a run thread, waited for as a started run is: backend/engine/worker.py)."""
    session: Session = access.session
    if not may_complete(access, task):
        raise Forbidden("only the task's assignee may complete it")
    output, handles = _answer(task, data)
    run = session.get(WorkflowRun, task.run_id)
    engine = RunEngine(session, run)
    if task.status == task_lifecycle.PENDING and not engine.is_waiting_at(task.node_id):
        raise Conflict(f"run {run.id} is not waiting for task {task.id}")
    task_lifecycle.complete(session, task, output, access.user.id)
    if run.status == run_lifecycle.PAUSED:
        run_lifecycle.resume(session, run)
    engine.resume_node(task.node_id, output, handles)
    engine.persist()
    worker.execute_and_wait(run.id)
    session.refresh(run)
    return run


def cancel_task(access: AccessContext, task: HumanTask) -> WorkflowRun:
    """Withdraw the task; its run is cancelled (DESIGN §4, input.*)."""
    session = access.session
    if access.data_level(TASK_TABLE, "update", task.mandate_id, task.feature_instance_id) == Level.NONE:
        raise Forbidden("your roles allow no update on human_task in this instance")
    task_lifecycle.cancel(session, task, access.user.id)
    run = session.get(WorkflowRun, task.run_id)
    if run.status in (run_lifecycle.RUNNING, run_lifecycle.PAUSED):
        run_lifecycle.cancel(session, run, f"task '{task.title}' was cancelled by {access.user.username}",
                             by=access.user.id)
    return run
