"""A small OpenID Connect provider on 127.0.0.1 for the single sign-on tests.

It serves discovery, /authorize (answers at once for its configured user, no login form),
/token (checks client credentials, code, redirect_uri and the PKCE verifier; returns an RS256
ID token), /jwks and /userinfo. Tests change its behaviour through the attributes of
:class:`Provider`; :func:`serve` runs it in a background thread.

Used by the REST-level tests (tests/integration/test_sso.py) and by the browser tests
(tests/e2e, one provider for the session next to the app started by `reflex run`).
"""

from __future__ import annotations

import base64
import hashlib
import json
import secrets
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, unquote, urlencode, urlsplit

from joserfc import jwt
from joserfc.jwk import RSAKey

DEFAULT_CLAIMS: dict[str, Any] = {"sub": "u-1001", "email": "jane.doe@example.com", "email_verified": True,
                                  "preferred_username": "jdoe", "name": "Jane Doe"}


def _s256(verifier: str) -> str:
    return base64.urlsafe_b64encode(hashlib.sha256(verifier.encode()).digest()).rstrip(b"=").decode()


@dataclass
class Provider:
    """An OpenID Connect provider for one registered client; tests change its behaviour through attributes.

    Args:
        client_id: The only client it knows.
        client_secret: That client's secret.
        redirect_uri: The only redirect URI registered for the client (the app's callback).
    """

    client_id: str
    client_secret: str
    redirect_uri: str
    issuer: str = ""  # set by `serve`
    key: RSAKey = field(default_factory=lambda: RSAKey.generate_key(2048, parameters={"kid": "k1", "use": "sig"}))
    # Same key id, other key: a token signed with it has a bad signature.
    rogue_key: RSAKey = field(default_factory=lambda: RSAKey.generate_key(2048, parameters={"kid": "k1"}))
    claims: dict[str, Any] = field(default_factory=dict)
    userinfo: dict[str, Any] = field(default_factory=dict)
    id_token_changes: dict[str, Any] = field(default_factory=dict)
    sign_with_rogue_key: bool = False
    auth_methods: list[str] = field(default_factory=list)
    deny: bool = False  # answer /authorize with error=access_denied
    codes: dict[str, dict[str, Any]] = field(default_factory=dict)
    token_calls: list[dict[str, Any]] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.reset()

    def reset(self) -> None:
        """Back to the defaults: user Jane Doe (jdoe), both client auth methods, no refusal."""
        self.claims = dict(DEFAULT_CLAIMS)
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
        claims = {"iss": self.issuer, "aud": self.client_id, "iat": now, "exp": now + 300, "nonce": nonce,
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
                    ("client_id", query.get("client_id") == provider.client_id),
                    ("response_type", query.get("response_type") == "code"),
                    ("scope", "openid" in query.get("scope", "").split()),
                    ("code_challenge_method", query.get("code_challenge_method") == "S256"),
                    ("code_challenge", bool(query.get("code_challenge"))),
                    ("nonce", bool(query.get("nonce"))),
                    ("state", bool(query.get("state"))),
                    ("redirect_uri", query.get("redirect_uri") == provider.redirect_uri),
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
            if (method not in provider.auth_methods or client_id != provider.client_id
                    or secret != provider.client_secret):
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


@contextmanager
def serve(provider: Provider) -> Iterator[Provider]:
    """Run `provider` on a free port of 127.0.0.1 (sets its issuer) until the block ends."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), _handler_for(provider))
    provider.issuer = f"http://127.0.0.1:{server.server_address[1]}"
    thread = threading.Thread(target=server.serve_forever, name="oidc-provider", daemon=True)
    thread.start()
    try:
        yield provider
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=10)
