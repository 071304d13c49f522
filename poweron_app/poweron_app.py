"""Builds the Reflex app: pages, the REST API mounted on the backend, start-up preparation."""

import functools

import reflex as rx

from backend.api.app import create_api
from backend.bootstrap import prepare
from poweron_app.pages.login import login_page
from poweron_app.pages.pending import PENDING_PAGES, pending_page
from poweron_app.pages.workflows import workflows_page
from state.auth import AuthState
from state.workflows import WorkflowsState


def _prepare_database() -> None:
    # Idempotent: `make run` has usually done this already; a bare `reflex run` still works.
    prepare()


app = rx.App(api_transformer=create_api())
app.register_lifespan_task(_prepare_database)

app.add_page(rx.center(rx.spinner()), route="/", title="PowerOn", on_load=AuthState.route_home)
app.add_page(login_page, route="/login", title="Sign in · PowerOn", on_load=AuthState.redirect_signed_in)
app.add_page(workflows_page, route="/workflows", title="Workflows · PowerOn", on_load=WorkflowsState.load)
for _title in PENDING_PAGES:
    app.add_page(
        functools.partial(pending_page, _title),
        route=f"/{_title.lower()}",
        title=f"{_title} · PowerOn",
        on_load=AuthState.require_login,
    )
