"""State of the Workflows page: the workflows of the chosen Graphical Editor instance."""

from __future__ import annotations

from typing import TypedDict

import reflex as rx

from backend.errors import DomainError
from backend.features.graphical_editor.interface import GraphicalEditorInterface as Door
from backend.features.graphical_editor.interface import WorkflowSummary, get_interface
from backend.workflows.graph_io import parse_import_named
from backend.workflows.templates import Template
from state.auth import AuthState, NotSignedIn
from state.instance_choice import InstanceChoiceMixin
from state.page import PageMixin, RenameMixin, user_message
from state.permissions import requires, requires_door


class WorkflowRow(TypedDict):
    id: str
    name: str
    description: str
    status: str
    modified: str
    mcp_tool: bool
    published: bool
    mcp_hint: str  # what the MCP switch means for this workflow now
    mail_one_click: bool  # its approvals may be decided from the mail without signing in


class TemplateNeedRow(TypedDict):
    text: str  # "Needs an AI provider — not configured here: set OPENAI_API_KEY …"
    met: bool


class TemplateRow(TypedDict):
    id: str
    name: str
    description: str
    category: str
    node_count: int
    needs: list[TemplateNeedRow]  # what the card names: all but what `make run` provides and is there
    runs_as_it_is: bool  # needs nothing beyond `make run`
    ready: bool  # what it needs is all here


class WorkflowsState(InstanceChoiceMixin, RenameMixin, PageMixin, AuthState):
    """What the Workflows page shows and the actions on it, in the instance its header names."""

    instance_id: str = ""
    instance_label: str = ""
    workflows: list[WorkflowRow] = []
    can_create: bool = False
    can_rename: bool = False
    can_delete: bool = False
    can_allow_mail: bool = False
    new_name: str = ""
    delete_id: str = ""
    delete_name: str = ""
    templates: list[TemplateRow] = []
    templates_open: bool = False

    def _refresh(self) -> None:
        with self._user_session() as (session, user):
            self._load_navigation(session, user)
            chosen = self._current_instance(session, user, self.instance_id)
            self.instance_id, self.instance_label = (chosen.id, chosen.label) if chosen else ("", "")
            self.workflows = []
            self.can_create = self.can_rename = self.can_delete = self.can_allow_mail = False
            if self.instance_id:
                iface = get_interface(user, None, self.instance_id, session)
                rights = iface.page_rights()
                self.can_create, self.can_rename, self.can_delete = (rights.can_create, rights.can_rename,
                                                                     rights.can_delete)
                self.can_allow_mail = rights.can_allow_mail
                self.workflows = [_workflow_row(summary) for summary in iface.workflow_summaries()]
        self.loaded = True

    def _run(self, action, success: str = ""):
        """Run `action(interface)` on the chosen instance; the event for the handler to return."""
        _ok, event = self._attempt(
            lambda session, user: action(get_interface(user, None, self.instance_id, session)), success)
        return event

    @rx.event
    @requires_door(Door.workflow_summaries, Door.page_rights)
    def load(self):
        """on_load: check the sign-in, then list the workflows of the user's current instance
        (the one they chose or used last, wherever: the header names it)."""
        self.instance_id = ""
        return self._reload()

    def _instance_switched(self, instance_id: str):
        """The header switched to another Graphical Editor instance: list its workflows."""
        self.instance_id = instance_id
        self.rename_id = self.delete_id = ""
        return self._reload()

    @rx.event
    @requires("ui")
    def set_new_name(self, value: str):
        self.new_name = value

    @rx.event
    @requires_door(Door.create_workflow)
    def create_workflow(self, form_data: dict):
        """Create a workflow with the typed name and open it in the editor."""
        name = (form_data.get("name") or self.new_name or "").strip()
        result = self._create_and_open(lambda iface: iface.create_workflow(name), success=f"Created '{name}'.")
        if not self.error:
            self.new_name = ""
        return result

    def _free_name(self, wanted: str) -> str:
        """`wanted`, numbered ("Name 2", …) when a workflow of the instance already has it."""
        taken = {w["name"] for w in self.workflows}
        name, number = wanted, 2
        while name in taken:
            name, number = f"{wanted} {number}", number + 1
        return name

    def _create_and_open(self, create, success: str):
        """Create a workflow with `create(iface) -> Workflow` and open it in the editor."""
        created: list[str] = []
        result = self._run(lambda iface: created.append(create(iface).id), success=success)
        if not created:
            return result
        self.notice = ""  # the editor opens; back on this page the list shows the new workflow
        return rx.redirect(f"/editor/{created[0]}")

    @rx.event
    @requires_door(Door.list_templates)
    def open_templates(self):
        """Show the templates to start a workflow from."""
        try:
            with self._user_session() as (session, user):
                iface = get_interface(user, None, self.instance_id, session)
                self.templates = [_template_row(t) for t in iface.list_templates()]
        except NotSignedIn:
            return self._signed_out()
        except DomainError as exc:
            self.error = user_message(exc)
            return None
        self.templates_open = True
        return None

    @rx.event
    @requires("ui")
    def close_templates(self):
        self.templates_open = False

    @rx.event
    @requires_door(Door.create_workflow)
    def create_from_template(self, template_id: str, template_name: str):
        """Create a workflow from a template (named after it, numbered when taken) and open it."""
        self.templates_open = False
        name = self._free_name(template_name)
        return self._create_and_open(lambda iface: iface.create_workflow(name, template_id=template_id),
                                     success=f"Created '{name}'.")

    @rx.event
    @requires_door(Door.create_workflow)
    async def import_workflow(self, files: list[rx.UploadFile]):
        """Create a workflow from an exported JSON file; a malformed file creates nothing."""
        if not files:
            return None
        upload = files[0]
        raw = await upload.read()
        try:
            graph, exported_name = parse_import_named(raw)
        except DomainError as exc:
            self.notice = ""
            self.error = f"Import of {upload.name or 'the file'} refused: {user_message(exc)}"
            return None
        name = self._free_name(exported_name or (upload.name or "Imported workflow").rsplit(".", 1)[0])
        return self._create_and_open(lambda iface: iface.create_workflow(name, graph=graph),
                                     success=f"Imported '{name}'.")

    @rx.event
    @requires_door(Door.update_workflow)
    def save_rename(self):
        """Rename the workflow being edited."""
        workflow_id, name = self.rename_id, self.rename_value

        def rename(iface: Door):
            iface.update_workflow(iface.get_workflow(workflow_id), name=name)

        result = self._run(rename, success=f"Renamed to '{name.strip()}'.")
        if not self.error:
            self.rename_id = ""
        return result

    @rx.event
    @requires_door(Door.update_workflow)
    def set_mcp_tool(self, workflow_id: str, exposed: bool):
        """Switch "expose as MCP tool": the published version becomes a tool at /mcp (or stops being one)."""
        row = next((w for w in self.workflows if w["id"] == workflow_id), None)
        name = row["name"] if row else ""
        if not exposed:
            success = f"'{name}' is no longer offered to MCP clients."
        elif row and row["published"]:
            success = f"'{name}' is offered to MCP clients as a tool."
        else:
            success = f"'{name}' will be offered to MCP clients as a tool once it is published."
        return self._run(lambda iface: iface.update_workflow(iface.get_workflow(workflow_id), mcp_tool=bool(exposed)),
                         success=success)

    @rx.event
    @requires_door(Door.allow_mail_decisions)
    def set_mail_one_click(self, workflow_id: str, allowed: bool):
        """Allow (or stop) deciding the workflow's approvals from the task mail without signing in."""
        row = next((w for w in self.workflows if w["id"] == workflow_id), None)
        name = row["name"] if row else ""
        success = (f"Approvals of '{name}' can now be decided from the mail's link without signing in."
                   if allowed else f"Approvals of '{name}' need a sign-in again to be decided from the mail.")
        return self._run(lambda iface: iface.allow_mail_decisions(iface.get_workflow(workflow_id), bool(allowed)),
                         success=success)

    @rx.event
    @requires("ui")
    def ask_delete(self, workflow_id: str, name: str):
        self.delete_id = workflow_id
        self.delete_name = name

    @rx.event
    @requires("ui")
    def cancel_delete(self):
        self.delete_id = ""
        self.delete_name = ""

    @rx.event
    @requires_door(Door.delete_workflow)
    def confirm_delete(self):
        """Delete the workflow the dialog asked about."""
        workflow_id, name = self.delete_id, self.delete_name
        self.delete_id = ""
        return self._run(
            lambda iface: iface.delete_workflow(iface.get_workflow(workflow_id)),
            success=f"Deleted '{name}'.",
        )


def _template_row(template: Template) -> TemplateRow:
    """A template as its card shows it: what it needs and whether this installation has it."""
    needs = template.needs()
    return TemplateRow(id=template.id, name=template.name, description=template.description,
                       category=template.category, node_count=len(template.graph.get("nodes", [])),
                       needs=[TemplateNeedRow(text=n.text, met=n.met) for n in needs if n.shown],
                       runs_as_it_is=template.runs_as_it_is(needs), ready=all(n.met for n in needs))


def _status_text(summary: WorkflowSummary) -> str:
    numbers = {"published": summary.published_version, "draft": summary.draft_version}
    parts = [f"{status} v{number}" for status, number in numbers.items() if number is not None]
    return " · ".join(parts) or "archived"


def _workflow_row(summary: WorkflowSummary) -> WorkflowRow:
    """A workflow as the page's table shows it."""
    workflow = summary.workflow
    if summary.published_version is None:
        hint = "offered to MCP clients once published" if workflow.mcp_tool else "publish it to offer it as an MCP tool"
    else:
        hint = "offered as a tool at /mcp" if workflow.mcp_tool else "not offered to MCP clients"
    return WorkflowRow(id=workflow.id, name=workflow.name, description=workflow.description,
                       status=_status_text(summary), modified=workflow.sys_modified_at.strftime("%Y-%m-%d %H:%M UTC"),
                       mcp_tool=workflow.mcp_tool, published=summary.published_version is not None, mcp_hint=hint,
                       mail_one_click=workflow.mail_one_click)
