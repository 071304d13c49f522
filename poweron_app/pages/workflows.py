"""The Workflows page: list, create, rename and delete the workflows of an instance."""

import reflex as rx

from components.shell import empty_state, page_shell
from components.tables import data_table
from state.workflows import WorkflowRow, WorkflowsState


def create_form() -> rx.Component:
    return rx.form(
        rx.hstack(
            rx.input(
                name="name", id="new-workflow-name", placeholder="Name of the new workflow",
                value=WorkflowsState.new_name, on_change=WorkflowsState.set_new_name,
                width="22em", max_width="100%",
            ),
            rx.button(rx.icon("plus", size=16), "Create workflow", type="submit", id="create-workflow"),
            wrap="wrap",
        ),
        on_submit=WorkflowsState.create_workflow,
        reset_on_submit=False,
        max_width="100%",
    )


def rename_cell(row: WorkflowRow) -> rx.Component:
    return rx.hstack(
        rx.input(value=WorkflowsState.rename_value, on_change=WorkflowsState.set_rename_value,
                 id="rename-input", auto_focus=True),
        rx.button("Save", on_click=WorkflowsState.save_rename, id="rename-save", size="2"),
        rx.button("Cancel", on_click=WorkflowsState.cancel_rename, variant="soft", size="2"),
    )


def workflow_row(row: WorkflowRow) -> rx.Component:
    return rx.table.row(
        rx.table.cell(
            rx.cond(
                WorkflowsState.rename_id == row["id"],
                rename_cell(row),
                rx.link(row["name"], href="/editor/" + row["id"], weight="medium", class_name="workflow-name"),
            )
        ),
        rx.table.cell(rx.badge(row["status"], variant="soft")),
        rx.table.cell(
            rx.tooltip(
                rx.switch(checked=row["mcp_tool"], disabled=~WorkflowsState.can_rename,
                          on_change=lambda value: WorkflowsState.set_mcp_tool(row["id"], value),
                          class_name="mcp-tool-switch", custom_attrs={"aria-label": "Expose as MCP tool"}),
                content=row["mcp_hint"],
            ),
        ),
        rx.table.cell(
            rx.tooltip(
                rx.switch(checked=row["mail_one_click"], disabled=~WorkflowsState.can_allow_mail,
                          on_change=lambda value: WorkflowsState.set_mail_one_click(row["id"], value),
                          class_name="mail-one-click-switch",
                          custom_attrs={"aria-label": "Decide approvals from the mail without signing in"}),
                content=rx.cond(row["mail_one_click"],
                                "Approvals can be decided from the mail's link without signing in",
                                "Deciding from the mail's link needs a sign-in (mandate admins may change this)"),
            ),
        ),
        rx.table.cell(rx.text(row["modified"], color_scheme="gray", size="2")),
        rx.table.cell(
            rx.hstack(
                rx.link(rx.button(rx.icon("workflow", size=14), "Open", size="1", variant="soft"),
                        href="/editor/" + row["id"], class_name="open-button"),
                rx.cond(
                    WorkflowsState.can_rename,
                    rx.button(rx.icon("pencil", size=14), "Rename", size="1", variant="soft",
                              on_click=WorkflowsState.start_rename(row["id"], row["name"]),
                              class_name="rename-button"),
                ),
                rx.cond(
                    WorkflowsState.can_delete,
                    rx.button(rx.icon("trash-2", size=14), "Delete", size="1", variant="soft",
                              color_scheme="red",
                              on_click=WorkflowsState.ask_delete(row["id"], row["name"]),
                              class_name="delete-button"),
                ),
            )
        ),
        class_name="workflow-row",
    )


def delete_dialog() -> rx.Component:
    return rx.alert_dialog.root(
        rx.alert_dialog.content(
            rx.alert_dialog.title("Delete workflow"),
            rx.alert_dialog.description(
                "Delete '", WorkflowsState.delete_name,
                "' with all its versions and runs? This cannot be undone.",
            ),
            rx.hstack(
                rx.alert_dialog.cancel(
                    rx.button("Cancel", variant="soft", on_click=WorkflowsState.cancel_delete)
                ),
                rx.alert_dialog.action(
                    rx.button("Delete", color_scheme="red", on_click=WorkflowsState.confirm_delete,
                              id="confirm-delete")
                ),
                justify="end",
                spacing="3",
                margin_top="1em",
            ),
        ),
        open=WorkflowsState.delete_id != "",
    )


IMPORT_UPLOAD = "import-workflow"


def template_need(need) -> rx.Component:
    """One line of a card: what the template needs and whether this installation has it."""
    return rx.hstack(
        rx.cond(need["met"], rx.icon("circle-check", size=14, color=rx.color("green", 10), flex_shrink="0"),
                rx.icon("triangle-alert", size=14, color=rx.color("orange", 10), flex_shrink="0")),
        rx.text(need["text"], size="1", color_scheme=rx.cond(need["met"], "gray", "orange")),
        spacing="1", align="start", class_name="template-need",
        custom_attrs={"data-met": rx.cond(need["met"], "true", "false")},
    )


def template_card(template) -> rx.Component:
    """A template: its name, whole description, what it needs here, and the button that uses it."""
    return rx.card(
        rx.vstack(
            rx.hstack(rx.heading(template["name"], size="3"), rx.spacer(),
                      rx.badge(template["category"], variant="soft", flex_shrink="0"), width="100%", align="start"),
            rx.text(template["description"], size="2", color_scheme="gray", class_name="template-description"),
            rx.foreach(template["needs"], template_need),
            rx.spacer(),
            rx.hstack(
                rx.text(template["node_count"], " nodes", size="1", color_scheme="gray"),
                rx.cond(template["runs_as_it_is"],
                        rx.badge(rx.icon("circle-check", size=12), "runs as it is", color_scheme="green",
                                 variant="soft", size="1", class_name="template-runs"),
                        rx.cond(template["ready"],
                                rx.badge(rx.icon("plug", size=12), "set up here", color_scheme="blue",
                                         variant="soft", size="1", class_name="template-ready"),
                                rx.badge(rx.icon("plug", size=12), "needs setup", color_scheme="orange",
                                         variant="soft", size="1", class_name="template-needs-setup"))),
                rx.spacer(),
                rx.button("Use this template", size="2",
                          on_click=WorkflowsState.create_from_template(template["id"], template["name"]),
                          id="use-template-" + template["id"], class_name="use-template"),
                width="100%", align="center", wrap="wrap",
            ),
            spacing="2", width="100%", height="100%",
        ),
        width="100%", flex_shrink="0", class_name="template-card",
        custom_attrs={"data-template": template["id"]},
    )


def templates_dialog() -> rx.Component:
    """The templates, each card whole: the list scrolls inside the dialog, the cards never shrink."""
    return rx.dialog.root(
        rx.dialog.content(
            rx.dialog.title("New workflow from a template"),
            rx.dialog.description("Each template opens in the editor with sample test input. "
                                  "A template marked \"runs as it is\" needs nothing more.",
                                  size="2", color_scheme="gray", margin_bottom="0.75em"),
            rx.box(
                rx.box(rx.foreach(WorkflowsState.templates, template_card), display="grid", gap="0.75em",
                       grid_template_columns="repeat(auto-fill, minmax(min(100%, 24em), 1fr))", width="100%"),
                max_height="calc(100vh - 13em)", overflow_y="auto", width="100%", padding_right="0.25em",
                id="template-list",
            ),
            rx.hstack(rx.dialog.close(rx.button("Close", variant="soft", on_click=WorkflowsState.close_templates)),
                      justify="end", margin_top="1em"),
            max_width="64em", width="calc(100vw - 2em)", max_height="calc(100vh - 2em)",
        ),
        open=WorkflowsState.templates_open,
        on_open_change=lambda open_: rx.cond(open_, rx.noop(), WorkflowsState.close_templates()),
    )


def create_more() -> rx.Component:
    return rx.hstack(
        rx.button(rx.icon("layout-template", size=16), "From template", variant="soft",
                  on_click=WorkflowsState.open_templates, id="open-templates"),
        rx.upload.root(
            rx.button(rx.icon("upload", size=16), "Import", variant="soft", type="button", id="import-button"),
            id=IMPORT_UPLOAD, accept={"application/json": [".json"]}, max_files=1, no_drag=True,
            on_drop=WorkflowsState.import_workflow(rx.upload_files(upload_id=IMPORT_UPLOAD)),
        ),
        spacing="2",
    )


def workflow_table() -> rx.Component:
    return data_table(("Name", "Versions", "MCP tool", "Mail 1-click", "Last change", ""), WorkflowsState.workflows,
                      workflow_row, "workflow-table")


def no_workflows() -> rx.Component:
    """The empty list, with the advice the user's rights allow."""
    return rx.cond(
        WorkflowsState.can_create,
        empty_state("workflow", "No workflows yet",
                    "Create the first workflow of this instance with the name field above, or start from a "
                    "template or an exported file."),
        empty_state("workflow", "No workflows yet",
                    "There are no workflows in this instance yet. Your roles here let you see workflows but not "
                    "create them; ask an administrator of your mandate if you need to."),
    )


def workflows_page() -> rx.Component:
    return page_shell(
        "Workflows",
        rx.cond(
            WorkflowsState.loaded & (WorkflowsState.instance_id == ""),
            empty_state("lock", "No Graphical Editor instance",
                        "You have no access to a Graphical Editor instance. Ask an administrator "
                        "of your mandate to give you a role in one."),
            rx.vstack(
                rx.hstack(rx.cond(WorkflowsState.can_create, create_form()),
                          rx.cond(WorkflowsState.can_create, create_more()),
                          spacing="4", align="center", wrap="wrap"),
                rx.cond(WorkflowsState.error != "",
                        rx.callout(WorkflowsState.error, icon="triangle-alert", color_scheme="red",
                                   id="workflows-error")),
                rx.cond(WorkflowsState.notice != "",
                        rx.callout(WorkflowsState.notice, icon="check", color_scheme="green",
                                   id="workflows-notice")),
                rx.cond(
                    WorkflowsState.workflows.length() > 0,
                    workflow_table(),
                    rx.cond(WorkflowsState.loaded, no_workflows()),
                ),
                delete_dialog(),
                templates_dialog(),
                width="100%",
                spacing="4",
            ),
        ),
        instance=WorkflowsState,
    )
