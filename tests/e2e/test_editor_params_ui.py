"""The editor's parameter panel in the browser (issue 16, items 4, 5 and the assignee of 7): a stored
webhook secret shows as set and is replaced or generated, never shown in clear except once to who
generated it; the webhook help gives the address, the live state with Activate / Publish first, a
curl example whose signature the server accepts, and the last calls linked to their runs; a human
step's assignee is picked from the instance's roles and users; the Last run card labels its blocks.
"""

from __future__ import annotations

import base64
import os
import re
import uuid

import httpx
from playwright.sync_api import Page, expect

from tests.e2e.conftest import RunningApp
from tests.e2e.test_editor_ui import api, new_workflow, node, open_editor, saved, select
from tests.e2e.test_workflows_ui import sign_in
from tests.integration.trigger_support import curl_parts

pytestmark = __import__("pytest").mark.e2e


def new_secret() -> str:
    return "whsec_" + base64.b64encode(os.urandom(24)).decode()


def webhook_graph(secret: str | None, path: str = "orders") -> dict:
    parameters = {"path": path, "method": "POST", **({"secret": secret} if secret else {})}
    return {"nodes": [{"id": "hook", "type": "trigger.webhook", "parameters": parameters,
                       "position": {"x": 0, "y": 0}},
                      {"id": "echo", "type": "context.transform", "position": {"x": 320, "y": 0},
                       "parameters": {"data": "{{ input.body }}", "template": "got {{ data.hello }}"}}],
            "edges": [{"source": "hook", "target": "echo"}]}


def workflow_url(running_app: RunningApp, workflow_id: str) -> str:
    _headers, instance = api(running_app)
    return f"{running_app.api_url}/api/graphicalEditor/{instance}/workflows/{workflow_id}"


def stored_secret(running_app: RunningApp, workflow_id: str) -> str | None:
    """The draft's webhook secret as the REST API shows it to the admin (in clear: they may change it)."""
    headers, _instance = api(running_app)
    graph = httpx.get(workflow_url(running_app, workflow_id), headers=headers).json()["graph"]
    return next(n for n in graph["nodes"] if n["id"] == "hook")["parameters"].get("secret")


def publish(running_app: RunningApp, workflow_id: str, active: bool) -> None:
    headers, _instance = api(running_app)
    url = workflow_url(running_app, workflow_id)
    assert httpx.post(f"{url}/publish", headers=headers).status_code == 200
    assert httpx.patch(url, json={"active": active}, headers=headers).status_code == 200


def curl_call(command: str) -> httpx.Response:
    """Send the request the page's curl command describes, as a shell would."""
    method, url, headers, body = curl_parts(command)
    return httpx.request(method, url, headers=headers, content=body)


def add_member(running_app: RunningApp, display_name: str, instance_roles: list[str]) -> tuple[str, str, str]:
    """A new user of the Default mandate with `instance_roles` in the Graphical Editor: (id, username, password)."""
    headers, instance = api(running_app)
    me = httpx.get(f"{running_app.api_url}/api/me", headers=headers).json()
    mandate = next(i["mandateId"] for i in me["instances"] if i["id"] == instance)
    username, password = f"{display_name.split()[0].lower()}{uuid.uuid4().hex[:5]}", "member-pass-12"
    created = httpx.post(f"{running_app.api_url}/api/mandates/{mandate}/users", headers=headers,
                         json={"username": username, "password": password, "roles": ["viewer"],
                               "displayName": display_name})
    assert created.status_code in (200, 201), created.text
    user_id = created.json()["id"]
    access = httpx.post(f"{running_app.api_url}/api/instances/{instance}/access", headers=headers,
                        json={"userId": user_id, "roles": instance_roles})
    assert access.status_code in (200, 201), access.text
    return user_id, username, password


def test_a_stored_secret_is_masked_replaced_and_generated_once(page: Page, running_app: RunningApp):
    secret = new_secret()
    workflow_id, _name = new_workflow(running_app, "Secret", webhook_graph(secret))
    open_editor(page, workflow_id)
    select(page, "hook")
    expect(page.locator("#secret-state")).to_have_attribute("data-state", "set")
    expect(page.locator("#error-secret")).to_have_count(0)  # the masked secret is no error …
    expect(node(page, "hook")).to_have_attribute("data-invalid", "false")  # … and no red node
    assert secret.removeprefix("whsec_") not in page.content()

    page.locator("#secret-replace").click()
    page.locator("#secret-new").fill("my-password")
    page.locator("#secret-save").click()
    expect(page.locator("#error-secret")).to_contain_text("whsec_ followed by base64")
    assert stored_secret(running_app, workflow_id) == secret

    replacement = new_secret()
    page.locator("#secret-new").fill(replacement)
    page.locator("#secret-save").click()
    expect(page.locator("#error-secret")).to_have_count(0)
    expect(page.locator("#secret-new")).to_have_count(0)
    expect(saved(page)).to_have_attribute("data-state", "saved")
    assert stored_secret(running_app, workflow_id) == replacement
    assert replacement.removeprefix("whsec_") not in page.content()

    page.context.grant_permissions(["clipboard-read", "clipboard-write"], origin=running_app.ui_url)
    page.locator("#secret-generate").click()
    generated = page.locator("#generated-secret")
    expect(generated).to_have_text(re.compile(r"^whsec_[A-Za-z0-9+/]{40,}={0,2}$"))
    shown = generated.inner_text()
    assert shown != replacement and len(base64.b64decode(shown.removeprefix("whsec_"))) >= 24
    assert stored_secret(running_app, workflow_id) == shown
    page.locator("#copy-generated-secret").click()
    assert page.evaluate("navigator.clipboard.readText()") == shown
    page.locator("#dismiss-generated-secret").click()
    expect(generated).to_have_count(0)
    expect(page.locator("#secret-state")).to_have_attribute("data-state", "set")
    page.reload()
    expect(page.locator(".poweron-node").first).to_be_visible(timeout=60_000)
    select(page, "hook")
    expect(page.locator("#secret-state")).to_have_attribute("data-state", "set")
    expect(node(page, "hook")).to_have_attribute("data-invalid", "false")
    assert shown.removeprefix("whsec_") not in page.content()  # shown once, then never again


def test_the_webhook_help_shows_a_working_call_its_state_and_the_calls(page: Page, running_app: RunningApp):
    workflow_id, _name = new_workflow(running_app, "Hook help", webhook_graph(None))
    open_editor(page, workflow_id)
    select(page, "hook")
    expect(page.locator("#webhook-url")).to_have_text(f"{running_app.api_url}/api/hooks/{workflow_id}/orders")
    expect(page.locator("#webhook-live")).to_have_attribute("data-state", "unpublished")
    expect(page.locator("#webhook-state-text")).to_contain_text("Publish the workflow first")
    for header in ("webhook-id", "webhook-timestamp", "webhook-signature"):
        expect(page.locator("#webhook-headers")).to_contain_text(header)
    expect(page.locator("#webhook-signature-note")).to_contain_text("Unsigned")
    expect(page.locator("#webhook-no-calls")).to_be_visible()

    page.locator("#secret-generate").click()
    expect(page.locator("#generated-secret")).to_be_visible()
    expect(page.locator("#webhook-signature-note")).to_contain_text("draft secret; valid for 5 minutes")
    page.locator("#webhook-publish").click()
    expect(page.locator("#webhook-live")).to_have_attribute("data-state", "inactive")
    inactive = curl_call(page.locator("#webhook-example").inner_text())
    assert inactive.status_code == 410 and "switched off" in inactive.json()["detail"]

    page.locator("#webhook-activate").click()
    expect(page.locator("#webhook-live")).to_have_text("Live")
    expect(page.locator("#webhook-signature-note")).to_contain_text("published secret")
    accepted = curl_call(page.locator("#webhook-example").inner_text())
    assert accepted.status_code == 202, accepted.text
    run_id = accepted.json()["runId"]

    page.locator("#refresh-webhook-help").click()
    calls = page.locator(".webhook-call")
    expect(calls).to_have_count(2)
    expect(calls.nth(0)).to_contain_text("202")
    expect(calls.nth(0)).to_contain_text("POST /orders: accepted: run started")
    expect(calls.nth(1)).to_contain_text("410")
    expect(calls.nth(1)).to_contain_text("switched off (inactive)")
    expect(calls.nth(1).locator(".call-run")).to_have_count(0)
    calls.nth(0).locator(".call-run").click()
    expect(page).to_have_url(re.compile(rf"/editor/{workflow_id}\?run={run_id}$"))
    expect(page.locator("#tab-trace")).to_have_attribute("data-state", "active")
    expect(page.locator("#side-panel")).to_contain_text("completed")

    select(page, "echo")
    card = page.locator("#node-last-run")
    expect(card.locator("#last-run-input")).to_contain_text("Input")
    expect(card.locator("#last-run-input")).to_contain_text('"hello": "world"')
    expect(card.locator("#last-run-output")).to_contain_text("Output")
    expect(card.locator("#last-run-output")).to_contain_text("got world")


def test_a_reader_sees_the_help_without_a_signature_or_secret_buttons(page: Page, running_app: RunningApp):
    workflow_id, _name = new_workflow(running_app, "Read only hook", webhook_graph(new_secret()))
    publish(running_app, workflow_id, active=True)
    _user_id, username, password = add_member(running_app, "Rita Reader", ["graphicalEditor-viewer"])
    sign_in(page, username, password)
    expect(page).to_have_url(re.compile(r"/workflows$"))
    page.goto(f"/editor/{workflow_id}")
    expect(saved(page)).to_have_attribute("data-state", "readonly", timeout=60_000)
    node(page, "hook").click()
    page.locator("#tab-parameters").click()
    expect(page.locator("#webhook-live")).to_have_text("Live")
    expect(page.locator("#secret-state")).to_have_attribute("data-state", "set")
    expect(page.locator("#secret-generate")).to_have_count(0)
    expect(page.locator("#secret-replace")).to_have_count(0)
    expect(page.locator("#webhook-activate")).to_have_count(0)
    expect(page.locator("#webhook-example")).to_contain_text("webhook-signature: v1,<signature")
    expect(page.locator("#webhook-signature-note")).to_contain_text("only people who may change this workflow")
    assert curl_call(page.locator("#webhook-example").inner_text()).status_code == 401


def test_the_assignee_is_picked_from_the_instances_roles_and_users(page: Page, running_app: RunningApp):
    anna_id, anna, anna_password = add_member(running_app, "Anna Approver", ["graphicalEditor-user"])
    graph = {"nodes": [{"id": "start", "type": "trigger.manual", "position": {"x": 0, "y": 0}},
                       {"id": "ask", "type": "input.approval", "position": {"x": 300, "y": 0},
                        "parameters": {"title": "Pay?", "assignee": {"user": "0" * 32}}}],
             "edges": [{"source": "start", "target": "ask"}]}
    workflow_id, _name = new_workflow(running_app, "Assignee", graph)
    open_editor(page, workflow_id)
    select(page, "ask")
    field = page.locator("#field-assignee")
    expect(field.locator("#param-assignee")).to_contain_text("no longer exists")
    expect(field.locator("#assignee-problem")).to_contain_text("choose another assignee")
    assert "DESIGN" not in page.locator("#parameters-panel").inner_text()
    assert "§" not in page.locator("#parameters-panel").inner_text()

    headers, _instance = api(running_app)
    url = workflow_url(running_app, workflow_id)

    def stored() -> object:
        nodes = httpx.get(url, headers=headers).json()["graph"]["nodes"]
        return next(n for n in nodes if n["id"] == "ask")["parameters"].get("assignee")

    page.locator("#param-assignee").click()
    expect(page.get_by_role("group").filter(has_text="Roles")).to_contain_text("graphicalEditor-user")
    expect(page.get_by_role("group").filter(has_text="Users")).to_contain_text(f"Anna Approver ({anna})")
    page.get_by_role("option", name="graphicalEditor-admin", exact=True).click()
    expect(saved(page)).to_have_attribute("data-state", "saved")
    expect(field.locator("#assignee-problem")).to_have_count(0)
    assert stored() == {"role": "graphicalEditor-admin"}

    page.locator("#param-assignee").click()
    page.get_by_role("option", name=f"Anna Approver ({anna})").click()
    expect(page.locator("#param-assignee")).to_contain_text("Anna Approver")
    expect(saved(page)).to_have_attribute("data-state", "saved")
    assert stored() == {"user": anna_id}

    # The Inbox matches what was stored: the task of a test run is Anna's.
    page.locator("#test-run").click()
    expect(page.locator("#run-summary")).to_contain_text("waiting for a person")
    token = httpx.post(f"{running_app.api_url}/api/auth/login",
                       json={"username": anna, "password": anna_password}).json()["token"]
    tasks = httpx.get(f"{running_app.api_url}/api/tasks?status=pending",
                      headers={"Authorization": f"Bearer {token}"}).json()
    assert [t["title"] for t in tasks if t["assignee"] == {"user": anna_id}] == ["Pay?"]
