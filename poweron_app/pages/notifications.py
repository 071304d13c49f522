"""The Notifications page: what the signed-in user was told (failed unattended runs), newest first."""

from __future__ import annotations

import reflex as rx

from components.notification_settings import notification_settings_panel
from components.shell import PHONE, TAP, empty_state, page_shell
from state.notifications import NotificationRow, NotificationsState


def notification_card(row: NotificationRow) -> rx.Component:
    return rx.card(
        rx.hstack(
            rx.match(
                row["kind"],
                ("task.assigned", rx.icon("inbox", size=20, color=rx.color("blue", 9), flex_shrink="0")),
                ("task.expiring", rx.icon("clock", size=20, color=rx.color("amber", 9), flex_shrink="0")),
                rx.icon("circle-alert", size=20, color=rx.color("red", 9), flex_shrink="0"),
            ),
            rx.vstack(
                rx.hstack(
                    rx.text(row["title"], weight="bold", class_name="notification-title"),
                    rx.cond(row["unread"], rx.badge("unread", color_scheme="blue", class_name="unread-badge")),
                    align="center",
                    spacing="2",
                ),
                rx.text(row["message"], size="2", class_name="notification-message", white_space="pre-wrap"),
                rx.hstack(
                    rx.text(row["created"], size="1", color_scheme="gray"),
                    rx.cond(row["kind"].contains("task."),
                            rx.link("Open the task", href=row["href"], size="1", class_name="notification-inbox-link")),
                    spacing="3", align="center",
                ),
                spacing="1",
                width="100%",
                class_name="notification-body",
            ),
            rx.cond(
                row["unread"],
                rx.button(rx.icon("check", size=14), "Mark read", size="1", variant="soft",
                          class_name="mark-read-button", on_click=NotificationsState.mark_read(row["id"])),
            ),
            align="start",
            spacing="3",
            width="100%",
            class_name="notification-line",
        ),
        width="100%",
        class_name="notification-row",
        custom_attrs={"data-unread": rx.cond(row["unread"], "true", "false")},
    )


# On a phone: the header's text, switch and button wrap onto lines of their own, and a card's
# "Mark read" goes under its text, at least `TAP` high.
PHONE_LAYOUT = {PHONE: {
    "& #notifications-header": {"flex_wrap": "wrap", "gap": "0.75em"},
    "& #notifications-header > .rt-Text": {"flex": "1 1 100%"},
    "& #mark-all-read, & .mark-read-button": {"min_height": TAP},
    "& .notification-line": {"flex_wrap": "wrap"},
    "& .notification-body": {"flex": "1 1 0", "min_width": "0"},
    "& .mark-read-button": {"flex": "1 1 100%"},
    "& .notification-message, & .notification-title": {"overflow_wrap": "anywhere"},
}}


def notifications_page() -> rx.Component:
    return page_shell(
        "Notifications",
        rx.vstack(
            rx.hstack(
                rx.text("Tasks waiting for you, and failed scheduled, webhook and event runs of the workflows you own.",
                        color_scheme="gray"),
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
                id="notifications-header",
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
            style=PHONE_LAYOUT,
        ),
    )
