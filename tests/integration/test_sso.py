"""Single sign-on (OpenID Connect, authorization code flow with PKCE) against a real provider.

A small OpenID Connect provider (tests/oidc_provider.py) runs on 127.0.0.1 in a background
thread: discovery, /authorize (answers at once for its configured user, no login form), /token
(checks client credentials, code, redirect_uri and the PKCE verifier; returns an RS256 ID
token), /jwks and /userinfo. The REST API drives the flow through TestClient; the browser's
hop to the provider is an httpx request.
"""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Iterator
from datetime import timedelta
from typing import Any
from urllib.parse import parse_qs, urlsplit

import httpx
import pytest
from fastapi.testclient import TestClient
from sqlmodel import select

from backend import sso
from backend.api.app import create_api
from backend.config import reset_settings_cache
from backend.db import session_scope
from backend.db.models import Mandate, Role, SsoExchange, User, UserMandate, UserMandateRole, utcnow
from tests.oidc_provider import Provider, serve

CLIENT_ID = "poweron-test"
CLIENT_SECRET = "s3cret/with+special&chars"
UI_URL = "http://ui.test"
API_URL = "http://testserver"

sqlite_only = pytest.mark.parametrize("db_url", ["sqlite"], indirect=True)


# --- the identity provider (tests/oidc_provider.py) ----------------------------------------


@pytest.fixture(scope="module")
def _provider_server() -> Iterator[Provider]:
    registered = Provider(client_id=CLIENT_ID, client_secret=CLIENT_SECRET,
                          redirect_uri=f"{API_URL}/api/auth/oidc/callback")
    with serve(registered) as provider:
        yield provider


@pytest.fixture
def provider(_provider_server: Provider) -> Provider:
    _provider_server.reset()
    return _provider_server


@pytest.fixture
def client(app_config: str, provider: Provider, monkeypatch: pytest.MonkeyPatch) -> Iterator[TestClient]:
    """The REST API with single sign-on pointed at the test provider."""
    monkeypatch.setenv("POWERON_OIDC_ISSUER", provider.issuer)
    monkeypatch.setenv("POWERON_OIDC_CLIENT_ID", CLIENT_ID)
    monkeypatch.setenv("POWERON_OIDC_CLIENT_SECRET", CLIENT_SECRET)
    monkeypatch.setenv("POWERON_UI_URL", UI_URL)
    monkeypatch.setenv("POWERON_API_URL", API_URL)
    monkeypatch.delenv("POWERON_OIDC_MANDATE", raising=False)
    monkeypatch.delenv("POWERON_OIDC_ROLES", raising=False)
    reset_settings_cache()
    sso.clear_cache()
    with TestClient(create_api(), follow_redirects=False) as test_client:
        yield test_client
    sso.clear_cache()


# --- the browser's part of the flow ---------------------------------------------------------


def start(client: TestClient) -> str:
    """GET /api/auth/oidc/login: the provider's authorization URL."""
    response = client.get("/api/auth/oidc/login")
    assert response.status_code == 302, response.text
    return response.headers["location"]


def authorize(url: str) -> str:
    """The browser at the provider: the callback URL it is sent back to."""
    response = httpx.get(url, follow_redirects=False)
    assert response.status_code == 302, response.text
    return response.headers["location"]


def callback(client: TestClient, url: str) -> tuple[str, dict[str, str]]:
    """GET the callback; the UI page it redirects to and that page's query parameters."""
    response = client.get(url)
    assert response.status_code == 302, response.text
    target = urlsplit(response.headers["location"])
    return f"{target.scheme}://{target.netloc}{target.path}", {k: v[0] for k, v in parse_qs(target.query).items()}


def sso_code(client: TestClient) -> str:
    """A complete sign-in; the one-time exchange code the UI gets."""
    page, query = callback(client, authorize(start(client)))
    assert page == f"{UI_URL}/sso", query
    return query["code"]


def sso_error(client: TestClient) -> str:
    """A sign-in that must fail; the message the login page shows."""
    page, query = callback(client, authorize(start(client)))
    assert page == f"{UI_URL}/login", query
    return query["sso_error"]


def exchange(client: TestClient, code: str) -> dict[str, Any]:
    response = client.post("/api/auth/oidc/exchange", json={"code": code})
    assert response.status_code == 200, response.text
    return response.json()


def sso_login(client: TestClient) -> dict[str, Any]:
    return exchange(client, sso_code(client))


def mandate_roles(user_id: str, mandate_name: str = "Default") -> list[str]:
    with session_scope() as session:
        return sorted(session.exec(
            select(Role.role_label)
            .join(UserMandateRole, UserMandateRole.role_id == Role.id)
            .join(UserMandate, UserMandate.id == UserMandateRole.user_mandate_id)
            .join(Mandate, Mandate.id == UserMandate.mandate_id)
            .where(UserMandate.user_id == user_id, Mandate.name == mandate_name)
        ).all())


def user_count() -> int:
    with session_scope() as session:
        return len(session.exec(select(User.id)).all())


def add_user(username: str, email: str, disabled: bool = False) -> str:
    with session_scope() as session:
        user = User(username=username, email=email, disabled=disabled)
        session.add(user)
        session.flush()
        return user.id


# --- tests ----------------------------------------------------------------------------------


def test_full_login_creates_member_with_role_and_working_token(client: TestClient, provider: Provider) -> None:
    auth_url = start(client)
    params = parse_qs(urlsplit(auth_url).query)
    assert auth_url.startswith(f"{provider.issuer}/authorize?")
    assert params["code_challenge_method"] == ["S256"] and params["redirect_uri"] == [
        f"{API_URL}/api/auth/oidc/callback"]

    page, query = callback(client, authorize(auth_url))
    assert page == f"{UI_URL}/sso" and set(query) == {"code"}
    assert "token" not in json.dumps(query)
    body = exchange(client, query["code"])
    assert body["token"].startswith("pon_") and body["userId"]

    me = client.get("/api/me", headers={"Authorization": f"Bearer {body['token']}"})
    assert me.status_code == 200, me.text
    assert me.json()["id"] == body["userId"]
    assert me.json()["username"] == "jdoe"
    assert [m["name"] for m in me.json()["mandates"]] == ["Default"]
    assert mandate_roles(body["userId"]) == ["user"]
    with session_scope() as session:
        user = session.get(User, body["userId"])
        assert (user.email, user.password_hash, user.display_name) == ("jane.doe@example.com", None, "Jane Doe")
    assert provider.token_calls[-1]["method"] == "client_secret_basic"


@sqlite_only
def test_second_login_matches_the_same_user_by_email_case_insensitively(
    client: TestClient, provider: Provider
) -> None:
    first = sso_login(client)
    count = user_count()
    provider.claims.update(email="Jane.DOE@Example.COM", preferred_username="someone-else")
    second = sso_login(client)
    assert second["userId"] == first["userId"]
    assert second["token"] != first["token"]
    assert user_count() == count


@sqlite_only
def test_existing_local_account_is_matched_by_email_and_keeps_its_roles(
    client: TestClient, provider: Provider
) -> None:
    alice = add_user("alice", "Alice@Example.org")
    provider.claims.update(email="alice@example.ORG", preferred_username="alice.sso")
    assert sso_login(client)["userId"] == alice
    assert mandate_roles(alice) == []  # matched users are not re-provisioned


@sqlite_only
def test_new_username_is_made_unique(client: TestClient, provider: Provider) -> None:
    provider.claims.update(email="boss@example.com", preferred_username="ADMIN")
    token = sso_login(client)["token"]
    me = client.get("/api/me", headers={"Authorization": f"Bearer {token}"}).json()
    assert me["username"] == "ADMIN-2"
    provider.claims.update(email="x@example.com", preferred_username=None)
    token = sso_login(client)["token"]
    assert client.get("/api/me", headers={"Authorization": f"Bearer {token}"}).json()["username"] == "x"


@sqlite_only
def test_configured_mandate_and_roles_are_granted(
    client: TestClient, provider: Provider, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("POWERON_OIDC_ROLES", "viewer, user")
    reset_settings_cache()
    assert mandate_roles(sso_login(client)["userId"]) == ["user", "viewer"]

    monkeypatch.setenv("POWERON_OIDC_MANDATE", "No such mandate")
    reset_settings_cache()
    provider.claims.update(email="other@example.com")
    assert "unknown mandate" in sso_error(client)


@sqlite_only
def test_replayed_state_is_refused(client: TestClient) -> None:
    callback_url = authorize(start(client))
    page, _ = callback(client, callback_url)
    assert page == f"{UI_URL}/sso"
    page, query = callback(client, callback_url)
    assert page == f"{UI_URL}/login"
    assert "already used" in query["sso_error"]


@sqlite_only
def test_unknown_state_and_other_browser_are_refused(client: TestClient) -> None:
    callback_url = authorize(start(client))
    forged = callback_url.replace("state=", "state=x")
    assert "already used" in callback(client, forged)[1]["sso_error"]

    callback_url = authorize(start(client))
    with TestClient(create_api(), follow_redirects=False) as other_browser:  # no state cookie
        page, query = callback(other_browser, callback_url)
    assert page == f"{UI_URL}/login" and "another browser" in query["sso_error"]


@sqlite_only
@pytest.mark.parametrize(
    ("change", "reason"),
    [
        pytest.param({"nonce": "not-the-nonce"}, "wrong nonce", id="wrong-nonce"),
        pytest.param({"nonce": None}, "missing nonce", id="missing-nonce"),
        pytest.param({"aud": "someone-else"}, "wrong aud", id="wrong-aud"),
        pytest.param({"aud": ["someone-else", CLIENT_ID]}, "wrong azp", id="wrong-azp"),
        pytest.param({"iss": "http://evil.example"}, "wrong iss", id="wrong-iss"),
        pytest.param({"exp": int(time.time()) - 3600, "iat": int(time.time()) - 7200}, "expired", id="expired"),
        pytest.param({"sub": None}, "missing sub", id="missing-sub"),
        pytest.param("rogue key", "bad signature", id="bad-signature"),
    ],
)
def test_invalid_id_tokens_are_refused(
    client: TestClient, provider: Provider, change: dict[str, Any] | str, reason: str
) -> None:
    count = user_count()
    if change == "rogue key":
        provider.sign_with_rogue_key = True
    else:
        provider.id_token_changes = change
    message = sso_error(client)
    assert message == f"invalid ID token: {reason}"
    assert user_count() == count


@sqlite_only
def test_exchange_code_is_single_use(client: TestClient) -> None:
    code = sso_code(client)
    assert exchange(client, code)["token"]
    again = client.post("/api/auth/oidc/exchange", json={"code": code})
    assert again.status_code == 400
    assert "already used" in again.json()["detail"]
    assert client.post("/api/auth/oidc/exchange", json={"code": "made-up"}).status_code == 400


@sqlite_only
def test_exchange_code_expires_after_a_minute(client: TestClient) -> None:
    code = sso_code(client)
    with session_scope() as session:
        row = session.get(SsoExchange, hashlib.sha256(code.encode()).hexdigest())
        assert timedelta(seconds=55) < row.expires_at - utcnow() <= timedelta(seconds=60)
        row.expires_at = utcnow() - timedelta(seconds=1)
        session.add(row)
    response = client.post("/api/auth/oidc/exchange", json={"code": code})
    assert response.status_code == 400
    assert "expired" in response.json()["detail"]


@sqlite_only
def test_disabled_user_is_refused(client: TestClient, provider: Provider) -> None:
    add_user("gone", "gone@example.com", disabled=True)
    provider.claims.update(email="gone@example.com")
    assert sso_error(client) == "this account is disabled"

    # Disabled between the callback and the exchange.
    provider.claims.update(email="jane.doe@example.com")
    user_id = sso_login(client)["userId"]
    code = sso_code(client)
    with session_scope() as session:
        session.get(User, user_id).disabled = True
    response = client.post("/api/auth/oidc/exchange", json={"code": code})
    assert response.status_code == 400 and response.json()["detail"] == "this account is disabled"


@sqlite_only
def test_email_claim_is_required_and_may_come_from_userinfo(client: TestClient, provider: Provider) -> None:
    provider.claims.pop("email")
    assert "no e-mail address" in sso_error(client)

    provider.userinfo = {"email": "Jane.Info@example.com", "email_verified": True}
    user_id = sso_login(client)["userId"]
    with session_scope() as session:
        assert session.get(User, user_id).email == "Jane.Info@example.com"

    provider.claims.update(email="unverified@example.com", email_verified=False)
    assert "not verified" in sso_error(client)


@sqlite_only
def test_token_endpoint_errors_and_client_secret_post(
    client: TestClient, provider: Provider, monkeypatch: pytest.MonkeyPatch
) -> None:
    provider.auth_methods = ["client_secret_post"]
    sso.clear_cache()
    assert sso_login(client)["token"]
    assert provider.token_calls[-1]["method"] == "client_secret_post"

    monkeypatch.setenv("POWERON_OIDC_CLIENT_SECRET", "wrong")
    reset_settings_cache()
    assert sso_error(client) == "the identity provider refused the sign-in (invalid_client)"


@sqlite_only
def test_provider_refusal_and_unreachable_provider(
    client: TestClient, provider: Provider, monkeypatch: pytest.MonkeyPatch
) -> None:
    provider.deny = True
    assert sso_error(client) == "the identity provider refused the sign-in (access_denied)"

    monkeypatch.setenv("POWERON_OIDC_ISSUER", "http://127.0.0.1:9")  # discard port: nothing listens
    reset_settings_cache()
    response = client.get("/api/auth/oidc/login")
    assert response.status_code == 302
    target = urlsplit(response.headers["location"])
    assert f"{target.scheme}://{target.netloc}{target.path}" == f"{UI_URL}/login"
    assert parse_qs(target.query)["sso_error"] == ["the identity provider is unreachable"]


@sqlite_only
def test_sso_disabled(app_config: str, monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("POWERON_OIDC_ISSUER", "POWERON_OIDC_CLIENT_ID", "POWERON_OIDC_CLIENT_SECRET"):
        monkeypatch.delenv(name, raising=False)
    reset_settings_cache()
    with TestClient(create_api(), follow_redirects=False) as plain:
        assert plain.get("/api/auth/oidc").json() == {"enabled": False}
        response = plain.get("/api/auth/oidc/login")
        assert response.status_code == 404
        assert "single sign-on is not configured" in response.json()["detail"]
        assert "POWERON_OIDC_ISSUER" in response.json()["detail"]
        assert plain.get("/api/auth/oidc/callback?state=a&code=b").status_code == 404
        assert plain.post("/api/auth/oidc/exchange", json={"code": "x"}).status_code == 404


@sqlite_only
def test_enabled_flag_and_public_permission_declarations(client: TestClient) -> None:
    assert client.get("/api/auth/oidc").json() == {"enabled": True}
    paths = client.get("/api/openapi.json").json()["paths"]
    for path, method in [("/api/auth/oidc", "get"), ("/api/auth/oidc/login", "get"),
                         ("/api/auth/oidc/callback", "get"), ("/api/auth/oidc/exchange", "post")]:
        assert paths[path][method]["x-permission"] == {"kind": "public"}, path
