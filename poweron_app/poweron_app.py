"""Builds the Reflex app: pages, the REST API mounted on the backend, start-up preparation."""

from contextlib import asynccontextmanager

import reflex as rx

from backend.api.app import create_api
from backend.runtime import start_background_services
from components.pwa import pwa_head_components
from poweron_app.pages.admin import admin_page
from poweron_app.pages.chatbot import chatbot_page
from poweron_app.pages.chatbot_embed import chatbot_embed_page
from poweron_app.pages.coach import coach_page
from poweron_app.pages.connections import connections_page
from poweron_app.pages.editor import editor_page
from poweron_app.pages.forms import form_page
from poweron_app.pages.inbox import inbox_page
from poweron_app.pages.login import login_page
from poweron_app.pages.monitor import monitor_page
from poweron_app.pages.notifications import notifications_page
from poweron_app.pages.sso import sso_page
from poweron_app.pages.task_link import task_link_page
from poweron_app.pages.tokens import tokens_page
from poweron_app.pages.trustee import trustee_page
from poweron_app.pages.workflows import workflows_page
from poweron_app.pages.workspace import workspace_page
from state.admin import AdminState
from state.auth import AuthState
from state.chatbot import ChatbotState
from state.chatbot_embed import ChatbotEmbedState
from state.coach import CoachState
from state.connections import ConnectionsState
from state.editor import EditorState
from state.forms import FormPageState
from state.inbox import InboxState
from state.monitor import MonitorState
from state.notifications import NotificationsState
from state.sso import SsoState
from state.task_link import TaskLinkState
from state.tokens import TokensState
from state.trustee import TrusteeState
from state.workflows import WorkflowsState
from state.workspace import WorkspaceState


def _prepare_database() -> None:
    # Migrations, bootstrap, notifier, run recovery, timers and scheduler: the same start-up as
    # every PowerOn process (backend/runtime.py).
    start_background_services()


api = create_api()


@asynccontextmanager
async def _serve_mcp():
    # Reflex runs its own lifespan, not the mounted API's: the MCP server at /mcp (its session
    # manager's task group) lives for this process's lifetime here (backend/mcp/server.py).
    async with api.state.mcp.run():
        yield


app = rx.App(api_transformer=api)
app.head_components.extend(pwa_head_components())  # installable: manifest, icons (components/pwa.py)
app.register_lifespan_task(_prepare_database)
app.register_lifespan_task(_serve_mcp)

# Dynamic route first, so that no fixed route is taken for it. Public: no sign-in, no shell.
app.add_page(form_page, route="/forms/[workflow_id]", title="Form · PowerOn", on_load=FormPageState.load)
app.add_page(task_link_page, route="/act/[link_token]", title="Task · PowerOn", on_load=TaskLinkState.load)
app.add_page(editor_page, route="/editor/[workflow_id]", title="Editor · PowerOn", on_load=EditorState.load)
app.add_page(rx.center(rx.spinner()), route="/editor", title="Editor · PowerOn", on_load=EditorState.open_recent)
app.add_page(rx.center(rx.spinner()), route="/", title="PowerOn", on_load=AuthState.route_home)
app.add_page(login_page, route="/login", title="Sign in · PowerOn",
             on_load=[AuthState.redirect_signed_in, SsoState.check_enabled])
app.add_page(workflows_page, route="/workflows", title="Workflows · PowerOn", on_load=WorkflowsState.load)
app.add_page(workspace_page, route="/workspace", title="Workspace · PowerOn", on_load=WorkspaceState.load)
app.add_page(trustee_page, route="/trustee", title="Trustee · PowerOn", on_load=TrusteeState.load)
app.add_page(coach_page, route="/coach", title="Coach · PowerOn", on_load=CoachState.load)
app.add_page(monitor_page, route="/monitor", title="Monitor · PowerOn", on_load=MonitorState.load)
app.add_page(admin_page, route="/admin", title="Admin · PowerOn", on_load=AdminState.load)
app.add_page(tokens_page, route="/tokens", title="API tokens · PowerOn", on_load=TokensState.load)
app.add_page(connections_page, route="/connections", title="Connections · PowerOn", on_load=ConnectionsState.load)
app.add_page(inbox_page, route="/inbox", title="Inbox · PowerOn", on_load=InboxState.load)
app.add_page(notifications_page, route="/notifications", title="Notifications · PowerOn",
             on_load=NotificationsState.load)
app.add_page(sso_page, route="/sso", title="Single sign-on · PowerOn", on_load=SsoState.finish)
app.add_page(chatbot_page, route="/chatbot", title="Chatbot · PowerOn", on_load=ChatbotState.load)
# A Chatbot's public embed (for an iframe): no sign-in, no shell.
app.add_page(chatbot_embed_page, route="/embed/chatbot/[embed_token]", title="Chatbot", on_load=ChatbotEmbedState.load)
