# ruff: noqa: F811 - the fixtures of test_msft_oauth are imported by name, and tests take them as arguments
"""The Sources door over a Microsoft 365 connection (issue 17), against the identity platform +
Graph stand-in (tests/msgraph_server.py): a connection offering mail and files opens to "Mail" and
"Files"; SharePoint is browsed sites → libraries → folders → files, a PDF previewed with its pages
and text and copied into the Workspace's files; an Outlook mail's attachment is copied too.
"""

from __future__ import annotations

from sqlmodel import select

from backend.connectors.sources import Sources
from backend.db import session_scope
from backend.db.models import User
from backend.rbac.access import AccessContext
from tests.integration.test_msft_oauth import _stand_in, admin, graph  # noqa: F401 - fixtures
from tests.integration.test_msft_sharepoint import pdf
from tests.integration.test_sources import by_name, stored, workspace_id


def as_admin(work):
    with session_scope() as session:
        user = session.exec(select(User).where(User.username == "admin")).one()
        return work(Sources(AccessContext(session, user)))


def test_sharepoint_is_browsed_from_sites_to_files_previewed_and_copied(graph, admin):
    finance = graph.add_site("Finance")
    documents = graph.add_library(finance, "Documents", "Shared Documents")
    graph.add_file(documents, "Reports/budget-2025.pdf", pdf("Budget 2025: total 1.2 million CHF"), "application/pdf")
    graph.add_file(documents, "readme.txt", b"Finance team space", "text/plain")
    connection = admin.connect(label="Contoso")
    instance = workspace_id()

    def walk(door: Sources):
        [listed] = door.connections()
        assert (listed.label, listed.offers) == ("Contoso", ("files", "mail"))
        top = door.browse(connection)
        assert [(e.name, e.kind) for e in top] == [("Mail", "area"), ("Files", "area")]
        sites = door.browse(connection, by_name(top, "Files").location)
        site = by_name(sites, "Finance")
        library = by_name(door.browse(connection, site.location), "Documents")
        entries = door.browse(connection, library.location)
        assert [(e.name, e.container) for e in entries] == [("Reports", True), ("readme.txt", False)]
        report = by_name(door.browse(connection, by_name(entries, "Reports").location), "budget-2025.pdf")
        shown = door.preview(connection, report.location)
        assert (shown.kind, shown.note) == ("pdf", "PDF, 1 page")
        assert "Budget 2025: total 1.2 million CHF" in shown.text
        assert [e.name for e in door.search(connection, "budget", library.location)] == ["budget-2025.pdf"]
        return door.copy_to_files(connection, report.location, instance)

    copied = as_admin(walk)
    assert copied.path == "/sources/Contoso/budget-2025.pdf"
    assert stored(instance, copied.path).startswith(b"%PDF")


def test_an_outlook_attachment_is_copied_into_the_workspace(graph, admin):
    graph.add_mail(subject="Invoice 42", body="See the attachment.",
                   attachments=[("invoice.txt", "text/plain", b"Invoice 42: CHF 1,234.50")])
    connection = admin.connect(label="Contoso")
    instance = workspace_id()

    def walk(door: Sources):
        mail_area = by_name(door.browse(connection), "Mail")
        inbox = by_name(door.browse(connection, mail_area.location), "Inbox")
        mail = by_name(door.browse(connection, inbox.location), "Invoice 42")
        assert "Bob Sender" in mail.detail or "bob@fabrikam.example" in mail.detail
        assert "See the attachment." in door.preview(connection, mail.location).text
        attachment = by_name(door.browse(connection, mail.location), "invoice.txt")
        return door.copy_to_files(connection, attachment.location, instance)

    copied = as_admin(walk)
    assert copied.path == "/sources/Contoso/Inbox/invoice.txt"
    assert stored(instance, copied.path) == b"Invoice 42: CHF 1,234.50"
