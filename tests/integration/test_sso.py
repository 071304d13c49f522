"""Single sign-on (OpenID Connect, authorization code flow with PKCE) against a real provider.

A small OpenID Connect provider runs on 127.0.0.1 in a background thread: discovery,
/authorize (answers at once for its configured user, no login form), /token (checks client
credentials, code, redirect_uri and the PKCE verifier; returns an RS256 ID token), /jwks and
/userinfo. The REST API drives the flow through TestClient; the browser's hop to the provider
is an httpx request.
"""

from __future__ import annotations

import base64
import hashlib
import json
import secrets
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, unquote, urlencode, urlsplit

import httpx
import pytest
from fastapi.testclient import TestClient
from joserfc import jwt
from joserfc.jwk import RSAKey
from sqlmodel import select

from backend import sso
from backend.api.app import create_api
from backend.config import reset_settings_cache
from backend.db import session_scope
from backend.db.models import Mandate, Role, SsoExchange, User, UserMandate, UserMandateRole, utcnow

CLIENT_ID = "poweron-test"
CLIENT_SECRET = "s3cret/with+special&chars"
UI_URL = "http://ui.test"
API_URL = "http://testserver"

sqlite_only = pytest.mark.parametrize("db_url", ["sqlite"], indirect=True)


# --- the identity provider ------------------------------------------------------------------


def _s256(verifier: str) -> str:
    return base64.urlsafe_b64encode(hashlib.sha256(verifier.encode()).digest()).rstrip(b"=").decode()


@dataclass
class Provider:
    """An OpenID Connect provider on 127.0.0.1; tests change its behaviour through attributes."""

    issuer: str = ""
    key: RSAKey = field(default_factory=lambda: RSAKey.generate_key(2048, parameters={"kid": "k1", "use": "sig"}))
    # Same key id, other key: a token signed with it has a bad signature.
    rogue_key: RSAKey = field(default_factory=lambda: RSAKey.generate_key(2048, parameters={"kid": "k1"}))
    claims: dict[str, Any] = field(default_factory=dict)
    userinfo: dict[str, Any] = field(default_factory=dict)
    id_token_changes: dict[str, Any] = field(default_factory=dict)
    sign_with_rogue_key: bool = False
    auth_methods: list[str] = field(default_factory=list)
    deny: bool = False
    codes: dict[str, dict[str, Any]] = field(default_factory=dict)
    token_calls: list[dict[str, Any]] = field(default_factory=list)

    def reset(self) -> None:
        self.claims = {"sub": "u-1001", "email": "jane.doe@example.com", "email_verified": True,
                       "preferred_username": "jdoe", "name": "Jane Doe"}
        self.userinfo = {}
        self.id_token_changes = {}
        self.sign_with_rogue_key = False
        self.auth_methods = ["client_secret_basic", "client_secret_post"]
        self.deny = False
        self.codes.clear()
        self.token_calls.clear()

    def metadata(self) -> dict[str, Any]:
        return {
            "issuer": self.issuer,
            "authorization_endpoint": f"{self.issuer}/authorize",
            "token_endpoint": f"{self.issuer}/token",
            "jwks_uri": f"{self.issuer}/jwks",
            "userinfo_endpoint": f"{self.issuer}/userinfo",
            "response_types_supported": ["code"],
            "subject_types_supported": ["public"],
            "id_token_signing_alg_values_supported": ["RS256"],
            "token_endpoint_auth_methods_supported": self.auth_methods,
            "code_challenge_methods_supported": ["S256"],
        }

    def id_token(self, nonce: str) -> str:
        now = int(time.time())
        claims = {"iss": self.issuer, "aud": CLIENT_ID, "iat": now, "exp": now + 300, "nonce": nonce,
                  **self.claims, **self.id_token_changes}
        claims = {k: v for k, v in claims.items() if v is not None}
        key = self.rogue_key if self.sign_with_rogue_key else self.key
        return jwt.encode({"alg": "RS256", "kid": "k1"}, claims, key)


def _handler_for(provider: Provider) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *_args) -> None:  # keep the test output clean
            pass

        def _json(self, status: int, body: Any) -> None:
            data = json.dumps(body).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def _redirect(self, url: str) -> None:
            self.send_response(302)
            self.send_header("Location", url)
            self.send_header("Content-Length", "0")
            self.end_headers()

        def do_GET(self) -> None:  # noqa: N802 - http.server's naming
            url = urlsplit(self.path)
            query = {k: v[0] for k, v in parse_qs(url.query).items()}
            if url.path == "/.well-known/openid-configuration":
                self._json(200, provider.metadata())
            elif url.path == "/jwks":
                self._json(200, {"keys": [provider.key.as_dict(private=False)]})
            elif url.path == "/authorize":
                self._authorize(query)
            elif url.path == "/userinfo":
                auth = self.headers.get("Authorization", "")
                if not auth.startswith("Bearer at-"):
                    self._json(401, {"error": "invalid_token"})
                else:
                    self._json(200, {"sub": provider.claims.get("sub"), **provider.userinfo})
            else:
                self._json(404, {"error": "not_found"})

        def _authorize(self, query: dict[str, str]) -> None:
            problems = [
                name for name, ok in (
                    ("client_id", query.get("client_id") == CLIENT_ID),
                    ("response_type", query.get("response_type") == "code"),
                    ("scope", "openid" in query.get("scope", "").split()),
                    ("code_challenge_method", query.get("code_challenge_method") == "S256"),
                    ("code_challenge", bool(query.get("code_challenge"))),
                    ("nonce", bool(query.get("nonce"))),
                    ("state", bool(query.get("state"))),
                    ("redirect_uri", query.get("redirect_uri") == f"{API_URL}/api/auth/oidc/callback"),
                ) if not ok
            ]
            if problems:
                self._json(400, {"error": "invalid_request", "error_description": ", ".join(problems)})
                return
            back = query["redirect_uri"]
            if provider.deny:
                self._redirect(f"{back}?{urlencode({'error': 'access_denied', 'state': query['state']})}")
                return
            code = secrets.token_urlsafe(16)
            provider.codes[code] = {"redirect_uri": back, "challenge": query["code_challenge"],
                                    "nonce": query["nonce"]}
            self._redirect(f"{back}?{urlencode({'code': code, 'state': query['state']})}")

        def do_POST(self) -> None:  # noqa: N802 - http.server's naming
            if urlsplit(self.path).path != "/token":
                self._json(404, {"error": "not_found"})
                return
            length = int(self.headers.get("Content-Length", "0"))
            form = {k: v[0] for k, v in parse_qs(self.rfile.read(length).decode()).items()}
            auth = self.headers.get("Authorization", "")
            if auth.startswith("Basic "):
                user, _, password = base64.b64decode(auth[6:]).decode().partition(":")
                client_id, secret, method = unquote(user), unquote(password), "client_secret_basic"
            else:
                client_id, secret, method = form.get("client_id"), form.get("client_secret"), "client_secret_post"
            provider.token_calls.append({"method": method, **form})
            if method not in provider.auth_methods or client_id != CLIENT_ID or secret != CLIENT_SECRET:
                self._json(401, {"error": "invalid_client"})
                return
            grant = provider.codes.pop(form.get("code", ""), None)
            if (
                form.get("grant_type") != "authorization_code"
                or grant is None
                or form.get("redirect_uri") != grant["redirect_uri"]
                or _s256(form.get("code_verifier", "")) != grant["challenge"]
            ):
                self._json(400, {"error": "invalid_grant"})
                return
            self._json(200, {"access_token": "at-" + secrets.token_hex(8), "token_type": "Bearer",
                             "expires_in": 300, "id_token": provider.id_token(grant["nonce"])})

    return Handler


@pytest.fixture(scope="module")
def _provider_server() -> Iterator[Provider]:
    provider = Provider()
    server = ThreadingHTTPServer(("127.0.0.1", 0), _handler_for(provider))
    provider.issuer = f"http://127.0.0.1:{server.server_address[1]}"
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield provider
    finally:
        server.shutdown()
        server.server_close()


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
