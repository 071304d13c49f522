"""Single sign-on in the UI: the login page's SSO button and the /sso landing page.

The API's callback sends the browser to `/sso?code=…`; the code is traded for a login token
here, server-side, through the same function the REST route uses (`backend.sso`).
"""

from __future__ import annotations

import reflex as rx

from backend import sso
from backend.config import get_settings
from backend.db import session_scope
from backend.db.models import User
from state.auth import AuthState
from state.permissions import requires


class SsoState(AuthState):
    """Whether SSO is offered, where its button points, and the outcome of /sso."""

    sso_enabled: bool = False
    sso_login_url: str = ""
    sso_error: str = ""

    def _query(self, name: str) -> str:
        return (self.router.url.query_parameters.get(name) or "").strip()

    @rx.event
    @requires("public")
    def check_enabled(self):
        """on_load of /login: offer the SSO button when configured; show `?sso_error=`."""
        settings = get_settings()
        self.sso_enabled = settings.sso_enabled
        self.sso_login_url = f"{settings.api_url}/api/auth/oidc/login" if settings.sso_enabled else ""
        self.sso_error = self._query("sso_error")[:300]

    @rx.event
    @requires("public")
    def finish(self):
        """on_load of /sso: trade `?code=` for a login token, then open the app."""
        self.sso_error = ""
        code = self._query("code")
        if not code:
            self.sso_error = "The sign-in link has no code. Please sign in again."
            return None
        try:
            issued = sso.exchange_code(code)
        except sso.SsoError as exc:
            self.sso_error = f"Single sign-on failed: {exc}."
            return None
        with session_scope() as session:
            user = session.get(User, issued.user_id)
            if user is not None:
                self._remember(user)
        self.token = issued.token
        return rx.redirect("/workflows")
