"""The Connections page in real Chromium (issue 17): a person adds an IMAP mailbox through the form
generated from the type's settings — a wrong password is refused with the mail server's words under
the form and nothing is listed; the right one is tested and listed active —, tests, renames and
deletes it; another user never sees it until its admin owner shares it, and then sees it badged
as shared without the owner's buttons; the connection picker of an email.checkEmail node lists it;
the page's buttons fit the window at 1366×768 and 1920×1080 with the form open.

The mailbox is tests/mail_servers.py's pymap (and aiosmtpd), started with the app (conftest).
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Iterator

import httpx
import pytest
from playwright.sync_api import Page, expect

from tests.e2e.conftest import ADMIN_PASSWORD, RunningApp
from tests.e2e.test_editor_files_ui import parameters_of, stored_graph
from tests.e2e.test_editor_params_ui import add_member
from tests.e2e.test_editor_ui import api, new_workflow, open_editor, saved, select
from tests.e2e.test_viewport_walk import SIZES, page_problems
from tests.e2e.test_workflows_ui import sign_in

pytestmark = pytest.mark.e2e

URL = "/api/connections"
TYPE_LABEL = "E-mail (IMAP/SMTP)"


def create_connection(running_app: RunningApp, label: str, headers: dict | None = None) -> str:
    """A tested IMAP connection to the test mailbox, made over REST (as the admin by default)."""
    headers = headers or api(running_app)[0]
    created = httpx.post(f"{running_app.api_url}{URL}", headers=headers, timeout=60,
                         json={"type": "imap", "label": label, "settings": running_app.mail_settings()})
    assert created.status_code == 201, created.text
    return created.json()["id"]


def labels_of(running_app: RunningApp, headers: dict | None = None) -> list[str]:
    headers = headers or api(running_app)[0]
    return [c["label"] for c in httpx.get(f"{running_app.api_url}{URL}", headers=headers).json()]


@pytest.fixture
def tag(running_app: RunningApp) -> Iterator[str]:
    """A word for this test's connection labels; the admin's connections carrying it are deleted
    afterwards (the Workspace's Sources tests expect none)."""
    word = uuid.uuid4().hex[:6]
    yield word
    headers = api(running_app)[0]
    for connection in httpx.get(f"{running_app.api_url}{URL}", headers=headers).json():
        if word in connection["label"]:
            httpx.delete(f"{running_app.api_url}{URL}/{connection['id']}", headers=headers)


def open_connections(page: Page, username: str = "admin", password: str = ADMIN_PASSWORD) -> None:
    sign_in(page, username, password)
    expect(page).to_have_url(re.compile(r"/workflows$"))
    page.locator("#nav-connections").click()
    expect(page).to_have_url(re.compile(r"/connections$"))
    expect(page.locator("#page-title")).to_have_text("Connections")


def row(page: Page, label: str):
    return page.locator(f".connection-row[data-label='{label}']")


def fill_mail_form(page: Page, running_app: RunningApp, label: str, password: str) -> None:
    settings = running_app.mail_settings(password)
    page.locator("#connection-label").fill(label)
    for name in ("host", "port", "username", "smtpHost", "smtpPort"):
        page.locator(f"#setting-{name}").fill(str(settings[name]))
    page.locator("#setting-password").fill(password)
    page.locator("#setting-security").select_option("none")
    page.locator("#setting-smtpSecurity").select_option("none")


def test_a_mailbox_is_added_through_the_form_tested_renamed_and_deleted(page: Page, running_app: RunningApp,
                                                                       tag: str):
    label, renamed = f"Team mailbox {tag}", f"Support inbox {tag}"
    open_connections(page)
    card = page.locator(".connection-type[data-type='imap']")
    expect(card).to_contain_text(TYPE_LABEL)
    page.locator("#add-imap").click()
    form = page.locator("#connection-form")
    expect(form).to_contain_text(f"New {TYPE_LABEL} connection")
    # The schema's defaults and kinds: TLS on 993, security a choice, the password masked.
    expect(page.locator("#setting-port")).to_have_value("993")
    expect(page.locator("#setting-security")).to_have_value("ssl")
    expect(page.locator("#setting-smtpSecurity")).to_have_value("starttls")
    expect(page.locator("#setting-password")).to_have_attribute("type", "password")

    # A required field left empty is named under it; nothing is tried.
    page.locator("#connection-label").fill(label)
    page.locator("#connection-save").click()
    expect(page.locator("#setting-error-host")).to_have_text("Field required")
    expect(page.locator("#setting-error-username")).to_have_text("Field required")

    # The wrong password: the mail server's refusal under the form, nothing stored or listed.
    fill_mail_form(page, running_app, label, "not-the-password")
    page.locator("#connection-save").click()
    error = page.locator("#connection-form-error")
    expect(error).to_contain_text("refused the login of demouser")
    expect(error).not_to_contain_text("not-the-password")
    expect(page.locator("#setting-error-host")).to_have_count(0)
    expect(row(page, label)).to_have_count(0)
    assert label not in labels_of(running_app)

    # The right one: tested, stored and listed active with what the test found.
    page.locator("#setting-password").fill(running_app.imap.password)
    page.locator("#connection-save").click()
    expect(page.locator("#connections-notice")).to_contain_text(f"Connected '{label}'")
    expect(form).to_have_count(0)
    listed = row(page, label)
    expect(listed.locator(".connection-status")).to_have_attribute("data-status", "active")
    expect(listed.locator(".connection-type-badge")).to_have_text(TYPE_LABEL)
    expect(listed.locator(".connection-owner")).to_contain_text("owner: you")
    expect(listed.locator(".connection-tested")).to_contain_text("signed in to 127.0.0.1 as demouser")
    assert label in labels_of(running_app)
    expect(page.locator("body")).not_to_contain_text(running_app.imap.password)

    # Test: the result in its row.
    listed.locator(".test-connection").click()
    result = listed.locator(".connection-test-result")
    expect(result).to_have_attribute("data-ok", "true")
    expect(result).to_contain_text("Test passed: signed in to 127.0.0.1 as demouser")

    # Rename.
    listed.locator(".rename-connection").click()
    page.locator("#connection-rename-input").fill(renamed)
    page.locator("#connection-rename-save").click()
    expect(row(page, renamed)).to_have_count(1)
    expect(row(page, label)).to_have_count(0)
    assert renamed in labels_of(running_app)

    # Delete, after the question.
    row(page, renamed).locator(".delete-connection").click()
    page.locator("#confirm-delete-connection").click()
    expect(page.locator("#connections-notice")).to_contain_text(f"Deleted '{renamed}'")
    expect(row(page, renamed)).to_have_count(0)
    assert renamed not in labels_of(running_app)


def test_another_user_sees_a_connection_only_while_it_is_shared(browser, page: Page, running_app: RunningApp,
                                                                 tag: str):
    label = f"Team mailbox {tag}"
    _user, username, password = add_member(running_app, f"Mia Member {tag}", ["graphicalEditor-user"])
    create_connection(running_app, label)

    member = browser.new_context(base_url=running_app.ui_url).new_page()
    try:
        open_connections(member, username, password)
        expect(member.locator("#empty-state")).to_contain_text("No connections yet")
        expect(row(member, label)).to_have_count(0)

        # Its owner, an admin of the mandate, shares it.
        open_connections(page)
        row(page, label).locator(".share-connection").click()
        expect(page.locator("#connections-notice")).to_contain_text(f"'{label}' is now shared with its mandate")
        expect(row(page, label).locator(".shared-badge")).to_be_visible()
        expect(row(page, label).locator(".share-connection")).to_have_text("Stop sharing")

        member.reload()
        shared = row(member, label)
        expect(shared.locator(".shared-badge")).to_be_visible()
        expect(shared.locator(".connection-owner")).not_to_contain_text("owner: you")
        for owners_only in (".rename-connection", ".share-connection", ".delete-connection"):
            expect(shared.locator(owners_only)).to_have_count(0)
        shared.locator(".test-connection").click()  # using it is everyone's who sees it
        expect(shared.locator(".connection-test-result")).to_have_attribute("data-ok", "true")

        # Stopped sharing: gone for the member.
        row(page, label).locator(".share-connection").click()
        expect(row(page, label).locator(".shared-badge")).to_have_count(0)
        member.reload()
        expect(member.locator("#empty-state")).to_contain_text("No connections yet")
        expect(row(member, label)).to_have_count(0)
    finally:
        member.context.close()


def test_the_picker_of_an_email_node_lists_the_users_mail_connections(page: Page, running_app: RunningApp, tag: str):
    label = f"Orders inbox {tag}"
    connection_id = create_connection(running_app, label)
    graph = {"nodes": [{"id": "start", "type": "trigger.manual", "position": {"x": 0, "y": 0}},
                       {"id": "wait", "type": "email.checkEmail", "parameters": {"folder": "INBOX"},
                        "position": {"x": 300, "y": 0}},
                       {"id": "gone", "type": "email.checkEmail",
                        "parameters": {"connectionId": "0123456789abcdef0123456789abcdef", "folder": "INBOX"},
                        "position": {"x": 300, "y": 200}}],
             "edges": [{"source": "start", "target": "wait"}, {"source": "start", "target": "gone"}]}
    workflow_id, _name = new_workflow(running_app, "Mail picked", graph)
    open_editor(page, workflow_id)

    select(page, "wait")
    picker = page.locator("#param-connectionId")
    expect(picker).to_contain_text("Choose a connection")
    expect(page.locator("#manage-connections")).to_have_attribute("href", "/connections")
    picker.click()
    option = page.locator(".connection-option", has_text=label)
    expect(option).to_have_text(f"{label} · {TYPE_LABEL} · active")
    option.click()
    expect(picker).to_contain_text(label)
    expect(saved(page)).to_have_attribute("data-state", "saved")
    assert parameters_of(stored_graph(running_app, workflow_id), "wait")["connectionId"] == connection_id

    # An id the user may not use (deleted, another user's) shows as such.
    select(page, "gone")
    expect(page.locator("#param-connectionId")).to_contain_text("Unknown connection 0123456789abcdef")
    expect(page.locator("#connection-problem")).to_contain_text("is not one you may use")


def test_the_page_fits_the_window_with_a_connection_and_the_form_open(page: Page, running_app: RunningApp, tag: str):
    create_connection(running_app, f"A mailbox with a rather long label to see it wrap {tag}")
    open_connections(page)
    page.locator("#add-imap").click()
    expect(page.locator("#connection-form")).to_be_visible()
    checked: list[str] = []
    problems = []
    for size in SIZES:
        page.set_viewport_size(size)
        problems += [f"{size['width']}×{size['height']} {p}" for p in page_problems(page, "/connections", checked)]
    assert any("#connection-save" in label for label in checked)
    assert any("Test" in label for label in checked)
    assert not problems, "\n".join(problems)


def test_microsoft_365_is_connected_through_the_consent_and_its_files_are_browsed(page: Page,
                                                                                  running_app: RunningApp, tag: str):
    graph = running_app.graph
    graph.reset()
    finance = graph.add_site("Finance")
    documents = graph.add_library(finance, "Documents", "Shared Documents")
    graph.add_file(documents, f"readme-{tag}.txt", f"Finance team space {tag}".encode(), "text/plain")
    label = f"Contoso {tag}"
    open_connections(page)
    card = page.locator(".connection-type[data-type='msft']")
    expect(card).to_contain_text("Microsoft 365")
    expect(card.locator(".type-unavailable")).to_have_count(0)

    # Cancelled at the provider: back on the page with its reason, nothing connected.
    page.locator("#connect-msft").click()
    expect(page.get_by_role("heading", name="Permissions requested")).to_be_visible()
    page.get_by_role("button", name="Cancel").click()
    expect(page).to_have_url(re.compile(r"/connections\?error="))
    expect(page.locator("#connections-result-error")).to_contain_text("The connection was not made")
    expect(page.locator(".connection-row[data-label*='Microsoft 365']")).to_have_count(0)

    # Accepted: back with an active connection under the label typed.
    page.locator("#oauth-label-msft").fill(label)
    page.locator("#connect-msft").click()
    expect(page.get_by_role("heading", name="Permissions requested")).to_be_visible()
    page.get_by_role("button", name="Accept").click()
    expect(page).to_have_url(re.compile(r"/connections\?connected="))
    expect(page.locator("#connections-result")).to_have_text(f"Connected '{label}' (Microsoft 365).")
    connected = row(page, label)
    expect(connected.locator(".connection-status")).to_have_attribute("data-status", "active")
    expect(connected.locator(".connection-type-badge")).to_have_text("Microsoft 365")
    assert len(graph.consents) == 1  # the accepted one (the stand-in records no refusal)

    # Microsoft no longer renews its tokens: the test marks it expired, its owner reconnects it.
    graph.expire_access_tokens()
    graph.revoke_refresh_tokens()
    connected.locator(".test-connection").click()
    expect(connected.locator(".connection-status")).to_have_attribute("data-status", "expired")
    expect(connected.locator(".connection-test-result")).to_have_attribute("data-ok", "false")
    connected.locator(".reconnect-connection").click()
    page.get_by_role("button", name="Accept").click()
    expect(page).to_have_url(re.compile(r"/connections\?connected="))
    expect(connected.locator(".connection-status")).to_have_attribute("data-status", "active")
    expect(page.locator(".connection-row", has_text="Microsoft 365")).to_have_count(1)  # renewed, not added

    # Its SharePoint files in the Workspace's Sources tab.
    page.locator("#nav-workspace").click()
    expect(page).to_have_url(re.compile(r"/workspace$"), timeout=30_000)
    page.locator("#udb-tab-sources").click()
    page.locator(".source-connection", has_text=label).click()
    for step in ("Files", "Finance", "Documents", f"readme-{tag}.txt"):
        page.locator(".source-entry-name", has_text=re.compile(f"^{re.escape(step)}$")).click()
    expect(page.locator("#source-preview-text")).to_have_text(f"Finance team space {tag}")
