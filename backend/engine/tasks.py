"""Human tasks of input.approval / input.form nodes: who may complete them, completing (which
resumes the run at that node) and cancelling (which cancels the run). DESIGN §4–5, spec §7.3.

A HumanTask is created by the node handler (backend.engine.nodes.human_task); the run then
pauses with pauseReason humanTask once nothing else is ready. The task's own transitions refuse
completing twice, so the run advances exactly once.

:class:`Inbox` is the door to the tasks (the Inbox page and /api/tasks): the rows a user may
see, already joined with workflow, instance and user names and flagged with what they may do.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from typing import Any

from pydantic import ValidationError
from sqlalchemy import and_, or_
from sqlmodel import Session, func, select

from backend.agent import approvals
from backend.db.models import AgentRun, FeatureInstance, HumanTask, User, Workflow, WorkflowRun
from backend.engine import crashpoints
from backend.engine import queue as run_queue
from backend.engine.executor import RunEngine
from backend.errors import Conflict, FieldError, Forbidden, InvalidInput, NotFound
from backend.json_limits import check_json
from backend.rbac.access import AccessContext, allows
from backend.rbac.door import Door, guarded
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
HISTORY_LIMIT = 200


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

    def may_read(self, task: HumanTask) -> bool:
        """Whether the caller may read `task` by the own/all rule of their read level."""
        level = self.level("read", task.mandate_id, task.feature_instance_id)
        return allows(level, getattr(task, "sys_created_by", None), self.access.user.id)

    def may_cancel(self, task: HumanTask) -> bool:
        """Whether the caller's roles allow updating human tasks in the task's instance."""
        return self.level("update", task.mandate_id, task.feature_instance_id) != Level.NONE

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
        # An agent's approval lives in the instance of its chat (any feature with an agent).
        access.require_instance(task.feature_instance_id, None if task.agent_run_id else FEATURE_CODE)
    except NotFound:
        raise NotFound(f"task {task_id} not found") from None
    if task.agent_run_id and not (may_complete(access, task) or _Rights(access).may_read(task)):
        raise NotFound(f"task {task_id} not found")
    return task


def _check_status(status: str | None) -> None:
    if status is not None and status not in STATUSES:
        raise InvalidInput([FieldError("status", f"must be one of {', '.join(STATUSES)}")])


def _task_scope(access: AccessContext) -> Any:
    """Which tasks the caller's instances hold: every task of the Graphical Editor instances they
    may open, and the approvals of agent runs in any instance they may open (issue 21; only their
    assignee may complete those). None when there are none."""
    instances: list[FeatureInstance] = access.visible_instances()
    if not instances:
        return None
    editors = [i.id for i in instances if i.feature_code == FEATURE_CODE]
    agent_tasks = and_(HumanTask.agent_run_id.is_not(None),
                       HumanTask.feature_instance_id.in_([i.id for i in instances]))
    return or_(HumanTask.feature_instance_id.in_(editors), agent_tasks) if editors else agent_tasks


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
    where = _task_scope(access)
    if where is None:
        return []
    query = select(HumanTask).where(where)
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
        if may or (not only_completable and rights.may_read(task)):
            visible.append((task, may))
            if limit is not None and len(visible) >= limit:
                break
    return visible


def pending_count(access: AccessContext) -> int:
    """How many pending tasks the caller may complete (the Inbox badge): one query for the
    assignees of the pending tasks in the caller's instances, the rights once per instance."""
    where = _task_scope(access)
    if where is None:
        return 0
    rows = access.session.exec(
        select(HumanTask.assignee, HumanTask.mandate_id, HumanTask.feature_instance_id)
        .where(where, HumanTask.status == task_lifecycle.PENDING)
    ).all()
    rights = _Rights(access)
    return sum(1 for assignee, mandate_id, instance_id in rows
               if rights.may_complete(assignee, mandate_id, instance_id))


# --- the Inbox door ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class InboxTask:
    """One task as the Inbox shows it: the task, its run's workflow (or, for an agent's approval,
    the run's chat), its instance's label, the names of the users it mentions (id → username), and
    what the caller may do with it."""

    task: HumanTask
    workflow: Workflow | None
    instance_label: str
    chat_id: str | None  # an agent's approval: the chat of its run
    usernames: dict[str, str]
    may_complete: bool
    may_cancel: bool


def _by_id(session: Session, model: Any, ids: set[str]) -> dict[str, Any]:
    """Rows of `model` with these ids, by id (one query; none for no ids)."""
    if not ids:
        return {}
    return {row.id: row for row in session.exec(select(model).where(model.id.in_(ids))).all()}


def _mentioned_users(pairs: list[tuple[HumanTask, bool]]) -> set[str]:
    users = {t.completed_by for t, _ in pairs if t.completed_by}
    return users | {t.assignee["user"] for t, _ in pairs if isinstance(t.assignee, dict) and t.assignee.get("user")}


def inbox_tasks(access: AccessContext, pairs: list[tuple[HumanTask, bool]]) -> list[InboxTask]:
    """(task, may complete) pairs joined with workflow, instance and user names, read in bulk."""
    session = access.session
    runs = _by_id(session, WorkflowRun, {t.run_id for t, _ in pairs if t.run_id})
    agent_runs = _by_id(session, AgentRun, {t.agent_run_id for t, _ in pairs if t.agent_run_id})
    workflows = _by_id(session, Workflow, {r.workflow_id for r in runs.values()})
    instances = _by_id(session, FeatureInstance, {t.feature_instance_id for t, _ in pairs})
    usernames = {u.id: u.username for u in _by_id(session, User, _mentioned_users(pairs)).values()}
    rights = _Rights(access)
    rows = []
    for task, may in pairs:
        run = runs.get(task.run_id) if task.run_id else None
        agent_run = agent_runs.get(task.agent_run_id) if task.agent_run_id else None
        instance = instances.get(task.feature_instance_id)
        rows.append(InboxTask(task, workflows.get(run.workflow_id) if run else None,
                              instance.label if instance else "", agent_run.chat_id if agent_run else None,
                              usernames, may, rights.may_cancel(task)))
    return rows


class Inbox(Door):
    """The door to human tasks, as one signed-in user, across the Graphical Editor instances
    they may open. Lists are narrowed per instance inside (the tasks the user may complete, and
    those their read level reaches, read only); a call naming a task is checked in the task's
    instance, and a task in an instance they may not open is not found."""

    def __init__(self, access: AccessContext):
        self.access = access

    def call_scope(self, method: str, arguments: dict[str, Any]) -> tuple[str | None, str | None]:
        """The task's mandate and instance for calls naming `task_id` (NotFound for a foreign task)."""
        if arguments.get("task_id") is None:
            return None, None
        task = get_task(self.access, arguments["task_id"])
        return task.mandate_id, task.feature_instance_id

    @guarded("authenticated")
    def completable(self, status: str | None = None) -> list[HumanTask]:
        """The tasks the caller may complete (the REST list), newest first."""
        return list_tasks(self.access, status)

    @guarded("authenticated")
    def pending(self) -> list[InboxTask]:
        """The pending tasks the Inbox lists: completable ones and, read only, the readable rest."""
        return inbox_tasks(self.access, list_visible_tasks(self.access, task_lifecycle.PENDING))

    @guarded("authenticated")
    def history(self, limit: int = HISTORY_LIMIT) -> list[InboxTask]:
        """Completed, cancelled and expired tasks the caller may see, the last finished first."""
        return inbox_tasks(self.access, list_visible_tasks(self.access, finished=True, limit=limit))

    @guarded("authenticated")
    def pending_count(self) -> int:
        """How many pending tasks the caller may complete (the navigation badge)."""
        return pending_count(self.access)

    @guarded("authenticated")
    def open(self, task_id: str) -> HumanTask:
        """A task the caller may complete or read (its form fields), else NotFound."""
        task = get_task(self.access, task_id)
        rights = _Rights(self.access)
        if not (rights.may_complete(task.assignee, task.mandate_id, task.feature_instance_id)
                or rights.may_read(task)):
            raise NotFound(f"task {task_id} not found")
        return task

    @guarded("authenticated")
    def complete(self, task_id: str, data: Any) -> tuple[HumanTask, WorkflowRun | None]:
        """Complete the task as its assignee (a user, a held role, or for an unassigned task
        anyone who may update tasks there: :func:`may_complete`); the run resumes. An agent's
        approval ({"approved": bool, "comment"?}) lets its run go on in the background (no
        workflow run: None)."""
        task = get_task(self.access, task_id)
        if approvals.is_agent_task(task):
            data = data if isinstance(data, dict) else {}
            approvals.decide(self.access, task, data.get("approved"), data.get("comment"))
            approvals.resume_in_background(task.agent_run_id)
            return task, None
        return task, complete_task(self.access, task, data)

    @guarded("authenticated")
    def cancel(self, task_id: str, reason: str | None = None) -> tuple[HumanTask, WorkflowRun | None]:
        """Withdraw the task (optionally with a reason); its run is cancelled — an agent run is
        told and finishes instead. Takes the right to update human tasks in the task's instance;
        an agent's approval may be withdrawn by its assignee as well."""
        task = get_task(self.access, task_id)
        if approvals.is_agent_task(task):
            withdraw_agent_task(self.access, task, reason)
            approvals.resume_in_background(task.agent_run_id)
            return task, None
        return task, cancel_task(self.access, task, reason)


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


def complete_task(access: AccessContext, task: HumanTask, data: Any, via: str = "app") -> WorkflowRun:
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
    check_json(data, "data")  # the JSON limits, whatever the entry point (REST, inbox UI)
    output, handles = _answer(task, data)
    run = session.get(WorkflowRun, task.run_id)
    engine = RunEngine(session, run)
    if not engine.is_waiting_at(task.node_id):
        session.refresh(task)
        if task.status != task_lifecycle.PENDING:
            raise Conflict(finished_message(session, task))
        raise Conflict(f"run {run.id} is not waiting for task {task.id}")
    try:
        task_lifecycle.complete(session, task, output, access.user.id, via)
    except ConcurrentTransition:
        raise _not_pending(session, task) from None
    if run.status == run_lifecycle.PAUSED:
        run_lifecycle.resume(session, run)
    engine.resume_node(task.node_id, output, handles)
    run_queue.enqueue(session, run.id)
    crashpoints.reach(engine.crash_at, "resume_before_commit", task.node_id)
    engine.persist()
    crashpoints.reach(engine.crash_at, "resume_after_commit", task.node_id)
    run_queue.wait_for_rest(run.id)
    session.refresh(run)
    return run


def _reason(reason: str | None) -> str | None:
    reason = (reason or "").strip() or None
    if reason and len(reason) > REASON_MAX:
        raise InvalidInput([FieldError("reason", f"must be at most {REASON_MAX} characters")])
    return reason


def withdraw_agent_task(access: AccessContext, task: HumanTask, reason: str | None = None) -> HumanTask:
    """Withdraw an agent's approval task (its assignee, or who may update tasks in its instance)."""
    session = access.session
    if not (may_complete(access, task) or access.data_level(TASK_TABLE, "update", task.mandate_id,
                                                             task.feature_instance_id) != Level.NONE):
        raise Forbidden("only the user the agent acts for may withdraw its request")
    reason = _reason(reason)
    if task.status != task_lifecycle.PENDING:
        raise Conflict(finished_message(session, task))
    try:
        return approvals.withdraw(session, task, access.user, reason)
    except ConcurrentTransition:
        session.rollback()
        raise _not_pending(session, task) from None


def cancel_task(access: AccessContext, task: HumanTask, reason: str | None = None) -> WorkflowRun:
    """Withdraw the task; its run is cancelled (DESIGN §4, input.*). The reason, if given, is kept
    in the task's data ({"cancelReason": …}) and in the run's cancel message with who cancelled."""
    session = access.session
    if access.data_level(TASK_TABLE, "update", task.mandate_id, task.feature_instance_id) == Level.NONE:
        raise Forbidden("your roles allow no update on human_task in this instance")
    reason = _reason(reason)
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
