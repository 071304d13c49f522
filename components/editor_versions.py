"""The editor's Versions tab (right sidebar) and the banner of a version opened read-only.

`state` is the page state class mixing in state.editor_versions.EditorVersionsMixin (EditorState).
"""

from __future__ import annotations

from typing import Any

import reflex as rx

STATUS_COLORS = (("published", "green"), ("draft", "amber"), ("archived", "gray"))


def status_badge(status: rx.Var) -> rx.Component:
    return rx.badge(status, color_scheme=rx.match(status, *STATUS_COLORS, "gray"), variant="soft")


def _version_row(state: Any, row: rx.Var) -> rx.Component:
    number = row["number"]
    return rx.box(
        rx.hstack(
            rx.text(f"v{number}", weight="bold"),
            status_badge(row["status"]),
            rx.spacer(),
            rx.button("Open", size="1", variant="soft", id=f"open-version-{number}",
                      on_click=state.open_version(row["id"])),
            rx.cond(
                row["status"] == "archived",
                rx.button("Restore", size="1", variant="outline", id=f"restore-version-{number}",
                          disabled=~state.can_publish, on_click=state.restore_version(row["id"])),
            ),
            align="center",
            width="100%",
        ),
        rx.text(
            f"created {row['created']}",
            rx.cond(row["published"] != "", f" · published {row['published']}", ""),
            rx.cond(row["author"] != "", f" · by {row['author']}", ""),
            size="1",
            color_scheme="gray",
        ),
        id=f"version-{number}",
        padding_y="0.4em",
        border_bottom="1px solid var(--gray-a4)",
        width="100%",
    )


ACTIVE_TEXT = ("Active: its published version starts on its triggers (schedules, webhooks, events and forms). "
               "Test runs use the graph on the canvas.")
INACTIVE_TEXT = ("Inactive: schedules, webhooks, events and forms do not start this workflow. Test runs here "
                 "still work. Switch it on to let its published version run by itself.")


def _active_switch(state: Any) -> rx.Component:
    """The active switch with what it means, and the switch offered once more as a button while inactive."""
    return rx.vstack(
        rx.hstack(
            rx.switch(checked=state.workflow_active, on_change=state.set_active, disabled=~state.can_edit,
                      id="workflow-active"),
            rx.text(rx.cond(state.workflow_active, "Active", "Inactive"), size="2", weight="medium",
                    id="workflow-active-label"),
            rx.spacer(),
            rx.cond(~state.workflow_active & state.can_edit,
                    rx.button(rx.icon("power", size=14), "Activate", size="1", id="activate-workflow",
                              on_click=state.set_active(True))),
            align="center", width="100%",
        ),
        rx.text(rx.cond(state.workflow_active, ACTIVE_TEXT, INACTIVE_TEXT), size="1", color_scheme="gray",
                id="active-explained"),
        rx.cond(~state.can_edit,
                rx.text("Your roles do not allow switching it.", size="1", color_scheme="gray")),
        spacing="1", width="100%",
    )


def versions_panel(state: Any) -> rx.Component:
    """The active switch, the schedule status, publish/unpublish/archive and the list of versions."""
    return rx.vstack(
        _active_switch(state),
        rx.text(state.schedule_text, size="1", color_scheme="gray", id="schedule-status"),
        rx.hstack(
            rx.button("Publish", size="1", id="publish-draft", on_click=state.publish_draft,
                      disabled=~state.has_draft | ~state.can_publish),
            rx.button("Unpublish", size="1", variant="soft", id="unpublish-version", on_click=state.unpublish,
                      disabled=~state.has_published | ~state.can_publish),
            rx.button("Archive", size="1", variant="soft", color_scheme="gray", id="archive-published",
                      on_click=state.archive_published, disabled=~state.has_published | ~state.can_publish),
            wrap="wrap",
        ),
        rx.cond(
            ~state.can_publish,
            rx.text("Your roles do not allow publishing here.", size="1", color_scheme="gray"),
        ),
        rx.divider(),
        rx.cond(
            state.versions.length() > 0,
            rx.vstack(rx.foreach(state.versions, lambda row: _version_row(state, row)), spacing="0",
                      width="100%", id="version-list"),
            rx.text("No versions yet.", size="2", color_scheme="gray"),
        ),
        spacing="3",
        width="100%",
        id="versions-panel",
    )


def readonly_banner(state: Any) -> rx.Component:
    """Shown while a version is opened read-only, with the way back to the draft."""
    return rx.cond(
        state.viewing_version != "",
        rx.callout.root(
            rx.callout.icon(rx.icon("eye")),
            rx.hstack(
                rx.callout.text(f"Viewing version {state.viewing_version} ({state.viewing_status}) read-only"),
                rx.button("Back to the draft", size="1", variant="soft", id="back-to-draft",
                          on_click=state.back_to_draft),
                align="center",
                spacing="3",
            ),
            color_scheme="blue",
            size="1",
            id="readonly-banner",
        ),
    )
