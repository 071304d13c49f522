"""The Notifications page: what the signed-in user was told (failed unattended runs), newest first."""

from __future__ import annotations

import reflex as rx

from components.notification_settings import notification_settings_panel
from components.shell import empty_state, page_shell
from state.notifications import NotificationRow, NotificationsState


def notification_card(row: NotificationRow) -> rx.Component:
    return rx.card(
        rx.hstack(
            rx.icon("circle-alert", size=20, color=rx.color("red", 9), flex_shrink="0"),
            rx.vstack(
                rx.hstack(
                    rx.text(row["title"], weight="bold", class_name="notification-title"),
                    rx.cond(row["unread"], rx.badge("unread", color_scheme="blue", class_name="unread-badge")),
                    align="center",
                    spacing="2",
                ),
                rx.text(row["message"], size="2", class_name="notification-message", white_space="pre-wrap"),
                rx.text(row["created"], size="1", color_scheme="gray"),
                spacing="1",
                width="100%",
            ),
            rx.cond(
                row["unread"],
                rx.button(rx.icon("check", size=14), "Mark read", size="1", variant="soft",
                          class_name="mark-read-button", on_click=NotificationsState.mark_read(row["id"])),
            ),
            align="start",
            spacing="3",
            width="100%",
        ),
        width="100%",
        class_name="notification-row",
        custom_attrs={"data-unread": rx.cond(row["unread"], "true", "false")},
    )


def notifications_page() -> rx.Component:
    return page_shell(
        "Notifications",
        rx.vstack(
            rx.hstack(
                rx.text("Failed scheduled, webhook and event runs of the workflows you own.", color_scheme="gray"),
                rx.spacer(),
                rx.hstack(
                    rx.switch(checked=NotificationsState.only_unread, on_change=NotificationsState.toggle_unread,
                              id="only-unread"),
                    rx.text("Unread only", size="2"),
                    align="center",
                    spacing="2",
                ),
                rx.button(rx.icon("check-check", size=16), "Mark all read", on_click=NotificationsState.mark_all_read,
                          id="mark-all-read", variant="soft", disabled=NotificationsState.unread == 0),
                width="100%",
                align="center",
                spacing="4",
            ),
            rx.cond(NotificationsState.error != "",
                    rx.callout(NotificationsState.error, icon="triangle-alert", color_scheme="red",
                               id="notifications-error")),
            rx.cond(NotificationsState.notice != "",
                    rx.callout(NotificationsState.notice, icon="check", color_scheme="green",
                               id="notifications-notice")),
            rx.cond(
                NotificationsState.items.length() > 0,
                rx.vstack(rx.foreach(NotificationsState.items, notification_card), width="100%", spacing="2",
                          id="notification-list"),
                rx.cond(
                    NotificationsState.loaded,
                    empty_state("bell", "No notifications",
                                "When a scheduled, webhook or event run of a workflow you own fails, you are told "
                                "here (and by e-mail when the server has a mail connection)."),
                ),
            ),
            notification_settings_panel(),
            width="100%",
            spacing="4",
        ),
    )
