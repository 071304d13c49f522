"""The app shell: navigation on the left; on top the page's title, its mandate and feature instance
(switchable), the bell, the signed-in user and logout.

Below the `PHONE` width the navigation (rendered once, with the same ids) turns into a drawer that
the top bar's menu button opens, the top bar wraps, and tap targets grow to 44 px; wider screens
are unchanged (every phone rule sits in a `PHONE` media query).
"""

from __future__ import annotations

from typing import Any

import reflex as rx

from state.auth import AuthState
from state.inbox import InboxCountState
from state.instance_choice import ALL_INSTANCES
from state.notifications import NotificationsState
from state.shell import ShellState

# The media query of phone-sized screens (below Reflex's "sm" breakpoint, 48em = 768 px). Styles
# under this key apply there only, so wider screens keep their layout exactly.
PHONE = "@media (max-width: 47.99em)"
# The least height of what a phone user taps (buttons, navigation entries, list items).
TAP = "44px"
# Shown on phones only (hidden on wider screens).
PHONE_ONLY = {"display": "none", PHONE: {"display": "flex"}}

# (label, route, icon, the AuthState flag that must be true to show it; None: always shown)
NAV_ITEMS = (
    ("Workflows", "/workflows", "list", "nav_graphical_editor"),
    ("Workspace", "/workspace", "message-square", "nav_workspace"),
    ("Editor", "/editor", "workflow", "nav_graphical_editor"),
    ("Monitor", "/monitor", "activity", "nav_graphical_editor"),
    ("Inbox", "/inbox", "inbox", "nav_graphical_editor"),
    ("Trustee", "/trustee", "receipt", "nav_trustee"),
    ("Chatbot", "/chatbot", "bot", "nav_chatbot"),
    ("Coach", "/coach", "messages-square", "nav_commcoach"),
    ("Connections", "/connections", "plug", None),
    ("Admin", "/admin", "shield", "nav_admin"),
    ("API tokens", "/tokens", "key-round", None),
)


def nav_id(label: str) -> str:
    """The element id of a navigation entry, e.g. `nav-api-tokens`."""
    return "nav-" + label.lower().replace(" ", "-")


def inbox_count(compact: bool = False) -> rx.Component:
    """The Inbox entry's badge: pending tasks the user may complete, re-read every 5 s while the
    page is open (the hidden moment ticks in the browser; it fires once on mount too). In the
    compact navigation it sits on the icon's corner."""
    corner = {"position": "absolute", "top": "-0.2em", "right": "-0.2em"} if compact else {}
    return rx.fragment(
        rx.cond(InboxCountState.pending > 0,
                rx.badge(InboxCountState.pending, id="inbox-count", color_scheme="red", variant="solid",
                         radius="full", size="1", **corner)),
        rx.moment(interval=5000, format="x", on_change=InboxCountState.refresh, display="none"),
    )


def nav_link(label: str, href: str, icon: str, active: str, compact: bool = False) -> rx.Component:
    """One navigation entry, highlighted when it is the current page; compact: its icon alone, the
    label as tooltip."""
    is_active = label == active
    badge = [inbox_count(compact)] if label == "Inbox" else []
    content = rx.box(rx.icon(icon, size=18), *badge, position="relative", display="flex") if compact else \
        rx.hstack(rx.icon(icon, size=18), rx.text(label, size="3"), *badge, spacing="3", align="center")
    return rx.link(
        content,
        href=href,
        id=nav_id(label),
        on_click=ShellState.close_menu,
        underline="none",
        color_scheme="gray",
        high_contrast=is_active,
        weight="bold" if is_active else "regular",
        padding="0.5em 0.75em",
        border_radius="6px",
        background_color=rx.color("accent", 4) if is_active else "transparent",
        width="100%",
        **({"title": label, "aria_label": label} if compact else {}),
    )


def gated_nav_link(label: str, href: str, icon: str, flag: str | None, active: str,
                   compact: bool = False) -> rx.Component:
    """A navigation entry shown only when the signed-in user may use that page."""
    link = nav_link(label, href, icon, active, compact)
    return link if flag is None else rx.cond(getattr(AuthState, flag), link)


def _drawer_style(compact: bool) -> dict[str, Any]:
    """On a phone the navigation is a drawer over the page's left edge, shown while the menu is
    open (`data-open`), its entries at least `TAP` high."""
    return {PHONE: {
        "display": "none",
        "position": "fixed",
        "top": "0",
        "left": "0",
        "bottom": "0",
        "height": "100dvh",
        "z_index": "60",
        "background_color": "var(--color-panel-solid)",
        "box_shadow": "var(--shadow-5)",
        **({} if compact else {"width": "min(17em, 85vw)"}),
        '&[data-open="true"]': {"display": "flex"},
        "& a": {"min_height": TAP, "display": "flex", "align_items": "center"},
    }}


def _menu_close() -> rx.Component:
    """The drawer's close button (phones only)."""
    return rx.icon_button(rx.icon("x", size=20), on_click=ShellState.close_menu, variant="ghost", color_scheme="gray",
                          id="nav-menu-close", title="Close the menu", aria_label="Close the menu",
                          style={**PHONE_ONLY, PHONE: {"display": "inline-flex", "width": TAP, "height": TAP}})


def _backdrop() -> rx.Component:
    """Behind the open drawer on a phone: dims the page, a tap beside the drawer closes it."""
    return rx.cond(
        ShellState.menu_open,
        rx.box(on_click=ShellState.close_menu, id="nav-backdrop",
               style={"display": "none", PHONE: {"display": "block", "position": "fixed", "inset": "0",
                                                 "z_index": "55", "background_color": "var(--black-a6)"}}),
    )


def sidebar(active: str, compact: bool = False) -> rx.Component:
    """The navigation; compact (the Editor, which needs the room): icons only. On a phone: the
    drawer of the menu button (`_drawer_style`)."""
    return rx.vstack(
        rx.hstack(
            rx.heading("P" if compact else "PowerOn", size="5", padding_x="0.75em", padding_y="0.5em",
                       title="PowerOn"),
            _menu_close(),
            justify="between", align="center", width="100%",
        ),
        *[gated_nav_link(label, href, icon, flag, active, compact) for label, href, icon, flag in NAV_ITEMS],
        width="3.75em" if compact else "14em",
        flex_shrink="0",
        height="100vh",
        position="sticky",
        top="0",
        overflow_y="auto",
        padding="1em 0.25em" if compact else "1em 0.5em",
        border_right=f"1px solid {rx.color('gray', 5)}",
        spacing="1",
        id="nav",
        custom_attrs={"data-open": rx.cond(ShellState.menu_open, "true", "false")},
        style=_drawer_style(compact),
    )


def notification_bell() -> rx.Component:
    """The bell: the number of unread notifications (loaded with every page), a link to the list."""
    return rx.link(
        rx.box(
            rx.icon("bell", size=20),
            rx.cond(
                NotificationsState.unread > 0,
                rx.badge(NotificationsState.unread, id="unread-count", color_scheme="red", variant="solid",
                         radius="full", size="1", position="absolute", top="-0.6em", right="-0.8em"),
            ),
            position="relative",
            display="flex",
            on_mount=NotificationsState.load_count,
        ),
        href="/notifications",
        id="notifications-bell",
        color_scheme="gray",
        title="Notifications",
        padding_right="0.5em",
        style={PHONE: {"min_width": TAP, "min_height": TAP, "display": "flex", "align_items": "center",
                       "justify_content": "center"}},
    )


# A text that stays on one line and ends in "…" when it does not fit (its full text is its title).
ONE_LINE = {"white_space": "nowrap", "overflow": "hidden", "text_overflow": "ellipsis", "min_width": "0"}


def _instance_item(entry: Any) -> rx.Component:
    return rx.select.item(entry["label"], value=entry["id"], class_name="instance-option")


def _instance_group(group: Any) -> rx.Component:
    return rx.select.group(
        rx.select.label(group["mandate"], class_name="instance-mandate-label"),
        rx.foreach(group["instances"], _instance_item),
    )


def instance_switcher(state: Any) -> rx.Component:
    """The instances the user may open, grouped by mandate (and "All instances" where the page
    offers it); choosing one calls `state.switch_instance`."""
    return rx.select.root(
        rx.select.trigger(placeholder="Choose an instance", id="instance-select", variant="ghost",
                          max_width="30em", min_width="0", flex="0 1 auto",
                          custom_attrs={"title": state.header_title}),
        rx.select.content(
            rx.cond(state.instance_all_label != "",
                    rx.select.item(state.instance_all_label, value=ALL_INSTANCES, class_name="instance-option")),
            rx.foreach(state.instance_groups, _instance_group),
            position="popper",
        ),
        value=rx.cond(state.header_instance_id != "", state.header_instance_id, ALL_INSTANCES),
        on_change=state.switch_instance,
        size="2",
    )


def instance_header(state: Any) -> rx.Component:
    """ "Default › Graphical Editor": the mandate and instance the page shows, switchable when the
    user may open more than one (`state` mixes state.instance_choice.InstanceChoiceMixin in)."""
    switchable = (state.instance_count > 1) | (state.instance_all_label != "")
    return rx.cond(
        (state.header_instance_id != "") | (state.instance_all_label != ""),
        rx.hstack(
            rx.cond(
                state.header_mandate != "",
                rx.hstack(
                    rx.icon("building-2", size=16, color=rx.color("gray", 10), flex_shrink="0"),
                    rx.text(state.header_mandate, id="current-mandate", color_scheme="gray", size="3",
                            title=state.header_mandate, **ONE_LINE),
                    rx.text("›", color_scheme="gray", size="3", flex_shrink="0", aria_hidden="true"),
                    align="center", spacing="2", min_width="0", max_width="24em", flex="0 1 auto",
                ),
            ),
            rx.cond(
                switchable,
                instance_switcher(state),
                rx.text(state.header_instance_label, id="instance-label", weight="medium", size="3",
                        title=state.header_title, max_width="30em", flex="0 1 auto", **ONE_LINE),
            ),
            id="instance-header",
            align="center",
            spacing="2",
            min_width="0",
            flex="0 1 auto",
            padding_left="0.75em",
            margin_left="0.25em",
            border_left=f"1px solid {rx.color('gray', 5)}",
            aria_label=state.header_title,
            # On a phone: a line of its own under the title.
            style={PHONE: {"order": "10", "flex": "1 1 100%", "border_left": "none", "padding_left": "0",
                           "margin_left": "0"}},
        ),
    )


def menu_button() -> rx.Component:
    """The top bar's menu button (phones only): opens the navigation drawer."""
    return rx.icon_button(
        rx.icon("menu", size=22), on_click=ShellState.toggle_menu, variant="soft", color_scheme="gray",
        id="nav-menu-button", title="Menu", aria_label="Menu",
        custom_attrs={"aria-expanded": rx.cond(ShellState.menu_open, "true", "false"), "aria-controls": "nav"},
        style={"display": "none", PHONE: {"display": "inline-flex", "width": TAP, "height": TAP, "flex_shrink": "0"}},
    )


# The top bar on a phone: it stays on top while the page scrolls, wraps the instance under the
# title, and keeps only the bell and Log out's icon beside the title.
_TOPBAR_PHONE = {PHONE: {
    "flex_wrap": "wrap",
    "gap": "0.5em",
    "position": "sticky",
    "top": "0",
    "z_index": "40",
    "background_color": "var(--color-background)",
    "padding_top": "0.5em",
    "padding_bottom": "0.5em",
    "& #page-title": {"font_size": "var(--font-size-5)", "flex_shrink": "1", "overflow": "hidden",
                      "text_overflow": "ellipsis", "min_width": "0"},
    "& #current-user": {"display": "none"},
    "& .logout-label": {"display": "none"},
    "& #logout-button": {"min_width": TAP, "height": TAP, "padding": "0"},
}}


def topbar(title: str, instance: Any = None) -> rx.Component:
    """The page's title (and, given a state with InstanceChoiceMixin, its mandate and instance),
    then the bell, the user and Log out, which always stay whole on screen. On a phone the menu
    button comes first."""
    return rx.hstack(
        menu_button(),
        rx.heading(title, size="6", id="page-title", flex_shrink="0", white_space="nowrap"),
        *([instance_header(instance)] if instance is not None else []),
        rx.spacer(),
        rx.hstack(
            notification_bell(),
            rx.text(AuthState.display_name, id="current-user", color_scheme="gray", max_width="14em",
                    title=AuthState.display_name, **ONE_LINE),
            rx.button(
                rx.icon("log-out", size=16), rx.el.span("Log out", class_name="logout-label"),
                on_click=AuthState.logout, variant="soft", id="logout-button", flex_shrink="0",
                title="Log out", aria_label="Log out",
            ),
            align="center",
            spacing="3",
            flex_shrink="0",
        ),
        width="100%",
        min_width="0",
        align="center",
        padding_bottom="1em",
        border_bottom=f"1px solid {rx.color('gray', 4)}",
        id="topbar",
        style=_TOPBAR_PHONE,
    )


def page_shell(title: str, *children: rx.Component, instance: Any = None, compact: bool = False) -> rx.Component:
    """A signed-in page: shell around `children`.

    Args:
        title: The page's title (also which navigation entry is highlighted).
        children: The page's content.
        instance: The page's state class when it shows one feature instance: it mixes
            state.instance_choice.InstanceChoiceMixin in, and the header names and switches that
            instance.
        compact: For a page that needs the whole window (the Editor): the navigation shows icons
            only, and the page's content is exactly as high as the window (a child with flex="1"
            takes what the header leaves).
    """
    fill = {"height": "100vh", "padding": "1em 1.25em", "spacing": "3"} if compact else \
        {"padding": "1.5em 2em", "spacing": "4"}
    return rx.hstack(
        sidebar(title, compact),
        _backdrop(),
        rx.vstack(topbar(title, instance), *children, width="100%", min_width="0", id="page-main",
                  style={PHONE: {"padding": "0 0.75em 1em", "height": "auto", "min_height": "100dvh"}}, **fill),
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


def no_access_state(page: str) -> rx.Component:
    """The honest notice on a page the signed-in user has no access to."""
    return empty_state(
        "lock", "No access",
        f"Your roles do not give you access to {page}. Ask an administrator of your mandate if you need it.",
    )


def gated(flag: str, page: str, *children: rx.Component) -> rx.Component:
    """Show `children` only when AuthState's navigation `flag` allows the page.

    Until the page's load handler has checked the sign-in, a spinner stands in.
    """
    return rx.cond(
        AuthState.nav_loaded,
        rx.cond(getattr(AuthState, flag), rx.fragment(*children), no_access_state(page)),
        rx.center(rx.spinner(), padding="4em", width="100%"),
    )

