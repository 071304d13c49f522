"""/sso: where single sign-on lands; trades the one-time code for a token (SsoState.finish)."""

import reflex as rx

from state.sso import SsoState


def sso_page() -> rx.Component:
    return rx.center(
        rx.card(
            rx.cond(
                SsoState.sso_error != "",
                rx.vstack(
                    rx.heading("Single sign-on", size="6"),
                    rx.callout(SsoState.sso_error, icon="triangle-alert", color_scheme="red",
                               id="sso-error", width="100%"),
                    rx.link("Back to sign-in", href="/login", id="sso-back"),
                    spacing="3",
                    width="22em",
                ),
                rx.hstack(rx.spinner(), rx.text("Signing you in…"), spacing="3", id="sso-pending"),
            ),
        ),
        min_height="100vh",
    )
