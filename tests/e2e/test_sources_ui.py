"""The UDB's "Sources" tab in real Chromium (issue 17): the Workspace browses an IMAP mailbox (pymap,
started with the app) from its connection to folders, mails and an attachment delivered for the
test, searches it, previews a mail as text and the attachment, and attaches the attachment to a
prompt — copied into the Workspace's files, its path goes to the agent (the scripted AI server
records the request) —; the Editor's Files tab picks an attachment into a node's path; a user who
holds no connection of their own sees none of another user's.
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Iterator
from email.message import EmailMessage

import httpx
import pytest
from playwright.sync_api import Page, expect
from sqlmodel import Session
from sqlmodel import select as sql_select

from backend.db.engine import make_engine
from backend.db.models import User
from backend.files import service
from backend.files.service import FileScope
from backend.rbac.access import AccessContext
from tests.ai_server import tiny_png
from tests.e2e.conftest import RunningApp
from tests.e2e.test_connections_ui import create_connection
from tests.e2e.test_editor_files_ui import parameters_of, stored_graph
from tests.e2e.test_editor_ui import api, new_workflow, open_editor, saved, select
from tests.e2e.test_workspace_ui import open_workspace, sign_in_as_workspace_viewer

pytestmark = pytest.mark.e2e


def deliver(running_app: RunningApp, subject: str, body: str, attachment: tuple[str, str, bytes]) -> None:
    """Put a mail from anna@example.com with one attachment into the test mailbox's INBOX."""
    message = EmailMessage()
    message["From"], message["To"], message["Subject"] = "anna@example.com", "demouser@example.com", subject
    message.set_content(body)
    name, mime, data = attachment
    maintype, subtype = mime.split("/")
    message.add_attachment(data, maintype=maintype, subtype=subtype, filename=name)
    running_app.imap.deliver(message.as_bytes())


@pytest.fixture
def mailbox(running_app: RunningApp) -> Iterator[tuple[str, str]]:
    """(tag, label) of an admin's IMAP connection to the test mailbox, deleted afterwards (the
    Files tab's tests expect the admin to hold none)."""
    tag = uuid.uuid4().hex[:6]
    label = f"Mailbox {tag}"
    connection_id = create_connection(running_app, label)
    yield tag, label
    httpx.delete(f"{running_app.api_url}/api/connections/{connection_id}", headers=api(running_app)[0])


def editor_store_has(running_app: RunningApp, instance_id: str, path: str, folder: str) -> bool:
    """Whether the Graphical Editor instance's own file store holds `path` in `folder` (as the admin sees it)."""
    engine = make_engine(f"sqlite:///{running_app.log.parent / 'e2e.db'}")
    try:
        with Session(engine) as session:
            admin = session.exec(sql_select(User).where(User.username == "admin")).one()
            access = AccessContext(session, admin)
            instance = access.require_instance(instance_id)
            scope = FileScope(session, admin, instance.mandate_id, instance.id, access)
            return any(f.path == path for f in service.list_files(scope, folder))
    finally:
        engine.dispose()


def entry(page: Page, name: str):
    return page.locator(".source-entry", has=page.locator(".source-entry-name",
                                                          has_text=re.compile(f"^{re.escape(name)}$")))


def open_mail(page: Page, label: str, subject: str) -> None:
    """From the list of connections to the mail's attachments."""
    page.locator(".source-connection", has_text=label).click()
    expect(page.locator("#source-top")).to_have_text(label)
    entry(page, "INBOX").locator(".source-entry-name").click()
    expect(page.locator(".source-crumb").last).to_have_text("INBOX")
    entry(page, subject).locator(".source-entry-name").click()
    expect(page.locator(".source-crumb").last).to_have_text(subject)


def test_the_workspace_browses_a_mailbox_previews_and_attaches_an_attachment(page: Page, running_app: RunningApp,
                                                                            mailbox: tuple[str, str]):
    tag, label = mailbox
    subject, report = f"Report {tag}", f"figures-{tag}.txt"
    deliver(running_app, subject, f"Hello,\nthe {tag} figures are attached.\n",
            (report, "text/plain", f"Revenue {tag}: 1200 CHF\n".encode()))
    open_workspace(page)
    page.locator("#udb-tab-sources").click()
    expect(page.locator(".source-connection", has_text=label)).to_be_visible()
    expect(page.locator("#sources-manage")).to_have_attribute("href", "/connections")

    # connection → folders → mails (newest first, sender and attachment count) → attachments
    page.locator(".source-connection", has_text=label).click()
    for folder in ("INBOX", "Sent", "Trash"):
        expect(entry(page, folder)).to_have_count(1)
    entry(page, "INBOX").locator(".source-entry-name").click()
    mail = entry(page, subject)
    expect(mail.locator(".source-entry-detail")).to_contain_text("📎 1 · anna@example.com")

    # The mail previewed as text.
    mail.locator(".source-preview-button").click()
    expect(page.locator("#source-preview-text")).to_contain_text(f"Subject: {subject}")
    expect(page.locator("#source-preview-text")).to_contain_text(f"the {tag} figures are attached")
    page.locator("#source-preview-close").click()
    expect(page.locator("#source-preview")).to_have_count(0)

    # Its attachment previewed, then attached from its row; the trail leads back.
    mail.locator(".source-entry-name").click()
    attachment = entry(page, report)
    expect(attachment).to_have_attribute("data-kind", "attachment")
    attachment.locator(".source-entry-name").click()
    expect(page.locator("#source-preview-text")).to_have_text(f"Revenue {tag}: 1200 CHF\n")
    page.locator("#source-preview-close").click()
    expect(page.locator("#source-preview")).to_have_count(0)
    attachment.locator(".source-attach").click()
    copied = f"/sources/{label}/INBOX/{report}"
    expect(page.locator("#sources-notice")).to_contain_text(f"Copied to {copied}")
    chips = page.locator(".attachment-chip")
    expect(chips).to_have_count(1)
    expect(chips).to_contain_text(copied)

    # Search within the connection (from the top: every folder).
    page.locator("#source-top").click()
    expect(entry(page, "INBOX")).to_have_count(1)
    page.locator("#source-search-input").fill(tag)
    page.locator("#source-search-input").press("Enter")
    expect(page.locator("#source-search-note")).to_contain_text(tag)
    expect(page.locator(".source-entry")).to_have_count(1)
    expect(entry(page, subject)).to_have_count(1)
    page.locator("#source-back").click()
    expect(page.locator(".source-connection", has_text=label)).to_be_visible()

    # The copy is a file of the Workspace; the prompt carries its path to the agent.
    ai = running_app.ai
    ai.clear()
    ai.reply("The figures show 1200 CHF.")
    page.locator("#chat-input").fill(f"What do the figures {tag} say?")
    page.locator("#chat-input").press("Enter")
    expect(page.locator(".assistant-message").last).to_have_text("The figures show 1200 CHF.")
    assert f"Attached files (read them with core_readFile): {copied}" in ai.last_chat.user_text
    expect(chips).to_have_count(0)
    page.locator("#udb-tab-files").click()
    page.locator(".folder-item", has_text="sources").click()
    page.locator(".folder-item", has_text=label).click()
    page.locator(".folder-item", has_text="INBOX").click()
    expect(page.locator(".file-name", has_text=report)).to_have_count(1)


def test_the_editor_picks_an_attachment_into_a_nodes_path(page: Page, running_app: RunningApp,
                                                          mailbox: tuple[str, str]):
    tag, label = mailbox
    subject, image = f"Receipt {tag}", f"receipt-{tag}.png"
    deliver(running_app, subject, "The receipt.\n", (image, "image/png", tiny_png()))
    graph = {"nodes": [{"id": "start", "type": "trigger.manual", "position": {"x": 0, "y": 0}},
                       {"id": "look", "type": "ai.describeImage", "parameters": {"prompt": "What is the total?"},
                        "position": {"x": 300, "y": 0}}],
             "edges": [{"source": "start", "target": "look"}]}
    workflow_id, _name = new_workflow(running_app, "Source picked", graph)
    open_editor(page, workflow_id)

    select(page, "look")
    page.locator("#tab-files").click()
    page.locator("#files-view-sources").click()
    expect(page.locator("#editor-files-hint")).to_contain_text("copied into this instance's files first")
    open_mail(page, label, subject)
    attachment = entry(page, image)
    expect(attachment.locator(".source-attach")).to_have_count(0)  # attaching is the Workspace's
    attachment.locator(".source-entry-name").click()
    expect(page.locator("#source-preview-image")).to_have_attribute("src", re.compile(r"^data:image/png;base64,"))
    page.locator("#source-preview-close").click()
    expect(page.locator("#source-preview")).to_have_count(0)

    attachment.locator(".use-source").click()
    expect(page.locator("#use-source-imageBase64")).to_have_count(0)  # only the fields taking a path
    page.locator("#use-source-path").click()
    copied = f"/sources/{label}/INBOX/{image}"
    expect(page.locator("#sources-notice")).to_contain_text(f"Copied to {copied}; it is now the node's path")
    expect(saved(page)).to_have_attribute("data-state", "saved")
    page.locator("#tab-parameters").click()
    expect(page.locator("#param-path")).to_have_value(copied)
    assert parameters_of(stored_graph(running_app, workflow_id), "look")["path"] == copied
    _headers, instance = api(running_app)
    assert editor_store_has(running_app, instance, copied, folder=f"/sources/{label}/INBOX")


def test_a_user_without_connections_sees_none_of_another_users(page: Page, running_app: RunningApp,
                                                                mailbox: tuple[str, str]):
    sign_in_as_workspace_viewer(page, running_app, "Nora Noconnection")
    page.locator("#udb-tab-sources").click()
    expect(page.locator("#sources-empty")).to_contain_text("No connections yet")
    expect(page.locator(".source-connection")).to_have_count(0)
