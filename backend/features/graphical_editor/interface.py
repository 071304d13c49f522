"""Data access of one Graphical Editor instance, with the caller's DATA and RESOURCE rights.

Every read and write of workflows and versions from REST or UI goes through here.
`own` rights are applied row by row (sysCreatedBy = the user); a row the user may not read is
not found, a row they may read but not change is forbidden.
"""

from __future__ import annotations

from typing import Any

from sqlmodel import Session

from backend.db.models import FeatureInstance, User, Workflow, WorkflowVersion
from backend.errors import FieldError, Forbidden, NotFound
from backend.rbac.access import AccessContext
from backend.rbac.rights import Level
from backend.workflows import service

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

    def create_workflow(self, name: Any, description: str = "", graph: Any = None) -> Workflow:
        self._require("workflow", "create")
        return service.create_workflow(self.session, self.user, self.instance, name, description, graph)

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

    def save_draft(self, workflow: Workflow, graph: Any) -> WorkflowVersion:
        self._require("workflow", "update", workflow)
        return service.save_draft(self.session, self.user, workflow, graph)

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
