"""State of the Inbox (/inbox, spec §7.3): the approvals and forms workflows ask of the signed-in
user, their history, and the pending count of the navigation badge.

Thin: every read and change goes through the door backend.engine.tasks.Inbox (pending, history,
pending_count, open, complete, cancel), which the REST routes /api/tasks use too and which applies
the rights; its rows come joined with names and flagged with what the user may do.
"""

from __future__ import annotations

import json
from typing import Any, TypedDict

import reflex as rx

from backend.db.models import HumanTask, Workflow
from backend.engine.tasks import Inbox, InboxTask
from backend.errors import DomainError, FieldError, InvalidInput
from backend.files import service as files
from backend.rbac.access import AccessContext
from backend.statemachines import ConcurrentTransition, IllegalTransition
from state.auth import AuthState, NotSignedIn
from state.forms import FormFieldRow, field_row
from state.page import PageMixin, user_message
from state.permissions import requires, requires_door

CHECK_FIELDS = "Please correct the marked fields."
FILE_HINT = "The path of a file in the instance's file store, e.g. /uploads/offer.pdf"


class TaskRow(TypedDict):
    id: str
    title: str
    kind: str
    message: str
    workflow_id: str
    workflow_name: str
    instance: str
    run_id: str
    run_link: str
    created: str
    due: str
    assignee: str
    may_complete: bool
    may_cancel: bool
    status: str
    outcome: str
    by: str
    finished: str
    reason: str
    tool: str  # an agent's approval: the tool it asks to call ("" for a workflow's task)
    arguments: str  # …and its arguments, as JSON text


AGENT_SOURCE = "AI agent"  # what the Workflow column says for an agent's request to approve a tool call


def _time(moment) -> str:
    return moment.strftime("%Y-%m-%d %H:%M UTC") if moment else ""


def assignee_text(assignee: Any, usernames: dict[str, str]) -> str:
    """Who the task is for, as the list shows it."""
    assignee = assignee if isinstance(assignee, dict) else {}
    if assignee.get("user"):
        return usernames.get(assignee["user"], assignee["user"])
    if assignee.get("role"):
        return f"role {assignee['role']}"
    return "anyone who may update tasks"


def outcome_text(kind: str, status: str, data: Any) -> str:
    """What came of a finished task: Approved / Rejected / Submitted / Cancelled / Expired."""
    if status == "completed":
        if kind == "approval":
            return "Approved" if isinstance(data, dict) and data.get("approved") else "Rejected"
        return "Submitted"
    return status.capitalize()


def task_row(task: HumanTask, may_complete: bool, may_cancel: bool, workflow: Workflow | None,
             instance_label: str, usernames: dict[str, str]) -> TaskRow:
    """One task as the page shows it (list row, panel and history row)."""
    data = task.data if isinstance(task.data, dict) else {}
    workflow_id = workflow.id if workflow else ""
    agent = task.agent_run_id is not None
    tool = f"{data.get('label') or ''} ({data.get('tool') or ''})" if agent else ""
    return TaskRow(
        id=task.id, title=task.title or "(untitled task)", kind=task.kind, message=task.message or "",
        workflow_id=workflow_id, workflow_name=AGENT_SOURCE if agent else (workflow.name if workflow else ""),
        instance=instance_label, run_id=task.run_id or task.agent_run_id or "",
        run_link="/workspace" if agent else f"/editor/{workflow_id}?run={task.run_id}",
        tool=tool, arguments=json.dumps(data.get("arguments"), indent=2, ensure_ascii=False) if agent else "",
        created=_time(task.sys_created_at), due=_time(task.due_at),
        assignee=assignee_text(task.assignee, usernames), may_complete=may_complete,
        may_cancel=may_cancel and task.status == "pending", status=task.status,
        outcome=outcome_text(task.kind, task.status, data),
        by=usernames.get(task.completed_by or "", task.completed_by or ""), finished=_time(task.finished_at),
        reason=str(data.get("cancelReason") or "") if task.status == "cancelled" else "",
    )


def form_rows(fields: Any) -> list[FormFieldRow]:
    """A form task's fields as the shared form renderer takes them (file: a path text field)."""
    return [field_row(f) for f in fields or [] if isinstance(f, dict) and f.get("name")]


def form_values(fields: list[FormFieldRow], form_data: dict[str, Any]) -> dict[str, Any]:
    """The submitted browser form as the task's answer: booleans from the checkbox (absent when
    unchecked), blank optional fields left out; the backend checks and converts the rest."""
    values: dict[str, Any] = {}
    for field in fields:
        name = field["name"]
        if field["type"] == "boolean":
            values[name] = str(form_data.get(name, "")).lower() in ("on", "true", "1", "yes")
            continue
        value = form_data.get(name)
        if value is None or (isinstance(value, str) and not value.strip()):
            continue
        values[name] = value
    return values


def field_errors(errors: list[FieldError], names: set[str]) -> tuple[dict[str, str], list[str]]:
    """The backend's FieldErrors (`data.<name>`) by form field, and the messages of the others."""
    by_field: dict[str, str] = {}
    others: list[str] = []
    for error in errors:
        name = error.field.removeprefix("data.")
        if name in names:
            by_field.setdefault(name, error.message)
        else:
            others.append(f"{error.field}: {error.message}")
    return by_field, others


def inbox_row(item: InboxTask) -> TaskRow:
    """One of the Inbox door's tasks as the page shows it."""
    return task_row(item.task, item.may_complete, item.may_cancel, item.workflow, item.instance_label,
                    item.usernames)


def _inbox(session, user) -> Inbox:
    return Inbox(AccessContext(session, user))


class InboxCountState(AuthState):
    """The pending count of the Inbox badge in the navigation, refreshed every few seconds."""

    pending: int = 0

    @rx.event
    @requires_door(Inbox.pending_count)
    def refresh(self, _tick: str = ""):
        """The number of pending tasks the user may complete (0 when signed out)."""
        try:
            with self._user_session() as (session, user):
                self.pending = _inbox(session, user).pending_count()
        except NotSignedIn:
            self.pending = 0


class InboxState(PageMixin, AuthState):
    """What /inbox shows: the pending tasks, the open task's panel, the history."""

    tab: str = "pending"
    pending_tasks: list[TaskRow] = []
    history: list[TaskRow] = []
    selected_id: str = ""
    comment: str = ""
    form_fields: list[FormFieldRow] = []
    cancel_open: bool = False
    cancel_reason: str = ""
    upload_target: str = ""

    @rx.var
    def file_fields(self) -> list[str]:
        """The open form's file fields: a file uploaded here goes into the first (or the chosen) one."""
        return [f["name"] for f in self.form_fields if f["type"] == "file"]

    def _refresh(self) -> None:
        with self._user_session() as (session, user):
            self._load_navigation(session, user)
            inbox = _inbox(session, user)
            self.pending_tasks = [inbox_row(item) for item in inbox.pending()]
            self.history = [inbox_row(item) for item in inbox.history()]
        if self.selected_id not in {t["id"] for t in self.pending_tasks}:
            self._close()
        self.loaded = True

    def _close(self) -> None:
        self.selected_id = ""
        self.comment = ""
        self.form_fields = []
        self.cancel_open = False
        self.cancel_reason = ""

    @rx.var
    def selected(self) -> TaskRow:
        """The open task (an empty row when none is open)."""
        for row in self.pending_tasks:
            if row["id"] == self.selected_id:
                return row
        return TaskRow(id="", title="", kind="", message="", workflow_id="", workflow_name="", instance="",
                       run_id="", run_link="", created="", due="", assignee="", may_complete=False,
                       may_cancel=False, status="", outcome="", by="", finished="", reason="")

    def _reload_all(self):
        """Reload the lists and the badge; the event to return."""
        event = self._reload()
        return event or InboxCountState.refresh("")

    @rx.event
    @requires_door(Inbox.pending, Inbox.history)
    def load(self):
        """on_load of /inbox: check the sign-in and list the tasks; `/inbox?task=<id>` (a mail's or a
        push's link) opens that task when it is still pending for the caller."""
        self.error = ""
        self.notice = ""
        event = self._reload_all()
        wanted = (self.router.url.query_parameters.get("task") or "").strip()
        if wanted and any(t["id"] == wanted for t in self.pending_tasks):
            self.tab = "pending"
            return [event, type(self).open_task(wanted)]
        return event

    @rx.event
    @requires("ui")
    def set_tab(self, value: str):
        self.tab = value

    @rx.event
    @requires_door(Inbox.open)
    def open_task(self, task_id: str):
        """A row was clicked: show its panel (a form's fields read from the task)."""
        self.error = ""
        self.notice = ""
        self._close()
        try:
            with self._user_session() as (session, user):
                task = _inbox(session, user).open(task_id)
                fields = form_rows(task.fields) if task.kind == "form" else []
        except NotSignedIn:
            return self._signed_out()
        except DomainError as exc:
            self.error = user_message(exc)
            return self._reload_all()
        self.selected_id = task_id
        self.form_fields = fields
        self.upload_target = next((f["name"] for f in fields if f["type"] == "file"), "")
        return None

    @rx.event
    @requires("ui")
    def close_task(self):
        self._close()

    @rx.event
    @requires("ui")
    def set_comment(self, value: str):
        self.comment = value

    def _complete(self, data: Any, done: str):
        self.error = ""
        self.notice = ""
        task_id = self.selected_id
        if not task_id:
            return None
        try:
            with self._user_session() as (session, user):
                _task, run = _inbox(session, user).complete(task_id, data)
                status = run.status if run is not None else "agent"
        except NotSignedIn:
            return self._signed_out()
        except InvalidInput as exc:
            by_field, others = field_errors(exc.errors, {f["name"] for f in self.form_fields})
            self.form_fields = [{**f, "error": by_field.get(f["name"], "")} for f in self.form_fields]
            self.error = "; ".join(others) if others else CHECK_FIELDS
            return None
        except (DomainError, ConcurrentTransition, IllegalTransition) as exc:
            # Someone else was faster (or the run ended): say so and show the lists as they are now.
            self.error = user_message(exc)
            self._close()
            return self._reload_all()
        self._close()
        if status == "agent":  # an agent's tool call: its run goes on in the background
            self.notice = f"{done} — the agent goes on; its chat shows what it did."
        else:
            self.notice = f"{done} — the run continued" + ("." if status == "running" else f" (now {status}).")
        return self._reload_all()

    @rx.event
    @requires_door(Inbox.complete)
    def approve(self):
        """Approve the open approval task (with the comment, if any)."""
        return self._complete({"approved": True, "comment": self.comment.strip() or None}, "Approved")

    @rx.event
    @requires_door(Inbox.complete)
    def reject(self):
        """Reject the open approval task (with the comment, if any)."""
        return self._complete({"approved": False, "comment": self.comment.strip() or None}, "Rejected")

    @rx.event
    @requires_door(Inbox.complete)
    def submit_form(self, form_data: dict):
        """Submit the open form task; the backend's field errors appear next to the fields."""
        self.form_fields = [{**f, "error": ""} for f in self.form_fields]
        return self._complete(form_values(self.form_fields, form_data or {}), "Submitted")

    @rx.event
    @requires("ui")
    def open_cancel(self):
        self.cancel_open = True
        self.cancel_reason = ""

    @rx.event
    @requires("ui")
    def set_cancel_open(self, value: bool):
        self.cancel_open = bool(value)

    @rx.event
    @requires("ui")
    def set_upload_target(self, name: str):
        self.upload_target = name

    @rx.event
    @requires_door(Inbox.open)
    async def upload_task_file(self, uploads: list[rx.UploadFile]):
        """Store a file for the open form in its instance's file store (/inbox/<task>/<name>) and
        put its path into the chosen file field; the file service checks rights and size."""
        if not uploads or not self.selected_id or not self.upload_target:
            return None
        upload = uploads[0]
        name = (upload.name or "upload").replace("\\", "/").rsplit("/", 1)[-1]
        data = await upload.read()
        content_type = upload.headers.get("content-type") if upload.headers else None
        path = f"/inbox/{self.selected_id}/{name}"
        try:
            with self._user_session() as (session, user):
                access = AccessContext(session, user)
                task = Inbox(access).open(self.selected_id)
                scope = files.FileScope(session, user, task.mandate_id, task.feature_instance_id, access)
                files.store_file(scope, path, data, content_type, overwrite=True)
        except NotSignedIn:
            return self._signed_out()
        except DomainError as exc:
            self.error = f"{name}: {user_message(exc)}"
            return None
        self.error = ""
        self.notice = f"Uploaded {name} for {self.upload_target}."
        # The field's input is uncontrolled and its id comes from a foreach (no ref for set_value).
        return rx.call_script(f"document.getElementById({json.dumps('task-field-' + self.upload_target)}).value = "
                              f"{json.dumps(path)}")

    @rx.event
    @requires("ui")
    def set_cancel_reason(self, value: str):
        self.cancel_reason = value

    @rx.event
    @requires_door(Inbox.cancel)
    def confirm_cancel(self):
        """Cancel the open task with the reason typed in the dialog; its run is cancelled."""
        task_id = self.selected_id
        reason = self.cancel_reason.strip() or None
        agent = any(t["id"] == task_id and t["workflow_name"] == AGENT_SOURCE for t in self.pending_tasks)

        def cancel(session, user):
            _inbox(session, user).cancel(task_id, reason)

        ok, event = self._attempt(cancel, "Withdrawn — the agent is told and finishes without the tool call."
                                  if agent else "Cancelled the task — its run was cancelled.")
        self.cancel_open = False
        if ok:
            self._close()
        else:
            event = self._reload_all()
        return event or InboxCountState.refresh("")
