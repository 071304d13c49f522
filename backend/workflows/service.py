"""Workflow CRUD and the version lifecycle (spec §7.1) for one Graphical Editor instance.

Callers pass an already authorised feature instance (see backend.tenancy.require_instance);
every lookup here is scoped to it, so a foreign id is simply not found.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import delete, func, update
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm.attributes import set_committed_value
from sqlmodel import Session, select

from backend.actions.catalogue import in_mandate
from backend.db.models import (
    FeatureInstance,
    HumanTask,
    RunStepLog,
    User,
    WebhookCall,
    WebhookDelivery,
    Workflow,
    WorkflowGraphSnapshot,
    WorkflowRun,
    WorkflowVersion,
    utcnow,
)
from backend.errors import Conflict, FieldError, InvalidInput, NotFound
from backend.json_limits import check_json
from backend.names import clean_name
from backend.statemachines import workflow_version as lifecycle
from backend.triggers import remote
from backend.triggers.secrets import seal_secrets
from backend.workflows import changes
from backend.workflows.graph import default_graph, require_valid_structure
from backend.workflows.validation import validate_graph

NAME_MAX = 200


def _clean_name(name: Any) -> str:
    if not isinstance(name, str) or not name.strip():
        raise InvalidInput([FieldError("name", "must be a non-empty string")])
    name = clean_name(name)
    if len(name) > NAME_MAX:
        raise InvalidInput([FieldError("name", f"must be at most {NAME_MAX} characters")])
    return name


def _require_unique_name(session: Session, instance: FeatureInstance, name: str, exclude_id: str | None = None) -> None:
    query = select(Workflow.id).where(Workflow.feature_instance_id == instance.id, Workflow.name == name)
    if exclude_id:
        query = query.where(Workflow.id != exclude_id)
    if session.exec(query).first():
        raise Conflict(f"name: a workflow named '{name}' already exists in this instance")


def _audit(workflow: Workflow, user: User | None, action: str, **details: Any) -> None:
    workflow.append_execution_log(
        {"at": utcnow().isoformat(), "by": user.id if user else None, "action": action, **details}
    )


def list_workflows(session: Session, instance: FeatureInstance) -> list[Workflow]:
    """The instance's workflows, newest change first."""
    return list(
        session.exec(
            select(Workflow)
            .where(Workflow.feature_instance_id == instance.id)
            .order_by(Workflow.sys_modified_at.desc(), Workflow.name)
        ).all()
    )


def get_workflow(session: Session, instance: FeatureInstance, workflow_id: str) -> Workflow:
    """The workflow of this instance with `workflow_id`, else NotFound."""
    workflow = session.get(Workflow, workflow_id)
    if workflow is None or workflow.feature_instance_id != instance.id:
        raise NotFound(f"workflow {workflow_id} not found")
    return workflow


def create_workflow(
    session: Session,
    user: User,
    instance: FeatureInstance,
    name: Any,
    description: str = "",
    graph: Any = None,
    test_input: Any = None,
) -> Workflow:
    """A new workflow whose first draft holds `graph` (a lone manual trigger by default) and whose
    editor starts with `test_input` as its test input (a template's sample input)."""
    name = _clean_name(name)
    check_json(graph, "graph")
    check_json(test_input, "testInput")
    graph = seal_secrets(require_valid_structure(graph)) if graph is not None else default_graph()
    _require_unique_name(session, instance, name)
    workflow = Workflow(
        mandate_id=instance.mandate_id,
        feature_instance_id=instance.id,
        name=name,
        description=description or "",
        test_input=test_input,
        sys_created_by=user.id,
    )
    _audit(workflow, user, "created")
    session.add(workflow)
    session.flush()
    session.add(
        WorkflowVersion(workflow_id=workflow.id, version_number=1, graph=graph, sys_created_by=user.id)
    )
    session.flush()
    return workflow


UNCHANGED: Any = object()  # update_workflow: leave the test input as it is


def update_workflow(
    session: Session,
    user: User,
    workflow: Workflow,
    instance: FeatureInstance,
    name: Any = None,
    description: str | None = None,
    active: bool | None = None,
    test_input: Any = UNCHANGED,
    mcp_tool: bool | None = None,
) -> Workflow:
    """Rename, describe or (de)activate a workflow, set its test input (None: none) or switch
    "expose as MCP tool" (its published version is then a tool at /mcp, backend/mcp/)."""
    if name is not None:
        new_name = _clean_name(name)
        if new_name != workflow.name:
            _require_unique_name(session, instance, new_name, exclude_id=workflow.id)
            _audit(workflow, user, "renamed", fromName=workflow.name, toName=new_name)
            workflow.name = new_name
    if description is not None:
        workflow.description = description
    if test_input is not UNCHANGED:
        check_json(test_input, "testInput")
        workflow.test_input = test_input
    if active is not None and active != workflow.active:
        workflow.active = bool(active)
        _audit(workflow, user, "activated" if active else "deactivated")
        changes.notify_on_commit(session, workflow.id)  # the scheduler (un)registers its jobs
    if mcp_tool is not None and mcp_tool != workflow.mcp_tool:
        workflow.mcp_tool = bool(mcp_tool)
        _audit(workflow, user, "exposedAsMcpTool" if mcp_tool else "hiddenFromMcp")
    workflow.sys_modified_at = utcnow()
    workflow.lock_version += 1
    session.add(workflow)
    session.flush()
    return workflow


def allow_mail_decisions(session: Session, user: User, workflow: Workflow, one_click: bool) -> Workflow:
    """Allow (or stop) deciding the workflow's approvals from a mail's link without signing in."""
    if bool(one_click) != workflow.mail_one_click:
        workflow.mail_one_click = bool(one_click)
        _audit(workflow, user, "mailOneClickAllowed" if one_click else "mailOneClickStopped")
        workflow.sys_modified_at = utcnow()
        workflow.lock_version += 1
        session.add(workflow)
        session.flush()
    return workflow


def delete_workflow(session: Session, workflow: Workflow) -> None:
    """Delete a workflow with its versions, runs (and their graph snapshots), step logs and tasks."""
    run_ids = select(WorkflowRun.id).where(WorkflowRun.workflow_id == workflow.id)
    session.execute(delete(RunStepLog).where(RunStepLog.run_id.in_(run_ids)))
    session.execute(delete(HumanTask).where(HumanTask.run_id.in_(run_ids)))
    session.execute(delete(WebhookDelivery).where(WebhookDelivery.workflow_id == workflow.id))
    session.execute(delete(WebhookCall).where(WebhookCall.workflow_id == workflow.id))
    remote.sync(session, workflow, None, None)  # its webhooks at ClickUp, Jira … are removed
    session.execute(delete(WorkflowRun).where(WorkflowRun.workflow_id == workflow.id))
    session.execute(delete(WorkflowGraphSnapshot).where(WorkflowGraphSnapshot.workflow_id == workflow.id))
    session.execute(delete(WorkflowVersion).where(WorkflowVersion.workflow_id == workflow.id))
    changes.notify_on_commit(session, workflow.id)  # the scheduler drops its jobs
    session.delete(workflow)
    session.flush()


def list_versions(session: Session, workflow: Workflow) -> list[WorkflowVersion]:
    """All versions, newest first."""
    return list(
        session.exec(
            select(WorkflowVersion)
            .where(WorkflowVersion.workflow_id == workflow.id)
            .order_by(WorkflowVersion.version_number.desc())
        ).all()
    )


def _version_in(session: Session, workflow: Workflow, status: str) -> WorkflowVersion | None:
    return session.exec(
        select(WorkflowVersion).where(
            WorkflowVersion.workflow_id == workflow.id, WorkflowVersion.status == status
        )
    ).first()


def draft_version(session: Session, workflow: Workflow) -> WorkflowVersion | None:
    """The workflow's draft, if it has one."""
    return _version_in(session, workflow, lifecycle.DRAFT)


def published_version(session: Session, workflow: Workflow) -> WorkflowVersion | None:
    """The workflow's published version, if it has one."""
    return _version_in(session, workflow, lifecycle.PUBLISHED)


def version_numbers(session: Session, workflows: list[Workflow]) -> dict[str, dict[str, int]]:
    """For each workflow id, the version number of its draft and published version (one query)."""
    numbers: dict[str, dict[str, int]] = {w.id: {} for w in workflows}
    if not workflows:
        return numbers
    rows = session.exec(
        select(WorkflowVersion.workflow_id, WorkflowVersion.status, WorkflowVersion.version_number).where(
            WorkflowVersion.workflow_id.in_(list(numbers)),
            WorkflowVersion.status.in_([lifecycle.DRAFT, lifecycle.PUBLISHED]),
        )
    ).all()
    for workflow_id, status, number in rows:
        numbers[workflow_id][status] = number
    return numbers


def edited_version(session: Session, workflow: Workflow) -> WorkflowVersion | None:
    """The version a person edits: the draft, else the published one (None when neither)."""
    return draft_version(session, workflow) or published_version(session, workflow)


def current_graph(session: Session, workflow: Workflow) -> dict[str, Any]:
    """The graph a person edits: the draft's, else the published one's."""
    version = edited_version(session, workflow)
    return version.graph if version else default_graph()


def validate_workflow(session: Session, workflow: Workflow) -> list[FieldError]:
    """Every problem of the graph a person edits (the draft, else the published one); [] if valid.
    Checked in the workflow's mandate: its MCP tools are node types there, nowhere else."""
    with in_mandate(session, workflow.mandate_id):
        return validate_graph(current_graph(session, workflow))


def _require_publishable(session: Session, workflow: Workflow, version: WorkflowVersion) -> None:
    """Only a fully valid graph (DESIGN §4) may become the published version."""
    with in_mandate(session, workflow.mandate_id):
        errors = validate_graph(version.graph)
    if errors:
        raise InvalidInput(errors)


def _next_version_number(session: Session, workflow: Workflow) -> int:
    highest = session.exec(
        select(func.max(WorkflowVersion.version_number)).where(WorkflowVersion.workflow_id == workflow.id)
    ).one()
    return (highest or 0) + 1


@dataclass(frozen=True)
class DraftBase:
    """The version an editor opened (its id and lock_version): a save based on it is refused when
    the edited version changed since (optimistic concurrency between browser tabs)."""

    version_id: str
    lock_version: int


def _username(session: Session, user_id: str | None) -> str:
    user = session.get(User, user_id) if user_id else None
    return user.username if user is not None else "someone"


def _when(moment: datetime) -> str:
    """'14:02 UTC' today, '2026-11-29 14:02 UTC' on another day."""
    today = utcnow().date()
    return moment.strftime("%H:%M UTC" if moment.date() == today else "%Y-%m-%d %H:%M UTC")


def _changed_elsewhere(session: Session, workflow: Workflow, draft: WorkflowVersion) -> Conflict:
    saved_by = _username(session, draft.sys_modified_by or draft.sys_created_by)
    return Conflict(
        f"the draft of '{workflow.name}' was changed elsewhere (version {draft.version_number}, saved "
        f"{_when(draft.sys_modified_at)} by {saved_by}) since you opened it; reload to see the changes"
    )


def _check_base(session: Session, workflow: Workflow, draft: WorkflowVersion | None,
                published: WorkflowVersion | None, base: DraftBase) -> None:
    """Conflict unless the version being edited is still exactly the one `base` names."""
    if draft is not None:
        if draft.id != base.version_id or draft.lock_version != base.lock_version:
            raise _changed_elsewhere(session, workflow, draft)
        return
    if published is not None and published.id == base.version_id and published.lock_version == base.lock_version:
        return  # opened the published version, which is untouched: the save starts the draft
    opened = session.get(WorkflowVersion, base.version_id)
    if opened is None or opened.workflow_id != workflow.id:
        what = f"the version of '{workflow.name}' you opened no longer exists"
    elif opened.status == lifecycle.PUBLISHED:
        what = f"the draft of '{workflow.name}' was published (version {opened.version_number}) since you opened it"
    else:
        what = f"version {opened.version_number} of '{workflow.name}' was {opened.status} since you opened it"
    raise Conflict(f"{what}; reload to see the changes")


def _create_draft(session: Session, user: User, workflow: Workflow, graph: dict[str, Any]) -> WorkflowVersion:
    """The workflow's new draft holding `graph` (inserted and flushed).

    Two saves creating the draft at the same instant both try to insert one; the database's
    one-draft index (and the unique version number) lets only one in. The other save's insert is
    undone alone (a savepoint) and it gets Conflict naming the draft that won: nothing of it is
    written, and the caller's transaction stays usable.
    """
    draft = WorkflowVersion(workflow_id=workflow.id, version_number=_next_version_number(session, workflow),
                            graph=copy.deepcopy(graph), sys_created_by=user.id, sys_modified_by=user.id)
    try:
        with session.begin_nested():
            session.add(draft)
            session.flush()
    except IntegrityError:  # the savepoint's rollback took the draft out of the session again
        winner = draft_version(session, workflow)
        if winner is not None:
            raise _changed_elsewhere(session, workflow, winner) from None
        raise Conflict(f"the draft of '{workflow.name}' was saved elsewhere at the same time; "
                       "reload to see the changes") from None
    return draft


def save_draft(session: Session, user: User, workflow: Workflow, graph: Any,
               base: DraftBase | None = None) -> WorkflowVersion:
    """Store `graph` in the draft, creating the draft when there is none.

    A published version is never changed: editing starts a new draft next to it. Only the
    structure is checked: a draft may be incomplete (validate_workflow reports the rest).
    Webhook secrets are stored sealed; a masked one keeps the stored secret
    (backend/triggers/secrets.py).

    `base` names the version the editor opened (see WorkflowDetail.editedVersionId/-LockVersion):
    when that version changed since (another tab saved, published or archived it), Conflict says
    who changed what and nothing is written. Without `base` (agent tools, API clients) the graph
    is saved over the current draft. Either way the write itself is guarded on lock_version, so
    of two concurrent saves the later one is refused rather than silently lost.
    """
    check_json(graph, "graph")
    graph = require_valid_structure(graph)
    draft = draft_version(session, workflow)
    published = published_version(session, workflow)
    if base is not None:
        _check_base(session, workflow, draft, published, base)
    edited = draft or published
    graph = seal_secrets(graph, edited.graph if edited is not None else None)
    if draft is None:
        draft = _create_draft(session, user, workflow, graph)
    else:
        values = {"graph": copy.deepcopy(graph), "sys_modified_at": utcnow(), "sys_modified_by": user.id,
                  "lock_version": draft.lock_version + 1}
        result = session.execute(
            update(WorkflowVersion)
            .where(WorkflowVersion.id == draft.id, WorkflowVersion.lock_version == draft.lock_version,
                   WorkflowVersion.status == lifecycle.DRAFT)
            .values(**values)
            .execution_options(synchronize_session=False)
        )
        if result.rowcount != 1:
            session.refresh(draft)
            raise _changed_elsewhere(session, workflow, draft)
        for name, value in values.items():
            set_committed_value(draft, name, value)
    workflow.sys_modified_at = utcnow()
    session.add(workflow)
    session.flush()
    return draft


def _find_version(session: Session, workflow: Workflow, version_id: str | None, status: str) -> WorkflowVersion:
    if version_id:
        version = session.get(WorkflowVersion, version_id)
        if version is None or version.workflow_id != workflow.id:
            raise NotFound(f"version {version_id} not found")
        return version
    version = session.exec(
        select(WorkflowVersion)
        .where(WorkflowVersion.workflow_id == workflow.id, WorkflowVersion.status == status)
        .order_by(WorkflowVersion.version_number.desc())
    ).first()
    if version is None:
        raise Conflict(f"workflow '{workflow.name}' has no {status} version")
    return version


def _touch(session: Session, workflow: Workflow, user: User, action: str, version: WorkflowVersion) -> None:
    # The published version changed: its webhooks at outside systems follow (registered as `user`;
    # a refusal there refuses the change, nothing half-done).
    remote.sync(session, workflow, user, published_version(session, workflow))
    _audit(workflow, user, action, versionNumber=version.version_number)
    workflow.sys_modified_at = utcnow()
    session.add(workflow)
    session.flush()
    changes.notify_on_commit(session, workflow.id)  # the published version changed: the scheduler re-syncs


def publish(session: Session, user: User, workflow: Workflow) -> WorkflowVersion:
    """Publish the draft; the previously published version is archived.

    An invalid graph is refused with InvalidInput listing every problem (nothing changes).
    """
    draft = _find_version(session, workflow, None, lifecycle.DRAFT)
    _require_publishable(session, workflow, draft)
    current = published_version(session, workflow)
    if current is not None:
        lifecycle.archive(session, current)
    lifecycle.publish(session, draft)
    _touch(session, workflow, user, "published", draft)
    return draft


def unpublish(session: Session, user: User, workflow: Workflow) -> WorkflowVersion:
    """Take the published version back to draft (only when there is no other draft)."""
    version = _find_version(session, workflow, None, lifecycle.PUBLISHED)
    existing = draft_version(session, workflow)
    if existing is not None:
        raise Conflict(
            f"workflow '{workflow.name}' already has a draft (version {existing.version_number}); "
            "publish or discard it before unpublishing"
        )
    lifecycle.unpublish(session, version)
    _touch(session, workflow, user, "unpublished", version)
    return version


def archive(session: Session, user: User, workflow: Workflow) -> WorkflowVersion:
    """Archive the published version; the workflow then has none."""
    version = _find_version(session, workflow, None, lifecycle.PUBLISHED)
    lifecycle.archive(session, version)
    _touch(session, workflow, user, "archived", version)
    return version


def restore(session: Session, user: User, workflow: Workflow, version_id: str | None = None) -> WorkflowVersion:
    """Publish an archived version again (the newest one unless `version_id` names another).

    Like publish, refuses a graph that is not valid (by today's rules) with InvalidInput.
    """
    version = _find_version(session, workflow, version_id, lifecycle.ARCHIVED)
    if version.status == lifecycle.ARCHIVED:
        _require_publishable(session, workflow, version)
    current = published_version(session, workflow)
    if current is not None and current.id != version.id:
        lifecycle.archive(session, current)
    lifecycle.restore(session, version)
    _touch(session, workflow, user, "restored", version)
    return version
