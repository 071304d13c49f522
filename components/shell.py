"""The app shell: navigation on the left, the signed-in user and logout on top."""

from __future__ import annotations

import reflex as rx

from state.auth import AuthState

NAV_ITEMS = (
    ("Workflows", "/workflows", "list"),
    ("Workspace", "/workspace", "message-square"),
    ("Editor", "/editor", "workflow"),
    ("Monitor", "/monitor", "activity"),
    ("Inbox", "/inbox", "inbox"),
    ("Admin", "/admin", "shield"),
)


def nav_link(label: str, href: str, icon: str, active: str) -> rx.Component:
    """One navigation entry, highlighted when it is the current page."""
    is_active = label == active
    return rx.link(
        rx.hstack(rx.icon(icon, size=18), rx.text(label, size="3"), spacing="3", align="center"),
        href=href,
        id=f"nav-{label.lower()}",
        underline="none",
        color_scheme="gray",
        high_contrast=is_active,
        weight="bold" if is_active else "regular",
        padding="0.5em 0.75em",
        border_radius="6px",
        background_color=rx.color("accent", 4) if is_active else "transparent",
        width="100%",
    )


def sidebar(active: str) -> rx.Component:
    return rx.vstack(
        rx.heading("PowerOn", size="5", padding_x="0.75em", padding_y="0.5em"),
        *[nav_link(label, href, icon, active) for label, href, icon in NAV_ITEMS],
        width="14em",
        min_height="100vh",
        padding="1em 0.5em",
        border_right=f"1px solid {rx.color('gray', 5)}",
        spacing="1",
    )


def topbar(title: str) -> rx.Component:
    return rx.hstack(
        rx.heading(title, size="6", id="page-title"),
        rx.spacer(),
        rx.text(AuthState.display_name, id="current-user", color_scheme="gray"),
        rx.button(
            rx.icon("log-out", size=16), "Log out", on_click=AuthState.logout,
            variant="soft", id="logout-button",
        ),
        width="100%",
        align="center",
        padding_bottom="1em",
        border_bottom=f"1px solid {rx.color('gray', 4)}",
    )


def page_shell(title: str, *children: rx.Component) -> rx.Component:
    """A signed-in page: shell around `children`."""
    return rx.hstack(
        sidebar(title),
        rx.vstack(topbar(title), *children, padding="1.5em 2em", width="100%", spacing="4"),
        spacing="0",
        align="start",
        width="100%",
    )


def empty_state(icon: str, heading: str, text: str) -> rx.Component:
    """An honest notice where a page has nothing (yet) to show."""
    return rx.center(
        rx.vstack(
            rx.icon(icon, size=40, color=rx.color("gray", 9)),
            rx.heading(heading, size="4"),
            rx.text(text, color_scheme="gray", text_align="center", max_width="36em"),
            align="center",
            spacing="3",
        ),
        padding="4em",
        width="100%",
        id="empty-state",
    )
