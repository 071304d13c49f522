"""trigger.event: ``POST /api/events {type, payload}`` starts every listening workflow.

Who may fire: a signed-in user (or API token) with the Graphical Editor execute right. An event
reaches only the active, published workflows of Graphical Editor instances in the caller's OWN
mandates (membership, not the system administrator's view of all mandates) where the caller has
that execute right; each matching workflow runs as its creator (launch.start). A caller without
the execute right in any such instance is refused (403); an event nobody listens to answers
202 with no runs.

A trigger.event node matches when its `eventType` equals the event's type and its optional
`filter` matches the payload:

- missing, null, {} or "": always;
- an object: a subset match: every key of the filter is in the payload with an equal value
  (objects nested in the filter are matched the same way, one level deeper; lists and scalars
  must be equal). ``{"status": "paid", "customer": {"country": "CH"}}`` matches
  ``{"status": "paid", "amount": 5, "customer": {"country": "CH", "id": 7}}``;
- a string: a sandboxed expression (backend/engine/expressions.py) over ``payload`` (also as
  ``input``) and ``event`` ({type}); ``{{ … }}`` may be left out. A truthy result matches:
  ``{{ payload.amount > 1000 and payload.currency == 'CHF' }}``. An expression that fails
  (e.g. a missing field) does not match; the failure is logged with the workflow's id.

The runs' input is the payload. Runs are handed to the run queue in the transaction that creates them.
"""

from __future__ import annotations

import logging
from typing import Any

from sqlmodel import Session, select

from backend.db.engine import write_gate
from backend.db.models import FeatureInstance, User, UserMandate, Workflow, WorkflowVersion
from backend.engine.expressions import ExpressionError, ExpressionScope, evaluate_parameters
from backend.errors import Forbidden
from backend.features.graphical_editor.main import FEATURE_CODE
from backend.rbac.access import AccessContext
from backend.statemachines import workflow_version as version_lifecycle
from backend.triggers import launch

log = logging.getLogger(__name__)

NODE_TYPE = "trigger.event"


class _EventScope(ExpressionScope):
    """The expression names of a filter: payload (= input) and event."""

    def names(self) -> dict[str, Any]:
        names = ExpressionScope.names(self)
        names["payload"] = self.input
        names["event"] = self.run
        return names


def _subset(filter_value: Any, payload: Any) -> bool:
    if isinstance(filter_value, dict):
        return isinstance(payload, dict) and all(
            key in payload and _subset(value, payload[key]) for key, value in filter_value.items())
    return filter_value == payload


def matches(filter_value: Any, event_type: str, payload: Any, where: str = "") -> bool:
    """Whether a trigger.event filter matches the payload (see the module doc)."""
    if filter_value in (None, "", {}):
        return True
    if isinstance(filter_value, dict):
        return _subset(filter_value, payload)
    if isinstance(filter_value, str):
        text = filter_value if "{{" in filter_value else f"{{{{ {filter_value} }}}}"
        try:
            return bool(evaluate_parameters(text, _EventScope(input=payload, run={"type": event_type}), "filter"))
        except ExpressionError as exc:
            log.warning("event filter of %s failed, not matched: %s", where or "a workflow", exc.message)
            return False
    return False


def executable_instances(session: Session, user: User) -> list[FeatureInstance]:
    """Graphical Editor instances of the user's own mandates where they may execute workflows."""
    from backend.features.graphical_editor.interface import GraphicalEditorInterface  # the feature imports the engine

    access = AccessContext(session, user)
    mandates = select(UserMandate.mandate_id).where(UserMandate.user_id == user.id)
    instances = session.exec(select(FeatureInstance).where(FeatureInstance.feature_code == FEATURE_CODE,
                                                           FeatureInstance.mandate_id.in_(mandates))).all()
    return [i for i in instances if access.can_open_instance(i)
            and GraphicalEditorInterface(access, i).may_call(GraphicalEditorInterface.check_may_execute)]


def listeners(session: Session, instances: list[FeatureInstance], event_type: str,
              payload: Any) -> list[launch.Target]:
    """Active workflows of `instances` whose published trigger.event listens to this event."""
    if not instances:
        return []
    rows = session.exec(
        select(Workflow, WorkflowVersion)
        .join(WorkflowVersion, WorkflowVersion.workflow_id == Workflow.id)
        .where(Workflow.feature_instance_id.in_([i.id for i in instances]), Workflow.active.is_(True),
               WorkflowVersion.status == version_lifecycle.PUBLISHED)
        .order_by(Workflow.sys_created_at, Workflow.id)
    ).all()
    targets = []
    for workflow, version in rows:
        for node in launch.trigger_nodes(version, NODE_TYPE):
            parameters = node.get("parameters") or {}
            if parameters.get("eventType") == event_type and matches(
                    parameters.get("filter"), event_type, payload, f"workflow {workflow.id}"):
                targets.append(launch.Target(workflow, version, node))
                break
    return targets


def fire(session: Session, user: User, event_type: str, payload: Any) -> list[str]:
    """Start every listening workflow (committed, then submitted); returns the run ids.

    Raises:
        Forbidden: the caller may execute workflows in no Graphical Editor instance of their mandates.
        launch.Overloaded: too many runs are waiting to start.
    """
    instances = executable_instances(session, user)
    if not instances:
        raise Forbidden("your roles allow executing workflows in no Graphical Editor instance of your mandates")
    launch.check_capacity()
    targets = listeners(session, instances, event_type, payload)
    run_ids = []
    with write_gate():
        for target in targets:
            try:
                run_ids.append(launch.start(session, target, payload, "event").id)
            except Forbidden:
                continue  # its creator may no longer run it: logged by launch
        session.commit()
    return run_ids
