"""State of the shell's bell and the Notifications page: the signed-in user's own notifications.

Thin: every read and change goes through the door backend.notifications.service.Notifications,
which touches only the signed-in user's rows.
"""

from __future__ import annotations

from typing import TypedDict

import reflex as rx

from backend.notifications import service
from backend.notifications.service import Notifications
from backend.rbac.access import AccessContext
from state.auth import AuthState, NotSignedIn
from state.page import PageMixin
from state.permissions import requires_door


def _door(session, user) -> Notifications:
    return Notifications(AccessContext(session, user))


class NotificationRow(TypedDict):
    id: str
    title: str
    message: str
    created: str
    unread: bool
    kind: str  # run.failed | task.assigned | task.expiring
    href: str  # where "Open" leads: a task's notification opens it in the Inbox


class NotificationsState(PageMixin, AuthState):
    """The unread count (shown by the bell on every page) and the list of the Notifications page."""

    unread: int = 0
    items: list[NotificationRow] = []
    only_unread: bool = False

    def _refresh(self) -> None:
        with self._user_session() as (session, user):
            self._load_navigation(session, user)
            self.items = [
                NotificationRow(id=n.id, title=n.title, message=n.message, unread=n.read_at is None,
                                created=n.created_at.strftime("%Y-%m-%d %H:%M UTC"), kind=n.kind,
                                href=f"/inbox?task={n.task_id}" if n.task_id else "/inbox")
                for n in _door(session, user).list(unread=self.only_unread, limit=service.LIST_LIMIT_MAX)
            ]
            self.unread = _door(session, user).unread_count()
        self.loaded = True

    @rx.event
    @requires_door(Notifications.list, Notifications.unread_count)
    def load(self):
        """on_load of /notifications: check the sign-in and list the user's notifications."""
        self.error = ""
        self.notice = ""
        return self._reload()

    @rx.event
    @requires_door(Notifications.unread_count)
    def load_count(self):
        """on_mount of the bell: how many of the user's notifications are unread (0 when signed out)."""
        try:
            with self._user_session() as (session, user):
                self.unread = _door(session, user).unread_count()
        except NotSignedIn:
            self.unread = 0

    @rx.event
    @requires_door(Notifications.list)
    def toggle_unread(self, value: bool):
        """Show only the unread notifications, or all."""
        self.only_unread = bool(value)
        return self._reload()

    @rx.event
    @requires_door(Notifications.mark_read)
    def mark_read(self, notification_id: str):
        """Mark one of the user's notifications read."""
        _ok, event = self._attempt(lambda session, user: _door(session, user).mark_read(notification_id))
        return event

    @rx.event
    @requires_door(Notifications.mark_all_read)
    def mark_all_read(self):
        """Mark every unread notification of the user read."""
        marked: dict[str, int] = {}

        def mark(session, user):
            marked["count"] = _door(session, user).mark_all_read()

        ok, event = self._attempt(mark)
        if ok:
            self.notice = f"Marked {marked['count']} notification{'s' if marked['count'] != 1 else ''} read."
        return event


