"""The Inbox (/inbox, spec §7.3): approvals and forms that workflows ask of the signed-in user.

Pending: the tasks (click one to open its panel: approve/reject with a comment, fill in the form,
or cancel with a reason); tasks the user may see but not complete open read only. History: the
completed, cancelled and expired tasks with outcome, who and when.
"""

from __future__ import annotations

import reflex as rx

from components.shell import PHONE, TAP, empty_state, gated, page_shell
from components.tables import data_table
from poweron_app.pages.forms import form_field
from state.inbox import InboxState, TaskRow

SELECTED = InboxState.selected

# On a phone: the list and an open task's panel take the whole width, one at a time (the panel's
# close button brings the list back); buttons, tabs and rows are at least `TAP` high.
PHONE_LAYOUT = {PHONE: {
    "flex_direction": "column",
    '&[data-open="true"] #pending-list': {"display": "none"},
    "& #task-panel": {"width": "100%"},
    "& #task-panel button, & #task-panel .rt-TextFieldRoot, & #task-panel .rt-SelectTrigger": {"min_height": TAP},
    "& #task-run-link": {"min_height": TAP, "display": "inline-flex", "align_items": "center"},
    "& #task-close": {"width": TAP, "height": TAP},
    "& #task-approve, & #task-reject": {"flex": "1"},
    "& #task-submit": {"width": "100%"},
    "& #task-panel input, & #task-panel textarea, & #task-panel select": {"font_size": "16px"},
}}
TABS_PHONE = {PHONE: {"& [role=tab]": {"min_height": TAP, "flex": "1"}}}


def _task_row(row: TaskRow) -> rx.Component:
    return rx.table.row(
        rx.table.cell(rx.hstack(
            rx.cond(row["kind"] == "approval", rx.icon("circle-check", size=16), rx.icon("file-text", size=16)),
            rx.text(row["title"], weight="medium"),
            rx.cond(~row["may_complete"], rx.badge("read only", color_scheme="gray", size="1")),
            align="center", spacing="2")),
        rx.table.cell(row["workflow_name"]),
        rx.table.cell(row["instance"]),
        rx.table.cell(row["created"]),
        rx.table.cell(row["due"]),
        rx.table.cell(row["assignee"]),
        on_click=InboxState.open_task(row["id"]),
        class_name="task-row",
        custom_attrs={"data-task-id": row["id"], "data-selected": rx.cond(row["id"] == InboxState.selected_id,
                                                                           "true", "false")},
        cursor="pointer",
        background_color=rx.cond(row["id"] == InboxState.selected_id, rx.color("accent", 3), "transparent"),
    )


def _pending_list() -> rx.Component:
    return rx.cond(
        InboxState.pending_tasks.length() > 0,
        data_table(("Task", "Workflow", "Instance", "Created", "Due", "Assignee"), InboxState.pending_tasks,
                   _task_row, "task-list"),
        rx.cond(InboxState.loaded,
                empty_state("inbox", "Nothing to do",
                            "Approvals and forms that workflows ask of you appear here.")),
    )


def _approval_controls() -> rx.Component:
    return rx.vstack(
        rx.text_area(placeholder="Comment (optional)", value=InboxState.comment, on_change=InboxState.set_comment,
                     id="task-comment", width="100%", rows="3"),
        rx.hstack(
            rx.button(rx.icon("check", size=16), "Approve", on_click=InboxState.approve, id="task-approve",
                      color_scheme="green"),
            rx.button(rx.icon("x", size=16), "Reject", on_click=InboxState.reject, id="task-reject",
                      color_scheme="red", variant="soft"),
            spacing="2",
            width="100%",
        ),
        width="100%",
        spacing="2",
    )


FILE_UPLOAD = "task-file-upload"


def _file_upload() -> rx.Component:
    """Upload a file into the task's instance file store; its path fills the chosen file field."""
    return rx.hstack(
        rx.cond(InboxState.file_fields.length() > 1,
                rx.select(InboxState.file_fields, value=InboxState.upload_target,
                          on_change=InboxState.set_upload_target, id="task-upload-target", size="1")),
        rx.upload.root(
            rx.button(rx.icon("upload", size=14), "Upload a file for ", InboxState.upload_target, size="1",
                      variant="soft", type="button"),
            id=FILE_UPLOAD, max_files=1, no_drag=True,
            on_drop=InboxState.upload_task_file(rx.upload_files(upload_id=FILE_UPLOAD)),
        ),
        align="center", spacing="2",
    )


def _form_controls() -> rx.Component:
    return rx.form(
        rx.vstack(
            rx.foreach(InboxState.form_fields, lambda field: form_field(field, "task-")),
            rx.cond(InboxState.file_fields.length() > 0, _file_upload()),
            rx.button(rx.icon("send", size=16), "Submit", type="submit", id="task-submit"),
            width="100%",
            spacing="3",
        ),
        on_submit=InboxState.submit_form,
        reset_on_submit=False,
        key=InboxState.selected_id,  # a new task: fresh inputs
        width="100%",
    )


def _cancel_dialog() -> rx.Component:
    return rx.dialog.root(
        rx.dialog.content(
            rx.dialog.title("Cancel this task?"),
            rx.dialog.description("The task is withdrawn and its run is cancelled.", size="2"),
            rx.text_area(placeholder="Reason (optional, shown in the history and the run)",
                         value=InboxState.cancel_reason, on_change=InboxState.set_cancel_reason,
                         id="task-cancel-reason", width="100%", rows="3", max_length=1000, margin_top="1em"),
            rx.hstack(
                rx.dialog.close(rx.button("Keep the task", variant="soft", color_scheme="gray")),
                rx.button("Cancel task", on_click=InboxState.confirm_cancel, id="task-cancel-confirm",
                          color_scheme="red"),
                justify="end", spacing="2", margin_top="1em",
            ),
        ),
        open=InboxState.cancel_open,
        on_open_change=InboxState.set_cancel_open,
    )


def _panel() -> rx.Component:
    return rx.card(
        rx.vstack(
            rx.hstack(
                rx.heading(SELECTED["title"], size="4", id="task-title"),
                rx.spacer(),
                rx.icon_button(rx.icon("x", size=16), on_click=InboxState.close_task, variant="ghost",
                               id="task-close", title="Close"),
                width="100%", align="center",
            ),
            rx.text(SELECTED["workflow_name"], " · ", SELECTED["instance"], " · created ", SELECTED["created"],
                    size="1", color_scheme="gray"),
            rx.cond(SELECTED["message"] != "",
                    rx.text(SELECTED["message"], id="task-message", white_space="pre-wrap")),
            rx.cond(SELECTED["tool"] != "", rx.vstack(
                rx.text("The agent asks to call ", rx.code(SELECTED["tool"]), " with:", size="2"),
                rx.code_block(SELECTED["arguments"], language="json", wrap_long_lines=True, font_size="0.8em",
                              width="100%"),
                id="task-tool", width="100%", spacing="1")),
            rx.link(rx.hstack(rx.icon("external-link", size=14),
                              rx.text(rx.cond(SELECTED["tool"] != "", "Open the Workspace", "Open run")),
                              spacing="1", align="center"),
                    href=SELECTED["run_link"], id="task-run-link", size="2"),
            rx.cond(
                SELECTED["may_complete"],
                rx.cond(SELECTED["kind"] == "approval", _approval_controls(), _form_controls()),
                rx.callout("You can see this task but not complete it.", icon="eye", color_scheme="gray",
                           id="task-readonly", width="100%"),
            ),
            rx.cond(
                SELECTED["may_cancel"],
                rx.button(rx.icon("ban", size=16), "Cancel task…", on_click=InboxState.open_cancel,
                          id="task-cancel", variant="outline", color_scheme="red", size="1"),
            ),
            _cancel_dialog(),
            width="100%",
            spacing="3",
        ),
        id="task-panel",
        width="28em",
        flex_shrink="0",
    )


def _history_row(row: TaskRow) -> rx.Component:
    return rx.table.row(
        rx.table.cell(row["title"]),
        rx.table.cell(row["workflow_name"]),
        rx.table.cell(rx.badge(row["outcome"], class_name="history-outcome",
                               color_scheme=rx.match(row["outcome"], ("Approved", "green"), ("Submitted", "green"),
                                                     ("Rejected", "orange"), "gray"))),
        rx.table.cell(row["by"]),
        rx.table.cell(row["finished"]),
        rx.table.cell(rx.text(row["reason"], class_name="history-reason", size="2")),
        class_name="history-task-row",
        custom_attrs={"data-task-id": row["id"], "data-status": row["status"]},
    )


def _history() -> rx.Component:
    return rx.cond(
        InboxState.history.length() > 0,
        data_table(("Task", "Workflow", "Outcome", "By", "When", "Reason"), InboxState.history, _history_row,
                   "task-history"),
        rx.cond(InboxState.loaded,
                empty_state("history", "No finished tasks yet",
                            "Completed, cancelled and expired tasks are listed here.")),
    )


def _content() -> rx.Component:
    return rx.vstack(
        rx.cond(InboxState.error != "",
                rx.callout(InboxState.error, icon="triangle-alert", color_scheme="red", id="inbox-error",
                           width="100%")),
        rx.cond(InboxState.notice != "",
                rx.callout(InboxState.notice, icon="check", color_scheme="green", id="inbox-notice", width="100%")),
        rx.tabs.root(
            rx.tabs.list(
                rx.tabs.trigger(rx.hstack(rx.text("Pending"), rx.badge(InboxState.pending_tasks.length(), size="1"),
                                          spacing="2", align="center"), value="pending", id="tab-pending"),
                rx.tabs.trigger("History", value="history", id="tab-history"),
                style=TABS_PHONE,
            ),
            rx.tabs.content(
                rx.hstack(
                    rx.box(_pending_list(), width="100%", overflow_x="auto", id="pending-list"),
                    rx.cond(InboxState.selected_id != "", _panel()),
                    width="100%", align="start", spacing="4", padding_top="1em",
                    custom_attrs={"data-open": rx.cond(InboxState.selected_id != "", "true", "false")},
                    style=PHONE_LAYOUT,
                ),
                value="pending",
            ),
            rx.tabs.content(rx.box(_history(), padding_top="1em", width="100%"), value="history"),
            value=InboxState.tab,
            on_change=InboxState.set_tab,
            width="100%",
        ),
        width="100%",
        spacing="3",
    )


def inbox_page() -> rx.Component:
    return page_shell("Inbox", gated("nav_graphical_editor", "the Inbox", _content()))
