"""The notification settings panel (issue 23, part 5): which events reach the user on which channel,
and "Enable push on this device".

A grid of checkboxes — Task assigned / Task expiring / Run failed × In the app / E-mail / Push —,
each saved as it is clicked; below it the button that subscribes this browser to Web Push (or
says why it cannot) and the browsers that get pushes already. State: state/notification_settings.py.
"""

from __future__ import annotations

import reflex as rx

from state.notification_settings import DeviceRow, NotificationSettingsState, SettingRow

CHANNELS = (("app", "In the app"), ("mail", "E-mail"), ("push", "Push"))


def _checkbox(row: SettingRow, channel: str, label: str) -> rx.Component:
    return rx.table.cell(
        rx.checkbox(
            checked=row[channel],
            on_change=lambda value: NotificationSettingsState.toggle(row["event"], channel, value),
            size="3",
            aria_label=row["label"] + " · " + label,
            id="setting-" + row["event"] + "-" + channel,
            custom_attrs={"data-event": row["event"], "data-channel": channel},
        ),
        text_align="center",
    )


def _setting_row(row: SettingRow) -> rx.Component:
    return rx.table.row(
        rx.table.row_header_cell(row["label"]),
        *[_checkbox(row, channel, label) for channel, label in CHANNELS],
        class_name="notification-setting-row",
    )


def _device(device: DeviceRow) -> rx.Component:
    return rx.hstack(
        rx.icon("smartphone", size=16),
        rx.text(device["label"], size="2"),
        rx.cond(device["error"] != "", rx.text(device["error"], size="1", color_scheme="red")),
        rx.spacer(),
        rx.button("Remove", size="1", variant="soft", color_scheme="gray", min_height="32px",
                  on_click=NotificationSettingsState.remove_device(device["id"])),
        width="100%",
        align="center",
        class_name="push-device",
    )


def _push_section() -> rx.Component:
    return rx.vstack(
        rx.hstack(
            rx.button(rx.icon("bell-ring", size=16), "Enable push on this device",
                      on_click=NotificationSettingsState.enable_push, loading=NotificationSettingsState.push_busy,
                      id="enable-push", min_height="44px"),
            rx.text("Push shows new tasks and failed runs on this phone or computer, even when PowerOn is closed.",
                    size="2", color_scheme="gray"),
            align="center",
            spacing="3",
            wrap="wrap",
        ),
        rx.cond(
            NotificationSettingsState.push_message != "",
            rx.callout(NotificationSettingsState.push_message, id="push-message",
                       icon=rx.cond(NotificationSettingsState.push_status == "subscribed", "check", "info"),
                       color_scheme=rx.cond(NotificationSettingsState.push_status == "subscribed", "green", "amber"),
                       custom_attrs={"data-status": NotificationSettingsState.push_status}),
        ),
        rx.cond(
            NotificationSettingsState.devices.length() > 0,
            rx.vstack(rx.text("Browsers that get push notifications", size="2", weight="bold"),
                      rx.foreach(NotificationSettingsState.devices, _device),
                      width="100%", spacing="1", id="push-devices"),
        ),
        width="100%",
        spacing="2",
    )


def notification_settings_panel() -> rx.Component:
    """The settings card for the Notifications page (loads itself when it appears)."""
    return rx.card(
        rx.vstack(
            rx.heading("Notification settings", size="4"),
            rx.text("Choose what you are told of, and where. Push reaches only browsers you enable it on.",
                    size="2", color_scheme="gray"),
            rx.cond(NotificationSettingsState.error != "",
                    rx.callout(NotificationSettingsState.error, icon="triangle-alert", color_scheme="red",
                               id="settings-error")),
            rx.cond(NotificationSettingsState.notice != "",
                    rx.text(NotificationSettingsState.notice, size="1", color_scheme="green", id="settings-notice")),
            rx.box(
                rx.table.root(
                    rx.table.header(rx.table.row(
                        rx.table.column_header_cell("Event"),
                        *[rx.table.column_header_cell(label, text_align="center") for _, label in CHANNELS],
                    )),
                    rx.table.body(rx.foreach(NotificationSettingsState.rows, _setting_row)),
                    size="1",
                    width="100%",
                ),
                width="100%",
                overflow_x="auto",
            ),
            _push_section(),
            width="100%",
            spacing="3",
        ),
        width="100%",
        id="notification-settings",
        on_mount=NotificationSettingsState.load,
    )
