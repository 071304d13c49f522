"""Human tasks of input.approval / input.form nodes: who may complete them, completing (which
resumes the run at that node) and cancelling (which cancels the run). DESIGN §4–5, spec §7.3.

A HumanTask is created by the node handler (backend.engine.nodes.human_task); the run then
pauses with pauseReason humanTask once nothing else is ready. The task's own transitions refuse
completing twice, so the run advances exactly once.
"""

from __future__ import annotations

import datetime as dt
from typing import Any

from pydantic import ValidationError
from sqlmodel import Session, func, select

from backend.db.models import FeatureInstance, HumanTask, User, WorkflowRun
from backend.engine import worker
from backend.engine.executor import RunEngine
from backend.errors import Conflict, FieldError, Forbidden, InvalidInput, NotFound
from backend.rbac.access import AccessContext
from backend.rbac.rights import Level
from backend.statemachines import ConcurrentTransition
from backend.statemachines import human_task as task_lifecycle
from backend.statemachines import workflow_run as run_lifecycle
from backend.workflows import form_values
from backend.workflows.node_types import DEFAULT_HANDLE, FormField

FEATURE_CODE = "graphicalEditor"
TASK_TABLE = f"data.feature.{FEATURE_CODE}.human_task"
STATUSES = (task_lifecycle.PENDING, task_lifecycle.COMPLETED, task_lifecycle.CANCELLED, task_lifecycle.EXPIRED)
REASON_MAX = 1000


def may_complete(access: AccessContext, task: HumanTask) -> bool:
    """The assignee user, a holder of the assignee role, or — for an unassigned task — anyone
    whose roles allow updating human tasks in the task's instance."""
    return _Rights(access).may_complete(task.assignee, task.mandate_id, task.feature_instance_id)


class _Rights:
    """may_complete for many tasks: held role labels and the update level once per instance."""

    def __init__(self, access: AccessContext):
        self.access = access
        self._labels: dict[tuple[str, str], set[str]] = {}
        self._levels: dict[tuple[str, str, str], Level] = {}

    def labels(self, mandate_id: str, instance_id: str) -> set[str]:
        key = (mandate_id, instance_id)
        if key not in self._labels:
            self._labels[key] = {r.label for r in self.access.resolver.held_roles(mandate_id, instance_id)}
        return self._labels[key]

    def level(self, operation: str, mandate_id: str, instance_id: str) -> Level:
        key = (operation, mandate_id, instance_id)
        if key not in self._levels:
            self._levels[key] = self.access.data_level(TASK_TABLE, operation, mandate_id, instance_id)
        return self._levels[key]

    def may_complete(self, assignee: Any, mandate_id: str, instance_id: str) -> bool:
        assignee = assignee if isinstance(assignee, dict) else {}
        if assignee.get("user"):
            return assignee["user"] == self.access.user.id
        if assignee.get("role"):
            return assignee["role"] in self.labels(mandate_id, instance_id)
        return self.level("update", mandate_id, instance_id) != Level.NONE


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


def _check_status(status: str | None) -> None:
    if status is not None and status not in STATUSES:
        raise InvalidInput([FieldError("status", f"must be one of {', '.join(STATUSES)}")])


def list_tasks(access: AccessContext, status: str | None = None) -> list[HumanTask]:
    """Tasks the caller may complete, in every Graphical Editor instance they may open."""
    return [task for task, may in list_visible_tasks(access, status, only_completable=True) if may]


def list_visible_tasks(access: AccessContext, status: str | None = None,
                       only_completable: bool = False, *, finished: bool = False,
                       limit: int | None = None) -> list[tuple[HumanTask, bool]]:
    """(task, may the caller complete it) for every task the caller may see, newest first: the
    tasks they may complete, and in instances where their roles allow reading every human task
    (DATA read level all) the others too, read only (the Inbox shows those to viewers).

    `finished`: only completed, cancelled and expired tasks, the last finished first; `limit`: at
    most that many (read from the database in batches, so a long history is not loaded whole).
    """
    _check_status(status)
    instances: list[FeatureInstance] = access.visible_instances(FEATURE_CODE)
    if not instances:
        return []
    query = select(HumanTask).where(HumanTask.feature_instance_id.in_([i.id for i in instances]))
    if status:
        query = query.where(HumanTask.status == status)
    if finished:
        query = query.where(HumanTask.status != task_lifecycle.PENDING).order_by(
            func.coalesce(HumanTask.finished_at, HumanTask.sys_created_at).desc(), HumanTask.id)
    else:
        query = query.order_by(HumanTask.sys_created_at.desc(), HumanTask.id)
    rights = _Rights(access)
    visible = []
    for task in access.session.exec(query.execution_options(yield_per=500)):
        may = rights.may_complete(task.assignee, task.mandate_id, task.feature_instance_id)
        if may or (not only_completable
                   and rights.level("read", task.mandate_id, task.feature_instance_id) == Level.ALL):
            visible.append((task, may))
            if limit is not None and len(visible) >= limit:
                break
    return visible


def pending_count(access: AccessContext) -> int:
    """How many pending tasks the caller may complete (the Inbox badge): one query for the
    assignees of the pending tasks in the caller's instances, the rights once per instance."""
    instances = access.visible_instances(FEATURE_CODE)
    if not instances:
        return 0
    rows = access.session.exec(
        select(HumanTask.assignee, HumanTask.mandate_id, HumanTask.feature_instance_id)
        .where(HumanTask.feature_instance_id.in_([i.id for i in instances]),
               HumanTask.status == task_lifecycle.PENDING)
    ).all()
    rights = _Rights(access)
    return sum(1 for assignee, mandate_id, instance_id in rows
               if rights.may_complete(assignee, mandate_id, instance_id))


def _when(moment: dt.datetime | None) -> str:
    return f" at {moment:%Y-%m-%d %H:%M} UTC" if moment else ""


def finished_message(session: Session, task: HumanTask) -> str:
    """Why a task that is no longer pending cannot be completed or cancelled again."""
    who = session.get(User, task.completed_by) if task.completed_by else None
    by = f" by {who.username}" if who else ""
    if task.status == task_lifecycle.EXPIRED:
        return f"task '{task.title}' expired{_when(task.finished_at)}; nothing was changed"
    return f"task '{task.title}' was already {task.status}{by}{_when(task.finished_at)}; nothing was changed"


def _not_pending(session: Session, task: HumanTask) -> Conflict:
    """The Conflict for a task someone else finished: re-read it to say who and when."""
    session.refresh(task)
    return Conflict(finished_message(session, task))


def check_form(fields: Any, data: Any) -> dict[str, Any]:
    """A form task's answer checked against its fields: required ones present, each value of its
    field's type (converted: "42" for a number becomes 42); InvalidInput naming every bad field."""
    if data is not None and not isinstance(data, dict):
        raise InvalidInput([FieldError("data", "must be an object with the form's fields")])
    values = dict(data or {})
    errors: list[FieldError] = []
    for raw in fields or []:
        try:
            field = FormField.model_validate(raw)
        except ValidationError:
            continue
        value = values.get(field.name)
        if form_values.is_blank(value):
            if field.required:
                errors.append(FieldError(f"data.{field.name}", "required"))
            continue
        try:
            values[field.name] = form_values.convert(field, value, files=True)
        except ValueError as exc:
            errors.append(FieldError(f"data.{field.name}", str(exc)))
    if errors:
        raise InvalidInput(errors)
    return values


def _answer(task: HumanTask, data: Any) -> tuple[Any, tuple[str, ...]]:
    """The node's output and handle for the submitted data (approval: approved/rejected)."""
    if task.kind == "approval":
        if not isinstance(data, dict) or not isinstance(data.get("approved"), bool):
            raise InvalidInput([FieldError("data.approved", "must be true or false")])
        output = {"approved": data["approved"], "comment": data.get("comment")}
        return output, ("approved" if data["approved"] else "rejected",)
    return check_form(task.fields, data), (DEFAULT_HANDLE,)


def complete_task(access: AccessContext, task: HumanTask, data: Any) -> WorkflowRun:
    """Record the answer and resume the run at the task's node; returns the run after it ran on
    (on a run thread, waited for as a started run is: backend/engine/worker.py).

    A task somebody else completed (or cancelled) first is a Conflict saying who and when;
    nothing is applied twice (the task's guarded transition lets only one completion through).
    """
    session: Session = access.session
    if not may_complete(access, task):
        raise Forbidden("only the task's assignee may complete it")
    if task.status != task_lifecycle.PENDING:
        raise Conflict(finished_message(session, task))
    output, handles = _answer(task, data)
    run = session.get(WorkflowRun, task.run_id)
    engine = RunEngine(session, run)
    if not engine.is_waiting_at(task.node_id):
        session.refresh(task)
        if task.status != task_lifecycle.PENDING:
            raise Conflict(finished_message(session, task))
        raise Conflict(f"run {run.id} is not waiting for task {task.id}")
    try:
        task_lifecycle.complete(session, task, output, access.user.id)
    except ConcurrentTransition:
        raise _not_pending(session, task) from None
    if run.status == run_lifecycle.PAUSED:
        run_lifecycle.resume(session, run)
    engine.resume_node(task.node_id, output, handles)
    engine.persist()
    worker.execute_and_wait(run.id)
    session.refresh(run)
    return run


def cancel_task(access: AccessContext, task: HumanTask, reason: str | None = None) -> WorkflowRun:
    """Withdraw the task; its run is cancelled (DESIGN §4, input.*). The reason, if given, is kept
    in the task's data ({"cancelReason": …}) and in the run's cancel message with who cancelled."""
    session = access.session
    if access.data_level(TASK_TABLE, "update", task.mandate_id, task.feature_instance_id) == Level.NONE:
        raise Forbidden("your roles allow no update on human_task in this instance")
    reason = (reason or "").strip() or None
    if reason and len(reason) > REASON_MAX:
        raise InvalidInput([FieldError("reason", f"must be at most {REASON_MAX} characters")])
    if task.status != task_lifecycle.PENDING:
        raise Conflict(finished_message(session, task))
    try:
        task_lifecycle.cancel(session, task, access.user.id, reason)
    except ConcurrentTransition:
        raise _not_pending(session, task) from None
    run = session.get(WorkflowRun, task.run_id)
    if run.status in (run_lifecycle.RUNNING, run_lifecycle.PAUSED):
        message = f"task '{task.title}' was cancelled by {access.user.username}"
        run_lifecycle.cancel(session, run, f"{message}: {reason}" if reason else message, by=access.user.id)
    return run
