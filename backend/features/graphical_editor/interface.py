"""The door of one Graphical Editor instance: the only path to its workflows, versions and runs.

Every read and write of workflows, versions and runs from REST, the UI, the agent's workflow
tools and the outside triggers goes through :class:`GraphicalEditorInterface`. Each public
method declares the permission it enforces with :func:`backend.rbac.door.guarded` (routes and UI
handlers read that declaration); row-level `own` rights are applied inside with
``AccessContext.may`` / ``AccessContext.visible``: a row the user may not read is not found, a row
they may read but not change is forbidden.

Graphs leave the door already shown for the caller: webhook secrets in clear only for those who
may change the workflow, masked for everyone else (and always masked with ``masked=True``, for
the editor page and agent prompts, where secrets never go).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any

from sqlmodel import Session, select

from backend.db.models import FeatureInstance, RunStepLog, User, Workflow, WorkflowRun, WorkflowVersion
from backend.engine import executor, recovery
from backend.engine import queue as run_queue
from backend.errors import Conflict, DomainError, FieldError, Forbidden, InvalidInput, NotFound
from backend.features.graphical_editor.main import (
    CHAT_DATA,
    CREATE_BUTTON,
    DELETE_BUTTON,
    EXECUTE,
    FEATURE_CODE,
    PUBLISH,
    RENAME_BUTTON,
    RUN_DATA,
    USE_AGENT,
    VERSION_DATA,
    WORKFLOW_DATA,
)
from backend.rbac.access import AccessContext, allows
from backend.rbac.door import Door, Permission, guarded
from backend.rbac.rights import DATA, RESOURCE, UI
from backend.rbac.templates import ADMIN_UI
from backend.statemachines import workflow_run as run_lifecycle
from backend.triggers import secrets as webhook_secrets
from backend.workflows import run_history as history
from backend.workflows import service, templates
from backend.workflows.graph import default_graph
from backend.workflows.suggestions import last_step_outputs
from backend.workflows.validation import validate_graph

if TYPE_CHECKING:
    from backend.agent.service import AgentChats, AgentRequest, ChatHistory
    from backend.triggers.webhook_help import WebhookHelp
    from backend.workflows.assignees import AssigneeChoices

__all__ = ["FEATURE_CODE", "EditorRights", "GraphicalEditorInterface", "PageRights", "VersionView",
           "WorkflowSummary", "WorkflowView", "get_interface", "interface_of_workflow",
           "last_changed_workflow"]

VERSION_ACTIONS = ("publish", "unpublish", "archive", "restore")


# --- what the door hands out --------------------------------------------------------------------


@dataclass(frozen=True)
class WorkflowSummary:
    """A workflow as lists show it: the row and the numbers of its draft and published version."""

    workflow: Workflow
    draft_version: int | None
    published_version: int | None


@dataclass(frozen=True)
class WorkflowView:
    """A workflow with the graph a person edits (draft, else published) as the caller may see it."""

    workflow: Workflow
    draft_version: int | None
    published_version: int | None
    graph: dict[str, Any]
    edited: VersionView | None

    @property
    def edited_version_id(self) -> str | None:
        """The id of the version whose graph this is (the base of the next draft save)."""
        return self.edited.id if self.edited is not None else None

    @property
    def edited_lock_version(self) -> int | None:
        return self.edited.lock_version if self.edited is not None else None


@dataclass(frozen=True)
class VersionView:
    """A version with its graph as the caller may see it and its author's username."""

    id: str
    workflow_id: str
    version_number: int
    status: str
    graph: dict[str, Any]
    sys_created_by: str | None
    sys_created_at: datetime
    sys_modified_at: datetime
    published_at: datetime | None
    lock_version: int
    author: str = ""


@dataclass(frozen=True)
class PageRights:
    """What the Workflows page offers in this instance."""

    can_create: bool
    can_rename: bool
    can_delete: bool
    can_allow_mail: bool = False  # one-click decisions from task mails (mandate admins)


@dataclass(frozen=True)
class EditorRights:
    """What the editor page offers on one workflow."""

    can_edit: bool
    can_publish: bool
    can_execute: bool
    can_use_agent: bool


# --- the door -----------------------------------------------------------------------------------


class GraphicalEditorInterface(Door):
    """Workflows, versions and runs of one instance, authorised as one user."""

    def __init__(self, access: AccessContext, instance: FeatureInstance):
        self.access = access
        self.session = access.session
        self.user = access.user
        self.instance = instance

    # --- checks (private) -----------------------------------------------------------------------

    def _holds(self, kind: str, item: str) -> bool:
        """Whether the caller holds this UI or RESOURCE item here (for a button no method declares)."""
        try:
            self.enforce(Permission(kind, item))
        except Forbidden:
            return False
        return True

    def _require_row(self, operation: str, row: Any, what: str) -> None:
        """Forbidden unless the caller may `operation` this visible row."""
        if not self.may(operation, WORKFLOW_DATA, row):
            raise Forbidden(f"your roles allow {operation} only on {what} you created")

    def _reads_all(self, item: str) -> bool:
        """Whether the caller reads every row of `item` here (not only their own)."""
        return allows(self.access.data_level(item, "read", self.instance.mandate_id, self.instance.id),
                      None, self.user.id)

    def _shown(self, workflow: Workflow, graph: Any, masked: bool) -> dict[str, Any]:
        """`graph` with webhook secrets in clear for those who may change `workflow`, else masked."""
        if not masked and self.may("update", WORKFLOW_DATA, workflow):
            return webhook_secrets.reveal(graph)
        return webhook_secrets.redact(graph)

    def _usernames(self, user_ids: set[str | None]) -> dict[str, str]:
        wanted = sorted(i for i in user_ids if i)
        if not wanted:
            return {}
        return {u.id: u.username for u in self.session.exec(select(User).where(User.id.in_(wanted))).all()}

    def _version_view(self, workflow: Workflow, version: WorkflowVersion, author: str = "",
                      masked: bool = False) -> VersionView:
        return VersionView(
            id=version.id, workflow_id=version.workflow_id, version_number=version.version_number,
            status=version.status, graph=self._shown(workflow, version.graph, masked),
            sys_created_by=version.sys_created_by, sys_created_at=version.sys_created_at,
            sys_modified_at=version.sys_modified_at, published_at=version.published_at,
            lock_version=version.lock_version, author=author)

    # --- page rights ----------------------------------------------------------------------------

    @guarded(DATA, WORKFLOW_DATA, "read")
    def page_rights(self) -> PageRights:
        """The Workflows page's buttons: create (button and create right), rename, delete."""
        return PageRights(
            can_create=self._holds(UI, CREATE_BUTTON) and self.may_call(type(self).create_workflow),
            can_rename=self._holds(UI, RENAME_BUTTON),
            can_delete=self._holds(UI, DELETE_BUTTON),
            can_allow_mail=self.may_call(type(self).allow_mail_decisions),
        )

    @guarded(DATA, WORKFLOW_DATA, "read")
    def editor_rights(self, workflow: Workflow) -> EditorRights:
        """What the editor offers on `workflow`: editing, publishing, running, the AI chat."""
        can_edit = self.may("update", WORKFLOW_DATA, workflow)
        return EditorRights(can_edit=can_edit, can_publish=can_edit and self.may_call(type(self).change_version),
                            can_execute=self.may_call(type(self).check_may_execute),
                            can_use_agent=self.may_call(type(self).prepare_agent_run))

    @guarded(DATA, WORKFLOW_DATA, "read")
    def may_change(self, workflow: Workflow) -> bool:
        """Whether the caller may change `workflow` (update it, save its draft)."""
        return self.may("update", WORKFLOW_DATA, workflow)

    @guarded(RESOURCE, EXECUTE)
    def check_may_execute(self) -> None:
        """Nothing when the caller holds the execute right here (e.g. to fire events), else Forbidden."""

    @guarded(RESOURCE, EXECUTE)
    @guarded(DATA, RUN_DATA, "create")
    def check_may_run(self) -> None:
        """Nothing when the caller may start runs here (execute right, create on runs), else Forbidden."""

    # --- workflows ------------------------------------------------------------------------------

    @guarded(DATA, WORKFLOW_DATA, "read")
    def list_workflows(self) -> list[Workflow]:
        """The workflows the caller may read, newest change first."""
        return [w for w in service.list_workflows(self.session, self.instance) if self.may("read", WORKFLOW_DATA, w)]

    @guarded(DATA, WORKFLOW_DATA, "read")
    def workflow_summaries(self) -> list[WorkflowSummary]:
        """The readable workflows with their draft and published version numbers."""
        workflows = self.list_workflows()
        numbers = service.version_numbers(self.session, workflows)
        return [WorkflowSummary(w, numbers[w.id].get("draft"), numbers[w.id].get("published")) for w in workflows]

    @guarded(DATA, WORKFLOW_DATA, "read")
    def get_workflow(self, workflow_id: str) -> Workflow:
        """The workflow, NotFound when it is not this instance's or not the caller's to read."""
        workflow = service.get_workflow(self.session, self.instance, workflow_id)
        if not self.may("read", WORKFLOW_DATA, workflow):
            raise NotFound(f"workflow {workflow_id} not found")
        return workflow

    @guarded(DATA, WORKFLOW_DATA, "read")
    def workflow_view(self, workflow: Workflow, masked: bool = False) -> WorkflowView:
        """`workflow` with the graph a person edits (draft, else published, else a lone trigger)."""
        numbers = service.version_numbers(self.session, [workflow])[workflow.id]
        version = service.edited_version(self.session, workflow)
        edited = self._version_view(workflow, version, masked=masked) if version is not None else None
        return WorkflowView(workflow=workflow, draft_version=numbers.get("draft"),
                            published_version=numbers.get("published"),
                            graph=edited.graph if edited is not None else default_graph(), edited=edited)

    @guarded(DATA, WORKFLOW_DATA, "read")
    def last_outputs(self, workflow: Workflow) -> dict[str, Any]:
        """Node id → its newest output in the caller's newest readable run of `workflow` ({} before
        any), for the `{{ }}` suggestions of the parameter panel."""
        if not self.may_call(type(self).get_run):
            return {}
        return last_step_outputs(self.session, workflow.id, created_by=self._run_reader())

    @guarded(DATA, WORKFLOW_DATA, "create")
    def create_workflow(self, name: Any, description: str = "", graph: Any = None,
                        template_id: str | None = None) -> Workflow:
        """A new workflow whose draft is `graph`, or the graph of template `template_id` (not both:
        422 naming templateId), else a lone manual trigger."""
        if template_id is not None:
            if graph is not None:
                raise InvalidInput([FieldError("templateId", "give either graph or templateId, not both")])
            try:
                chosen = templates.template(template_id)
            except NotFound as exc:
                raise InvalidInput([FieldError("templateId", str(exc))]) from None
            graph, test_input = chosen.graph, chosen.sample_input
        else:
            test_input = None
        if graph is not None:
            _refuse_bad_schedules(graph)
        return service.create_workflow(self.session, self.user, self.instance, name, description, graph,
                                       test_input)

    @guarded(DATA, WORKFLOW_DATA, "read")
    def list_templates(self) -> list[templates.Template]:
        """The workflow templates (to whoever may read workflows here)."""
        return templates.templates()

    @guarded(DATA, WORKFLOW_DATA, "update")
    def update_workflow(self, workflow: Workflow, name: Any = None, description: str | None = None,
                        active: bool | None = None, test_input: Any = service.UNCHANGED,
                        mcp_tool: bool | None = None) -> Workflow:
        """Rename, describe, switch (in)active, set the test input or switch "expose as MCP tool"
        of a workflow the caller may change."""
        self._require_row("update", workflow, "workflows")
        return service.update_workflow(self.session, self.user, workflow, self.instance, name, description, active,
                                       test_input, mcp_tool)

    @guarded(UI, ADMIN_UI)
    @guarded(DATA, WORKFLOW_DATA, "update")
    def allow_mail_decisions(self, workflow: Workflow, one_click: bool) -> Workflow:
        """Allow (or stop) deciding this workflow's approvals from the mail's link without signing in
        (backend/engine/task_links.py): a mandate admin's choice, recorded in the workflow's log."""
        self._require_row("update", workflow, "workflows")
        return service.allow_mail_decisions(self.session, self.user, workflow, one_click)

    @guarded(DATA, WORKFLOW_DATA, "delete")
    def delete_workflow(self, workflow: Workflow) -> None:
        """Delete a workflow the caller may delete."""
        self._require_row("delete", workflow, "workflows")
        service.delete_workflow(self.session, workflow)

    @guarded(DATA, WORKFLOW_DATA, "read")
    def validate_workflow(self, workflow: Workflow) -> list[FieldError]:
        """Every DESIGN §4 problem of the graph being edited (draft, else published); [] when valid."""
        return service.validate_workflow(self.session, workflow)

    # --- versions -------------------------------------------------------------------------------

    @guarded(DATA, VERSION_DATA, "read")
    def list_versions(self, workflow: Workflow, masked: bool = False) -> list[VersionView]:
        """All versions of `workflow`, newest first, with their authors."""
        versions = service.list_versions(self.session, workflow)
        names = self._usernames({v.sys_created_by for v in versions})
        return [self._version_view(workflow, v, names.get(v.sys_created_by or "", ""), masked) for v in versions]

    @guarded(DATA, VERSION_DATA, "read")
    def get_version(self, workflow: Workflow, version_id: str, masked: bool = False) -> VersionView:
        """One version of `workflow` (e.g. to show it read only), else NotFound."""
        version = next((v for v in self.list_versions(workflow, masked) if v.id == version_id), None)
        if version is None:
            raise NotFound(f"version {version_id} not found")
        return version

    @guarded(DATA, WORKFLOW_DATA, "update")
    def save_draft(self, workflow: Workflow, graph: Any, base: service.DraftBase | None = None) -> VersionView:
        """Save the draft. A draft may be incomplete, but a schedule it cannot run is refused at
        once (422 naming node and field), as when creating: a wrong cron, interval or time zone
        is never work in progress worth keeping, and finding out only at publish time is late.

        `base` (the version the editor opened): Conflict when it changed since (service.save_draft)."""
        self._require_row("update", workflow, "workflows")
        _refuse_bad_schedules(graph)
        draft = service.save_draft(self.session, self.user, workflow, graph, base)
        return self._version_view(workflow, draft)

    @guarded(RESOURCE, PUBLISH)
    @guarded(DATA, WORKFLOW_DATA, "update")
    def change_version(self, workflow: Workflow, action: str, version_id: str | None = None) -> VersionView:
        """publish | unpublish | archive | restore, which need the publish right."""
        if action not in VERSION_ACTIONS:
            raise InvalidInput([FieldError("action", f"must be one of {', '.join(VERSION_ACTIONS)}")])
        self._require_row("update", workflow, "workflows")
        if action == "restore":
            version = service.restore(self.session, self.user, workflow, version_id)
        else:
            version = getattr(service, action)(self.session, self.user, workflow)
        return self._version_view(workflow, version)

    # --- parameter panel ------------------------------------------------------------------------
    # (their modules are imported where used, keeping this section apart from the shared import block)

    def _stored_node(self, workflow: Workflow, node_id: str) -> dict[str, Any]:
        """The node as the graph being edited stores it (draft, else published; secrets sealed)."""
        version = service.edited_version(self.session, workflow)
        nodes = (version.graph or {}).get("nodes", []) if version is not None else []
        node = next((n for n in nodes if isinstance(n, dict) and n.get("id") == node_id), None)
        if node is None:
            raise NotFound(f"node {node_id} not found in workflow {workflow.id}")
        return node

    def _readable_runs(self, run_ids: set[str]) -> set[str]:
        """Those of `run_ids` that are this instance's runs the caller may read."""
        if not run_ids or not self.may_call(type(self).get_run):
            return set()
        query = select(WorkflowRun.id).where(WorkflowRun.id.in_(sorted(run_ids)),
                                             WorkflowRun.feature_instance_id == self.instance.id)
        return set(self.session.exec(self.visible(query, WorkflowRun, RUN_DATA)).all())

    @guarded(DATA, WORKFLOW_DATA, "read")
    def webhook_help(self, workflow: Workflow, node_id: str) -> WebhookHelp:
        """The editor's help for trigger.webhook `node_id`: its address, whether calls are accepted
        now and why not, a curl example — signed with the real secret (valid 5 minutes) only for those
        who may change the workflow — and the workflow's last calls, linked to the runs the caller
        may read. NotFound for a node that is not a stored webhook of the workflow."""
        from dataclasses import replace

        from backend.triggers import webhook_help

        node = self._stored_node(workflow, node_id)
        if node.get("type") != webhook_secrets.WEBHOOK:
            raise NotFound(f"node {node_id} is no webhook trigger")
        shown = webhook_help.webhook_help(self.session, workflow, node,
                                          reveal=self.may("update", WORKFLOW_DATA, workflow))
        readable = self._readable_runs({c.run_id for c in shown.calls if c.run_id})
        return replace(shown, calls=[replace(c, run_id=c.run_id if c.run_id in readable else None)
                                     for c in shown.calls])

    @guarded(DATA, WORKFLOW_DATA, "update")
    def assignee_options(self) -> AssigneeChoices:
        """Whom a human task of this instance can be assigned to (for people editing workflows): the
        mandate's and this instance's roles and the mandate's enabled members, nothing of other mandates."""
        from backend.workflows.assignees import assignee_choices

        return assignee_choices(self.session, self.instance)

    # --- runs -----------------------------------------------------------------------------------

    @guarded(RESOURCE, EXECUTE)
    @guarded(DATA, RUN_DATA, "create")
    @guarded(DATA, WORKFLOW_DATA, "read")
    def mcp_tool_workflows(self) -> list[tuple[Workflow, WorkflowVersion]]:
        """The workflows exposed as MCP tools that the caller may read and run: each with its
        published version (one without is not offered), oldest first (stable tool names)."""
        exposed = [w for w in self.list_workflows() if w.mcp_tool]
        found = [(w, service.published_version(self.session, w)) for w in exposed]
        return sorted(((w, v) for w, v in found if v is not None), key=lambda p: (p[0].sys_created_at, p[0].id))

    @guarded(RESOURCE, EXECUTE)
    @guarded(DATA, RUN_DATA, "create")
    def start_run(self, workflow: Workflow, input: Any = None, version: str | None = None,  # noqa: A002
                  mode: str = "full", wait_seconds: float | None = None) -> WorkflowRun:
        """Start a run of the draft (default when there is one) or the published version.

        The run is handed to the run queue (backend/engine/queue.py); the answer is its state
        once it came to rest (completed, failed, cancelled or paused), or `running` when that
        took longer than `wait_seconds` (POWERON_RUN_WAIT_SECONDS by default; 0 returns at once,
        for callers that watch the run themselves, like the editor's live trace).
        """
        chosen = None
        if version in (None, "draft"):
            chosen = service.draft_version(self.session, workflow)
        if chosen is None and version in (None, "published"):
            chosen = service.published_version(self.session, workflow)
        if chosen is None:
            raise Conflict(f"workflow '{workflow.name}' has no {version or 'draft or published'} version to run")
        run = executor.start_run(self.session, self.user, workflow, chosen, input, mode)
        self.session.commit()
        return self._executed(run, wait_seconds)

    def _executed(self, run: WorkflowRun, wait_seconds: float | None = None) -> WorkflowRun:
        """`run` (committed, handed to the run queue) as it stands after waiting for it to come to rest."""
        run_queue.wait_for_rest(run.id, wait_seconds)
        self.session.refresh(run)
        return run

    @guarded(DATA, RUN_DATA, "read")
    def list_runs(self, workflow_id: str | None = None, status: str | None = None) -> list[WorkflowRun]:
        """The runs the caller may read, newest first, of one workflow and/or in one status."""
        query = select(WorkflowRun).where(WorkflowRun.feature_instance_id == self.instance.id)
        if workflow_id:
            query = query.where(WorkflowRun.workflow_id == self.get_workflow(workflow_id).id)
        if status:
            known = (run_lifecycle.RUNNING, run_lifecycle.PAUSED, *run_lifecycle.FINISHED)
            if status not in known:
                raise InvalidInput([FieldError("status", f"must be one of {', '.join(known)}")])
            query = query.where(WorkflowRun.status == status)
        query = self.visible(query, WorkflowRun, RUN_DATA)
        return list(self.session.exec(query.order_by(WorkflowRun.started_at.desc())).all())

    def _run_reader(self) -> str | None:
        """None when the user may read every run of the instance, their id when only their own."""
        return None if self._reads_all(RUN_DATA) else self.user.id

    @guarded(DATA, RUN_DATA, "read")
    def run_history(self, workflow: Workflow, status: str | None = None, trigger: str | None = None,
                    limit: int = history.DEFAULT_LIMIT, before: str | None = None) -> history.RunPage:
        """A page of `workflow`'s runs (read with get_workflow), newest first; rights as list_runs."""
        return history.list_runs(self.session, workflow.id, created_by=self._run_reader(), status=status,
                                 trigger=trigger, limit=limit, before=before)

    @guarded(DATA, RUN_DATA, "read")
    def run_summary(self, workflow: Workflow, days: int = history.DEFAULT_DAYS) -> history.RunSummary:
        """The monitor's figures of `workflow`'s runs over the last `days` days; rights as list_runs."""
        return history.summarize(self.session, workflow.id, created_by=self._run_reader(), days=days)

    @guarded(DATA, RUN_DATA, "read")
    def get_run(self, run_id: str) -> WorkflowRun:
        """The run, NotFound when it is not this instance's or not the caller's to read."""
        run = self.session.get(WorkflowRun, run_id)
        if run is None or run.feature_instance_id != self.instance.id or not self.may("read", RUN_DATA, run):
            raise NotFound(f"run {run_id} not found")
        return run

    @guarded(DATA, RUN_DATA, "read")
    def run_steps(self, run: WorkflowRun) -> list[RunStepLog]:
        """The step log of a run read with get_run, in order."""
        return list(self.session.exec(
            select(RunStepLog).where(RunStepLog.run_id == run.id).order_by(RunStepLog.started_at, RunStepLog.id)
        ).all())

    @guarded(RESOURCE, EXECUTE)
    def cancel_run(self, run: WorkflowRun) -> WorkflowRun:
        """Cancel a running or paused run; a running one stops before its next node.

        Its pending human tasks are cancelled with it, so nobody is asked to decide for a dead run.
        """
        run_lifecycle.cancel(self.session, run, f"cancelled by {self.user.username}", by=self.user.id)
        return run

    @guarded(RESOURCE, EXECUTE)
    def continue_run(self, run: WorkflowRun, wait_seconds: float | None = None) -> WorkflowRun:
        """Step-by-step mode: run the next node of a run paused by the step debugger."""
        executor.continue_run(self.session, run)
        return self._executed(run, wait_seconds)

    @guarded(RESOURCE, EXECUTE)
    @guarded(DATA, RUN_DATA, "create")
    def retry_run(self, run: WorkflowRun, wait_seconds: float | None = None, graph: str = "current") -> WorkflowRun:
        """Retry a failed run from its failed node: a new run that reuses the completed outputs
        (see backend/engine/recovery.py) executed to its next resting state; 409 unless failed.

        `graph`: `current` runs the version's graph as it is now (the fixed draft), `original`
        the failed run's own snapshot."""
        retry = recovery.retry_failed_run(self.session, self.user, run, graph)
        self.session.commit()
        return self._executed(retry, wait_seconds)

    # --- the editor's AI chat -------------------------------------------------------------------

    @guarded(DATA, WORKFLOW_DATA, "read")
    def agent_context(self, workflow: Workflow) -> str:
        """The system prompt's part about the workflow being edited (UC-4: the agent knows the graph,
        draft else published, webhook secrets masked)."""
        graph = self.workflow_view(workflow, masked=True).graph
        return (f"You are helping to edit the workflow \"{workflow.name}\" (workflowId {workflow.id}) in the "
                "Graphical Editor. Change it only with the workflow tools, passing this workflowId; every change "
                f"is validated. Its current graph:\n{json.dumps(graph, ensure_ascii=False, separators=(',', ':'))}")

    def _chats(self) -> AgentChats:
        """The agent chats door of this instance."""
        from backend.agent.service import AgentChats  # the agent imports the workflow tools, which import this

        return AgentChats(self.access, self.instance)

    @guarded(RESOURCE, USE_AGENT)
    def prepare_agent_run(self, workflow: Workflow, prompt: Any,
                          chat_id: str | None = None) -> AgentRequest:
        """Check and prepare the editor agent's run about `workflow` (its graph in the system prompt)."""
        return self._chats().prepare_run(prompt, chat_id or None, system_extra=self.agent_context(workflow))

    @guarded(DATA, CHAT_DATA, "read")
    def own_chats(self) -> list[Any]:
        """The caller's own editor chats in this instance (AgentChat rows), last continued first."""
        return [c for c in self._chats().list_chats() if c.sys_created_by == self.user.id]

    @guarded(DATA, CHAT_DATA, "read")
    def own_chat(self, chat_id: str) -> ChatHistory:
        """One of the caller's own chats with its runs (oldest first) and their traces; NotFound otherwise
        (others' chats may be readable, but the editor's sidebar shows and continues only one's own)."""
        history = self._chats().chat_history(chat_id)
        if not history.mine:
            raise NotFound(f"chat {chat_id} not found")
        return history


# --- helpers ------------------------------------------------------------------------------------


def _node_type(graph: Any, node_id: str) -> str | None:
    nodes = graph.get("nodes") if isinstance(graph, dict) else None
    return next((n.get("type") for n in nodes or [] if isinstance(n, dict) and n.get("id") == node_id), None)


def _refuse_bad_schedules(graph: Any) -> None:
    """InvalidInput naming node and field for every trigger.schedule parameter problem."""
    errors = [error for error in validate_graph(graph)
              if error.node_id and error.field.startswith("parameters")
              and _node_type(graph, error.node_id) == "trigger.schedule"]
    if errors:
        raise InvalidInput(errors)


def get_interface(
    user: User, mandate_id: str | None, feature_instance_id: str, session: Session
) -> GraphicalEditorInterface:
    """The interface of one instance for `user`; NotFound when they may not open it.

    `mandate_id` may be None (derived from the instance); when given it must match.
    """
    access = AccessContext(session, user)
    return GraphicalEditorInterface(access, access.require_instance(feature_instance_id, FEATURE_CODE, mandate_id))


def interface_of_workflow(user: User, workflow_id: str, session: Session) -> tuple[GraphicalEditorInterface,
                                                                                  Workflow]:
    """The interface of the instance a workflow is in, with the workflow; NotFound when the
    user may not read it (or it does not exist)."""
    found = session.get(Workflow, workflow_id) if workflow_id else None
    if found is None:
        raise NotFound(f"workflow {workflow_id or '(none)'} not found")
    iface = get_interface(user, None, found.feature_instance_id, session)
    return iface, iface.get_workflow(workflow_id)


def last_changed_workflow(user: User, session: Session) -> Workflow | None:
    """The workflow changed last among those the user may read in their current Graphical Editor
    instance (the one the page header names: backend/instance_choice.py); None when it has none."""
    from backend.instance_choice import InstanceChoice  # it imports the bootstrap, which imports features

    access = AccessContext(session, user)
    current = InstanceChoice(access).current(FEATURE_CODE).chosen
    instance = access.require_instance(current.id, FEATURE_CODE) if current is not None else None
    if instance is None:
        return None
    try:
        workflows = GraphicalEditorInterface(access, instance).list_workflows()
    except DomainError:
        return None
    return max(workflows, key=lambda workflow: workflow.sys_modified_at, default=None)
