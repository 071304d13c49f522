"""The editor's parameter panel: the selected node's label, parameters (generated from its type's
JSON Schema, state/param_fields.py), error handling and its step in the last run; for a webhook
trigger its secret (set / Replace / Generate) and help (address, live state, headers, a signed curl
example, last calls); for a human step the assignee picker; for a node that needs a connection the
connection picker (state/editor_params.py).

It takes the page's state class, so the page module only arranges it.
"""

from __future__ import annotations

import reflex as rx

# --- parameters --------------------------------------------------------------------------------


def copy_button(text, button_id: str, title: str) -> rx.Component:
    """An icon button copying `text` to the clipboard."""
    return rx.icon_button(rx.icon("copy", size=14), size="1", variant="soft", type="button", id=button_id,
                          title=title, on_click=[rx.set_clipboard(text), rx.toast.success("Copied to the clipboard.")])


def _readonly(state) -> rx.Var:
    return ~state.can_edit | (state.viewing_version != "")


def _secret_input(state, field) -> rx.Component:
    """A webhook secret: whether one is stored (never its value), Replace and Generate."""
    readonly = _readonly(state)
    return rx.vstack(
        rx.hstack(
            rx.cond(field["checked"],
                    rx.badge(rx.icon("lock", size=12), "Set (hidden)", color_scheme="green", id="secret-state",
                             data_state="set"),
                    rx.badge(rx.icon("lock-open", size=12), "Not set: every call is refused", color_scheme="amber",
                             id="secret-state", data_state="unset")),
            rx.spacer(),
            rx.cond(~readonly, rx.hstack(
                rx.button("Replace", size="1", variant="soft", type="button", id="secret-replace",
                          on_click=state.start_replace_secret, title="Type a whsec_ secret your sender already uses"),
                rx.button("Generate", size="1", variant="soft", type="button", id="secret-generate",
                          on_click=state.generate_secret, title="Make a new secret (shown once, to you)"),
                spacing="1")),
            width="100%", align="center",
        ),
        rx.cond(state.secret_editing & ~readonly, rx.form(
            rx.hstack(
                rx.input(name="secret", type="password", placeholder="whsec_…", id="secret-new", auto_complete="off",
                         width="100%", auto_focus=True),
                rx.button("Save", size="1", type="submit", id="secret-save"),
                rx.button("Cancel", size="1", variant="soft", color_scheme="gray", type="button",
                          on_click=state.cancel_replace_secret),
                width="100%", align="center", spacing="1",
            ),
            on_submit=state.replace_secret, reset_on_submit=True, width="100%",
        )),
        rx.cond(state.generated_secret != "", rx.vstack(
            rx.hstack(rx.icon("key-round", size=16, color="var(--green-11)", flex_shrink="0"),
                      rx.text("New secret saved in the draft. Copy it now into your sender: it is not shown again. "
                              "Publish to use it for live calls.", size="1"),
                      align="start", spacing="2"),
            rx.hstack(rx.code(state.generated_secret, id="generated-secret", word_break="break-all", size="1"),
                      copy_button(state.generated_secret, "copy-generated-secret", "Copy the secret"),
                      align="center", spacing="1"),
            rx.button("I have stored it", size="1", variant="soft", type="button", id="dismiss-generated-secret",
                      on_click=state.dismiss_generated_secret),
            spacing="2", width="100%", id="generated-secret-box", padding="0.6em", background="var(--green-a3)",
            border_radius="var(--radius-3)",
        )),
        spacing="1", width="100%",
    )


def _assignee_picker(state, field) -> rx.Component:
    """Who completes a human task: a role or a user of this instance, or anyone who may update tasks."""
    name = field["name"]

    def item(option) -> rx.Component:
        return rx.select.item(option["label"], value=option["value"])

    return rx.vstack(
        rx.select.root(
            rx.select.trigger(placeholder="Anyone who may update tasks here", id="param-" + name, width="100%"),
            rx.select.content(
                rx.select.item("Anyone who may update tasks here", value="none"),
                rx.cond(state.assignee_roles.length() > 0, rx.select.group(
                    rx.select.label("Roles"), rx.foreach(state.assignee_roles, item))),
                rx.cond(state.assignee_users.length() > 0, rx.select.group(
                    rx.select.label("Users"), rx.foreach(state.assignee_users, item))),
                rx.cond(state.assignee_extra.length() > 0, rx.select.group(
                    rx.select.label("No longer available"), rx.foreach(state.assignee_extra, item))),
            ),
            value=field["value"], on_change=lambda value: state.set_parameter(name, "assignee", value),
            disabled=_readonly(state),
        ),
        rx.cond(state.assignee_problem != "",
                rx.text(state.assignee_problem, size="1", color_scheme="amber", id="assignee-problem")),
        spacing="1", width="100%",
    )


def _connection_picker(state, field) -> rx.Component:
    """A node's connection: one the user may use of the types it takes (label · type · status); a
    stored id that is not one of them shows as such; the Connections page is a link away."""
    name = field["name"]

    def item(option) -> rx.Component:
        return rx.select.item(option["label"], value=option["value"], class_name="connection-option")

    return rx.vstack(
        rx.hstack(
            rx.select.root(
                rx.select.trigger(placeholder="Choose a connection", id="param-" + name, width="100%"),
                rx.select.content(
                    rx.cond(state.connection_options.length() > 0, rx.select.group(
                        rx.select.label("Your connections"), rx.foreach(state.connection_options, item))),
                    rx.cond(state.connection_extra.length() > 0, rx.select.group(
                        rx.select.label("Not usable here"), rx.foreach(state.connection_extra, item))),
                    position="popper",
                ),
                value=field["value"], on_change=lambda value: state.set_parameter(name, "text", value),
                disabled=_readonly(state),
            ),
            rx.icon_button(rx.icon("refresh-cw", size=12), size="1", variant="soft", type="button",
                           id="connection-refresh", title="Read your connections again",
                           on_click=state.refresh_connections),
            width="100%", align="center", spacing="1",
        ),
        rx.cond(state.connection_problem != "",
                rx.text(state.connection_problem, size="1", color_scheme="amber", id="connection-problem")),
        rx.cond((state.connection_options.length() == 0) & (state.connection_problem == ""),
                rx.text("You have no ", state.connection_needed, " connection yet.", size="1", color_scheme="amber",
                        id="connection-none")),
        rx.link(rx.icon("external-link", size=12), "Manage connections", href="/connections", size="1",
                id="manage-connections", display="flex", align_items="center", gap="0.3em"),
        spacing="1", width="100%", id="connection-picker",
    )


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
              "disabled": _readonly(state)}
    blur = lambda value: state.set_parameter(name, field["kind"], value)  # noqa: E731
    plain = _plain_input(state, field, common, blur)
    return rx.cond(name == state.connection_field, _connection_picker(state, field),
                   rx.cond(state.choice_fields.contains(name), _with_choices(state, field, plain), plain))


def _with_choices(state, field, plain: rx.Component) -> rx.Component:
    """A field whose choices its connector lists (a ClickUp list, a Jira project): typed (or an
    expression) as before, or chosen from what "Choose" lists with the node's connection."""
    name = field["name"]
    shown = state.choice_field == name
    return rx.vstack(
        rx.hstack(plain,
                  rx.button(rx.icon("list", size=12), "Choose", size="1", variant="soft", type="button",
                            id="choose-" + name, loading=shown & state.choice_busy, disabled=_readonly(state),
                            on_click=state.load_choices(name)),
                  width="100%", align="center", spacing="1"),
        rx.cond(shown & (state.choice_items.length() > 0),
                rx.select.root(
                    rx.select.trigger(placeholder="Pick one", id="choices-" + name, width="100%"),
                    rx.select.content(rx.foreach(state.choice_items, lambda option: rx.select.item(
                        option["label"], value=option["value"], class_name="choice-option")), position="popper"),
                    on_change=lambda value: state.choose(name, value),
                )),
        rx.cond(shown & (state.choice_problem != ""),
                rx.text(state.choice_problem, size="1", color_scheme="amber", id="choice-problem-" + name)),
        spacing="1", width="100%",
    )


def _choices_field(state, field, disabled) -> rx.Component:
    """Several of a fixed set (a trigger's events): one checkbox per option."""
    name = field["name"]
    return rx.flex(
        rx.foreach(field["options"], lambda option: rx.checkbox(
            option, checked=field["chosen"].contains(option), disabled=disabled, size="1",
            on_change=lambda checked: state.toggle_choice(name, option, checked),
            class_name="choice-box", custom_attrs={"data-option": option})),
        id="param-" + name, wrap="wrap", spacing="3", width="100%",
    )


def _plain_input(state, field, common: dict, blur) -> rx.Component:
    """The input of a field by its kind (text by default)."""
    name = field["name"]
    return rx.match(
        field["kind"],
        ("secret", _secret_input(state, field)),
        ("assignee", _assignee_picker(state, field)),
        ("choices", _choices_field(state, field, common["disabled"])),
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
            # a secret never takes an expression (it would be stored as written, in clear)
            rx.cond((state.expression_options.length() > 0) & (field["kind"] != "secret"),
                    _expression_menu(state, field)),
            width="100%", align="center",
        ),
        _field_input(state, field),
        rx.cond(field["description"] != "", rx.text(field["description"], size="1", color_scheme="gray")),
        rx.cond(error, rx.text(error, size="1", color_scheme="red", id="error-" + field["name"])),
        spacing="1", width="100%", id="field-" + field["name"],
    )


def _step_block(label: str, text, block_id: str) -> rx.Component:
    return rx.box(
        rx.text(label, size="2", weight="bold", as_="div"),
        rx.cond(text != "", rx.code_block(text, language="json", font_size="11px"),
                rx.text("(none)", size="1", color_scheme="gray")),
        width="100%", id=block_id, aria_label=label,
    )


def _step_card(row) -> rx.Component:
    return rx.vstack(
        rx.hstack(rx.badge(row["status"]), rx.text(f"attempt {row['attempt']}", size="1"),
                  rx.text(row["duration"], size="1", color_scheme="gray"), spacing="2"),
        rx.cond(row["error"] != "", rx.text(row["error"], size="1", color_scheme="red")),
        _step_block("Input", row["input"], "last-run-input"),
        _step_block("Output", row["output"], "last-run-output"),
        spacing="1", width="100%", class_name="node-last-step",
    )


# --- webhook help ------------------------------------------------------------------------------


def _webhook_status(state) -> rx.Component:
    live = state.webhook_state == "live"
    unpublished = (state.webhook_state == "unpublished") | (state.webhook_state == "notPublishedHere")
    return rx.vstack(
        rx.hstack(
            rx.badge(rx.cond(live, "Live", "Not live"), color_scheme=rx.cond(live, "green", "amber"),
                     id="webhook-live", data_state=state.webhook_state),
            rx.text(state.webhook_state_text, size="1", id="webhook-state-text"),
            align="start", spacing="2", width="100%",
        ),
        rx.cond((state.webhook_state == "inactive") & state.can_edit & (state.viewing_version == ""),
                rx.button(rx.icon("power", size=14), "Activate", size="1", id="webhook-activate", type="button",
                          on_click=state.set_active(True), title="Switch the workflow on: calls start runs")),
        rx.cond(unpublished & state.can_publish & state.has_draft & (state.viewing_version == ""),
                rx.button(rx.icon("upload", size=14), "Publish first", size="1", id="webhook-publish",
                          type="button", on_click=state.publish_draft,
                          title="Publish the draft: calls reach the published version only")),
        rx.cond(state.webhook_draft_differs,
                rx.text("The draft changes this webhook (path, method or secret): publish to apply it to calls.",
                        size="1", color_scheme="amber", id="webhook-draft-differs")),
        spacing="1", width="100%",
    )


def _webhook_headers() -> rx.Component:
    rows = [("webhook-id", "a unique message id; a repeated id is answered with the run it started"),
            ("webhook-timestamp", "unix seconds; accepted within 5 minutes of the server's time"),
            ("webhook-signature", 'v1,<base64 HMAC-SHA256 of "{id}.{timestamp}.{body}" keyed by the secret>')]
    return rx.vstack(
        rx.text("Standard Webhooks headers", size="1", weight="bold"),
        *[rx.hstack(rx.code(name, size="1", white_space="nowrap"), rx.text(what, size="1", color_scheme="gray"),
                    spacing="2", align="start") for name, what in rows],
        spacing="1", width="100%", id="webhook-headers",
    )


def _webhook_example(state) -> rx.Component:
    return rx.vstack(
        rx.hstack(
            rx.text("Example call", size="1", weight="bold"), rx.spacer(),
            copy_button(state.webhook_example, "copy-webhook-example", "Copy the curl command"),
            rx.icon_button(rx.icon("refresh-cw", size=14), size="1", variant="soft", type="button",
                           id="refresh-webhook-help", on_click=state.refresh_webhook_help,
                           title="A new signed example (valid 5 minutes from now) and the latest calls"),
            width="100%", align="center",
        ),
        rx.el.pre(state.webhook_example, id="webhook-example", white_space="pre-wrap", word_break="break-all",
                  font_size="11px", font_family="monospace", width="100%", margin="0", padding="0.5em",
                  background="var(--gray-a3)", border_radius="var(--radius-2)"),
        rx.text(
            rx.cond(
                state.webhook_signed_with != "",
                "Signed with the " + state.webhook_signed_with + " secret; valid for 5 minutes (until "
                + state.webhook_valid_until + "). Refresh for a new one.",
                rx.cond(state.can_edit, "Unsigned: set a secret (Generate) to get a signed example.",
                        "Unsigned: only people who may change this workflow see a signature made with its secret."),
            ),
            size="1", color_scheme="gray", id="webhook-signature-note",
        ),
        spacing="1", width="100%",
    )


def _webhook_call(call) -> rx.Component:
    return rx.vstack(
        rx.hstack(
            rx.badge(call["status"], color_scheme=rx.cond(call["ok"], "green", "red")),
            rx.text(call["time"], size="1", color_scheme="gray"),
            rx.spacer(),
            rx.cond(call["run_link"] != "",
                    rx.link("Open run", href=call["run_link"], size="1", class_name="call-run")),
            width="100%", align="center", spacing="2",
        ),
        rx.text(call["request"] + ": " + call["message"], size="1", word_break="break-word"),
        spacing="0", width="100%", class_name="webhook-call",
        border_bottom="1px solid var(--gray-a4)", padding_bottom="0.25em",
    )


def webhook_help(state) -> rx.Component:
    """The selected webhook trigger's address, live state, headers, signed example and last calls."""
    return rx.vstack(
        rx.heading("Webhook", size="2"),
        rx.cond(state.webhook_help_error != "",
                rx.text(state.webhook_help_error, size="1", color_scheme="red", id="webhook-help-error")),
        rx.text("Address (" + state.webhook_method + ")", size="1", weight="bold"),
        rx.hstack(rx.code(state.webhook_url, id="webhook-url", size="1", word_break="break-all"),
                  copy_button(state.webhook_url, "copy-webhook-url", "Copy the address"),
                  width="100%", align="center", spacing="1"),
        _webhook_status(state),
        _webhook_headers(),
        rx.cond(state.webhook_example != "", _webhook_example(state)),
        rx.text("Last calls", size="1", weight="bold"),
        rx.cond(state.webhook_calls.length() > 0,
                rx.vstack(rx.foreach(state.webhook_calls, _webhook_call), spacing="1", width="100%",
                          id="webhook-calls"),
                rx.text("No calls received yet.", size="1", color_scheme="gray", id="webhook-no-calls")),
        spacing="2", width="100%", id="webhook-help", padding="0.5em", border="1px solid var(--gray-a5)",
        border_radius="var(--radius-3)",
    )


def parameters_panel(state) -> rx.Component:
    """The selected node's label, parameters (from its JSON Schema), error handling and last step."""
    readonly = _readonly(state)
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
            rx.cond(state.webhook_node != "", webhook_help(state)),
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
