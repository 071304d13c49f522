"""The editor's parameter panel: the selected node's label, parameters (generated from its type's
JSON Schema, state/param_fields.py), error handling and its step in the last run.

It takes the page's state class, so the page module only arranges it.
"""

from __future__ import annotations

import reflex as rx

# --- parameters --------------------------------------------------------------------------------


def _expression_menu(state, field) -> rx.Component:
    return rx.menu.root(
        rx.menu.trigger(rx.button("{{ }}", size="1", variant="ghost", type="button",
                                  title="Insert a value from an earlier node", id="insert-" + field["name"])),
        rx.menu.content(
            rx.foreach(state.expression_options,
                       lambda option: rx.menu.item(option, on_select=state.insert_expression(
                           field["name"], field["kind"], field["value"], option))),
            max_height="20em", overflow_y="auto",
        ),
    )


def field_key(state, name) -> rx.Var:
    """Inputs keep what was typed until their key changes: another node, or the graph reloaded."""
    return state.selected_node + "-" + name + "-" + state.form_revision.to_string()


def _field_input(state, field) -> rx.Component:
    name = field["name"]
    common = {"id": "param-" + name, "name": name, "width": "100%", "placeholder": field["placeholder"],
              "disabled": ~state.can_edit | (state.viewing_version != "")}
    blur = lambda value: state.set_parameter(name, field["kind"], value)  # noqa: E731
    return rx.match(
        field["kind"],
        ("boolean", rx.switch(checked=field["checked"], on_change=lambda checked: state.set_flag(name, checked),
                              id="param-" + name, disabled=common["disabled"])),
        ("select", rx.select(field["options"], value=field["value"], id="param-" + name,
                             on_change=lambda value: state.set_parameter(name, "select", value),
                             disabled=common["disabled"], width="100%")),
        ("textarea", rx.text_area(default_value=field["value"], on_blur=blur, rows="4", resize="vertical",
                                  key=field_key(state, name), **common)),
        ("json", rx.text_area(default_value=field["value"], on_blur=blur, rows="4", resize="vertical",
                              font_family="monospace", key=field_key(state, name), **common)),
        rx.input(default_value=field["value"], on_blur=blur, list="expression-options",
                 key=field_key(state, name), **common),
    )


def _field(state, field) -> rx.Component:
    error = state.field_errors[field["name"]]
    return rx.vstack(
        rx.hstack(
            rx.text(field["title"], rx.cond(field["required"], rx.text.span(" *", color_scheme="red")),
                    size="2", weight="medium"),
            rx.spacer(),
            rx.cond(state.expression_options.length() > 0, _expression_menu(state, field)),
            width="100%", align="center",
        ),
        _field_input(state, field),
        rx.cond(field["description"] != "", rx.text(field["description"], size="1", color_scheme="gray")),
        rx.cond(error, rx.text(error, size="1", color_scheme="red", id="error-" + field["name"])),
        spacing="1", width="100%", id="field-" + field["name"],
    )


def _step_card(row) -> rx.Component:
    return rx.vstack(
        rx.hstack(rx.badge(row["status"]), rx.text(f"attempt {row['attempt']}", size="1"),
                  rx.text(row["duration"], size="1", color_scheme="gray"), spacing="2"),
        rx.cond(row["error"] != "", rx.text(row["error"], size="1", color_scheme="red")),
        rx.cond(row["input"] != "", rx.box(rx.text("Input", size="1", weight="bold"),
                                           rx.code_block(row["input"], language="json", font_size="11px"),
                                           width="100%")),
        rx.cond(row["output"] != "", rx.box(rx.text("Output", size="1", weight="bold"),
                                            rx.code_block(row["output"], language="json", font_size="11px"),
                                            width="100%")),
        spacing="1", width="100%", class_name="node-last-step",
    )


def parameters_panel(state) -> rx.Component:
    """The selected node's label, parameters (from its JSON Schema), error handling and last step."""
    readonly = ~state.can_edit | (state.viewing_version != "")
    return rx.cond(
        state.selected_node != "",
        rx.vstack(
            rx.hstack(
                rx.vstack(rx.text(state.node_type_label, size="1", color_scheme="gray"),
                          rx.code(state.node_type_id, size="1"), spacing="0"),
                rx.spacer(),
                rx.cond(~readonly, rx.icon_button(rx.icon("trash-2", size=14), size="1", color_scheme="red",
                                                  variant="soft", on_click=state.delete_selected,
                                                  id="delete-node", title="Delete this node")),
                width="100%",
            ),
            rx.text("Label", size="2", weight="medium"),
            rx.input(default_value=state.node_label, on_blur=state.set_label, id="node-label", width="100%",
                     key=field_key(state, "-label"), disabled=readonly),
            rx.el.datalist(rx.foreach(state.expression_options, lambda o: rx.el.option(value=o)),
                           id="expression-options"),
            rx.foreach(state.param_fields, lambda field: _field(state, field)),
            rx.text("On error", size="2", weight="medium"),
            rx.select(["fail", "continue", "route"], value=state.node_on_error, on_change=state.set_on_error,
                      id="node-on-error", disabled=readonly, width="100%"),
            rx.cond(
                state.selected_steps.length() > 0,
                rx.vstack(rx.heading("Last run", size="2"), _step_card(state.selected_steps[0]), width="100%",
                          id="node-last-run"),
            ),
            spacing="2", width="100%", id="parameters-panel",
        ),
        rx.text(rx.cond(state.selected_ids.length() > 1, "Several nodes are selected: Delete removes them all.",
                        "Select a node to edit its parameters."),
                color_scheme="gray", size="2", id="parameters-empty"),
    )
