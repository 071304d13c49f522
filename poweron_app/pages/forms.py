"""The public form of a workflow (/forms/[workflow_id]): no sign-in, no app shell (trigger.form)."""

from __future__ import annotations

import reflex as rx

from state.forms import FormFieldRow, FormPageState

FILE_PLACEHOLDER = "Path of a file in the instance's file store, e.g. /uploads/offer.pdf"


def _control(field: FormFieldRow, control_id: str | None) -> rx.Component:
    """The input for one field, by its type (the values reach the backend as text)."""
    common = {"name": field["name"], "required": False}  # required is checked server-side (422)
    if control_id is not None:
        common["id"] = control_id
    return rx.match(
        field["type"],
        ("number", rx.input(type="number", step="any", default_value=field["default"], width="100%", **common)),
        ("date", rx.input(type="date", default_value=field["default"], width="100%", **common)),
        ("textarea", rx.text_area(default_value=field["default"], width="100%", rows="4", **common)),
        ("boolean", rx.hstack(rx.checkbox(default_checked=field["checked"], **common),
                              rx.text("Yes", size="2"), align="center", spacing="2")),
        ("select", rx.el.select(
            rx.el.option("", value=""),
            rx.foreach(field["options"], lambda option: rx.el.option(option, value=option)),
            default_value=field["default"], style={"width": "100%", "padding": "0.4em"}, **common,
        )),
        # Only human form tasks have file fields (the public form leaves them out).
        ("file", rx.input(type="text", default_value=field["default"], width="100%", placeholder=FILE_PLACEHOLDER,
                          **common)),
        rx.input(type="text", default_value=field["default"], width="100%", **common),
    )


def form_field(field: FormFieldRow, id_prefix: str = "") -> rx.Component:
    """One labelled field with its inline error; shared by the public form and the Inbox's form
    tasks. With `id_prefix` the input gets the id `<prefix>field-<name>`, the error `<prefix>error-<name>`."""
    control_id = f"{id_prefix}field-{field['name']}" if id_prefix else None
    error_attrs = {"id": f"{id_prefix}error-{field['name']}"} if id_prefix else {}
    return rx.vstack(
        rx.hstack(
            rx.text(field["label"], size="2", weight="medium"),
            rx.cond(field["required"], rx.text("*", color_scheme="red", size="2", title="required")),
            spacing="1",
        ),
        _control(field, control_id),
        rx.cond(
            field["error"] != "",
            rx.text(field["error"], size="1", color_scheme="red", class_name="field-error",
                    custom_attrs={"data-field": field["name"]}, **error_attrs),
        ),
        spacing="1",
        width="100%",
        class_name="form-field",
        custom_attrs={"data-field": field["name"]},
    )


def _form() -> rx.Component:
    return rx.form(
        rx.vstack(
            rx.heading(FormPageState.form_name, size="6", id="form-title"),
            rx.cond(FormPageState.form_description != "",
                    rx.text(FormPageState.form_description, color_scheme="gray", id="form-description",
                            white_space="pre-wrap")),
            rx.foreach(FormPageState.fields, lambda field: form_field(field)),
            rx.cond(FormPageState.form_error != "",
                    rx.callout(FormPageState.form_error, icon="triangle-alert", color_scheme="red",
                               id="form-error", width="100%")),
            rx.button("Submit", type="submit", id="form-submit", width="100%"),
            spacing="3",
            width="100%",
        ),
        on_submit=FormPageState.submit,
        reset_on_submit=False,
        width="100%",
    )


def form_page() -> rx.Component:
    return rx.center(
        rx.card(
            rx.match(
                FormPageState.status,
                ("form", _form()),
                ("unavailable", rx.vstack(
                    rx.heading("This form is not available", size="5"),
                    rx.text("The link may be wrong, or the form has been switched off.", color_scheme="gray"),
                    id="form-unavailable", spacing="2")),
                ("done", rx.vstack(
                    rx.icon("circle-check", size=32, color=rx.color("green", 9)),
                    rx.heading(FormPageState.form_name, size="5"),
                    rx.text("Thank you — your submission started run ",
                            rx.code(FormPageState.run_id, id="form-run-id"), ".", id="form-done"),
                    spacing="2", align="center")),
                rx.center(rx.spinner(), width="100%"),
            ),
            width="min(32em, 94vw)",
        ),
        min_height="100vh",
        padding="2em 0",
    )
