"""What every signed-in page state shares: its messages, reloading, and running one change."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import reflex as rx
from sqlmodel import Session

from backend.db.models import User
from backend.errors import DomainError, InvalidInput
from backend.statemachines import ConcurrentTransition
from state.auth import NotSignedIn
from state.permissions import requires


def routed_id(path: str, page: str) -> str:
    """The id in a page address "/<page>/<id>" (maybe behind a frontend prefix); "" when there is none.

    Read from the address itself (router.url), not Reflex's deprecated RouterData.page.
    """
    _head, found, rest = path.rstrip("/").rpartition(f"/{page}/")
    return rest if found and "/" not in rest else ""


def user_message(exc: Exception) -> str:
    """A backend error as the page shows it (the REST field prefix "name: " of a lone problem is
    dropped; with several, each keeps the field it is about)."""
    if isinstance(exc, InvalidInput) and len(exc.errors) > 1:
        return str(exc)
    return str(exc).removeprefix("name: ")


class PageMixin(rx.State, mixin=True):
    """Mixed into page states next to AuthState: `class XState(PageMixin, AuthState)`.

    The page defines `_refresh()` (load what it shows inside `self._user_session()`).
    """

    error: str = ""
    notice: str = ""
    loaded: bool = False

    def _refresh(self) -> None:
        raise NotImplementedError

    def _signed_out(self):
        self.token = ""
        self._forget_navigation()
        return rx.redirect("/login")

    def _reload(self):
        """Reload the page's data; the event to return (a redirect when signed out)."""
        try:
            self._refresh()
        except NotSignedIn:
            return self._signed_out()
        except DomainError as exc:
            self.error = user_message(exc)
        return None

    def _attempt(self, work: Callable[[Session, User], Any], success: str = "") -> tuple[bool, Any]:
        """Run `work(session, user)` in one transaction, then reload.

        Returns:
            (whether it succeeded, the event for the handler to return). On failure
            `self.error` says why and nothing was written.
        """
        self.error = ""
        self.notice = ""
        try:
            with self._user_session() as (session, user):
                work(session, user)
        except NotSignedIn:
            return False, self._signed_out()
        except (DomainError, ConcurrentTransition) as exc:
            self.error = user_message(exc)
            return False, None
        self.notice = success
        return True, self._reload()


class RenameMixin(rx.State, mixin=True):
    """An inline rename on a page: which row is being renamed and the text typed so far.

    The page's own `save_rename` handler reads `rename_id` / `rename_value` and calls its service.
    """

    rename_id: str = ""
    rename_value: str = ""

    @rx.event
    @requires("ui")
    def start_rename(self, row_id: str, current: str):
        self.rename_id, self.rename_value = row_id, current
        self.error = ""

    @rx.event
    @requires("ui")
    def set_rename_value(self, value: str):
        self.rename_value = value

    @rx.event
    @requires("ui")
    def cancel_rename(self):
        self.rename_id, self.rename_value = "", ""
