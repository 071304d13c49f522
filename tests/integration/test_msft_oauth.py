"""Microsoft 365 connections by consent (issue 17, DESIGN §8): OAuth 2.0 authorization code with PKCE
through authlib, against the identity platform + Graph stand-in (tests/msgraph_server.py) on 127.0.0.1.

The REST API runs in process (TestClient, redirects not followed, cookies kept like a browser); the
browser's hop to the consent page and its "Accept" is an httpx request to the stand-in. Each test
checks what a user notices: where the browser lands, which connection exists, what it says.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import timedelta
from typing import Any
from urllib.parse import parse_qs, urlsplit

import pytest
from fastapi.testclient import TestClient
from sqlmodel import select

from backend.api.app import create_api
from backend.config import reset_settings_cache
from backend.connectors.store import unseal_secret
from backend.db import session_scope
from backend.db.models import Connection, ConnectionOAuthState, User
from tests.integration.test_admin_api import add_user, make_mandate, signed_in
from tests.msgraph_server import MsGraph, accept_consent, serve

CLIENT_ID = "7d2b1a9e-0000-4c1e-9f00-poweron-test"
CLIENT_SECRET = "msft~Secret.with/special+chars&="
API_URL = "http://testserver"
UI_URL = "http://ui.test"
CALLBACK = f"{API_URL}/api/connections/oauth/msft/callback"
OAUTH = "/api/connections/oauth/msft"


# --- the stand-in and the configuration --------------------------------------------------------------


@pytest.fixture(scope="module")
def _stand_in() -> Iterator[MsGraph]:
    with serve(MsGraph(CLIENT_ID, CLIENT_SECRET, CALLBACK)) as graph:
        yield graph


def configure(monkeypatch: pytest.MonkeyPatch, graph: MsGraph, **extra: str) -> None:
    """Point POWERON_MSFT_* at the stand-in (and the API/UI URLs at the test client)."""
    for name, value in {"POWERON_MSFT_TENANT": graph.tenant, "POWERON_MSFT_CLIENT_ID": CLIENT_ID,
                        "POWERON_MSFT_CLIENT_SECRET": CLIENT_SECRET, "POWERON_MSFT_AUTHORITY": graph.url,
                        "POWERON_MSFT_GRAPH_URL": graph.url, "POWERON_API_URL": API_URL, "POWERON_UI_URL": UI_URL,
                        **extra}.items():
        monkeypatch.setenv(name, value)
    reset_settings_cache()


@pytest.fixture
def graph(_stand_in: MsGraph, app_config: str, monkeypatch: pytest.MonkeyPatch) -> MsGraph:
    """The stand-in, emptied, with the application configured for it."""
    _stand_in.reset()
    configure(monkeypatch, _stand_in)
    return _stand_in


# --- a browser --------------------------------------------------------------------------------------


@dataclass
class Browser:
    """One browser (its own cookies) of a signed-in user, consenting for connections of `type_id`."""

    client: TestClient
    headers: dict[str, str]
    type_id: str = "msft"

    def ticket(self, **body: Any):
        return self.client.post(f"/api/connections/oauth/{self.type_id}/tickets", json=body, headers=self.headers)

    def start(self, **body: Any) -> str:
        """Ticket, then the browser opens its URL: the provider's authorization URL."""
        ticket = self.ticket(**body)
        assert ticket.status_code == 201, ticket.text
        answer = self.client.get(ticket.json()["url"])
        assert answer.status_code == 302, answer.text
        return answer.headers["location"]

    def land(self, url: str) -> dict[str, str]:
        """The browser comes back to the callback: the query of the UI page it lands on."""
        answer = self.client.get(url)
        assert answer.status_code == 302, answer.text
        target = urlsplit(answer.headers["location"])
        assert f"{target.scheme}://{target.netloc}{target.path}" == f"{UI_URL}/connections", answer.headers
        return {k: v[0] for k, v in parse_qs(target.query).items()}

    def connect(self, **body: Any) -> str:
        """The whole consent, accepted: the new connection's id."""
        landed = self.land(accept_consent(self.start(**body)))
        assert "connected" in landed, landed
        return landed["connected"]


def browser(headers: dict[str, str], type_id: str = "msft") -> Browser:
    return Browser(TestClient(create_api(), follow_redirects=False), headers, type_id)


@pytest.fixture
def admin(graph: MsGraph) -> Browser:
    return browser(signed_in("admin"))


def row(connection_id: str) -> Connection:
    with session_scope() as session:
        return session.get(Connection, connection_id)


def assert_no_secrets(graph: MsGraph, *texts: str, records: list[logging.LogRecord] = ()) -> None:
    """No token and no client secret in `texts`; no authorization code either in the application's
    own log (the code is in the callback URL by the protocol's design, so a browser's log has it)."""
    for secret in [*graph.issued, CLIENT_SECRET]:
        assert all(secret not in text for text in texts)
    ours = "\n".join(r.getMessage() for r in records if r.name.startswith("backend"))
    for secret in [*graph.issued, *graph.issued_codes, CLIENT_SECRET]:
        assert secret not in ours


def pending_consents() -> int:
    with session_scope() as session:
        return len(session.exec(select(ConnectionOAuthState)).all())


# --- the consent --------------------------------------------------------------------------------------


def test_a_consent_makes_an_active_connection_with_sealed_tokens(graph, admin, api, caplog):
    caplog.set_level(logging.DEBUG)
    ticket = admin.ticket(label="Anna's Outlook")
    assert ticket.status_code == 201, ticket.text
    assert ticket.json()["url"].startswith(f"{API_URL}{OAUTH}/start?ticket=")
    started = admin.client.get(ticket.json()["url"])
    assert started.status_code == 302
    authorize = urlsplit(started.headers["location"])
    assert f"{authorize.scheme}://{authorize.netloc}{authorize.path}" == \
        f"{graph.url}/{graph.tenant}/oauth2/v2.0/authorize"
    asked = {k: v[0] for k, v in parse_qs(authorize.query).items()}
    assert (asked["client_id"], asked["response_type"], asked["redirect_uri"], asked["code_challenge_method"]) == \
        (CLIENT_ID, "code", CALLBACK, "S256")
    assert set(asked["scope"].split()) == {"User.Read", "Mail.ReadWrite", "Mail.Send", "Files.ReadWrite.All",
                                           "Sites.Read.All", "offline_access",
                                           "https://outlook.office.com/IMAP.AccessAsUser.All",
                                           "https://outlook.office.com/SMTP.Send"}
    # The browser cookie: HttpOnly, SameSite=Lax, only sent to the callback.
    cookie = started.headers["set-cookie"]
    assert "HttpOnly" in cookie and "SameSite=lax" in cookie and f"Path={OAUTH}/callback" in cookie

    landed = admin.land(accept_consent(started.headers["location"]))
    connection = api.client.get(f"/api/connections/{landed['connected']}", headers=api.auth).json()
    assert (connection["type"], connection["label"], connection["status"], connection["mine"]) == \
        ("msft", "Anna's Outlook", "active", True)
    assert connection["settings"]["account"] == "anna.meier@contoso.example"
    assert connection["settings"]["tested"] == "signed in as anna.meier@contoso.example"
    stored = row(landed["connected"])
    assert stored.secret.startswith("sealed:v1:") and stored.expires_at is not None
    tokens = unseal_secret(stored)
    assert tokens["accessToken"] in graph.access_tokens and tokens["refreshToken"] in graph.refresh_tokens
    # The test of the Connections page works on it; no token, code or secret shows anywhere.
    tested = api.client.post(f"/api/connections/{landed['connected']}/test", headers=api.auth).json()
    assert tested == {"ok": True, "message": "signed in as anna.meier@contoso.example", "status": "active"}
    assert_no_secrets(graph, caplog.text, api.client.get("/api/connections", headers=api.auth).text,
                      str(stored.settings), records=caplog.records)
    assert pending_consents() == 0


def test_the_types_say_whether_microsoft_365_can_be_connected(graph, api, monkeypatch):
    types = {t["id"]: t for t in api.client.get("/api/connections/types", headers=api.auth).json()}
    assert (types["msft"]["auth"], types["msft"]["unavailable"], types["msft"]["settingsSchema"]) == \
        ("oauth", None, None)
    monkeypatch.delenv("POWERON_MSFT_CLIENT_SECRET")
    monkeypatch.delenv("POWERON_MSFT_TENANT")
    reset_settings_cache()
    types = {t["id"]: t for t in api.client.get("/api/connections/types", headers=api.auth).json()}
    assert "set POWERON_MSFT_TENANT, POWERON_MSFT_CLIENT_SECRET" in types["msft"]["unavailable"]
    refused = api.client.post(f"{OAUTH}/tickets", json={}, headers=api.auth)
    assert refused.status_code == 422 and refused.json()["errors"][0]["field"] == "type"
    assert "POWERON_MSFT_TENANT" in refused.json()["detail"]
    assert api.client.post("/api/connections/oauth/imap/tickets", json={}, headers=api.auth).status_code == 422
    assert api.client.post("/api/connections/oauth/nothing/tickets", json={}, headers=api.auth).status_code == 404


def test_an_api_client_may_start_with_its_bearer_token(graph, admin, api):
    started = admin.client.get(f"{OAUTH}/start", params={"label": "Direct"}, headers=admin.headers)
    assert started.status_code == 302
    landed = admin.land(accept_consent(started.headers["location"]))
    assert row(landed["connected"]).label == "Direct"
    without = TestClient(create_api(), follow_redirects=False).get(f"{OAUTH}/start")
    assert without.status_code == 401


def test_a_declined_consent_connects_nothing_and_says_so(graph, admin, api):
    landed = admin.land(accept_consent(admin.start(), decision="deny"))
    assert landed == {"error": "the consent at Microsoft was declined; nothing was connected"}
    graph.deny = True  # an administrator's policy refuses before any page
    landed = admin.land(accept_consent(admin.start()))
    assert "declined" in landed["error"]
    assert api.client.get("/api/connections", headers=api.auth).json() == []
    assert pending_consents() == 0


def test_a_used_forged_or_expired_state_is_refused(graph, admin, api):
    back = accept_consent(admin.start())
    assert "connected" in admin.land(back)
    again = admin.land(back)  # the same answer twice (a reload, a replay)
    assert again["error"].startswith("the answer of the sign-in was invalid, expired or already used")
    forged = admin.land(f"{OAUTH}/callback?code=x&state=made-up")
    assert "invalid, expired or already used" in forged["error"]
    assert "lacks its state" in admin.land(f"{OAUTH}/callback?code=x")["error"]
    late = accept_consent(admin.start())
    with session_scope() as session:
        for pending in session.exec(select(ConnectionOAuthState)).all():
            pending.expires_at = pending.expires_at - timedelta(minutes=11)
            session.add(pending)
    assert "invalid, expired or already used" in admin.land(late)["error"]
    assert len(api.client.get("/api/connections", headers=api.auth).json()) == 1


def test_the_callback_must_come_from_the_browser_that_started(graph, admin, api):
    acme = make_mandate(api, "Acme", "acme-admin")
    add_user(api, acme, "bert", ["user"])
    bert = browser(signed_in("bert"))
    # Another browser of the same user (no cookie of this consent).
    back = accept_consent(admin.start())
    stranger = browser(admin.headers)
    assert "started in another browser" in stranger.land(back)["error"]
    assert "invalid, expired or already used" in admin.land(back)["error"]  # the state is used up
    # Bert's state in the admin's browser (a link someone sent): refused, nothing connected for anyone.
    berts = accept_consent(bert.start())
    assert "started in another browser" in admin.land(berts)["error"]
    for headers in (api.auth, bert.headers):
        assert api.client.get("/api/connections", headers=headers).json() == []


def test_a_ticket_works_once_briefly_and_only_for_its_type(graph, admin):
    ticket = admin.ticket().json()["url"]
    assert admin.client.get(ticket).status_code == 302
    used = admin.client.get(ticket)
    assert used.status_code == 302 and "already used" in parse_qs(urlsplit(used.headers["location"]).query)["error"][0]
    other_type = admin.ticket().json()["url"].replace("/oauth/msft/", "/oauth/imap/")
    assert "already used" in parse_qs(urlsplit(admin.client.get(other_type).headers["location"]).query)["error"][0]
    stale = admin.ticket().json()["url"]
    with session_scope() as session:
        for pending in session.exec(select(ConnectionOAuthState)).all():
            pending.expires_at = pending.expires_at - timedelta(minutes=3)
            session.add(pending)
    assert "expired" in parse_qs(urlsplit(admin.client.get(stale).headers["location"]).query)["error"][0]


def test_a_foreign_mandate_or_connection_cannot_be_named(graph, admin, api):
    acme = make_mandate(api, "Acme", "acme-admin")
    add_user(api, acme, "bert", ["user"])
    bert = browser(signed_in("bert"))
    berts = bert.connect()
    assert admin.ticket(mandateId=acme.id).status_code == 404
    assert admin.ticket(connectionId=berts).status_code == 404
    assert bert.ticket(connectionId=berts, mandateId=acme.id).status_code == 201
    assert admin.ticket(label="x" * 201).status_code == 422


def test_a_user_disabled_meanwhile_connects_nothing(graph, admin, api):
    acme = make_mandate(api, "Acme", "acme-admin")
    add_user(api, acme, "bert", ["user"])
    bert = browser(signed_in("bert"))
    back = accept_consent(bert.start())
    with session_scope() as session:
        user = session.exec(select(User).where(User.username == "bert")).one()
        user.disabled = True
        session.add(user)
    assert "disabled" in bert.land(back)["error"]
    with session_scope() as session:
        assert session.exec(select(Connection)).all() == []


def test_a_token_refused_at_the_provider_connects_nothing(graph, admin, monkeypatch):
    configure(monkeypatch, graph, POWERON_MSFT_CLIENT_SECRET="not-the-secret")
    landed = admin.land(accept_consent(admin.start()))
    assert landed["error"].startswith("Microsoft refused the sign-in (invalid_client: AADSTS7000215")
    with session_scope() as session:
        assert session.exec(select(Connection)).all() == []


def test_reconsent_restores_an_expired_connection_of_the_same_account(graph, admin, api):
    connection_id = admin.connect(label="Mine")
    graph.revoke_refresh_tokens()
    graph.expire_access_tokens()
    tested = api.client.post(f"/api/connections/{connection_id}/test", headers=api.auth).json()
    assert tested["ok"] is False and tested["status"] == "expired"
    assert "reconnect it on the Connections page" in tested["message"]
    again = admin.connect(connectionId=connection_id)
    assert again == connection_id
    restored = api.client.get(f"/api/connections/{connection_id}", headers=api.auth).json()
    assert (restored["status"], restored["lastError"], restored["label"]) == ("active", None, "Mine")
    # Connecting the same account again without naming the connection renews it too: no duplicate.
    assert admin.connect() == connection_id
    # Another Microsoft account may not take over the connection.
    graph.user = {**graph.user, "id": "another-user-id", "mail": "eve@contoso.example"}
    landed = admin.land(accept_consent(admin.start(connectionId=connection_id)))
    assert "you signed in as eve@contoso.example, but connection 'Mine' is for anna.meier@contoso.example" \
        in landed["error"]
    assert len(api.client.get("/api/connections", headers=api.auth).json()) == 1
