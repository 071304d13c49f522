"""The shell's bell: a failed scheduled run of a workflow the admin owns shows up as an unread
notification; the admin opens the list, marks it read and the count drops.

The failure is made in the app's database from the test process: a workflow and a run with
trigger "schedule", failed through the WorkflowRun state machine, and the notification written
by the same service the app's notifier calls for the ``run.failed`` event (the event bus is
in-process, so the app's notifier does not see a failure committed by this process).
"""

from __future__ import annotations

import re
import uuid

from playwright.sync_api import Page, expect
from sqlmodel import Session, select

from backend.db.engine import make_engine
from backend.db.models import FeatureInstance, Mandate, User, WorkflowRun
from backend.notifications import service
from backend.statemachines import workflow_run as run_lifecycle
from backend.tenancy import create_feature_instance, create_mandate
from backend.workflows import service as workflows
from backend.workflows.graph import default_graph
from tests.e2e.conftest import ADMIN_PASSWORD, RunningApp
from tests.e2e.test_workflows_ui import sign_in

pytestmark = __import__("pytest").mark.e2e

MANDATE = "Operations"  # sorts after "Default" and "Acme", which the admin test lists


def _own_editor(session: Session) -> FeatureInstance:
    """A Graphical Editor instance of a mandate of this test's own, so that the workflows made here
    do not show in the default instance other tests expect empty."""
    mandate = session.exec(select(Mandate).where(Mandate.name == MANDATE)).first() or create_mandate(session, MANDATE)
    instance = session.exec(select(FeatureInstance).where(FeatureInstance.mandate_id == mandate.id)
                            .where(FeatureInstance.feature_code == "graphicalEditor")).first()
    return instance or create_feature_instance(session, mandate, "graphicalEditor", f"{MANDATE} flows")


def fail_a_scheduled_run(app: RunningApp, workflow_name: str, error: str) -> None:
    """In the app's database: the admin's workflow, a scheduled run of it failed, its notification."""
    engine = make_engine(f"sqlite:///{app.log.parent / 'e2e.db'}")
    try:
        with Session(engine, expire_on_commit=False) as session:
            admin = session.exec(select(User).where(User.username == "admin")).one()
            editor = _own_editor(session)
            workflow = workflows.create_workflow(session, admin, editor, workflow_name, "", default_graph())
            version = workflows.publish(session, admin, workflow)
            run = WorkflowRun(workflow_id=workflow.id, version_id=version.id, mandate_id=workflow.mandate_id,
                              feature_instance_id=editor.id, trigger="schedule", sys_created_by=admin.id)
            session.add(run)
            session.flush()
            run_lifecycle.fail(session, run, error)
            session.commit()
            assert service.notify_run_failed(session, run.id) is not None
            session.commit()
    finally:
        engine.dispose()


def test_the_bell_counts_unread_notifications_and_marking_read_lowers_it(page: Page, running_app: RunningApp):
    name = f"Nightly export {uuid.uuid4().hex[:6]}"
    other = f"Hourly sync {uuid.uuid4().hex[:6]}"
    fail_a_scheduled_run(running_app, other, "node 'fetch' failed: timed out")
    fail_a_scheduled_run(running_app, name, "node 'upload' failed: the server said 503")

    sign_in(page, "admin", ADMIN_PASSWORD)
    expect(page).to_have_url(re.compile(r"/workflows$"))
    count = page.locator("#unread-count")
    expect(count).to_be_visible()
    unread_before = int(count.inner_text())
    assert unread_before >= 2

    page.locator("#notifications-bell").click()
    expect(page).to_have_url(re.compile(r"/notifications$"))
    expect(page.locator("#page-title")).to_have_text("Notifications")
    card = page.locator(".notification-row", has_text=name)
    expect(card).to_have_count(1)
    expect(card.locator(".notification-title")).to_have_text(f"Workflow '{name}' failed (schedule run)")
    expect(card.locator(".notification-message")).to_have_text("node 'upload' failed: the server said 503")
    expect(card.locator(".unread-badge")).to_be_visible()

    card.locator(".mark-read-button").click()
    expect(card.locator(".unread-badge")).to_have_count(0)
    expect(card.locator(".mark-read-button")).to_have_count(0)
    expect(count).to_have_text(str(unread_before - 1))

    # Read stays read: after a reload the count is still lower and the card still read.
    page.reload()
    expect(page.locator(".notification-row", has_text=name).locator(".unread-badge")).to_have_count(0)
    expect(count).to_have_text(str(unread_before - 1))
    page.locator("#only-unread").click()
    expect(page.locator(".notification-row", has_text=name)).to_have_count(0)
    expect(page.locator(".notification-row", has_text=other)).to_have_count(1)

    page.locator("#mark-all-read").click()
    expect(page.locator("#notifications-notice")).to_contain_text(f"Marked {unread_before - 1} notification")
    expect(count).to_have_count(0)
    expect(page.locator("#mark-all-read")).to_be_disabled()
    expect(page.locator("#empty-state")).to_contain_text("No notifications")

    # The bell shows no count on other pages either.
    page.locator("#nav-workflows").click()
    expect(page).to_have_url(re.compile(r"/workflows$"))
    expect(page.locator("#notifications-bell")).to_be_visible()
    expect(count).to_have_count(0)
