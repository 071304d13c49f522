"""Administration in the browser: mandates, users, instances, access, the "why" view, API tokens.

The main scenario sets up a mandate for a new user and then signs in as that user to check that
the UI shows exactly what the granted roles allow.
"""

from __future__ import annotations

import re

import httpx
from playwright.sync_api import Locator, Page, expect

from tests.e2e.conftest import ADMIN_PASSWORD
from tests.e2e.test_workflows_ui import pick, sign_in

pytestmark = __import__("pytest").mark.e2e

VERA_PASSWORD = "vera-secret-42"


def choose(page: Page, trigger: str, option: str) -> None:
    """Pick `option` in the Radix select whose trigger has the id `trigger`."""
    pick(page, page.locator(f"#{trigger}"), page.get_by_role("option", name=option, exact=True))
    expect(page.locator(f"#{trigger}")).to_have_text(option)


def tick(page: Page, checkbox: str, checked: bool = True) -> None:
    """Click a (server-controlled) checkbox and wait until it shows the new state."""
    box = page.locator(f"#{checkbox}")
    box.click()
    if checked:
        expect(box).to_be_checked()
    else:
        expect(box).not_to_be_checked()


def member_row(page: Page, username: str) -> Locator:
    return page.locator(f'.member-row[data-username="{username}"]')


def decision(page: Page, item: str) -> Locator:
    return page.locator(f'.decision-row[data-item="{item}"]')


def sign_out(page: Page) -> None:
    page.locator("#logout-button").click()
    expect(page).to_have_url(re.compile(r"/login$"))


def test_admin_sets_up_a_mandate_and_the_new_user_sees_only_what_she_was_given(page: Page):
    sign_in(page, "admin", ADMIN_PASSWORD)
    expect(page).to_have_url(re.compile(r"/workflows$"))
    page.locator("#nav-admin").click()
    expect(page).to_have_url(re.compile(r"/admin$"))

    # Mandates (system administrators only): create "Acme"; it becomes the selected mandate.
    page.locator("#tab-mandates").click()
    page.locator("#new-mandate-name").fill("Acme")
    page.locator("#create-mandate").click()
    expect(page.locator("#admin-notice")).to_contain_text("Created mandate 'Acme'")
    expect(page.locator("#mandate-select")).to_have_text("Acme")
    expect(page.locator(".mandate-name")).to_contain_text(["Acme", "Default"])

    # A duplicate name is refused with a message naming the problem.
    page.locator("#new-mandate-name").fill("Acme")
    page.locator("#create-mandate").click()
    expect(page.locator("#admin-error")).to_contain_text("already exists")

    # Users: vera with the mandate role "user".
    page.locator("#tab-users").click()
    page.locator("#new-username").fill("vera")
    page.locator("#new-password").fill("short")
    expect(page.locator("#new-role-user")).to_be_checked()
    expect(page.locator("#new-role-admin")).not_to_be_checked()
    page.locator("#create-user").click()
    expect(page.locator("#admin-error")).to_contain_text("password: must be at least 8 characters")
    page.locator("#new-password").fill(VERA_PASSWORD)
    page.locator("#create-user").click()
    expect(page.locator("#admin-notice")).to_contain_text("Created user 'vera'")
    expect(member_row(page, "vera").locator(".member-roles")).to_have_text("user")
    expect(member_row(page, "vera").locator(".member-status")).to_have_text("active")

    # Instances: a Graphical Editor instance "Acme Flows"; vera gets graphicalEditor-viewer there.
    page.locator("#tab-instances").click()
    choose(page, "new-instance-feature", "Graphical Editor")
    page.locator("#new-instance-label").fill("Acme Flows")
    page.locator("#create-instance").click()
    expect(page.locator("#admin-notice")).to_contain_text("Created Graphical Editor instance 'Acme Flows'")
    expect(page.locator(".instance-label")).to_have_text(["Acme Flows"])
    expect(page.locator("#access-heading")).to_have_text("Access to Acme Flows")
    expect(page.locator("#access-empty")).to_be_visible()
    choose(page, "grant-user", "vera")
    choose(page, "grant-role", "graphicalEditor-viewer")
    page.locator("#grant-access").click()
    expect(page.locator("#admin-notice")).to_contain_text("'vera' now has graphicalEditor-viewer")
    vera_access = page.locator('.access-row[data-username="vera"]')
    expect(vera_access.locator(".access-role-select")).to_have_text("graphicalEditor-viewer")

    # Permissions: why vera may not create workflows there, and what she may do with the data.
    page.locator("#tab-permissions").click()
    expect(page.locator("#explain-hint")).to_be_visible()
    choose(page, "explain-user", "vera")
    choose(page, "explain-instance", "Acme Flows (Graphical Editor)")
    create_button = decision(page, "ui.feature.graphicalEditor.workflows.create")
    expect(create_button.locator(".decision-context")).to_have_text("UI")
    expect(create_button.locator(".decision-view")).to_have_text("no")
    expect(create_button.locator(".decision-level")).to_have_text("instance")
    expect(create_button.locator(".decision-role")).to_have_text("graphicalEditor-viewer")
    expect(create_button.locator(".decision-rule")).to_have_text("ui.feature.graphicalEditor.workflows.create")
    expect(create_button.locator(".decision-explanation")).to_have_text(
        "decided at instance level by role 'graphicalEditor-viewer' rule "
        "'ui.feature.graphicalEditor.workflows.create'"
    )
    workflow_data = decision(page, "data.feature.graphicalEditor.workflow")
    expect(workflow_data.locator(".decision-context")).to_have_text("DATA")
    expect(workflow_data.locator(".decision-read")).to_have_text("all")
    for operation in ("create", "update", "delete"):
        expect(workflow_data.locator(f".decision-{operation}")).to_have_text("none")
    expect(workflow_data.locator(".decision-level")).to_have_text("instance")
    expect(workflow_data.locator(".decision-role")).to_have_text("graphicalEditor-viewer")
    # The filter narrows the table to matching items.
    page.locator("#explain-filter").fill("workflows.create")
    expect(page.locator(".decision-row")).to_have_count(1)

    # A workflow in Acme Flows, so that vera has something she could rename or delete.
    page.locator("#nav-workflows").click()
    expect(page).to_have_url(re.compile(r"/workflows$"))
    choose(page, "instance-select", "Acme Flows")
    page.locator("#new-workflow-name").fill("Acme invoices")
    page.locator("#create-workflow").click()
    expect(page.locator("#workflow-name")).to_have_text("Acme invoices", timeout=90_000)  # the editor opens it
    sign_out(page)

    # vera: only Acme Flows, read-only, no administration.
    sign_in(page, "vera", VERA_PASSWORD)
    expect(page).to_have_url(re.compile(r"/workflows$"))
    expect(page.locator("#current-user")).to_have_text("vera")
    expect(page.locator("#instance-label")).to_have_text("Acme Flows")
    expect(page.locator("#instance-select")).to_have_count(0)
    expect(page.locator(".workflow-name")).to_have_text(["Acme invoices"])
    expect(page.locator("#new-workflow-name")).to_have_count(0)
    expect(page.locator(".rename-button")).to_have_count(0)
    expect(page.locator(".delete-button")).to_have_count(0)
    expect(page.locator("#nav-workflows")).to_be_visible()
    expect(page.locator("#nav-api-tokens")).to_be_visible()
    expect(page.locator("#nav-admin")).to_have_count(0)
    expect(page.locator("#nav-workspace")).to_have_count(0)

    page.goto("/admin")
    expect(page.locator("#empty-state")).to_contain_text("No access")
    expect(page.locator("#mandate-select")).to_have_count(0)
    page.goto("/workspace")
    expect(page.locator("#empty-state")).to_contain_text("No access")
    sign_out(page)


def test_admin_manages_a_user_account(page: Page):
    sign_in(page, "admin", ADMIN_PASSWORD)
    expect(page).to_have_url(re.compile(r"/workflows$"))
    page.goto("/admin")
    choose(page, "mandate-select", "Default")
    page.locator("#tab-users").click()
    page.locator("#new-username").fill("walt")
    page.locator("#new-password").fill("walt-first-pass")
    tick(page, "new-role-viewer")
    tick(page, "new-role-user", checked=False)
    page.locator("#create-user").click()
    walt = member_row(page, "walt")
    expect(walt.locator(".member-roles")).to_have_text("viewer")

    # Change the mandate roles in the dialog.
    walt.locator(".roles-button").click()
    expect(page.locator("#edit-role-viewer")).to_be_checked()
    tick(page, "edit-role-user")
    page.locator("#save-roles").click()
    expect(walt.locator(".member-roles")).to_have_text("user, viewer")

    # Reset the password: too short is refused, then a valid one is set.
    walt.locator(".reset-button").click()
    page.locator("#reset-password-input").fill("abc")
    page.locator("#save-reset").click()
    expect(page.locator("#admin-error")).to_contain_text("password: must be at least 8 characters")
    page.locator("#reset-password-input").fill("walt-second-pass")
    page.locator("#save-reset").click()
    expect(page.locator("#admin-notice")).to_contain_text("New password set for 'walt'")

    # Disable: walt can no longer sign in; enable again.
    walt.locator(".disable-button").click()
    expect(walt.locator(".member-status")).to_have_text("disabled")
    sign_out(page)
    sign_in(page, "walt", "walt-second-pass")
    expect(page.locator("#login-error")).to_be_visible()
    sign_in(page, "admin", ADMIN_PASSWORD)
    expect(page).to_have_url(re.compile(r"/workflows$"))
    page.goto("/admin")
    choose(page, "mandate-select", "Default")
    page.locator("#tab-users").click()
    walt.locator(".enable-button").click()
    expect(walt.locator(".member-status")).to_have_text("active")

    # The administrator cannot remove the last admin (themselves as sysadmin is allowed, but
    # they are the mandate's only admin): the refusal names the reason.
    member_row(page, "admin").locator(".remove-button").click()
    page.locator("#confirm-remove").click()
    expect(page.locator("#admin-error")).to_contain_text("last admin")

    # Remove walt from the mandate.
    walt.locator(".remove-button").click()
    page.locator("#confirm-remove").click()
    expect(page.locator("#admin-notice")).to_contain_text("Removed 'walt'")
    expect(walt).to_have_count(0)


def test_api_token_created_in_the_ui_works_until_revoked(page: Page, running_app):
    sign_in(page, "admin", ADMIN_PASSWORD)
    expect(page).to_have_url(re.compile(r"/workflows$"))
    page.locator("#nav-api-tokens").click()
    expect(page).to_have_url(re.compile(r"/tokens$"))
    expect(page.locator("#page-title")).to_have_text("API tokens")

    page.locator("#new-token-name").fill("e2e script")
    page.locator("#create-token").click()
    expect(page.locator("#token-warning")).to_contain_text("shown only once")
    value = page.locator("#new-token-value")
    expect(value).not_to_have_value("")
    token = value.input_value()
    expect(page.locator('.token-row[data-name="e2e script"]')).to_be_visible()

    me = f"{running_app.api_url}/api/me"
    answer = httpx.get(me, headers={"Authorization": f"Bearer {token}"}, timeout=10)
    assert answer.status_code == 200, answer.text
    assert answer.json()["username"] == "admin"

    # The text is not shown again once the page is reloaded; the token stays listed.
    page.reload()
    expect(page.locator('.token-row[data-name="e2e script"]')).to_be_visible()
    expect(page.locator("#new-token-value")).to_have_count(0)

    page.locator('.token-row[data-name="e2e script"]').locator(".revoke-token-button").click()
    page.locator("#confirm-revoke-token").click()
    expect(page.locator("#tokens-notice")).to_contain_text("Revoked 'e2e script'")
    expect(page.locator('.token-row[data-name="e2e script"]')).to_have_count(0)

    answer = httpx.get(me, headers={"Authorization": f"Bearer {token}"}, timeout=10)
    assert answer.status_code == 401, answer.text
