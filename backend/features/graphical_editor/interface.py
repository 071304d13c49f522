"""Data access of one Graphical Editor instance, with the caller's DATA and RESOURCE rights.

Every read and write of workflows and versions from REST or UI goes through here.
`own` rights are applied row by row (sysCreatedBy = the user); a row the user may not read is
not found, a row they may read but not change is forbidden.
"""

from __future__ import annotations

from typing import Any

from sqlmodel import Session, select

from backend.db.models import FeatureInstance, RunStepLog, User, Workflow, WorkflowRun, WorkflowVersion
from backend.engine import executor, recovery, worker
from backend.errors import Conflict, FieldError, Forbidden, InvalidInput, NotFound
from backend.rbac.access import AccessContext
from backend.rbac.rights import Level
from backend.statemachines import workflow_run as run_lifecycle
from backend.workflows import run_history as history
from backend.workflows import service, templates
from backend.workflows.validation import validate_graph

FEATURE_CODE = "graphicalEditor"


class GraphicalEditorInterface:
    """CRUD over one instance's workflows, authorised as one user."""

    def __init__(self, access: AccessContext, instance: FeatureInstance):
        self.access = access
        self.session = access.session
        self.user = access.user
        self.instance = instance

    # --- checks -----------------------------------------------------------------------------

    def _level(self, table: str, operation: str) -> Level:
        return self.access.data_level(f"data.feature.{FEATURE_CODE}.{table}", operation,
                                      self.instance.mandate_id, self.instance.id)

    def _require(self, table: str, operation: str, row: Any = None) -> None:
        level = self._level(table, operation)
        if level == Level.NONE:
            raise Forbidden(f"your roles allow no {operation} on {table} in this instance")
        if level == Level.OWN and row is not None and getattr(row, "sys_created_by", None) != self.user.id:
            raise Forbidden(f"your roles allow {operation} only on {table} rows you created")

    def can_see(self, item: str) -> bool:
        """UI check within this instance (item relative to the feature, e.g. 'workflows.create')."""
        return self.access.can_see(f"ui.feature.{FEATURE_CODE}.{item}", self.instance.mandate_id, self.instance.id)

    def can(self, table: str, operation: str, row: Any = None) -> bool:
        try:
            self._require(table, operation, row)
        except Forbidden:
            return False
        return True

    def require_resource(self, name: str) -> None:
        self.access.require_resource(f"resource.feature.{FEATURE_CODE}.{name}",
                                     self.instance.mandate_id, self.instance.id)

    # --- workflows --------------------------------------------------------------------------

    def list_workflows(self) -> list[Workflow]:
        level = self._level("workflow", "read")
        if level == Level.NONE:
            raise Forbidden("your roles allow no read on workflow in this instance")
        workflows = service.list_workflows(self.session, self.instance)
        if level == Level.OWN:
            workflows = [w for w in workflows if w.sys_created_by == self.user.id]
        return workflows

    def get_workflow(self, workflow_id: str) -> Workflow:
        workflow = service.get_workflow(self.session, self.instance, workflow_id)
        level = self._level("workflow", "read")
        if level == Level.NONE or (level == Level.OWN and workflow.sys_created_by != self.user.id):
            raise NotFound(f"workflow {workflow_id} not found")
        return workflow

    def create_workflow(self, name: Any, description: str = "", graph: Any = None,
                        template_id: str | None = None) -> Workflow:
        """A new workflow whose draft is `graph`, or the graph of template `template_id` (not both:
        422 naming templateId), else a lone manual trigger."""
        self._require("workflow", "create")
        if template_id is not None:
            if graph is not None:
                raise InvalidInput([FieldError("templateId", "give either graph or templateId, not both")])
            try:
                graph = templates.template(template_id).graph
            except NotFound as exc:
                raise InvalidInput([FieldError("templateId", str(exc))]) from None
        if graph is not None:
            _refuse_bad_schedules(graph)
        return service.create_workflow(self.session, self.user, self.instance, name, description, graph)

    def list_templates(self) -> list[templates.Template]:
        """The workflow templates (to whoever may read workflows here)."""
        self._require("workflow", "read")
        return templates.templates()

    def update_workflow(self, workflow: Workflow, name: Any = None, description: str | None = None,
                        active: bool | None = None) -> Workflow:
        self._require("workflow", "update", workflow)
        return service.update_workflow(self.session, self.user, workflow, self.instance, name, description, active)

    def delete_workflow(self, workflow: Workflow) -> None:
        self._require("workflow", "delete", workflow)
        service.delete_workflow(self.session, workflow)

    # --- versions ---------------------------------------------------------------------------

    def list_versions(self, workflow: Workflow) -> list[WorkflowVersion]:
        self._require("workflow_version", "read")
        return service.list_versions(self.session, workflow)

    def save_draft(self, workflow: Workflow, graph: Any, base: service.DraftBase | None = None) -> WorkflowVersion:
        """Save the draft. A draft may be incomplete, but a schedule it cannot run is refused at
        once (422 naming node and field), as when creating: a wrong cron, interval or time zone
        is never work in progress worth keeping, and finding out only at publish time is late.

        `base` (the version the editor opened): Conflict when it changed since (service.save_draft)."""
        self._require("workflow", "update", workflow)
        _refuse_bad_schedules(graph)
        return service.save_draft(self.session, self.user, workflow, graph, base)

    def edited_version(self, workflow: Workflow) -> WorkflowVersion | None:
        """The version a person edits: the draft, else the published one (None when neither)."""
        return service.edited_version(self.session, workflow)

    def validate_workflow(self, workflow: Workflow) -> list[FieldError]:
        """Every DESIGN §4 problem of the graph being edited (draft, else published); [] when valid."""
        self._require("workflow", "read", workflow)
        return service.validate_workflow(self.session, workflow)

    def change_version(self, workflow: Workflow, action: str, version_id: str | None = None) -> WorkflowVersion:
        """publish | unpublish | archive | restore, which need the publish right."""
        self.require_resource("publish")
        self._require("workflow", "update", workflow)
        if action == "restore":
            return service.restore(self.session, self.user, workflow, version_id)
        return getattr(service, action)(self.session, self.user, workflow)

    # --- runs -------------------------------------------------------------------------------

    def start_run(self, workflow: Workflow, input: Any = None, version: str | None = None,  # noqa: A002
                  mode: str = "full", wait_seconds: float | None = None) -> WorkflowRun:
        """Start a run of the draft (default when there is one) or the published version.

        The run executes on a run thread (backend/engine/worker.py); the answer is its state
        once it came to rest (completed, failed, cancelled or paused), or `running` when that
        took longer than `wait_seconds` (POWERON_RUN_WAIT_SECONDS by default; 0 returns at once,
        for callers that watch the run themselves, like the editor's live trace).
        """
        self.require_resource("execute")
        self._require("workflow_run", "create")
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
        """`run` (committed) executed on a run thread, as it stands after the wait."""
        worker.execute_and_wait(run.id, wait_seconds)
        self.session.refresh(run)
        return run

    def list_runs(self, workflow_id: str | None = None, status: str | None = None) -> list[WorkflowRun]:
        level = self._level("workflow_run", "read")
        if level == Level.NONE:
            raise Forbidden("your roles allow no read on workflow_run in this instance")
        query = select(WorkflowRun).where(WorkflowRun.feature_instance_id == self.instance.id)
        if workflow_id:
            query = query.where(WorkflowRun.workflow_id == self.get_workflow(workflow_id).id)
        if status:
            known = (run_lifecycle.RUNNING, run_lifecycle.PAUSED, *run_lifecycle.FINISHED)
            if status not in known:
                raise InvalidInput([FieldError("status", f"must be one of {', '.join(known)}")])
            query = query.where(WorkflowRun.status == status)
        if level == Level.OWN:
            query = query.where(WorkflowRun.sys_created_by == self.user.id)
        return list(self.session.exec(query.order_by(WorkflowRun.started_at.desc())).all())

    def _run_reader(self) -> str | None:
        """None when the user may read every run of the instance, their id when only their own."""
        level = self._level("workflow_run", "read")
        if level == Level.NONE:
            raise Forbidden("your roles allow no read on workflow_run in this instance")
        return self.user.id if level == Level.OWN else None

    def run_history(self, workflow: Workflow, status: str | None = None, trigger: str | None = None,
                    limit: int = history.DEFAULT_LIMIT, before: str | None = None) -> history.RunPage:
        """A page of `workflow`'s runs (read with get_workflow), newest first; rights as list_runs."""
        return history.list_runs(self.session, workflow.id, created_by=self._run_reader(), status=status,
                                     trigger=trigger, limit=limit, before=before)

    def run_summary(self, workflow: Workflow, days: int = history.DEFAULT_DAYS) -> history.RunSummary:
        """The monitor's figures of `workflow`'s runs over the last `days` days; rights as list_runs."""
        return history.summarize(self.session, workflow.id, created_by=self._run_reader(), days=days)

    def get_run(self, run_id: str) -> WorkflowRun:
        run = self.session.get(WorkflowRun, run_id)
        level = self._level("workflow_run", "read")
        if (run is None or run.feature_instance_id != self.instance.id or level == Level.NONE
                or (level == Level.OWN and run.sys_created_by != self.user.id)):
            raise NotFound(f"run {run_id} not found")
        return run

    def run_steps(self, run: WorkflowRun) -> list[RunStepLog]:
        return list(self.session.exec(
            select(RunStepLog).where(RunStepLog.run_id == run.id).order_by(RunStepLog.started_at, RunStepLog.id)
        ).all())

    def cancel_run(self, run: WorkflowRun) -> WorkflowRun:
        """Cancel a running or paused run; a running one stops before its next node.

        Its pending human tasks are cancelled with it, so nobody is asked to decide for a dead run.
        """
        self.require_resource("execute")
        run_lifecycle.cancel(self.session, run, f"cancelled by {self.user.username}", by=self.user.id)
        return run

    def continue_run(self, run: WorkflowRun, wait_seconds: float | None = None) -> WorkflowRun:
        """Step-by-step mode: run the next node of a run paused by the step debugger."""
        self.require_resource("execute")
        executor.continue_run(self.session, run)
        return self._executed(run, wait_seconds)

    def retry_run(self, run: WorkflowRun, wait_seconds: float | None = None) -> WorkflowRun:
        """Retry a failed run from its failed node: a new run that reuses the completed outputs
        (see backend/engine/recovery.py) executed to its next resting state; 409 unless failed."""
        self.require_resource("execute")
        self._require("workflow_run", "create")
        retry = recovery.retry_failed_run(self.session, self.user, run)
        self.session.commit()
        return self._executed(retry, wait_seconds)


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
    instance = access.require_instance(feature_instance_id, FEATURE_CODE)
    if mandate_id is not None and instance.mandate_id != mandate_id:
        raise NotFound(f"feature instance {feature_instance_id} not found")
    return GraphicalEditorInterface(access, instance)
