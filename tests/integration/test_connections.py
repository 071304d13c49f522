"""Connections (issue 17, DESIGN §8): a user's accounts at outside systems, managed over REST through
the Connections door, tested live against real mail servers (pymap IMAP, aiosmtpd SMTP) before
anything is stored; credentials sealed and never returned; other users' connections not found;
sharing with the mandate by its admins; the agent's toolboxes follow active connections."""

from __future__ import annotations

import logging

import pytest
from sqlmodel import select

from backend.db import session_scope
from backend.db.models import Connection
from tests.integration.test_admin_api import add_user, make_mandate, signed_in
from tests.mail_servers import imap_server, smtp_server

URL = "/api/connections"


@pytest.fixture
def mail():
    with imap_server() as imap, smtp_server() as smtp:
        yield {"host": imap.host, "port": imap.port, "security": "none", "username": imap.username,
               "password": imap.password, "smtpHost": smtp.host, "smtpPort": smtp.port, "smtpSecurity": "none"}


def create(api, headers, settings, label="Team mailbox", **extra):
    return api.client.post(URL, json={"type": "imap", "label": label, "settings": settings, **extra}, headers=headers)


def test_a_mailbox_is_tested_stored_sealed_and_listed_without_its_password(api, mail, caplog):
    caplog.set_level(logging.DEBUG)
    created = create(api, api.auth, mail)
    assert created.status_code == 201, created.text
    body = created.json()
    assert (body["type"], body["label"], body["status"], body["mine"], body["shared"]) == \
        ("imap", "Team mailbox", "active", True, False)
    assert body["settings"]["username"] == "demouser" and "password" not in body["settings"]
    assert "signed in to 127.0.0.1 as demouser: 3 folders; sending through 127.0.0.1 works" == \
        body["settings"]["tested"]
    listed = api.client.get(URL, headers=api.auth).json()
    assert [c["id"] for c in listed] == [body["id"]]
    with session_scope() as session:
        row = session.get(Connection, body["id"])
        assert row.secret.startswith("sealed:v1:") and "demopass" not in row.secret
        assert "demopass" not in str(row.settings)
    for answer in (created.text, api.client.get(f"{URL}/{body['id']}", headers=api.auth).text,
                   api.client.get(URL, headers=api.auth).text):
        assert "demopass" not in answer
    assert "demopass" not in caplog.text
    tested = api.client.post(f"{URL}/{body['id']}/test", headers=api.auth)
    assert tested.status_code == 200 and tested.json()["ok"] is True and tested.json()["status"] == "active"


def test_a_refused_test_stores_nothing_and_says_why(api, mail):
    wrong = create(api, api.auth, {**mail, "password": "not-the-password"})
    assert wrong.status_code == 422
    assert wrong.json()["errors"][0]["field"] == "settings"
    assert "refused the login of demouser" in wrong.json()["detail"]
    assert "not-the-password" not in wrong.text
    closed = create(api, api.auth, {**mail, "port": 1})
    assert closed.status_code == 422 and "cannot reach the IMAP server 127.0.0.1:1" in closed.json()["detail"]
    assert "Connection refused" in closed.json()["detail"]  # the reason in words, not an errno
    unknown = create(api, api.auth, {**mail, "host": "no-such-host.invalid"})
    assert unknown.status_code == 422 and "the host name does not resolve" in unknown.json()["detail"]
    bad = create(api, api.auth, {**mail, "security": "telepathy", "port": "x"})
    assert bad.status_code == 422
    assert {"settings.security", "settings.port"} <= {e["field"] for e in bad.json()["errors"]}
    unknown = api.client.post(URL, json={"type": "carrier-pigeon", "label": "x", "settings": {}}, headers=api.auth)
    assert unknown.status_code == 422 and unknown.json()["errors"][0]["field"] == "type"
    with session_scope() as session:
        assert session.exec(select(Connection)).all() == []


def test_others_do_not_see_a_connection_until_its_admin_owner_shares_it(api, mail):
    acme = make_mandate(api, "Acme", "acme-admin")
    add_user(api, acme, "anna", ["user"])
    add_user(api, acme, "bert", ["user"])
    anna, bert = signed_in("anna"), signed_in("bert")
    mine = create(api, anna, mail, label="Anna's inbox")
    assert mine.status_code == 201, mine.text
    anna_path = f"{URL}/{mine.json()['id']}"
    assert mine.json()["mandateName"] == "Acme" and mine.json()["mayShare"] is False
    # Bert, the mandate's admin and the system admin (another mandate) do not see it: 404 like a missing id.
    for headers in (bert, acme.admin, api.auth):
        assert api.client.get(URL, headers=headers).json() == []
        for answer in (api.client.get(anna_path, headers=headers),
                       api.client.post(f"{anna_path}/test", headers=headers),
                       api.client.delete(anna_path, headers=headers),
                       api.client.patch(anna_path, json={"shared": True}, headers=headers)):
            assert answer.status_code == 404, answer.text
    # Anna may not share her own: her roles hold no shareConnections.
    refused = api.client.patch(anna_path, json={"shared": True}, headers=anna)
    assert refused.status_code == 403 and "shareConnections" in refused.text

    # The mandate's admin shares the team mailbox: members use it, but only its owner (or who may
    # share there) changes it.
    team = create(api, acme.admin, mail, label="Team mailbox").json()
    assert team["mayShare"] is True
    team_path = f"{URL}/{team['id']}"
    assert api.client.get(team_path, headers=bert).status_code == 404
    shared = api.client.patch(team_path, json={"shared": True}, headers=acme.admin)
    assert shared.status_code == 200 and shared.json()["shared"] is True
    seen = api.client.get(URL, headers=bert).json()
    assert [(c["label"], c["mine"], c["ownerName"], c["mayDelete"], c["mayShare"]) for c in seen] == \
        [("Team mailbox", False, "acme-admin", False, False)]
    assert api.client.patch(team_path, json={"label": "Mine now"}, headers=bert).status_code == 403
    assert api.client.patch(team_path, json={"shared": False}, headers=bert).status_code == 403
    assert api.client.delete(team_path, headers=bert).status_code == 403
    assert api.client.post(f"{team_path}/test", headers=bert).json()["ok"] is True
    # Anna renames and deletes her own; the admin stops sharing theirs.
    renamed = api.client.patch(anna_path, json={"label": "Anna's mail"}, headers=anna)
    assert renamed.status_code == 200 and renamed.json()["label"] == "Anna's mail"
    assert api.client.delete(anna_path, headers=anna).status_code == 204
    assert api.client.patch(team_path, json={"shared": False}, headers=acme.admin).json()["shared"] is False
    assert api.client.get(URL, headers=bert).json() == []


def test_a_failing_connection_is_marked_and_a_passing_test_restores_it(api, mail):
    created = create(api, api.auth, mail).json()
    with session_scope() as session:
        row = session.get(Connection, created["id"])
        row.settings = {**row.settings, "port": 1}  # the server moved away
    failed = api.client.post(f"{URL}/{created['id']}/test", headers=api.auth).json()
    assert failed["ok"] is False and failed["status"] == "error" and "cannot reach" in failed["message"]
    listed = api.client.get(f"{URL}/{created['id']}", headers=api.auth).json()
    assert listed["status"] == "error" and "cannot reach" in listed["lastError"]
    with session_scope() as session:
        row = session.get(Connection, created["id"])
        row.settings = {**row.settings, "port": mail["port"]}
    restored = api.client.post(f"{URL}/{created['id']}/test", headers=api.auth).json()
    assert restored == {"ok": True, "message": restored["message"], "status": "active"}
    assert api.client.get(f"{URL}/{created['id']}", headers=api.auth).json()["lastError"] is None


def test_the_types_say_what_each_needs(api):
    types = {t["id"]: t for t in api.client.get(f"{URL}/types", headers=api.auth).json()}
    assert types["imap"]["auth"] == "password"
    assert {"host", "port", "security", "username", "password", "smtpHost"} <= \
        set(types["imap"]["settingsSchema"]["properties"])
    assert types["imap"]["unavailable"] is None


def test_the_agent_is_offered_mail_tools_only_with_an_active_mail_connection(api, mail):
    from backend.connectors.store import active_connection_types
    from backend.db.models import User

    def kinds() -> set[str]:
        with session_scope() as session:
            return active_connection_types(session, session.exec(select(User).where(User.username == "admin")).one())

    assert kinds() == set()
    created = create(api, api.auth, mail).json()
    assert kinds() == {"imap"}
    with session_scope() as session:
        row = session.get(Connection, created["id"])
        row.settings = {**row.settings, "port": 1}
    api.client.post(f"{URL}/{created['id']}/test", headers=api.auth)  # now in error: not offered
    assert kinds() == set()
