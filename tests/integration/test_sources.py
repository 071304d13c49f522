"""The Sources door (issue 17, UDB "Sources"): a user browses the connections they may use — an IMAP
mailbox on a real server (pymap: folders → mails → attachments) and a files connection (sites →
drives → folders → files) —, searches, previews, and copies an item into the file store of an
instance they may write to, under /sources/<connection>/…, with the store's rights and limits.
Other users' connections are not found; an inactive connection says why; bad locations are named.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime
from email.message import EmailMessage

import pytest
from pydantic import BaseModel
from sqlmodel import select

from backend.config import reset_settings_cache
from backend.connectors import types
from backend.connectors.access import FileAccess, SourceItem
from backend.connectors.interface import Connections
from backend.connectors.sources import SourceFailed, Sources, encode_location, node_connection_types, safe_name
from backend.connectors.types import ConnectionFailed, ConnectionType
from backend.db import session_scope
from backend.db.models import Connection, FeatureInstance, Mandate, StoredFile, User
from backend.errors import Forbidden, InvalidInput, NotFound
from backend.files.service import FileStore, FileTooLarge
from backend.rbac.access import AccessContext
from backend.tenancy import grant_instance_roles, grant_mandate_roles
from tests.ai_server import tiny_png
from tests.mail_servers import imap_server, smtp_server

TAG = "quokka7"
REPORT = b"Quarterly figures: revenue up 12 percent.\n"


def invoice_mail(subject: str = f"Invoice {TAG}", attachment: bytes = REPORT, name: str = "report.txt") -> bytes:
    message = EmailMessage()
    message["From"], message["To"], message["Subject"] = "anna@example.com", "demouser@example.com", subject
    message.set_content(f"Hello,\nthe {TAG} report is attached.\n")
    message.add_attachment(attachment, maintype="text", subtype="plain", filename=name)
    return message.as_bytes()


@pytest.fixture
def mailbox(api) -> Iterator[str]:
    """A tested IMAP connection of the admin ("Team mailbox") whose INBOX holds an invoice mail."""
    with imap_server() as imap, smtp_server() as smtp:
        imap.deliver(invoice_mail())
        settings = {"host": imap.host, "port": imap.port, "security": "none", "username": imap.username,
                    "password": imap.password, "smtpHost": smtp.host, "smtpPort": smtp.port, "smtpSecurity": "none"}
        created = api.client.post("/api/connections", json={"type": "imap", "label": "Team mailbox",
                                                             "settings": settings}, headers=api.auth)
        assert created.status_code == 201, created.text
        yield created.json()["id"]


def as_user(username: str, work):
    with session_scope() as session:
        user = session.exec(select(User).where(User.username == username)).one()
        return work(Sources(AccessContext(session, user)), session, user)


def workspace_id() -> str:
    with session_scope() as session:
        return session.exec(select(FeatureInstance).where(FeatureInstance.feature_code == "workspace")).first().id


def stored(instance_id: str, path: str) -> bytes:
    with session_scope() as session:
        admin = session.exec(select(User).where(User.username == "admin")).one()
        return FileStore.of(AccessContext(session, admin), instance_id).read_bytes(path)[1]


def stored_count() -> int:
    with session_scope() as session:
        return len(session.exec(select(StoredFile)).all())


def by_name(entries, name):
    return next(e for e in entries if e.name == name)


# --- mail -----------------------------------------------------------------------------------------


def test_a_mailbox_is_browsed_from_folders_to_mails_to_attachments_and_previewed(api, mailbox):
    def walk(door: Sources, _session, _user):
        listed = door.connections()
        assert [(c.id, c.label, c.offers, c.usable) for c in listed] == [(mailbox, "Team mailbox", ("mail",), True)]
        folders = door.browse(mailbox)
        assert {"INBOX", "Sent", "Trash"} <= {f.name for f in folders}
        inbox = by_name(folders, "INBOX")
        assert inbox.container and not inbox.copyable
        mails = door.browse(mailbox, inbox.location)
        mail = by_name(mails, f"Invoice {TAG}")
        assert mail.container and mail.previewable and mail.copyable
        assert mail.detail.startswith("📎 1 · anna@example.com · ")
        attachments = door.browse(mailbox, mail.location)
        assert [(a.name, a.kind, a.container, a.copyable) for a in attachments] == \
            [("report.txt", "attachment", False, True)]
        shown = door.preview(mailbox, mail.location)
        assert (shown.kind, shown.title) == ("mail", f"Invoice {TAG}")
        assert "From: anna@example.com" in shown.text and f"the {TAG} report is attached" in shown.text
        assert "Attachments: report.txt" in shown.text
        report = door.preview(mailbox, attachments[0].location)
        assert (report.kind, report.text) == ("text", REPORT.decode())

    as_user("admin", walk)


def test_search_finds_a_mail_by_a_word_of_its_body_in_every_folder_or_the_open_one(api, mailbox):
    def search(door: Sources, _session, _user):
        everywhere = door.search(mailbox, TAG)
        assert [e.name for e in everywhere] == [f"Invoice {TAG}"]
        inbox = by_name(door.browse(mailbox), "INBOX")
        assert [e.name for e in door.search(mailbox, TAG, inbox.location)] == [f"Invoice {TAG}"]
        trash = by_name(door.browse(mailbox), "Trash")
        assert door.search(mailbox, TAG, trash.location) == []
        with pytest.raises(InvalidInput, match="query"):
            door.search(mailbox, "  ")

    as_user("admin", search)


def test_an_attachment_and_a_mail_are_copied_into_the_instance_once(api, mailbox):
    instance = workspace_id()

    def copy(door: Sources, _session, _user):
        inbox = by_name(door.browse(mailbox), "INBOX")
        mail = by_name(door.browse(mailbox, inbox.location), f"Invoice {TAG}")
        attachment = door.browse(mailbox, mail.location)[0]
        first = door.copy_to_files(mailbox, attachment.location, instance)
        again = door.copy_to_files(mailbox, attachment.location, instance)
        as_text = door.copy_to_files(mailbox, mail.location, instance)
        return first, again, as_text

    first, again, as_text = as_user("admin", copy)
    assert first.path == "/sources/Team mailbox/INBOX/report.txt"
    assert again.path == first.path and again.id == first.id  # the same content is not copied twice
    assert stored(instance, first.path) == REPORT
    assert as_text.path == f"/sources/Team mailbox/INBOX/Invoice {TAG}.txt"
    text = stored(instance, as_text.path).decode()
    assert text.startswith("From: anna@example.com") and f"the {TAG} report is attached" in text


def test_another_file_of_the_same_name_gets_a_number(api):
    with imap_server() as imap:
        imap.deliver(invoice_mail("First", b"one\n"))
        imap.deliver(invoice_mail("Second", b"two\n"))
        settings = {"host": imap.host, "port": imap.port, "security": "none", "username": imap.username,
                    "password": imap.password}
        connection = api.client.post("/api/connections", json={"type": "imap", "label": "Box/Two",
                                                                "settings": settings}, headers=api.auth).json()["id"]
        instance = workspace_id()

        def copy_both(door: Sources, _session, _user):
            inbox = by_name(door.browse(connection), "INBOX")
            mails = door.browse(connection, inbox.location)
            return [door.copy_to_files(connection, door.browse(connection, by_name(mails, s).location)[0].location,
                                       instance).path for s in ("First", "Second")]

        paths = as_user("admin", copy_both)
    assert paths == ["/sources/Box-Two/INBOX/report.txt", "/sources/Box-Two/INBOX/report (2).txt"]
    assert stored(instance, paths[1]) == b"two\n"


def test_copying_keeps_the_file_stores_rights_and_limits(api, mailbox, monkeypatch):
    instance = workspace_id()
    with session_scope() as session:
        admin = session.exec(select(User).where(User.username == "admin")).one()
        row = session.get(FeatureInstance, instance)
        viewer = User(username="vera", display_name="Vera")
        session.add(viewer)
        session.flush()
        grant_mandate_roles(session, viewer, session.get(Mandate, row.mandate_id), ["user"])
        grant_instance_roles(session, viewer, row, ["workspace-viewer"])
        # The admin shares the mailbox with the mandate: Vera may browse it but not write files here.
        Connections(AccessContext(session, admin)).share(mailbox, True)
    before = stored_count()

    def as_viewer(door: Sources, _session, _user):
        inbox = by_name(door.browse(mailbox), "INBOX")
        mail = by_name(door.browse(mailbox, inbox.location), f"Invoice {TAG}")
        with pytest.raises(Forbidden, match="create"):
            door.copy_to_files(mailbox, mail.location, instance)

    as_user("vera", as_viewer)
    assert stored_count() == before

    monkeypatch.setenv("POWERON_FILE_MAX_BYTES", "20")
    reset_settings_cache()

    def too_large(door: Sources, _session, _user):
        inbox = by_name(door.browse(mailbox), "INBOX")
        mail = by_name(door.browse(mailbox, inbox.location), f"Invoice {TAG}")
        with pytest.raises((FileTooLarge, InvalidInput), match="POWERON_FILE_MAX_BYTES"):
            door.copy_to_files(mailbox, door.browse(mailbox, mail.location)[0].location, instance)

    as_user("admin", too_large)
    monkeypatch.undo()
    reset_settings_cache()
    assert stored_count() == before


def test_others_do_not_find_a_connection_and_an_inactive_one_says_why(api, mailbox):
    with session_scope() as session:
        mandate = session.get(Mandate, session.get(FeatureInstance, workspace_id()).mandate_id)
        bert = User(username="bert", display_name="Bert")
        session.add(bert)
        session.flush()
        grant_mandate_roles(session, bert, mandate, ["user"])

    def as_bert(door: Sources, _session, _user):
        assert door.connections() == []
        for call in (lambda: door.browse(mailbox), lambda: door.search(mailbox, TAG),
                     lambda: door.preview(mailbox, encode_location("mail", "message", "INBOX", "INBOX", "1:1:INBOX")),
                     lambda: door.copy_to_files(mailbox, encode_location("mail", "message", "INBOX", "INBOX",
                                                                         "1:1:INBOX"),
                                                workspace_id())):
            with pytest.raises(NotFound):
                call()

    as_user("bert", as_bert)
    before = stored_count()

    with session_scope() as session:
        session.get(Connection, mailbox).status = "error"
        session.get(Connection, mailbox).last_error = "the server moved"

    def inactive(door: Sources, _session, _user):
        assert [c.usable for c in door.connections()] == [False]
        with pytest.raises(SourceFailed, match="is error: the server moved — reconnect or test it"):
            door.browse(mailbox)

    as_user("admin", inactive)
    assert stored_count() == before


def test_a_location_that_was_not_handed_out_is_refused_naming_it(api, mailbox):
    def bad(door: Sources, _session, _user):
        for location in ("not json", '["elsewhere","root"]', '["mail"]', '["mail","folder"]',
                         '["mail","attachment","INBOX","INBOX"]', '[1,2]'):
            with pytest.raises(InvalidInput, match="location"):
                door.browse(mailbox, location) if "attachment" not in location else \
                    door.preview(mailbox, location)
        folder = by_name(door.browse(mailbox), "INBOX")
        with pytest.raises(InvalidInput, match="names a folder"):
            door.copy_to_files(mailbox, folder.location, workspace_id())

    as_user("admin", bad)


# --- files ----------------------------------------------------------------------------------------


class NoSettings(BaseModel):
    pass


MODIFIED = datetime(2024, 5, 2, 9, 14, tzinfo=UTC)
TREE = {
    None: [SourceItem("site-1", "Finance", "site", True, path="/sites/Finance")],
    "site-1": [SourceItem("drive-1", "Documents", "drive", True, path="/sites/Finance/Documents")],
    "drive-1": [SourceItem("file-2", "zeta.txt", "file", False, size=4, mime_type="text/plain", modified=MODIFIED),
                SourceItem("folder-1", "Reports", "folder", True, path="/Documents/Reports"),
                SourceItem("file-1", "logo.png", "file", False, size=80, mime_type="image/png", modified=MODIFIED)],
    "folder-1": [],
}
CONTENT = {"file-1": ("logo.png", "image/png", tiny_png()), "file-2": ("zeta.txt", "text/plain", b"zeta")}


class MemoryFiles(FileAccess):
    """A files connection for the tests: a fixed tree of sites, drives, folders and files."""

    def browse(self, container_id=None):
        if container_id not in TREE:
            raise ConnectionFailed(f"folder {container_id} does not exist")
        return TREE[container_id]

    def search(self, query, container_id=None, limit=25):
        return [i for items in TREE.values() for i in items if not i.container and query in i.name][:limit]

    def download(self, item_id):
        return CONTENT[item_id]

    def upload(self, container_id, name, content, mime_type, overwrite=False):
        raise ConnectionFailed("read only")


@pytest.fixture
def files_connection(api) -> Iterator[str]:
    kind = ConnectionType(id="test-files", label="Test files", description="Files for the tests.", auth="password",
                          check=lambda _credentials: "ok", settings_model=NoSettings,
                          files=lambda _credentials: MemoryFiles())
    types.connection_types()
    types.register_connection_type(kind)
    try:
        created = api.client.post("/api/connections", json={"type": "test-files", "label": "Finance files",
                                                             "settings": {}}, headers=api.auth)
        assert created.status_code == 201, created.text
        yield created.json()["id"]
    finally:
        types._TYPES.pop(kind.id, None)  # noqa: SLF001 - the registry has no removal: only tests add types


def test_files_are_browsed_from_sites_to_drives_to_folders_previewed_and_copied(api, files_connection):
    instance = workspace_id()

    def walk(door: Sources, _session, _user):
        sites = door.browse(files_connection)
        assert [(s.name, s.kind, s.container) for s in sites] == [("Finance", "site", True)]
        drives = door.browse(files_connection, sites[0].location)
        assert [d.name for d in drives] == ["Documents"]
        entries = door.browse(files_connection, drives[0].location)
        assert [(e.name, e.container) for e in entries] == [("Reports", True), ("logo.png", False),
                                                            ("zeta.txt", False)]  # folders first, then by name
        assert by_name(entries, "zeta.txt").detail == "4 bytes · text/plain · 2024-05-02 09:14"
        assert door.browse(files_connection, by_name(entries, "Reports").location) == []
        image = door.preview(files_connection, by_name(entries, "logo.png").location)
        assert (image.kind, image.mime_type, image.data) == ("image", "image/png", tiny_png())
        assert [e.name for e in door.search(files_connection, "zeta")] == ["zeta.txt"]
        return door.copy_to_files(files_connection, by_name(entries, "zeta.txt").location, instance)

    copied = as_user("admin", walk)
    assert copied.path == "/sources/Finance files/zeta.txt"
    assert stored(instance, copied.path) == b"zeta"


def test_a_failure_of_the_outside_system_is_said_in_words(api, files_connection):
    def missing(door: Sources, _session, _user):
        with pytest.raises(SourceFailed, match="folder gone does not exist"):
            door.browse(files_connection, encode_location("files", "container", "gone"))

    as_user("admin", missing)


# --- which connections a node takes ------------------------------------------------------------------


def test_a_node_takes_the_connections_of_its_type():
    assert node_connection_types("email.checkEmail") == tuple(t.id for t in types.connection_types()
                                                              if "mail" in t.offers)
    assert "imap" in node_connection_types("email.checkEmail")
    assert node_connection_types("core.readFile") is None  # no connectionId
    assert node_connection_types("flow.wait") is None
    assert node_connection_types("no.suchType") is None


def test_names_from_outside_become_file_names():
    assert safe_name("Q1/Q2 \\ report\x07.pdf") == "Q1-Q2 - report.pdf"
    assert safe_name("..") == "item" and safe_name("  ") == "item"
    assert safe_name("x" * 300 + ".pdf").endswith(".pdf") and len(safe_name("x" * 300 + ".pdf")) <= 120
