"""The public form of a workflow (/forms/[workflow_id]): no sign-in, trigger.form (issue 7, item 4).

Thin: the definition and the submission go through backend.triggers.forms, the same functions the
REST routes ``GET|POST /api/forms/{workflowId}`` use (validation, conversion of the submitted text
to the field types, starting the run, back-pressure).
"""

from __future__ import annotations

from typing import Any, TypedDict

import reflex as rx

from backend.db import session_scope
from backend.errors import InvalidInput, NotFound
from backend.triggers import forms, launch
from state.page import routed_id
from state.permissions import requires

BUSY = "The service is busy right now. Please try again shortly."


class FormFieldRow(TypedDict):
    name: str
    label: str
    type: str
    required: bool
    options: list[str]
    default: str
    checked: bool
    error: str


def field_row(field: dict[str, Any]) -> FormFieldRow:
    """A FormField (as a dict) as the shared renderer of poweron_app/pages/forms.py takes it."""
    default = field.get("default")
    return FormFieldRow(
        name=field["name"], label=field.get("label") or field["name"], type=field.get("type") or "text",
        required=bool(field.get("required")), options=[str(o) for o in field.get("options") or []],
        default="" if default is None or isinstance(default, bool) else str(default),
        checked=default is True or str(default).lower() in ("true", "on", "1"), error="",
    )


class FormPageState(rx.State):
    """What /forms/[workflow_id] shows: loading, the form, "not available", or the confirmation."""

    status: str = "loading"  # loading | form | unavailable | done
    form_name: str = ""
    form_description: str = ""
    fields: list[FormFieldRow] = []
    form_error: str = ""
    run_id: str = ""

    def _target(self) -> str:
        return routed_id(self.router.url.path, "forms").strip()

    @rx.event
    @requires("public")
    def load(self):
        """on_load of /forms/[workflow_id]: the form of the workflow's published trigger.form."""
        self.form_error = ""
        self.run_id = ""
        try:
            with session_scope() as session:
                form = forms.definition(session, self._target())
        except NotFound:
            self.status = "unavailable"
            self.fields = []
            return
        self.form_name = form["name"]
        self.form_description = form["description"]
        self.fields = [field_row(f) for f in form["fields"] if f.get("type") != "file"]
        self.status = "form"

    @rx.event
    @requires("public")
    def submit(self, form_data: dict):
        """Submit the form: start the run, or show the errors next to the fields."""
        self.form_error = ""
        names = {f["name"] for f in self.fields}
        values = {k: v for k, v in (form_data or {}).items() if k in names}
        try:
            with launch.accepting, session_scope() as session:
                run_id = forms.submit(session, self._target(), values)
        except NotFound:
            self.status = "unavailable"
            return
        except InvalidInput as exc:
            by_field = {}
            for error in exc.errors:
                by_field.setdefault(error.field, error.message)
            self.fields = [{**f, "error": by_field.get(f["name"], "")} for f in self.fields]
            others = [m for name, m in by_field.items() if name not in names]
            self.form_error = "; ".join(others) if others else "Please correct the marked fields."
            return
        except launch.Overloaded:
            self.form_error = BUSY
            return
        self.fields = [{**f, "error": ""} for f in self.fields]
        self.run_id = run_id
        self.status = "done"
