"""A person signs in, manages workflows in the browser and signs out."""

from __future__ import annotations

import re

from playwright.sync_api import Locator, Page, expect
from playwright.sync_api import TimeoutError as PlaywrightTimeout

from tests.e2e.conftest import ADMIN_PASSWORD

pytestmark = __import__("pytest").mark.e2e


def sign_in(page: Page, username: str, password: str) -> None:
    page.goto("/login")
    page.locator("#login-username").fill(username)
    page.locator("#login-password").fill(password)
    page.locator("#login-submit").click()


def pick(page: Page, trigger: Locator, option: Locator, attempts: int = 3) -> None:
    """Open the Radix select `trigger` and click `option` in its list.

    A select whose items arrive with the page's state is rendered anew when they do, which closes an
    open list under the pointer (the option is "detached"); the list is then opened again.
    """
    for _ in range(attempts - 1):
        trigger.click()
        try:
            option.click(timeout=5_000)
            return
        except PlaywrightTimeout:
            page.keyboard.press("Escape")
    trigger.click()
    option.click()


def open_instance(page: Page, label: str) -> None:
    """Show the workflows of the Graphical Editor instance `label` (other tests may add instances)."""
    expect(page.locator("#instance-select, #instance-label").first).to_be_visible()
    if page.locator("#instance-select").count():
        pick(page, page.locator("#instance-select"), page.get_by_role("option", name=label, exact=True))
        expect(page.locator("#instance-select")).to_have_text(label)
    else:
        expect(page.locator("#instance-label")).to_have_text(label)


def workflow_names(page: Page, containing: str = ""):
    """The names in the list (those containing `containing`: other tests add workflows too)."""
    names = page.locator(".workflow-name")
    return names.filter(has_text=containing) if containing else names


def test_wrong_password_shows_the_generic_message(page: Page):
    sign_in(page, "admin", "wrong-password")
    expect(page.locator("#login-error")).to_have_text("Unknown user or wrong password.")
    expect(page).to_have_url(re.compile(r"/login$"))


def test_protected_pages_send_strangers_to_login(page: Page):
    for path in ("/", "/workflows", "/admin"):
        page.goto(path)
        expect(page).to_have_url(re.compile(r"/login$"))
        expect(page.locator("#login-username")).to_be_visible()


def test_sign_in_create_rename_delete_and_sign_out(page: Page):
    sign_in(page, "admin", ADMIN_PASSWORD)
    expect(page).to_have_url(re.compile(r"/workflows$"))
    expect(page.locator("#page-title")).to_have_text("Workflows")
    expect(page.locator("#current-user")).to_have_text("System administrator")
    open_instance(page, "Graphical Editor")

    page.locator("#new-workflow-name").fill("Invoice approval")
    page.locator("#create-workflow").click()
    # A new workflow opens in the editor (the URL changes once the page is loaded: the first visit compiles it).
    expect(page).to_have_url(re.compile(r"/editor/\w+$"), timeout=90_000)
    expect(page.locator("#workflow-name")).to_have_text("Invoice approval")
    page.locator("#nav-workflows").click()
    open_instance(page, "Graphical Editor")
    expect(workflow_names(page, "Invoice approval")).to_have_text(["Invoice approval"])

    # The same name again is refused with a clear message and nothing new is listed.
    page.locator("#new-workflow-name").fill("Invoice approval")
    page.locator("#create-workflow").click()
    expect(page.locator("#workflows-error")).to_contain_text("already exists")
    expect(workflow_names(page, "Invoice approval")).to_have_count(1)

    row = page.locator(".workflow-row", has_text="Invoice approval")
    row.locator(".rename-button").click()
    page.locator("#rename-input").fill("Invoice approval (CHF)")
    page.locator("#rename-save").click()
    expect(workflow_names(page, "Invoice approval")).to_have_text(["Invoice approval (CHF)"])

    # The list survives a reload: it comes from the database, not from the page.
    page.reload()
    expect(workflow_names(page, "Invoice approval")).to_have_text(["Invoice approval (CHF)"])

    page.locator(".workflow-row", has_text="Invoice approval (CHF)").locator(".delete-button").click()
    page.locator("#confirm-delete").click()
    expect(workflow_names(page, "Invoice approval")).to_have_count(0)
    expect(page.locator("#workflows-notice")).to_contain_text("Deleted 'Invoice approval (CHF)'")

    page.locator("#logout-button").click()
    expect(page).to_have_url(re.compile(r"/login$"))
    page.goto("/workflows")
    expect(page).to_have_url(re.compile(r"/login$"))


def test_every_navigation_entry_opens_its_page(page: Page):
    sign_in(page, "admin", ADMIN_PASSWORD)
    expect(page).to_have_url(re.compile(r"/workflows$"))
    pages = (("monitor", "Monitor", "#monitor-range"), ("inbox", "Inbox", "#tab-pending"),
             ("workspace", "Workspace", "#chat-input"), ("workflows", "Workflows", "#workflow-table, #empty-state"))
    for nav, title, content in pages:
        page.locator(f"#nav-{nav}").click()
        expect(page.locator("#page-title")).to_have_text(title)
        expect(page.locator(content)).to_be_visible()
    page.locator("#nav-editor").click()  # the workflow changed last, else the Workflows page
    expect(page).to_have_url(re.compile(r"/(editor/\w+|workflows)$"))