# ruff: noqa: F811 - the fixtures of test_msft_oauth are imported by name, and tests take them as arguments
"""Outlook through Microsoft 365 connections (issue 17): the outlook.* actions run through execute_action
as a user, and the connector's MailAccess (what email.sendMail and email.checkEmail use), against the
Graph stand-in (tests/msgraph_server.py)."""

from __future__ import annotations

import logging
from datetime import UTC, datetime, timedelta

from sqlmodel import select

from backend.actions import ActionContext, execute_action
from backend.connectors.access import OutgoingMail
from backend.connectors.store import credentials_of
from backend.connectors.types import connection_type
from backend.db import session_scope
from backend.db.models import Connection, FeatureInstance, User
from backend.files import service as files
from tests.integration.test_admin_api import add_user, make_mandate, signed_in
from tests.integration.test_msft_oauth import (  # noqa: F401 - fixtures
    _stand_in,
    admin,
    assert_no_secrets,
    browser,
    graph,
)

MIB = 1024 * 1024


def run(action_id: str, params: dict, username: str = "admin"):
    """`action_id` through execute_action as `username` in their mandate's Workspace (own transaction)."""
    with session_scope() as session:
        user = session.exec(select(User).where(User.username == username)).one()
        instance = session.exec(select(FeatureInstance).where(FeatureInstance.feature_code == "workspace")
                                .order_by(FeatureInstance.sys_created_at)).first()
        context = ActionContext(session, user, instance.mandate_id, instance.id)
        return execute_action(action_id, params, context)


def workspace_files(folder: str = "/") -> dict[str, bytes]:
    with session_scope() as session:
        user = session.exec(select(User).where(User.username == "admin")).one()
        instance = session.exec(select(FeatureInstance).where(FeatureInstance.feature_code == "workspace")
                                .order_by(FeatureInstance.sys_created_at)).first()
        scope = files.FileScope(session, user, instance.mandate_id, instance.id)
        return {f.path: files.read_bytes(scope, f.path)[1] for f in files.list_files(scope, folder, recursive=True)}


def mailbox(connection_id: str):
    """The connection's MailAccess, as generic code gets it from the type registry."""
    with session_scope() as session:
        return connection_type("msft").mail(credentials_of(session.get(Connection, connection_id)))


def test_read_emails_newest_first_with_filters(graph, admin):
    connection_id = admin.connect()
    now = datetime.now(UTC).replace(microsecond=0)
    graph.add_mail(subject="Old and read", received=now - timedelta(days=3), is_read=True)
    graph.add_mail(subject="Yesterday", body="Please check the <b>numbers</b>", received=now - timedelta(days=1),
                   sender=("Carla Client", "carla@client.example"))
    graph.add_mail(subject="Today, read", received=now - timedelta(hours=1), is_read=True)
    graph.add_mail(subject="Elsewhere", folder="archive", received=now)
    result = run("outlook.readEmails", {"connectionId": connection_id})
    assert result.ok, result.error
    mails = result.output["mails"]
    assert [m["subject"] for m in mails] == ["Today, read", "Yesterday", "Old and read"]
    yesterday = mails[1]
    assert yesterday["from"] == "Carla Client <carla@client.example>"
    assert yesterday["to"] == ["Anna Meier <anna.meier@contoso.example>"]
    assert "Please check the <b>numbers</b>" in yesterday["body"]  # the text of an HTML body
    assert yesterday["isRead"] is False and yesterday["webLink"].startswith("https://outlook.office365.com/")
    unread = run("outlook.readEmails", {"connectionId": connection_id, "unreadOnly": True}).output["mails"]
    assert [m["subject"] for m in unread] == ["Yesterday"]
    since = (now - timedelta(days=2)).isoformat()
    recent = run("outlook.readEmails", {"connectionId": connection_id, "since": since}).output["mails"]
    assert [m["subject"] for m in recent] == ["Today, read", "Yesterday"]
    archive = run("outlook.readEmails", {"connectionId": connection_id, "folder": "Archive"}).output["mails"]
    assert [m["subject"] for m in archive] == ["Elsewhere"]
    cut = run("outlook.readEmails", {"connectionId": connection_id, "top": 1, "bodyChars": 5}).output["mails"][0]
    assert cut["bodyTruncated"] is True and len(cut["body"]) == 5


def test_ten_thousand_mails_are_not_fetched_for_a_few(graph, admin):
    connection_id = admin.connect()
    graph.add_mails(10_000)
    result = run("outlook.readEmails", {"connectionId": connection_id, "top": 3})
    assert result.ok, result.error
    assert [m["subject"] for m in result.output["mails"]] == ["Bulk mail 10000", "Bulk mail 9999", "Bulk mail 9998"]
    assert graph.graph_calls("GET", "/messages") == 1
    more = run("outlook.readEmails", {"connectionId": connection_id, "top": 100})
    assert more.output["count"] == 100 and graph.graph_calls("GET", "/messages") == 2
    graph.add_mail(subject="Quarterly forecast", received=datetime.now(UTC) - timedelta(days=30))
    searched = run("outlook.searchEmails", {"connectionId": connection_id, "query": "forecast", "top": 2})
    assert [m["subject"] for m in searched.output["mails"]] == ["Quarterly forecast"]


def test_search_finds_words_and_saves_attachments_into_the_file_store(graph, admin):
    connection_id = admin.connect()
    graph.add_mail(subject="Invoice 2025-114", body="Attached the invoice for March.",
                   attachments=[("invoice-114.pdf", "application/pdf", b"%PDF-1.4 invoice"),
                                ("notes.txt", "text/plain", b"pay within 30 days")],
                   inline=[("logo.png", "image/png", b"\x89PNG logo")])
    graph.add_mail(subject="Lunch?", body="Pizza at noon")
    result = run("outlook.searchEmails", {"connectionId": connection_id, "query": "invoice", "saveAttachments": True})
    assert result.ok, result.error
    (mail,) = result.output["mails"]
    assert mail["subject"] == "Invoice 2025-114"
    assert [a["name"] for a in mail["attachments"]] == ["invoice-114.pdf", "notes.txt"]  # not the inline logo
    stored = workspace_files("/mail-attachments")
    assert sorted(stored.values()) == [b"%PDF-1.4 invoice", b"pay within 30 days"]
    assert sorted(result.output["savedFiles"]) == sorted(stored)
    assert all(" Invoice 2025-114/" in path for path in stored)
    assert [a["savedPath"] for a in mail["attachments"]] == result.output["savedFiles"]


def test_an_attachment_over_the_limit_is_refused_naming_it_before_downloading(graph, admin):
    connection_id = admin.connect()
    graph.add_mail(subject="Huge scan", attachments=[("scan.tiff", "image/tiff", b"\0" * (50 * MIB)),
                                                     ("cover.txt", "text/plain", b"see the scan")])
    result = run("outlook.readEmails", {"connectionId": connection_id, "saveAttachments": True})
    assert result.ok, result.error
    (skipped,) = result.output["skippedAttachments"]
    assert skipped["name"] == "scan.tiff"
    assert skipped["reason"] == ("the attachment 'scan.tiff' is 50 MiB; files may be at most 20 MiB "
                                 "(POWERON_FILE_MAX_BYTES)")
    assert list(workspace_files().values()) == [b"see the scan"]
    assert graph.graph_calls("GET", "/$value") == 1  # only the small one was downloaded
    access = mailbox(connection_id)
    (mail,) = access.list("inbox", 1)
    big = next(a for a in mail.attachments if a.name == "scan.tiff")
    try:
        access.attachment(mail.id, big.id)
    except Exception as exc:  # noqa: BLE001 - the connector's own refusal is the point
        assert "files may be at most 20 MiB (POWERON_FILE_MAX_BYTES)" in str(exc)
    else:
        raise AssertionError("a 50 MB attachment was accepted")


def test_draft_with_file_store_attachments_then_send(graph, admin):
    connection_id = admin.connect()
    files_written = run("core.writeFile", {"path": "/reports/summary.md", "content": "# Q1\nAll good."})
    assert files_written.ok, files_written.error
    drafted = run("outlook.draftEmail", {"connectionId": connection_id, "to": ["carla@client.example"],
                                         "cc": ["boss@contoso.example"], "subject": "Q1 summary",
                                         "body": "Hello Carla, see attached.", "attachments": ["/reports/summary.md"]})
    assert drafted.ok, drafted.error
    assert drafted.output["attachments"] == ["summary.md"] and graph.sent == []
    drafts = run("outlook.readEmails", {"connectionId": connection_id, "folder": "drafts"}).output["mails"]
    assert [d["subject"] for d in drafts] == ["Q1 summary"]
    sent = run("outlook.sendDraft", {"connectionId": connection_id, "draftId": drafted.output["draftId"]})
    assert sent.ok, sent.error
    assert sent.output["message"] == ("sent 'Q1 summary' to 2 recipients through Microsoft 365 as "
                                      "anna.meier@contoso.example")
    (out,) = graph.sent
    assert (out["subject"], out["to"], out["cc"]) == ("Q1 summary", [("", "carla@client.example")],
                                                      [("", "boss@contoso.example")])
    assert out["attachments"] == [("summary.md", "text/markdown", b"# Q1\nAll good.")]
    again = run("outlook.sendDraft", {"connectionId": connection_id, "draftId": drafted.output["draftId"]})
    assert not again.ok and "is not a draft: it was sent already" in again.error
    unknown = run("outlook.sendDraft", {"connectionId": connection_id, "draftId": "AAMkAGnothing"})
    assert not unknown.ok and "there is no mail AAMkAGnothing in anna.meier@contoso.example's mailbox" in unknown.error
    bad = run("outlook.draftEmail", {"connectionId": connection_id, "to": ["not an address"], "subject": "x",
                                     "body": "y"})
    assert not bad.ok and bad.error_kind == "invalid" and "to.0" in bad.error
    missing = run("outlook.draftEmail", {"connectionId": connection_id, "to": ["a@b.example"], "subject": "x",
                                         "body": "y", "attachments": ["/nope.pdf"]})
    assert not missing.ok and "/nope.pdf" in missing.error


def test_the_mail_access_sends_with_attachments_for_email_send_mail(graph, admin):
    connection_id = admin.connect()
    access = mailbox(connection_id)
    said = access.send(OutgoingMail(to=("Carla <carla@client.example>",), subject="Report", body="<p>Hi</p>",
                                    html=True, attachments=(("r.csv", "text/csv", b"a,b\n1,2\n"),)))
    assert said == "sent to 1 recipient through Microsoft 365 as anna.meier@contoso.example"
    (out,) = graph.sent
    assert out["to"] == [("Carla", "carla@client.example")] and out["bodyType"] == "html"
    assert out["attachments"] == [("r.csv", "text/csv", b"a,b\n1,2\n")]
    sent_items = run("outlook.readEmails", {"connectionId": connection_id, "folder": "Sent Items"}).output["mails"]
    assert [m["subject"] for m in sent_items] == ["Report"]
    too_big = OutgoingMail(to=("a@b.example",), subject="x", body="y",
                           attachments=(("big.bin", "application/octet-stream", b"\0" * (4 * MIB)),))
    try:
        access.send(too_big)
    except Exception as exc:  # noqa: BLE001
        assert "Microsoft Graph takes at most 3 MiB of attachments with one mail" in str(exc)
    else:
        raise AssertionError("4 MiB of attachments were sent")
    assert len(graph.sent) == 1


def test_new_mail_since_a_cursor_is_reported_once(graph, admin):
    connection_id = admin.connect()
    graph.add_mail(subject="Before the cursor", received=datetime.now(UTC) - timedelta(minutes=5))
    access = mailbox(connection_id)
    first = access.since("inbox", None)
    assert first.mails == [] and first.cursor
    assert access.since("inbox", first.cursor).mails == []
    one = graph.add_mail(subject="First new", attachments=[("a.txt", "text/plain", b"A")])
    graph.add_mail(subject="Second new", received=datetime.now(UTC) + timedelta(seconds=1))
    page = access.since("inbox", first.cursor)
    assert [m.subject for m in page.mails] == ["First new", "Second new"]
    assert [a.name for a in page.mails[0].attachments] == ["a.txt"]
    graph.mark_read(one)  # a change, not a new mail
    quiet = access.since("inbox", page.cursor)
    assert quiet.mails == []
    graph.add_mail(subject="Third new", received=datetime.now(UTC) + timedelta(seconds=2))
    graph.invalidate_delta()  # the delta link expired: a new round from the watermark
    later = access.since("inbox", quiet.cursor)
    assert [m.subject for m in later.mails] == ["Third new"]
    assert access.since("inbox", later.cursor).mails == []


def test_many_new_mails_come_over_several_polls_oldest_first(graph, admin, monkeypatch):
    from tests.integration.test_msft_oauth import configure

    configure(monkeypatch, graph, POWERON_GRAPH_MAX_PAGES="2")
    connection_id = admin.connect()
    access = mailbox(connection_id)
    cursor = access.since("inbox", None).cursor
    graph.add_mails(250, start=datetime.now(UTC) + timedelta(days=1))
    seen: list[str] = []
    for _poll in range(10):
        page = access.since("inbox", cursor)
        assert len(page.mails) <= 2 * 50
        seen += [m.subject for m in page.mails]
        cursor = page.cursor
        if not page.mails:
            break
    assert seen == [f"Bulk mail {n}" for n in range(1, 251)]


def test_another_users_or_mandates_connection_is_not_found(graph, admin, api, caplog):
    caplog.set_level(logging.DEBUG)
    acme = make_mandate(api, "Acme", "acme-admin")
    add_user(api, acme, "bert", ["user"])
    berts = browser(signed_in("bert")).connect()
    theirs = browser(acme.admin).connect()
    api.client.patch(f"/api/connections/{theirs}", json={"shared": True}, headers=acme.admin)
    for connection_id in (berts, theirs, "0" * 32):
        for action_id, params in (("outlook.readEmails", {}), ("outlook.searchEmails", {"query": "x"}),
                                  ("outlook.sendDraft", {"draftId": "x"}),
                                  ("outlook.draftEmail", {"to": ["a@b.example"], "subject": "s", "body": "b"})):
            result = run(action_id, {"connectionId": connection_id, **params})
            assert not result.ok and result.error == f"connection {connection_id} not found", result.error
    assert graph.graph_calls("GET", "/messages") == 0
    assert_no_secrets(graph, caplog.text, records=caplog.records)


def test_a_token_due_for_renewal_is_renewed_before_a_writing_action_reads(graph, admin):
    """The connection's access token is due (it expires in a minute): it is renewed as the action
    opens the connection, and the action's writes (the attachment saved into the file store) go
    through — on SQLite a renewal committed after the action's first read would leave it a snapshot
    that can no longer write ("database is locked")."""
    graph.access_token_lifetime = 60  # the token the consent gives is due at once
    connection_id = admin.connect()
    graph.access_token_lifetime = 3600
    graph.add_mail(subject="Invoice 77", body="attached", attachments=[("i-77.pdf", "application/pdf", b"%PDF-1.4 77")])
    result = run("outlook.searchEmails", {"connectionId": connection_id, "query": "invoice", "saveAttachments": True})
    assert result.ok, result.error
    assert list(workspace_files("/mail-attachments").values()) == [b"%PDF-1.4 77"]
