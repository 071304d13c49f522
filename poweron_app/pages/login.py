"""Sign-in page for local accounts."""

import reflex as rx

from components.shell import PHONE, TAP
from state.auth import AuthState
from state.sso import SsoState

# On a phone the card takes the screen's width, its fields and buttons at least `TAP` high (and
# 16 px text, which phones do not zoom into).
PHONE_LAYOUT = {PHONE: {
    "width": "calc(100vw - 2em)",
    "& form > div": {"width": "100%"},
    "& input": {"font_size": "16px"},
    "& .rt-TextFieldRoot, & button, & a": {"min_height": TAP},
}}


def login_page() -> rx.Component:
    return rx.center(
        rx.card(
            rx.form(
                rx.vstack(
                    rx.heading("Sign in to PowerOn", size="6"),
                    rx.text("Username", size="2", weight="medium"),
                    rx.input(name="username", id="login-username", placeholder="admin",
                             auto_focus=True, width="100%", auto_complete="username"),
                    rx.text("Password", size="2", weight="medium"),
                    rx.input(name="password", id="login-password", type="password",
                             width="100%", auto_complete="current-password"),
                    rx.cond(
                        AuthState.login_error != "",
                        rx.callout(AuthState.login_error, icon="triangle-alert", color_scheme="red",
                                   id="login-error", width="100%"),
                    ),
                    rx.button("Sign in", type="submit", id="login-submit", width="100%"),
                    rx.cond(
                        SsoState.sso_error != "",
                        rx.callout(SsoState.sso_error, icon="triangle-alert", color_scheme="red",
                                   id="sso-error", width="100%"),
                    ),
                    rx.cond(
                        SsoState.sso_enabled,
                        rx.button(
                            rx.el.a("Sign in with single sign-on", href=SsoState.sso_login_url, id="sso-login"),
                            as_child=True, variant="outline", width="100%",
                        ),
                    ),
                    spacing="3",
                    width="22em",
                ),
                on_submit=AuthState.login,
                reset_on_submit=False,
            ),
            id="login-card",
            style=PHONE_LAYOUT,
        ),
        min_height="100vh",
    )
