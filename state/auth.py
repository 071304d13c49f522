"""Sign-in state shared by every page: the token and who is signed in."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import reflex as rx
from sqlmodel import Session

from backend import auth
from backend.admin import Administration
from backend.db import session_scope
from backend.db.models import User
from backend.rbac.access import AccessContext
from state.permissions import requires

GRAPHICAL_EDITOR = "graphicalEditor"
WORKSPACE = "workspace"
TRUSTEE = "trustee"
CHATBOT = "chatbot"
COMMCOACH = "commcoach"


class NotSignedIn(Exception):
    """The browser's token is missing, expired or revoked."""


class AuthState(rx.State):
    """The browser's bearer token (kept in localStorage) and the signed-in user."""

    token: str = rx.LocalStorage("", name="poweron_token", sync=True)
    username: str = ""
    display_name: str = ""
    is_sysadmin: bool = False
    login_error: str = ""
    login_busy: bool = False
    # Which navigation entries the signed-in user may see (set by `_load_navigation`).
    nav_loaded: bool = False
    nav_graphical_editor: bool = False
    nav_workspace: bool = False
    nav_trustee: bool = False
    nav_chatbot: bool = False
    nav_commcoach: bool = False
    nav_admin: bool = False

    @contextmanager
    def _user_session(self) -> Iterator[tuple[Session, User]]:
        """A database transaction and the signed-in user, or NotSignedIn."""
        with session_scope() as session:
            user = auth.user_for_token(session, self.token)
            if user is None:
                raise NotSignedIn()
            yield session, user

    def _remember(self, user: User) -> None:
        self.username = user.username
        self.display_name = user.display_name or user.username
        self.is_sysadmin = user.is_sysadmin

    def _load_navigation(self, session: Session, user: User) -> None:
        """Remember who is signed in and which navigation entries they may see.

        Workflows, Editor, Monitor and Inbox need a Graphical Editor instance the user may
        open, Workspace, Trustee, Chatbot and Coach an instance
        of their feature, Admin what the administration door says
        (`Administration.navigation_rights`).

        Args:
            session: The open database transaction.
            user: The signed-in user.
        """
        self._remember(user)
        access = AccessContext(session, user)
        self.nav_graphical_editor = bool(access.visible_instances(GRAPHICAL_EDITOR))
        self.nav_workspace = bool(access.visible_instances(WORKSPACE))
        self.nav_trustee = bool(access.visible_instances(TRUSTEE))
        self.nav_chatbot = bool(access.visible_instances(CHATBOT))
        self.nav_commcoach = bool(access.visible_instances(COMMCOACH))
        self.nav_admin = Administration(access).navigation_rights()
        self.nav_loaded = True

    def _forget_navigation(self) -> None:
        self.nav_loaded = False
        self.nav_graphical_editor = self.nav_workspace = self.nav_admin = False
        self.nav_trustee = self.nav_chatbot = self.nav_commcoach = False

    @rx.event
    @requires("authenticated")
    def require_login(self):
        """on_load of protected pages: send anyone without a valid token to /login."""
        with session_scope() as session:
            user = auth.user_for_token(session, self.token)
            if user is None:
                self.token = ""
                self._forget_navigation()
                return rx.redirect("/login")
            self._load_navigation(session, user)

    def _signed_in(self) -> bool:
        with session_scope() as session:
            return auth.user_for_token(session, self.token) is not None

    def _after_login(self) -> str:
        """Where a sign-in leads: the page that sent the visitor here (``/login?next=/act/…``, a
        path of this app only), else the workflows."""
        target = (self.router.url.query_parameters.get("next") or "").strip()
        safe = target.startswith("/") and not target.startswith("//") and "\\" not in target
        return target if safe and not target.startswith("/login") else "/workflows"

    @rx.event
    @requires("public")
    def redirect_signed_in(self):
        """on_load of /login: go straight on (to `next` or the app) when the token is still valid."""
        if self._signed_in():
            return rx.redirect(self._after_login())
        return None

    @rx.event
    @requires("public")
    def route_home(self):
        """on_load of /: the app for the signed in, the login page for everybody else."""
        return rx.redirect("/workflows" if self._signed_in() else "/login")

    @rx.event
    @requires("public")
    def login(self, form_data: dict):
        """Check the credentials of the login form and keep the issued token."""
        self.login_error = ""
        username = (form_data.get("username") or "").strip()
        password = form_data.get("password") or ""
        if not username or not password:
            self.login_error = "Enter your username and password."
            return
        try:
            with session_scope() as session:
                issued = auth.login(session, username, password, client_address=self.router.session.client_ip)
                user = session.get(User, issued.user_id)
                self._remember(user)
        except auth.LoginFailed as exc:
            self.login_error = str(exc)
            return
        self.token = issued.token
        return rx.redirect(self._after_login())

    @rx.event
    @requires("authenticated")
    def logout(self):
        """Revoke the token and return to the login page."""
        if self.token:
            with session_scope() as session:
                auth.revoke_token(session, self.token)
        self.token = ""
        self.username = ""
        self.display_name = ""
        self.is_sysadmin = False
        self._forget_navigation()
        return rx.redirect("/login")
