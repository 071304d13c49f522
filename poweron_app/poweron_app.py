"""Builds the Reflex app: pages, the REST API mounted on the backend, start-up preparation."""

import reflex as rx

from backend.api.app import create_api
from backend.bootstrap import prepare
from backend.engine.recovery import start_recovery_thread
from backend.engine.timers import start_timer_thread
from backend.notifications.notifier import start_notifier
from backend.scheduler.scheduler import start_scheduler
from poweron_app.pages.admin import admin_page
from poweron_app.pages.editor import editor_page
from poweron_app.pages.forms import form_page
from poweron_app.pages.inbox import inbox_page
from poweron_app.pages.login import login_page
from poweron_app.pages.monitor import monitor_page
from poweron_app.pages.notifications import notifications_page
from poweron_app.pages.sso import sso_page
from poweron_app.pages.tokens import tokens_page
from poweron_app.pages.workflows import workflows_page
from poweron_app.pages.workspace import workspace_page
from state.admin import AdminState
from state.auth import AuthState
from state.editor import EditorState
from state.forms import FormPageState
from state.inbox import InboxState
from state.monitor import MonitorState
from state.notifications import NotificationsState
from state.sso import SsoState
from state.tokens import TokensState
from state.workflows import WorkflowsState
from state.workspace import WorkspaceState


def _prepare_database() -> None:
    # Idempotent: `make run` has usually done this already; a bare `reflex run` still works.
    prepare()
    # Tells workflow owners about failed scheduled, webhook and event runs, in the app and by
    # mail when POWERON_SMTP_URL is set (backend/notifications/);
    # first, so a run that recovery fails at once is told too.
    start_notifier()
    # Once per process start: continue runs a stopped process left in `running`, in the
    # background so start-up is not held up (backend/engine/recovery.py).
    start_recovery_thread()
    # Wakes due flow.wait runs, expires due human tasks and polls mailboxes every
    # POWERON_TIMER_INTERVAL_SECONDS (backend/engine/timers.py).
    start_timer_thread()
    # trigger.schedule jobs (APScheduler), led by one process per database through a lease; its
    # first sync comes POWERON_SCHEDULER_STARTUP_DELAY_SECONDS later (backend/scheduler/).
    start_scheduler()


app = rx.App(api_transformer=create_api())
app.register_lifespan_task(_prepare_database)

# Dynamic route first, so that no fixed route is taken for it. Public: no sign-in, no shell.
app.add_page(form_page, route="/forms/[workflow_id]", title="Form · PowerOn", on_load=FormPageState.load)
app.add_page(editor_page, route="/editor/[workflow_id]", title="Editor · PowerOn", on_load=EditorState.load)
app.add_page(rx.center(rx.spinner()), route="/editor", title="Editor · PowerOn", on_load=EditorState.open_recent)
app.add_page(rx.center(rx.spinner()), route="/", title="PowerOn", on_load=AuthState.route_home)
app.add_page(login_page, route="/login", title="Sign in · PowerOn",
             on_load=[AuthState.redirect_signed_in, SsoState.check_enabled])
app.add_page(workflows_page, route="/workflows", title="Workflows · PowerOn", on_load=WorkflowsState.load)
app.add_page(workspace_page, route="/workspace", title="Workspace · PowerOn", on_load=WorkspaceState.load)
app.add_page(monitor_page, route="/monitor", title="Monitor · PowerOn", on_load=MonitorState.load)
app.add_page(admin_page, route="/admin", title="Admin · PowerOn", on_load=AdminState.load)
app.add_page(tokens_page, route="/tokens", title="API tokens · PowerOn", on_load=TokensState.load)
app.add_page(inbox_page, route="/inbox", title="Inbox · PowerOn", on_load=InboxState.load)
app.add_page(notifications_page, route="/notifications", title="Notifications · PowerOn",
             on_load=NotificationsState.load)
app.add_page(sso_page, route="/sso", title="Single sign-on · PowerOn", on_load=SsoState.finish)
