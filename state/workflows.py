"""State of the Workflows page: the workflows of the chosen Graphical Editor instance."""

from __future__ import annotations

from typing import TypedDict

import reflex as rx

from backend.errors import DomainError, Forbidden
from backend.statemachines import ConcurrentTransition
from backend.tenancy import can_modify, instances_for_user, require_instance
from backend.workflows import service
from state.auth import AuthState, NotSignedIn

FEATURE_CODE = "graphicalEditor"


class InstanceRow(TypedDict):
    id: str
    label: str


class WorkflowRow(TypedDict):
    id: str
    name: str
    description: str
    status: str
    modified: str


class WorkflowsState(AuthState):
    """What the Workflows page shows and the actions on it."""

    instances: list[InstanceRow] = []
    instance_id: str = ""
    workflows: list[WorkflowRow] = []
    can_edit: bool = False
    loaded: bool = False
    error: str = ""
    notice: str = ""
    new_name: str = ""
    rename_id: str = ""
    rename_value: str = ""
    delete_id: str = ""
    delete_name: str = ""

    def _refresh(self) -> None:
        with self._user_session() as (session, user):
            instances = instances_for_user(session, user, FEATURE_CODE)
            self.instances = [InstanceRow(id=i.id, label=i.label) for i in instances]
            if self.instance_id not in {i.id for i in instances}:
                self.instance_id = instances[0].id if instances else ""
            self.workflows = []
            self.can_edit = False
            if self.instance_id:
                instance, roles = require_instance(session, user, self.instance_id, FEATURE_CODE)
                self.can_edit = can_modify(roles)
                workflows = service.list_workflows(session, instance)
                numbers = service.version_numbers(session, workflows)
                for workflow in workflows:
                    self.workflows.append(
                        WorkflowRow(
                            id=workflow.id,
                            name=workflow.name,
                            description=workflow.description,
                            status=_status_text(numbers[workflow.id]),
                            modified=workflow.sys_modified_at.strftime("%Y-%m-%d %H:%M UTC"),
                        )
                    )
        self.loaded = True

    def _run(self, action, success: str = ""):
        """Run `action(session, user, instance)`, then reload; errors become the page's message."""
        self.error = ""
        self.notice = ""
        try:
            with self._user_session() as (session, user):
                instance, roles = require_instance(session, user, self.instance_id, FEATURE_CODE)
                if not can_modify(roles):
                    raise Forbidden("your roles in this instance allow reading only")
                action(session, user, instance)
        except NotSignedIn:
            return rx.redirect("/login")
        except (DomainError, ConcurrentTransition) as exc:
            self.error = str(exc).removeprefix("name: ")
            return None
        self.notice = success
        self._refresh()
        return None

    @rx.event
    def load(self):
        """on_load: check the sign-in, then list the workflows."""
        try:
            self._refresh()
        except NotSignedIn:
            self.token = ""
            return rx.redirect("/login")
        return None

    @rx.event
    def select_instance(self, instance_id: str):
        """Switch to another Graphical Editor instance."""
        self.instance_id = instance_id
        return WorkflowsState.load

    @rx.event
    def set_new_name(self, value: str):
        self.new_name = value

    @rx.event
    def create_workflow(self, form_data: dict):
        """Create a workflow with the typed name."""
        name = (form_data.get("name") or self.new_name or "").strip()
        result = self._run(
            lambda session, user, instance: service.create_workflow(session, user, instance, name),
            success=f"Created '{name}'.",
        )
        if not self.error:
            self.new_name = ""
        return result

    @rx.event
    def start_rename(self, workflow_id: str, name: str):
        self.rename_id = workflow_id
        self.rename_value = name
        self.error = ""

    @rx.event
    def set_rename_value(self, value: str):
        self.rename_value = value

    @rx.event
    def cancel_rename(self):
        self.rename_id = ""
        self.rename_value = ""

    @rx.event
    def save_rename(self):
        """Rename the workflow being edited."""
        workflow_id, name = self.rename_id, self.rename_value

        def rename(session, user, instance):
            workflow = service.get_workflow(session, instance, workflow_id)
            service.update_workflow(session, user, workflow, instance, name=name)

        result = self._run(rename, success=f"Renamed to '{name.strip()}'.")
        if not self.error:
            self.rename_id = ""
        return result

    @rx.event
    def ask_delete(self, workflow_id: str, name: str):
        self.delete_id = workflow_id
        self.delete_name = name

    @rx.event
    def cancel_delete(self):
        self.delete_id = ""
        self.delete_name = ""

    @rx.event
    def confirm_delete(self):
        """Delete the workflow the dialog asked about."""
        workflow_id, name = self.delete_id, self.delete_name
        self.delete_id = ""
        return self._run(
            lambda session, user, instance: service.delete_workflow(
                session, service.get_workflow(session, instance, workflow_id)
            ),
            success=f"Deleted '{name}'.",
        )


def _status_text(numbers: dict[str, int]) -> str:
    parts = [f"{status} v{numbers[status]}" for status in ("published", "draft") if status in numbers]
    return " · ".join(parts) or "archived"
