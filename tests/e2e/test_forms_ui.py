"""trigger.form (issue 7, item 4): the public form page /forms/<workflow id>, without sign-in.

The workflow is made in the app's database from the test process, in a mandate of this test's own:
active, its published version a trigger.form (a required text field and a number field) followed
by a context.transform. Submitting with the required field empty shows the error next to it;
filled in, the page confirms with the run id, and the run has trigger "form" and the fields as
input. An unknown workflow id shows "This form is not available".
"""

from __future__ import annotations

import re
import uuid

from playwright.sync_api import Page, expect
from sqlmodel import Session, select

from backend.db.engine import make_engine
from backend.db.models import FeatureInstance, Mandate, User, WorkflowRun
from backend.tenancy import create_feature_instance, create_mandate
from backend.workflows import service as workflows
from tests.e2e.conftest import RunningApp

pytestmark = __import__("pytest").mark.e2e

MANDATE = "Public forms"  # a mandate of its own, so other tests' workflow lists stay as they expect

GRAPH = {
    "nodes": [
        {"id": "start", "type": "trigger.form", "parameters": {"fields": [
            {"name": "customer", "label": "Your name", "type": "text", "required": True},
            {"name": "amount", "label": "Amount", "type": "number"},
        ]}},
        {"id": "echo", "type": "context.transform",
         "parameters": {"data": "{{ input }}", "template": "{{ customer }} asks {{ amount }}"}},
    ],
    "edges": [{"source": "start", "target": "echo"}],
}


def _engine(app: RunningApp):
    return make_engine(f"sqlite:///{app.log.parent / 'e2e.db'}")


def publish_a_form(app: RunningApp, name: str, description: str) -> str:
    """In the app's database: an active workflow of the admin whose published version is GRAPH."""
    engine = _engine(app)
    try:
        with Session(engine, expire_on_commit=False) as session:
            admin = session.exec(select(User).where(User.username == "admin")).one()
            mandate = (session.exec(select(Mandate).where(Mandate.name == MANDATE)).first()
                       or create_mandate(session, MANDATE))
            editor = (session.exec(select(FeatureInstance).where(FeatureInstance.mandate_id == mandate.id)
                                   .where(FeatureInstance.feature_code == "graphicalEditor")).first()
                      or create_feature_instance(session, mandate, "graphicalEditor", f"{MANDATE} flows"))
            workflow = workflows.create_workflow(session, admin, editor, name, description, GRAPH)
            workflows.publish(session, admin, workflow)
            workflows.update_workflow(session, admin, workflow, editor, active=True)
            session.commit()
            return workflow.id
    finally:
        engine.dispose()


def runs_of(app: RunningApp, workflow_id: str) -> list[WorkflowRun]:
    engine = _engine(app)
    try:
        with Session(engine) as session:
            return list(session.exec(select(WorkflowRun).where(WorkflowRun.workflow_id == workflow_id)))
    finally:
        engine.dispose()


def test_the_public_form_names_missing_fields_and_starts_a_run(page: Page, running_app: RunningApp):
    name = f"Refund request {uuid.uuid4().hex[:6]}"
    workflow_id = publish_a_form(running_app, name, "Ask for your money back.")

    page.goto(f"/forms/{workflow_id}")  # no sign-in
    expect(page.locator("#form-title")).to_have_text(name)
    expect(page.locator("#form-description")).to_have_text("Ask for your money back.")
    customer = page.locator('input[name="customer"]')
    amount = page.locator('input[name="amount"]')
    expect(customer).to_be_visible()
    expect(amount).to_have_attribute("type", "number")
    expect(page.locator('.form-field[data-field="customer"]')).to_contain_text("*")

    amount.fill("12.5")
    page.locator("#form-submit").click()
    error = page.locator('.field-error[data-field="customer"]')
    expect(error).to_have_text("Your name is required")
    expect(page.locator('.field-error[data-field="amount"]')).to_have_count(0)
    assert runs_of(running_app, workflow_id) == []

    customer.fill("Ada")
    page.locator("#form-submit").click()
    expect(page.locator("#form-done")).to_contain_text("Thank you — your submission started run")
    run_id = page.locator("#form-run-id").inner_text().strip()
    assert re.fullmatch(r"[0-9a-f]{32}", run_id), run_id

    runs = runs_of(running_app, workflow_id)
    assert [r.id for r in runs] == [run_id]
    assert runs[0].trigger == "form"
    assert runs[0].input == {"customer": "Ada", "amount": 12.5}


def test_an_unknown_form_is_not_available(page: Page, running_app: RunningApp):
    page.goto(f"/forms/{'0' * 32}")
    expect(page.locator("#form-unavailable")).to_contain_text("This form is not available")
    expect(page.locator("#form-submit")).to_have_count(0)
