"""The shell's own UI state: whether the navigation menu is open on a phone-sized screen.

A pure UI toggle (no data, no rights): on a wide screen the navigation is always shown and this
flag changes nothing.
"""

from __future__ import annotations

import reflex as rx

from state.permissions import requires


class ShellState(rx.State):
    """The phone navigation drawer: opened by the top bar's menu button, closed by choosing an
    entry, tapping beside it or its close button."""

    menu_open: bool = False

    @rx.event
    @requires("ui")
    def toggle_menu(self):
        self.menu_open = not self.menu_open

    @rx.event
    @requires("ui")
    def close_menu(self):
        self.menu_open = False
