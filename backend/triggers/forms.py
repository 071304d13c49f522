"""trigger.form: a public form per workflow (``GET|POST /api/forms/{workflowId}``, page /forms/…).

The form is the `fields` of the first trigger.form node of the workflow's published version;
the workflow must be active (else 404, as for a missing one). A submission is an object of
field values: unknown fields, missing required ones (absent, null or blank text) and values of
the wrong type are refused with 422 naming every such field; optional fields left out get their
`default` (else null). Values are converted to the field's type: number (a number or numeric
text), boolean (true/false, or "true"/"false"/"on"/"off"/"1"/"0"), date (ISO 8601 text, kept as
given), select (one of `options`), text and textarea (text; numbers become text). File fields
cannot be filled in on the public form (a required one makes the form unusable: 422).

The fields become the run input; the run is started as with webhooks (launch.start: published
version, as the creator, handed to the run queue in the same transaction, back-pressure 429).
"""

from __future__ import annotations

from typing import Any

from pydantic import ValidationError
from sqlmodel import Session

from backend.db.engine import write_gate
from backend.errors import FieldError, InvalidInput, NotFound
from backend.triggers import launch
from backend.workflows import form_values
from backend.workflows.node_types import FormField, FormTriggerParams

NODE_TYPE = "trigger.form"


def find_form(session: Session, workflow_id: str) -> tuple[launch.Target, list[FormField]]:
    """The published trigger.form of an active workflow and its fields; NotFound otherwise."""
    workflow, version, nodes = launch.published_triggers(session, workflow_id, NODE_TYPE)
    try:
        fields = FormTriggerParams.model_validate(nodes[0].get("parameters") or {}).fields
    except ValidationError:
        raise NotFound(f"workflow {workflow_id} not found") from None
    return launch.Target(workflow, version, nodes[0]), fields


def definition(session: Session, workflow_id: str) -> dict[str, Any]:
    """What the public form shows: the workflow's name and description and the fields."""
    target, fields = find_form(session, workflow_id)
    return {"workflowId": target.workflow.id, "name": target.workflow.name,
            "description": target.workflow.description or "",
            "fields": [f.model_dump(mode="json") for f in fields]}


def validate(fields: list[FormField], values: Any) -> dict[str, Any]:
    """The submitted values checked and converted; InvalidInput naming every bad field."""
    if not isinstance(values, dict):
        raise InvalidInput([FieldError("body", "must be an object of field values")])
    known = {f.name for f in fields}
    errors = [FieldError(name, "is not a field of this form") for name in values if name not in known]
    data: dict[str, Any] = {}
    for field in fields:
        value = values.get(field.name)
        if form_values.is_blank(value):
            if field.required:
                errors.append(FieldError(field.name, f"{field.label or field.name} is required"))
            data[field.name] = field.default
            continue
        try:
            data[field.name] = form_values.convert(field, value, files=False)
        except ValueError as exc:
            errors.append(FieldError(field.name, str(exc)))
    if errors:
        raise InvalidInput(errors)
    return data


def submit(session: Session, workflow_id: str, values: Any) -> str:
    """Validate a submission and start the run (committed, then submitted); returns its id."""
    target, fields = find_form(session, workflow_id)
    data = validate(fields, values)
    launch.check_capacity()
    with write_gate():
        run = launch.start(session, target, data, "form")
        session.commit()
    return run.id
