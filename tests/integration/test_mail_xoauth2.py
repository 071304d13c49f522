# ruff: noqa: F811 - the fixtures of test_msft_oauth are imported by name, and tests take them as arguments
"""IMAP + SMTP connections signed in with OAuth 2.0 (SASL XOAUTH2, issue 17): the `imap` connection
names one of its owner's Microsoft 365 connections; the mail servers' token (Outlook's IMAP and SMTP
scopes) comes from that connection's refresh token at the identity platform stand-in
(tests/msgraph_server.py), and real servers check it: pymap with pysasl's XOAUTH2 mechanism (asking
the stand-in whose token it is) and aiosmtpd with an XOAUTH2 mechanism (tests/mail_servers.py).
Created over REST (tested live), read and sent through the connection's MailAccess; an expired
Microsoft 365 connection and another user's one are refused with clear errors."""

from __future__ import annotations

import imaplib
import logging
from collections.abc import Iterator

import pytest
from sqlmodel import select

from backend.connectors.access import OutgoingMail
from backend.connectors.store import credentials_of
from backend.connectors.types import ConnectionFailed, connection_type
from backend.db import session_scope
from backend.db.models import Connection
from tests.integration.test_admin_api import add_user, make_mandate, signed_in
from tests.integration.test_msft_oauth import (  # noqa: F401 - fixtures
    _stand_in,
    admin,
    assert_no_secrets,
    browser,
    graph,
)
from tests.mail_servers import ImapServer, SmtpServer, imap_server, mail, smtp_server
from tests.msgraph_server import DEFAULT_USER, MsGraph

URL = "/api/connections"
UPN = DEFAULT_USER["userPrincipalName"]
MAIL_SCOPES = {"https://outlook.office.com/IMAP.AccessAsUser.All", "https://outlook.office.com/SMTP.Send"}


@pytest.fixture
def servers(graph: MsGraph) -> Iterator[tuple[ImapServer, SmtpServer]]:
    """pymap and aiosmtpd taking XOAUTH2 for Anna's mailbox, checking tokens with the stand-in."""
    with imap_server(xoauth2_check=f"{graph.url}/test/outlook-tokens", username=UPN) as imap, \
            smtp_server(xoauth2_user=graph.outlook_user) as smtp:
        yield imap, smtp


def oauth_settings(imap: ImapServer, smtp: SmtpServer, token_connection_id: str) -> dict[str, object]:
    return {"host": imap.host, "port": imap.port, "security": "none", "username": UPN, "auth": "xoauth2",
            "tokenConnectionId": token_connection_id, "smtpHost": smtp.host, "smtpPort": smtp.port,
            "smtpSecurity": "none"}


def create(api, headers, settings, label="Anna's Exchange mailbox"):
    return api.client.post(URL, json={"type": "imap", "label": label, "settings": settings}, headers=headers)


def mailbox(connection_id: str):
    """The connection's MailAccess, as generic code (email.sendMail, email.checkEmail) gets it."""
    with session_scope() as session:
        return connection_type("imap").mail(credentials_of(session.get(Connection, connection_id)))


def mail_grants(graph: MsGraph) -> int:
    """Refresh grants that asked for the mail servers' scopes."""
    return sum(1 for r in graph.token_requests
               if r["grant_type"] == "refresh_token" and MAIL_SCOPES <= set(r["scope"].split()))


def test_a_mailbox_signs_in_with_the_microsoft_connection_reads_and_sends(graph, admin, api, servers, caplog):
    caplog.set_level(logging.DEBUG)
    imap, smtp = servers
    msft = admin.connect()
    created = create(api, admin.headers, oauth_settings(imap, smtp, msft))
    assert created.status_code == 201, created.text
    body = created.json()
    assert (body["type"], body["status"], body["settings"]["auth"], body["settings"]["tokenConnectionId"]) == \
        ("imap", "active", "xoauth2", msft)
    assert body["settings"]["tested"] == \
        f"signed in to 127.0.0.1 as {UPN} with XOAUTH2: 3 folders; sending through 127.0.0.1 works"
    assert "password" not in body["settings"]
    assert mail_grants(graph) == 1  # one token for IMAP and SMTP, kept for the next sign-ins

    imap.deliver(mail("Quarterly figures", body="Q3 is attached.", to=UPN))
    box = mailbox(body["id"])
    newest = box.list("INBOX", limit=2)
    assert [m.subject for m in newest] == ["Quarterly figures", "Hello, World!"]
    assert box.get(newest[0].id).body == "Q3 is attached."
    status = box.send(OutgoingMail(to=("Bert <bert@example.com>",), subject="Figures", body="See attached."))
    assert status.startswith("sent to 1 recipient")
    assert smtp.envelopes == [(UPN, ["bert@example.com"])]
    assert smtp.received[0]["Subject"] == "Figures" and smtp.refused_tokens == 0
    assert mail_grants(graph) == 1

    # The servers really check the token: a made-up one is refused, a Graph token too.
    client = imaplib.IMAP4(imap.host, imap.port, timeout=10)
    try:
        with pytest.raises(imaplib.IMAP4.error):
            client.authenticate("XOAUTH2", lambda _: f"user={UPN}\x01auth=Bearer made-up\x01\x01".encode())
    finally:
        client.shutdown()

    # Expired tokens: the mail token is renewed from the rotated refresh token the first grant stored,
    # and the Microsoft 365 connection itself keeps working on Graph.
    graph.expire_access_tokens()
    assert [m.subject for m in mailbox(body["id"]).list("INBOX", limit=1)] == ["Quarterly figures"]
    assert mail_grants(graph) == 2
    tested = api.client.post(f"{URL}/{msft}/test", headers=admin.headers)
    assert tested.json()["ok"] is True, tested.text
    assert_no_secrets(graph, created.text, caplog.text, records=caplog.records)


def test_an_expired_microsoft_connection_fails_the_mailbox_with_the_reason(graph, admin, api, servers, caplog):
    caplog.set_level(logging.DEBUG)
    imap, smtp = servers
    msft = admin.connect()
    created = create(api, admin.headers, oauth_settings(imap, smtp, msft))
    assert created.status_code == 201, created.text
    graph.revoke_refresh_tokens()
    graph.expire_access_tokens()
    with pytest.raises(ConnectionFailed, match="reconnect it on the Connections page") as failed:
        mailbox(created.json()["id"]).list("INBOX")
    assert failed.value.expired and "AADSTS50173" in str(failed.value)
    assert api.client.get(f"{URL}/{msft}", headers=admin.headers).json()["status"] == "expired"
    # Now the mailbox names the expired connection before asking anyone.
    tested = api.client.post(f"{URL}/{created.json()['id']}/test", headers=admin.headers).json()
    assert tested["ok"] is False and tested["status"] == "expired"
    assert "settings.tokenConnectionId" in tested["message"] and "is expired" in tested["message"]
    again = create(api, admin.headers, oauth_settings(imap, smtp, msft), label="Again")
    assert again.status_code == 422 and again.json()["errors"][0]["field"] == "settings"
    assert "settings.tokenConnectionId" in again.json()["detail"] and "is expired" in again.json()["detail"]
    assert smtp.received == [] and smtp.refused_tokens == 0
    assert_no_secrets(graph, again.text, caplog.text, records=caplog.records)


def test_a_consent_older_than_the_mail_scopes_asks_to_connect_again(graph, admin, api, servers):
    imap, smtp = servers
    msft = admin.connect()
    graph.consent_without(*MAIL_SCOPES)
    refused = create(api, admin.headers, oauth_settings(imap, smtp, msft))
    assert refused.status_code == 422
    assert "settings.tokenConnectionId: the Microsoft 365 connection 'Microsoft 365 (anna.meier@contoso.example)' " \
           "was not consented for IMAP and SMTP: connect Microsoft 365 again" in refused.json()["detail"]
    # Its Graph part still works: it is not marked expired.
    assert api.client.get(f"{URL}/{msft}", headers=admin.headers).json()["status"] == "active"
    assert api.client.post(f"{URL}/{msft}/test", headers=admin.headers).json()["ok"] is True
    assert admin.connect() == msft  # consenting again with the same account renews it, now with the scopes
    assert create(api, admin.headers, oauth_settings(imap, smtp, msft)).status_code == 201


def test_another_users_connection_is_not_found_and_settings_name_their_field(graph, admin, api, servers):
    imap, smtp = servers
    annas = admin.connect()
    acme = make_mandate(api, "Acme", "acme-admin")
    add_user(api, acme, "bert", ["user"])
    bert = signed_in("bert")
    grants = mail_grants(graph)
    for token_connection_id in (annas, "0" * 32):
        refused = create(api, bert, oauth_settings(imap, smtp, token_connection_id))
        assert refused.status_code == 422, refused.text
        assert f"settings.tokenConnectionId: connection {token_connection_id} was not found among your " \
               "connections" in refused.json()["detail"]
    assert mail_grants(graph) == grants  # nobody's token was asked for
    plain = create(api, admin.headers, {**imap.settings(), "auth": "password"}, label="Plain")
    assert plain.status_code == 201, plain.text
    not_msft = create(api, admin.headers, oauth_settings(imap, smtp, plain.json()["id"]))
    assert not_msft.status_code == 422
    assert "connection 'Plain' is not a Microsoft 365 connection" in not_msft.json()["detail"]
    missing = create(api, admin.headers, {**oauth_settings(imap, smtp, annas), "tokenConnectionId": None})
    assert [e["field"] for e in missing.json()["errors"]] == ["settings.tokenConnectionId"]
    no_password = create(api, admin.headers, {**imap.settings(smtp), "password": None})
    assert [e["field"] for e in no_password.json()["errors"]] == ["settings.password"]
    with session_scope() as session:
        assert session.exec(select(Connection.label).where(Connection.type == "imap")).all() == ["Plain"]
