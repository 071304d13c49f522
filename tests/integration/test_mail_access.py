"""The mailbox of an `imap` connection (issue 17): MailAccess against real servers on 127.0.0.1 —
pymap for IMAP, aiosmtpd for SMTP (tests/mail_servers.py). Listing newest first within limits,
IMAP SEARCH, new mails after a UIDVALIDITY:UID cursor (each once; a renumbered folder starts over
without old mails), a mail's PDF attachment, sending with proper MIME, a box of 10,000 mails read
in bounded parts, and clear refusals: the limits named, wrong password, server down."""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest

from backend.config import reset_settings_cache
from backend.connectors.access import OutgoingMail
from backend.connectors.types import ConnectionFailed, Credentials, connection_type
from backend.errors import InvalidInput, NotFound
from tests.mail_servers import ImapServer, imap_server, mail, minimal_pdf, smtp_server

PDF = minimal_pdf()


@pytest.fixture
def settings(monkeypatch, tmp_path) -> Iterator[pytest.MonkeyPatch]:
    """The configuration (limits set by a test) in a data folder of the test's own."""
    monkeypatch.setenv("POWERON_DATA_DIR", str(tmp_path / "data"))
    reset_settings_cache()
    yield monkeypatch
    reset_settings_cache()


@pytest.fixture
def servers(settings):
    with imap_server() as imap, smtp_server() as smtp:
        yield imap, smtp


def mailbox(imap: ImapServer, smtp=None, password: str | None = None):
    """The MailAccess of an `imap` connection to these servers, through the type's registry entry."""
    settings = imap.settings(smtp)
    secret = {"password": password or settings.pop("password")}
    settings.pop("password", None)
    return connection_type("imap").mail(Credentials("conn", "imap", "Test box", settings, secret))


def test_folders_newest_mails_search_and_one_mail(servers):
    imap, _smtp = servers
    box = mailbox(imap)
    assert [(f.id, f.kind, f.container) for f in box.folders()] == \
        [("INBOX", "mailFolder", True), ("Sent", "mailFolder", True), ("Trash", "mailFolder", True)]
    newest = box.list("Inbox", limit=2)
    assert [m.subject for m in newest] == ["Hello, World!", "Important notice regarding your account"]
    assert newest[0].received_at > newest[1].received_at
    assert newest[1].sender == "corp@example.com" and newest[1].to == ("me@example.com",)
    assert newest[1].body == "This is some important stuff!"
    assert [m.subject for m in box.list("INBOX", limit=10)][-1] == "Re: Re: Random question"
    imap.deliver(mail("Rechnung März", body="Grüezi, anbei die Rechnung.", sender="Änna <anna@example.com>"))
    found = box.list("INBOX", limit=5, query="rechnung")
    assert [(m.subject, m.sender) for m in found] == [("Rechnung März", "Änna <anna@example.com>")]
    assert found[0].body == "Grüezi, anbei die Rechnung." and found[0].attachments == ()
    assert [m.subject for m in box.list("INBOX", limit=5, query="corp@example")] == \
        ["Important notice regarding your account"]
    assert box.list("INBOX", limit=5, query="nothing like this") == []
    again = box.get(found[0].id)
    assert (again.id, again.subject, again.folder) == (found[0].id, "Rechnung März", "INBOX")
    with pytest.raises(NotFound, match="not found"):
        box.get("nonsense")
    with pytest.raises(NotFound, match="mail folder 'Archive' not found"):
        box.list("Archive")


def test_a_pdf_attachment_is_listed_and_read(servers):
    imap, _smtp = servers
    box = mailbox(imap)
    imap.deliver(mail("Invoice 42", body="See the attached invoice.",
                      attachments=[("invoice-42.pdf", "application/pdf", PDF), ("notes.txt", "text/plain", b"n")]))
    (received,) = box.list("INBOX", limit=1)
    assert received.body == "See the attached invoice."
    assert [(a.name, a.mime_type) for a in received.attachments] == \
        [("invoice-42.pdf", "application/pdf"), ("notes.txt", "text/plain")]
    # The size as the server reports it, before anything is downloaded (pymap counts the part's headers in).
    assert len(PDF) * 0.9 < received.attachments[0].size < len(PDF) * 1.5
    name, mime_type, content = box.attachment(received.id, received.attachments[0].id)
    assert (name, mime_type, content) == ("invoice-42.pdf", "application/pdf", PDF)
    assert received.to_output()["attachments"][0]["name"] == "invoice-42.pdf"
    with pytest.raises(NotFound, match="attachment '9' of mail"):
        box.attachment(received.id, "9")


def test_an_attachment_over_the_file_limit_is_refused_naming_it(servers, settings):
    imap, _smtp = servers
    big = bytes(range(256)) * 64  # 16 KiB
    imap.deliver(mail("Big one", attachments=[("big.bin", "application/octet-stream", big)]))
    box = mailbox(imap)
    (received,) = box.list("INBOX", limit=1)
    settings.setenv("POWERON_FILE_MAX_BYTES", "4096")
    reset_settings_cache()
    with pytest.raises(InvalidInput, match=r"the attachment 'big.bin' is 1[56](\.\d)? KiB; files may be at most "
                                           r"4 KiB \(POWERON_FILE_MAX_BYTES\)"):
        box.attachment(received.id, received.attachments[0].id)
    settings.delenv("POWERON_FILE_MAX_BYTES")
    reset_settings_cache()
    assert box.attachment(received.id, received.attachments[0].id)[2] == big


def test_new_mails_after_a_cursor_are_reported_once_oldest_first(servers):
    imap, _smtp = servers
    box = mailbox(imap)
    start = box.since("INBOX", None)
    assert start.mails == []  # what is there already does not count
    assert box.since("INBOX", start.cursor).mails == []
    imap.deliver(mail("first"))
    imap.deliver(mail("second"))
    page = box.since("INBOX", start.cursor)
    assert [m.subject for m in page.mails] == ["first", "second"]
    assert box.since("INBOX", page.cursor).mails == []
    imap.deliver(mail("third"))
    later = box.since("INBOX", page.cursor)
    assert [m.subject for m in later.mails] == ["third"]
    # The same cursor asks the same question: a poll that was not committed is repeated.
    assert [m.subject for m in box.since("INBOX", page.cursor).mails] == ["third"]


def test_a_renumbered_folder_starts_over_without_old_mails(servers):
    imap, _smtp = servers
    box = mailbox(imap)
    client = imap.client()
    assert client.create("Reports")[0] == "OK"
    imap.deliver(mail("old report"), folder="Reports")
    cursor = box.since("Reports", None).cursor
    # The folder is deleted and made anew: the server gives it a new UIDVALIDITY.
    assert client.delete("Reports")[0] == "OK" and client.create("Reports")[0] == "OK"
    client.logout()
    imap.deliver(mail("old report"), folder="Reports")
    imap.deliver(mail("older report"), folder="Reports")
    restarted = box.since("Reports", cursor)
    assert restarted.mails == [] and restarted.cursor.split(":")[0] != cursor.split(":")[0]
    imap.deliver(mail("new report"), folder="Reports")
    assert [m.subject for m in box.since("Reports", restarted.cursor).mails] == ["new report"]


def test_sending_through_smtp_with_attachments(servers):
    imap, smtp = servers
    box = mailbox(imap, smtp)
    status = box.send(OutgoingMail(to=("Anna <anna@example.com>",), cc=("bert@example.com",), subject="Report März",
                                   body="<p>The <b>report</b> is attached.</p>", html=True,
                                   attachments=(("report.pdf", "application/pdf", PDF),)))
    assert status.startswith("sent to 2 recipients through 127.0.0.1:")
    (received,) = smtp.received
    assert smtp.envelopes == [("demouser@127.0.0.1", ["anna@example.com", "bert@example.com"])]
    assert (received["From"], received["To"], received["Cc"]) == \
        ("demouser@127.0.0.1", "Anna <anna@example.com>", "bert@example.com")
    from email.header import decode_header, make_header

    assert str(make_header(decode_header(received["Subject"]))) == "Report März"
    assert received["Date"] and received["Message-ID"].endswith("@127.0.0.1>")
    assert received["Message-ID"] in status
    parts = {part.get_content_type(): part for part in received.walk()}
    assert "The report is attached." in parts["text/plain"].get_payload(decode=True).decode()
    assert "<b>report</b>" in parts["text/html"].get_payload(decode=True).decode()
    assert parts["application/pdf"].get_filename() == "report.pdf"
    assert parts["application/pdf"].get_payload(decode=True) == PDF


def test_bad_addresses_and_a_read_only_mailbox_are_refused(servers):
    imap, smtp = servers
    with pytest.raises(InvalidInput, match="to: 'nobody' is not an e-mail address"):
        mailbox(imap, smtp).send(OutgoingMail(to=("nobody",), subject="x", body="x"))
    with pytest.raises(InvalidInput, match="subject: must be one line"):
        mailbox(imap, smtp).send(OutgoingMail(to=("a@example.com",), subject="x\r\nBcc: b@example.com", body="x"))
    with pytest.raises(ConnectionFailed, match="no SMTP server: it can read mail but not send it"):
        mailbox(imap).send(OutgoingMail(to=("a@example.com",), subject="x", body="x"))
    assert smtp.received == []


def test_wrong_password_and_server_down_say_so_without_the_password(servers):
    imap, _smtp = servers
    with pytest.raises(ConnectionFailed, match="refused the login of demouser") as refused:
        mailbox(imap, password="not-the-password").since("INBOX", None)
    assert "not-the-password" not in str(refused.value)
    down = ImapServer(imap.host, 1)
    with pytest.raises(ConnectionFailed, match="cannot reach the IMAP server 127.0.0.1:1"):
        mailbox(down).list("INBOX")


# --- a big mailbox --------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def big_box() -> Iterator[ImapServer]:
    """pymap with 10,000 more mails in INBOX (subjects "bulk 0" … "bulk 9999", oldest first)."""
    with imap_server() as imap:
        assert imap.deliver_many(f"From: bulk@example.com\r\nSubject: bulk {n}\r\n\r\nmail {n}\r\n".encode()
                                 for n in range(10_000)) == 10_000
        yield imap


def test_a_mailbox_of_10000_mails_is_read_in_bounded_parts(big_box, settings):
    settings.setenv("POWERON_MAIL_MAX_MESSAGES", "40")
    reset_settings_cache()
    box = mailbox(big_box)
    started = time.monotonic()
    newest = box.list("INBOX", limit=25)
    assert [m.subject for m in newest] == [f"bulk {n}" for n in range(9999, 9974, -1)]
    assert newest[0].body == "mail 9999"
    # A generous bound: reading all 10,000 mails would take minutes.
    assert time.monotonic() - started < 30
    with pytest.raises(InvalidInput, match=r"limit: at most 40 mails per call \(POWERON_MAIL_MAX_MESSAGES\); "
                                           r"41 were asked for"):
        box.list("INBOX", limit=41)
    with pytest.raises(InvalidInput, match="limit: must be a whole number of at least 1"):
        box.list("INBOX", limit=0)
    assert [m.subject for m in box.list("INBOX", limit=3, query="bulk 9990")] == ["bulk 9990"]
    # Polling after a cursor that lies 10,000 mails back: 40 at a time, oldest first, each once.
    validity = box.since("INBOX", None).cursor.split(":")[0]
    first = box.since("INBOX", f"{validity}:104")  # the demo mails end at UID 104
    assert [m.subject for m in first.mails] == [f"bulk {n}" for n in range(40)]
    second = box.since("INBOX", first.cursor)
    assert [m.subject for m in second.mails] == [f"bulk {n}" for n in range(40, 80)]
