# ruff: noqa: F811 - the fixtures of test_msft_oauth are imported by name, and tests take them as arguments
"""Microsoft 365 at run time (issue 17): tokens refreshed before they expire and when Graph answers
401, the rotated refresh token stored at once (also when many callers refresh together), a refused
refresh making the connection `expired` with a notification, and Graph's throttling (429/503 with
Retry-After) honoured within bounds — all against the stand-in (tests/msgraph_server.py), through the
production code."""

from __future__ import annotations

import logging
import os
import subprocess
import sys
import threading
from pathlib import Path

import pytest
from sqlmodel import select

from backend.connectors.kinds.msft import check
from backend.connectors.store import credentials_of, unseal_secret
from backend.connectors.types import ConnectionFailed
from backend.db import session_scope
from backend.db.models import Connection, Notification
from tests.integration.test_msft_mail import run
from tests.integration.test_msft_oauth import (  # noqa: F401 - fixtures
    _stand_in,
    admin,
    assert_no_secrets,
    configure,
    graph,
)

PROJECT = Path(__file__).resolve().parents[2]


def stored(connection_id: str) -> tuple[Connection, dict]:
    with session_scope() as session:
        row = session.get(Connection, connection_id)
        return row, unseal_secret(row)


def credentials(connection_id: str):
    with session_scope() as session:
        return credentials_of(session.get(Connection, connection_id))


def refreshes(graph) -> int:
    return sum(1 for r in graph.token_requests if r["grant_type"] == "refresh_token")


@pytest.fixture
def short_lived(graph, admin) -> str:
    """A connection whose access token expires within the refresh margin (two minutes)."""
    graph.access_token_lifetime = 120
    connection_id = admin.connect()
    graph.access_token_lifetime = 3600
    return connection_id


def test_a_token_about_to_expire_is_refreshed_first_and_the_rotated_one_stored(graph, short_lived, caplog):
    caplog.set_level(logging.DEBUG)
    before, old = stored(short_lived)
    result = run("outlook.readEmails", {"connectionId": short_lived, "top": 1})
    assert result.ok, result.error
    after, new = stored(short_lived)
    assert refreshes(graph) == 1
    assert new["refreshToken"] != old["refreshToken"] and graph.refresh_tokens[old["refreshToken"]] == "used"
    assert graph.refresh_tokens[new["refreshToken"]] == "valid" and new["accessToken"] in graph.access_tokens
    assert after.expires_at > before.expires_at and after.status == "active"
    # Fresh now: the next call uses it as it is.
    assert run("outlook.readEmails", {"connectionId": short_lived, "top": 1}).ok
    assert refreshes(graph) == 1
    assert_no_secrets(graph, caplog.text, str(result.as_dict()), records=caplog.records)


def test_a_token_graph_refuses_is_refreshed_once_and_the_call_repeated(graph, admin):
    connection_id = admin.connect()
    graph.add_mail(subject="After the refresh")
    graph.expire_access_tokens()  # e.g. revoked sessions: the stored expiry still says valid
    result = run("outlook.readEmails", {"connectionId": connection_id})
    assert result.ok, result.error
    assert [m["subject"] for m in result.output["mails"]] == ["After the refresh"]
    assert refreshes(graph) == 1
    assert stored(connection_id)[1]["accessToken"] in graph.access_tokens


def test_a_refused_refresh_expires_the_connection_and_tells_its_owner(graph, short_lived, api):
    graph.revoke_refresh_tokens()
    result = run("outlook.readEmails", {"connectionId": short_lived})
    assert not result.ok and result.error_kind == "failed"
    assert "Microsoft no longer accepts the sign-in of connection" in result.error
    assert "invalid_grant: AADSTS50173" in result.error and "reconnect it on the Connections page" in result.error
    row, _secret = stored(short_lived)
    assert row.status == "expired" and "reconnect" in row.last_error
    with session_scope() as session:
        notes = session.exec(select(Notification).where(Notification.kind == "connection.expired")).all()
        assert len(notes) == 1 and notes[0].user_id == row.owner_id and "expired" in notes[0].title
    # From now on it fails at once, saying what to do, without asking Microsoft.
    calls = len(graph.token_requests)
    again = run("outlook.readEmails", {"connectionId": short_lived})
    assert not again.ok and "is expired" in again.error and "reconnect" in again.error
    assert len(graph.token_requests) == calls
    listed = api.client.get(f"/api/connections/{short_lived}", headers=api.auth).json()
    assert listed["status"] == "expired"


def test_the_connections_test_refreshes_and_stays_active(graph, short_lived, api):
    tested = api.client.post(f"/api/connections/{short_lived}/test", headers=api.auth)
    assert tested.status_code == 200 and tested.json()["ok"] is True, tested.text
    assert refreshes(graph) == 1 and stored(short_lived)[0].status == "active"


def test_threads_refreshing_together_refresh_once_and_lose_no_token(graph, short_lived):
    results: list[str] = []
    barrier = threading.Barrier(6)

    def call() -> None:
        creds = credentials(short_lived)
        barrier.wait(timeout=30)
        try:
            results.append(check(creds))
        except ConnectionFailed as exc:
            results.append(f"failed: {exc}")

    threads = [threading.Thread(target=call) for _ in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    assert results == ["signed in as anna.meier@contoso.example"] * 6
    # A refresh token works once at the stand-in: a second refresh with the old one would have
    # expired the connection.
    assert refreshes(graph) == 1
    row, secret = stored(short_lived)
    assert row.status == "active" and graph.refresh_tokens[secret["refreshToken"]] == "valid"


@pytest.mark.postgres
@pytest.mark.parametrize("db_url", ["postgresql"], indirect=True)
def test_processes_refreshing_together_take_turns_on_the_row_lock(graph, short_lived):
    script = ("import sys\n"
              "from backend.connectors.kinds.msft import check\n"
              "from backend.connectors.store import credentials_of\n"
              "from backend.db import session_scope\n"
              "from backend.db.models import Connection\n"
              "with session_scope() as session:\n"
              "    creds = credentials_of(session.get(Connection, sys.argv[1]))\n"
              "print('ready', flush=True)\n"
              "sys.stdin.read()\n"  # the go: every process holds the same stale token by now
              "print(check(creds))\n")
    workers = [subprocess.Popen([sys.executable, "-c", script, short_lived], cwd=PROJECT, env=dict(os.environ),
                                stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
               for _ in range(4)]
    for worker in workers:
        assert worker.stdout.readline().strip() == "ready", worker.stderr.read()
    for worker in workers:
        worker.stdin.close()
    outputs = [(worker.stdout.read().strip(), worker.stderr.read()) for worker in workers]
    for worker in workers:
        worker.wait(timeout=120)
    assert [out for out, _err in outputs] == ["signed in as anna.meier@contoso.example"] * 4, outputs
    assert refreshes(graph) == 1
    row, secret = stored(short_lived)
    assert row.status == "active" and graph.refresh_tokens[secret["refreshToken"]] == "valid"


def test_throttling_is_waited_out_within_bounds(graph, admin, monkeypatch):
    configure(monkeypatch, graph, POWERON_GRAPH_MAX_RETRIES="3", POWERON_GRAPH_MAX_WAIT_SECONDS="10")
    connection_id = admin.connect()
    graph.add_mail(subject="Patience")
    graph.fail_next(2, 429, "1")
    graph.fail_next(1, 503, "1")
    result = run("outlook.readEmails", {"connectionId": connection_id})
    assert result.ok, result.error
    assert [m["subject"] for m in result.output["mails"]] == ["Patience"]
    assert graph.graph_calls("GET", "/messages") == 4  # three refused, then answered


def test_a_429_storm_ends_in_a_clear_error_naming_the_throttling(graph, admin, monkeypatch):
    configure(monkeypatch, graph, POWERON_GRAPH_MAX_RETRIES="2", POWERON_GRAPH_MAX_WAIT_SECONDS="10")
    connection_id = admin.connect()
    graph.fail_next(50, 429, "1")
    result = run("outlook.readEmails", {"connectionId": connection_id})
    assert not result.ok
    assert "Microsoft Graph throttled the requests (too many) while listing the mails of 'inbox'" in result.error
    assert "after 2 retries" in result.error and "429 TooManyRequests" in result.error
    assert graph.graph_calls("GET", "/messages") == 3
    # A Retry-After beyond the allowed wait is not waited for at all.
    graph.failures.clear()
    graph.fail_next(1, 503, "3600")
    result = run("outlook.readEmails", {"connectionId": connection_id})
    assert not result.ok and "was unavailable" in result.error and "after 0 retries" in result.error


def test_graph_errors_are_named_and_links_elsewhere_not_followed(graph, admin):
    connection_id = admin.connect()
    missing = run("outlook.readEmails", {"connectionId": connection_id, "folder": "Nowhere"})
    assert not missing.ok and "ErrorItemNotFound" in missing.error and "'Nowhere'" in missing.error
    with session_scope() as session:
        from backend.connectors.kinds.msft import graph_for

        client = graph_for(credentials_of(session.get(Connection, connection_id)))
    with pytest.raises(ConnectionFailed, match="a link to another host"):
        client.get("https://graph.evil.example/v1.0/me", "following a link")
