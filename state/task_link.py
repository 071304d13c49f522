"""The page a task mail's link opens (/act/[token]?do=approve|reject|open; issue 23): the task, and
— for someone who may decide — Approve / Reject. No app shell, made for a phone.

Thin: what the link is for and the decision come from the door backend.engine.task_links.TaskLinks
(the same as ``/api/task-links/{token}``); the visitor is whoever the browser's token says, if any.
"""

from __future__ import annotations

from urllib.parse import quote

import reflex as rx

from backend import auth
from backend.db import session_scope
from backend.engine.task_links import INVALID, OPEN, SIGN_IN, LinkView, SignInRequired, TaskLinks
from backend.errors import Conflict, Forbidden, InvalidInput, NotFound
from state.auth import AuthState
from state.page import routed_id
from state.permissions import requires

ACTIONS = ("approve", "reject", "open")


def _when(moment) -> str:
    return f"{moment:%Y-%m-%d %H:%M} UTC" if moment else ""


class TaskLinkState(AuthState):
    """What /act/[token] shows: loading, then the link's state (open, signIn, foreign, finished,
    used, expired, invalid) with the task."""

    link_state: str = "loading"
    reason: str = ""
    kind: str = ""
    title: str = ""
    message: str = ""
    context: str = ""
    recipient: str = ""
    due: str = ""
    outcome: str = ""
    inbox_href: str = "/inbox"  # a pending task opens there directly
    requested: str = "open"
    comment: str = ""
    error: str = ""

    def _link_token(self) -> str:
        return routed_id(self.router.url.path, "act").strip()

    def _show(self, view: LinkView) -> None:
        self.link_state, self.reason = view.state, view.reason
        self.kind, self.title, self.message, self.context = view.kind or "", view.title, view.message, view.context
        self.recipient, self.due, self.outcome = view.recipient, _when(view.due_at), view.outcome or ""
        self.inbox_href = f"/inbox?task={view.task_id}" if view.task_id and view.status == "pending" else "/inbox"

    def _door(self, session) -> TaskLinks:
        return TaskLinks(session, auth.user_for_token(session, self.token) if self.token else None)

    @rx.event
    @requires("public")
    def load(self):
        """on_load: what the link is for; nothing is decided by opening it."""
        requested = (self.router.url.query_parameters.get("do") or "open").strip().lower()
        self.requested = requested if requested in ACTIONS else "open"
        self.error, self.comment = "", ""
        with session_scope() as session:
            self._show(self._door(session).view(self._link_token()))

    @rx.event
    @requires("public")
    def set_comment(self, value: str):
        self.comment = value

    @rx.event
    @requires("public")
    def decide(self, approved: bool):
        """Approve or reject with this link; the page then says what happened (or why not)."""
        self.error = ""
        token = self._link_token()
        try:
            with session_scope() as session:
                view = self._door(session).decide(token, bool(approved), self.comment.strip() or None)
        except SignInRequired as exc:
            self.link_state, self.reason = SIGN_IN, str(exc)
            return
        except (Forbidden, Conflict, NotFound) as exc:
            with session_scope() as session:
                self._show(self._door(session).view(token))
            if self.link_state == OPEN:  # e.g. a race the view does not show: say what the door said
                self.error = str(exc)
            return
        except InvalidInput as exc:
            self.error = str(exc).removeprefix("approved: ").removeprefix("comment: ")
            return
        self._show(view)

    @rx.event
    @requires("public")
    def sign_in(self):
        """To the login page, which brings the visitor back here."""
        target = f"/act/{self._link_token()}?do={self.requested}"
        return rx.redirect(f"/login?next={quote(target, safe='')}")

    @rx.var
    def valid(self) -> bool:
        return self.link_state not in ("loading", INVALID)
