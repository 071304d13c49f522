"""Single sign-on with an OpenID Connect provider (authorization code flow with PKCE).

The flow, as the REST routes in `backend.api.sso` drive it:

1. :func:`begin_login` fetches the provider metadata, stores a pending sign-in (`state`
   digest, `nonce`, PKCE verifier; ten minutes, single use) and returns the provider's
   authorization URL. The route also puts `state` into an HttpOnly cookie, so that only the
   browser that started the sign-in can finish it (no login CSRF).
2. The provider sends the browser back to the callback; :func:`finish_login` consumes the
   pending sign-in, trades the code at the token endpoint, validates the ID token
   (signature from the provider's JWKS, `iss`, `aud`, `exp`, `iat`, `nonce`), matches the
   user by e-mail or creates one, and returns a one-time exchange code (60 seconds).
3. The UI (another origin) trades that code for a PowerOn login token with
   :func:`exchange_code`, server-side, so no token ever appears in a URL.

Every failure raises :class:`SsoError` with a short message fit to show to the user; the
details go to the log. Authlib provides the PKCE and URL helpers; the ID token is checked
with joserfc, Authlib's JOSE implementation (`authlib.jose` is deprecated in its favour).
"""

from __future__ import annotations

import hashlib
import hmac
import logging
import re
import secrets
import threading
import time
from dataclasses import dataclass
from datetime import timedelta
from typing import Any
from urllib.parse import quote, urlencode

import httpx
from authlib.common.urls import add_params_to_uri
from authlib.oauth2.rfc7636 import create_s256_code_challenge
from joserfc import jwt
from joserfc.errors import ClaimError, ExpiredTokenError, JoseError, MissingClaimError
from joserfc.jwk import KeySet
from sqlalchemy import delete, func
from sqlmodel import Session, select

from backend.auth import IssuedToken, issue_token
from backend.config import Settings, get_settings
from backend.db import session_scope
from backend.db.models import Mandate, OidcLogin, SsoExchange, User, utcnow
from backend.errors import InvalidInput
from backend.tenancy import grant_mandate_roles

log = logging.getLogger(__name__)

LOGIN_TTL = timedelta(minutes=10)
EXCHANGE_TTL = timedelta(seconds=60)
METADATA_TTL_SECONDS = 300.0
HTTP_TIMEOUT_SECONDS = 10.0
CLOCK_LEEWAY_SECONDS = 60
SCOPES = "openid email profile"
# Asymmetric algorithms only: a symmetric one would accept tokens signed with public data.
ALLOWED_ALGORITHMS = ("RS256", "RS384", "RS512", "PS256", "PS384", "PS512", "ES256", "ES384", "ES512", "EdDSA")
CALLBACK_PATH = "/api/auth/oidc/callback"
NOT_CONFIGURED_MESSAGE = (
    "single sign-on is not configured: set POWERON_OIDC_ISSUER, POWERON_OIDC_CLIENT_ID and "
    "POWERON_OIDC_CLIENT_SECRET"
)
USERNAME_MAX = 150


class SsoError(Exception):
    """Single sign-on failed; the message is short and safe to show to the user."""


class SsoNotConfigured(SsoError):
    """Issuer, client id or client secret is missing."""

    def __init__(self) -> None:
        super().__init__(NOT_CONFIGURED_MESSAGE)


@dataclass(frozen=True)
class LoginStart:
    """Where to send the browser, and the `state` to bind to it (cookie)."""

    url: str
    state: str


def is_enabled() -> bool:
    """Whether single sign-on is configured."""
    return get_settings().sso_enabled


def _settings() -> Settings:
    settings = get_settings()
    if not settings.sso_enabled:
        raise SsoNotConfigured()
    return settings


def redirect_uri(settings: Settings | None = None) -> str:
    """The callback URL registered at the provider: `{POWERON_API_URL}/api/auth/oidc/callback`."""
    return (settings or get_settings()).api_url + CALLBACK_PATH


def ui_success_url(exchange: str) -> str:
    """The UI page that trades the one-time code for a token."""
    return f"{get_settings().ui_url}/sso?{urlencode({'code': exchange})}"


def ui_error_url(message: str) -> str:
    """The UI login page showing why single sign-on failed."""
    return f"{get_settings().ui_url}/login?{urlencode({'sso_error': message})}"


def _digest(value: str) -> str:
    return hashlib.sha256(value.encode()).hexdigest()


# --- provider metadata and keys (cached briefly) -------------------------------------------

_cache: dict[str, tuple[float, Any]] = {}
_cache_lock = threading.Lock()


def clear_cache() -> None:
    """Forget cached provider metadata and keys (the next sign-in fetches them again)."""
    with _cache_lock:
        _cache.clear()


def _cached(key: str) -> Any | None:
    with _cache_lock:
        hit = _cache.get(key)
        if hit is not None and time.monotonic() - hit[0] < METADATA_TTL_SECONDS:
            return hit[1]
    return None


def _store(key: str, value: Any) -> None:
    with _cache_lock:
        _cache[key] = (time.monotonic(), value)


def _get_json(url: str, what: str) -> Any:
    try:
        response = httpx.get(url, timeout=HTTP_TIMEOUT_SECONDS, headers={"Accept": "application/json"})
    except httpx.HTTPError as exc:
        log.warning("single sign-on: %s at %s unreachable: %s", what, url, exc)
        raise SsoError("the identity provider is unreachable") from exc
    if response.status_code != 200:
        log.warning("single sign-on: %s at %s answered %s: %.300s", what, url, response.status_code, response.text)
        raise SsoError(f"the identity provider answered {response.status_code} for its {what}")
    try:
        return response.json()
    except ValueError as exc:
        log.warning("single sign-on: %s at %s is not JSON: %.300s", what, url, response.text)
        raise SsoError(f"the identity provider sent an invalid {what}") from exc


def provider_metadata(issuer: str) -> dict[str, Any]:
    """The provider's discovery document (`{issuer}/.well-known/openid-configuration`), checked."""
    key = f"metadata:{issuer}"
    cached = _cached(key)
    if cached is not None:
        return cached
    metadata = _get_json(issuer.rstrip("/") + "/.well-known/openid-configuration", "discovery document")
    if not isinstance(metadata, dict):
        raise SsoError("the identity provider sent an invalid discovery document")
    if str(metadata.get("issuer", "")).rstrip("/") != issuer.rstrip("/"):
        log.warning("single sign-on: discovery names issuer %r, configured is %r", metadata.get("issuer"), issuer)
        raise SsoError("the identity provider names another issuer than POWERON_OIDC_ISSUER")
    missing = [k for k in ("authorization_endpoint", "token_endpoint", "jwks_uri") if not metadata.get(k)]
    if missing:
        raise SsoError(f"the identity provider's discovery document lacks {', '.join(missing)}")
    _store(key, metadata)
    return metadata


def _key_set(jwks_uri: str, refresh: bool = False) -> KeySet:
    key = f"jwks:{jwks_uri}"
    cached = None if refresh else _cached(key)
    if cached is not None:
        return cached
    document = _get_json(jwks_uri, "signing keys")
    try:
        keys = KeySet.import_key_set(document)
    except (JoseError, ValueError, TypeError, KeyError) as exc:
        log.warning("single sign-on: JWKS at %s unusable: %s", jwks_uri, exc)
        raise SsoError("the identity provider published unusable signing keys") from exc
    _store(key, keys)
    return keys


# --- 1. start --------------------------------------------------------------------------------


def begin_login() -> LoginStart:
    """Store a pending sign-in and return the provider's authorization URL.

    Raises:
        SsoNotConfigured: single sign-on is off.
        SsoError: the provider cannot be reached or its metadata is unusable.
    """
    settings = _settings()
    metadata = provider_metadata(settings.oidc_issuer)
    state = secrets.token_urlsafe(32)
    nonce = secrets.token_urlsafe(32)
    verifier = secrets.token_urlsafe(64)  # 86 characters, within PKCE's 43..128
    now = utcnow()
    with session_scope() as session:
        session.execute(delete(OidcLogin).where(OidcLogin.expires_at < now))
        session.execute(delete(SsoExchange).where(SsoExchange.expires_at < now))
        session.add(OidcLogin(state_hash=_digest(state), nonce=nonce, code_verifier=verifier,
                              created_at=now, expires_at=now + LOGIN_TTL))
    url = add_params_to_uri(metadata["authorization_endpoint"], [
        ("response_type", "code"),
        ("client_id", settings.oidc_client_id),
        ("redirect_uri", redirect_uri(settings)),
        ("scope", SCOPES),
        ("state", state),
        ("nonce", nonce),
        ("code_challenge", create_s256_code_challenge(verifier)),
        ("code_challenge_method", "S256"),
    ])
    return LoginStart(url=url, state=state)


# --- 2. callback -----------------------------------------------------------------------------


def _consume_login(state: str) -> OidcLogin:
    """The pending sign-in for `state`, deleted in its own committed transaction (single use)."""
    digest = _digest(state)
    with session_scope() as session:
        pending = session.get(OidcLogin, digest)
        deleted = session.execute(delete(OidcLogin).where(OidcLogin.state_hash == digest)).rowcount
    # Of two concurrent callbacks with the same state only one deletes the row.
    if pending is None or deleted != 1 or pending.expires_at <= utcnow():
        raise SsoError("the sign-in link is invalid, expired or was already used; please sign in again")
    return pending


def _token_auth(settings: Settings, metadata: dict[str, Any]) -> tuple[dict[str, str], httpx.Auth | None]:
    """Client authentication the provider supports: client_secret_basic (preferred) or _post."""
    supported = metadata.get("token_endpoint_auth_methods_supported") or ["client_secret_basic"]
    if "client_secret_basic" in supported:
        # RFC 6749 §2.3.1: both parts are form-encoded before Basic encoding.
        return {}, httpx.BasicAuth(quote(settings.oidc_client_id, safe=""), quote(settings.oidc_client_secret, safe=""))
    if "client_secret_post" in supported:
        return {"client_id": settings.oidc_client_id, "client_secret": settings.oidc_client_secret}, None
    raise SsoError("the identity provider supports neither client_secret_basic nor client_secret_post")


def _redeem_code(settings: Settings, metadata: dict[str, Any], code: str, verifier: str) -> dict[str, Any]:
    """Trade the authorization code for tokens at the token endpoint."""
    extra, auth = _token_auth(settings, metadata)
    form = {"grant_type": "authorization_code", "code": code, "redirect_uri": redirect_uri(settings),
            "code_verifier": verifier, **extra}
    try:
        response = httpx.post(metadata["token_endpoint"], data=form, auth=auth, timeout=HTTP_TIMEOUT_SECONDS,
                              headers={"Accept": "application/json"})
    except httpx.HTTPError as exc:
        log.warning("single sign-on: token endpoint unreachable: %s", exc)
        raise SsoError("the identity provider is unreachable") from exc
    try:
        body = response.json()
    except ValueError:
        body = None
    if response.status_code != 200 or not isinstance(body, dict):
        error = body.get("error") if isinstance(body, dict) else None
        log.warning("single sign-on: token endpoint answered %s: %.300s", response.status_code, response.text)
        raise SsoError(f"the identity provider refused the sign-in ({error or f'HTTP {response.status_code}'})")
    if not isinstance(body.get("id_token"), str):
        raise SsoError("the identity provider sent no ID token")
    return body


def _reason(exc: JoseError) -> str:
    """A few words on why the ID token was refused."""
    if isinstance(exc, ExpiredTokenError):
        return "expired"
    if isinstance(exc, MissingClaimError):
        return f"missing {exc.claim}"
    if isinstance(exc, ClaimError):
        return f"wrong {exc.claim}"
    if exc.error in ("bad_signature", "invalid_key_id", "missing_key"):
        return "bad signature"
    return exc.error.replace("_", " ") or "unreadable"


def _validate_id_token(settings: Settings, metadata: dict[str, Any], id_token: str, nonce: str) -> dict[str, Any]:
    """Verify signature and claims of the ID token; its claims on success."""
    offered = metadata.get("id_token_signing_alg_values_supported") or ["RS256"]
    algorithms = [alg for alg in offered if alg in ALLOWED_ALGORITHMS] or ["RS256"]
    try:
        try:
            token = jwt.decode(id_token, _key_set(metadata["jwks_uri"]), algorithms=algorithms)
        except JoseError:
            # The provider may have rotated its keys since they were cached: fetch them once more.
            token = jwt.decode(id_token, _key_set(metadata["jwks_uri"], refresh=True), algorithms=algorithms)
        claims = token.claims
        jwt.JWTClaimsRegistry(
            leeway=CLOCK_LEEWAY_SECONDS,
            iss={"essential": True, "value": metadata["issuer"]},
            aud={"essential": True, "value": settings.oidc_client_id},
            sub={"essential": True},
            exp={"essential": True},
            iat={"essential": True},
            nonce={"essential": True, "value": nonce},
        ).validate(claims)
    except JoseError as exc:
        log.warning("single sign-on: ID token refused: %r", exc)
        raise SsoError(f"invalid ID token: {_reason(exc)}") from exc
    except ValueError as exc:  # malformed compact serialization
        log.warning("single sign-on: ID token unreadable: %r", exc)
        raise SsoError("invalid ID token: unreadable") from exc
    audiences = claims["aud"] if isinstance(claims["aud"], list) else [claims["aud"]]
    if len(audiences) > 1 and claims.get("azp") != settings.oidc_client_id:
        raise SsoError("invalid ID token: wrong azp")
    return claims


def _userinfo(metadata: dict[str, Any], access_token: str | None, subject: str) -> dict[str, Any]:
    """Claims from the userinfo endpoint (for providers that keep e-mail out of the ID token)."""
    endpoint = metadata.get("userinfo_endpoint")
    if not endpoint or not access_token:
        return {}
    try:
        response = httpx.get(endpoint, timeout=HTTP_TIMEOUT_SECONDS,
                             headers={"Authorization": f"Bearer {access_token}", "Accept": "application/json"})
        info = response.json() if response.status_code == 200 else {}
    except (httpx.HTTPError, ValueError) as exc:
        log.warning("single sign-on: userinfo failed: %s", exc)
        return {}
    # OIDC Core §5.3.2: the userinfo answer must be about the same subject.
    return info if isinstance(info, dict) and info.get("sub") == subject else {}


def _email(claims: dict[str, Any]) -> str:
    email = claims.get("email")
    if not isinstance(email, str) or "@" not in email.strip():
        raise SsoError("the identity provider sent no e-mail address (grant the 'email' scope)")
    if claims.get("email_verified") in (False, "false"):
        raise SsoError("the identity provider has not verified the e-mail address")
    return email.strip()


def _unique_username(session: Session, wanted: str) -> str:
    base = re.sub(r"\s+", "", wanted)[:USERNAME_MAX] or "user"
    candidate, n = base, 1
    while session.exec(select(User.id).where(func.lower(User.username) == candidate.lower())).first():
        n += 1
        suffix = f"-{n}"
        candidate = base[: USERNAME_MAX - len(suffix)] + suffix
    return candidate


def _user_for_claims(session: Session, settings: Settings, claims: dict[str, Any]) -> User:
    """The user with this e-mail address (case-insensitive), or a new member of the SSO mandate."""
    email = _email(claims)
    matches = session.exec(select(User).where(func.lower(User.email) == email.lower())).all()
    if len(matches) > 1:
        raise SsoError("several accounts use this e-mail address; ask an administrator")
    if matches:
        user = matches[0]
        if user.disabled:
            raise SsoError("this account is disabled")
        return user
    mandate = session.exec(select(Mandate).where(Mandate.name == settings.oidc_mandate)).first()
    if mandate is None:
        log.error("single sign-on: POWERON_OIDC_MANDATE names unknown mandate %r", settings.oidc_mandate)
        raise SsoError("single sign-on is misconfigured (unknown mandate); ask an administrator")
    preferred = claims.get("preferred_username")
    wanted = preferred if isinstance(preferred, str) and preferred.strip() else email.split("@", 1)[0]
    name = claims.get("name")
    user = User(username=_unique_username(session, wanted), email=email,
                display_name=name[:200] if isinstance(name, str) and name.strip() else None)
    session.add(user)
    session.flush()
    try:
        grant_mandate_roles(session, user, mandate, list(settings.oidc_roles))
    except InvalidInput as exc:
        log.error("single sign-on: POWERON_OIDC_ROLES %s: %s", settings.oidc_roles, exc)
        raise SsoError("single sign-on is misconfigured (unknown role); ask an administrator") from exc
    log.info("single sign-on: created user %s (%s) in mandate %s", user.username, user.id, mandate.name)
    return user


def finish_login(
    *,
    state: str | None,
    code: str | None,
    error: str | None = None,
    browser_state: str | None = None,
) -> str:
    """Complete the sign-in the provider sent back; returns the one-time exchange code.

    Args:
        state: The `state` query parameter of the callback.
        code: The authorization code, when the provider granted one.
        error: The provider's `error` parameter when it refused (e.g. `access_denied`).
        browser_state: The `state` the browser was given when it started (cookie); must match.

    Raises:
        SsoNotConfigured: single sign-on is off.
        SsoError: anything refused; the message says what, briefly.
    """
    settings = _settings()
    if not state:
        raise SsoError("the identity provider's answer lacks the sign-in state; please sign in again")
    pending = _consume_login(state)
    if not browser_state or not hmac.compare_digest(browser_state.encode(), state.encode()):
        raise SsoError("this sign-in was started in another browser; please sign in again")
    if error:
        raise SsoError(f"the identity provider refused the sign-in ({error[:80]})")
    if not code:
        raise SsoError("the identity provider sent no authorization code")
    metadata = provider_metadata(settings.oidc_issuer)
    tokens = _redeem_code(settings, metadata, code, pending.code_verifier)
    claims = _validate_id_token(settings, metadata, tokens["id_token"], pending.nonce)
    if not claims.get("email"):
        claims = {**_userinfo(metadata, tokens.get("access_token"), claims["sub"]), **claims}
    exchange = secrets.token_urlsafe(32)
    with session_scope() as session:
        user = _user_for_claims(session, settings, claims)
        now = utcnow()
        session.add(SsoExchange(code_hash=_digest(exchange), user_id=user.id, created_at=now,
                                expires_at=now + EXCHANGE_TTL))
    return exchange


# --- 3. exchange -----------------------------------------------------------------------------


def exchange_code(code: str | None) -> IssuedToken:
    """Trade a one-time exchange code (single use, 60 seconds) for a PowerOn login token.

    Raises:
        SsoNotConfigured: single sign-on is off.
        SsoError: unknown, expired or used code, or the account is disabled.
    """
    _settings()
    digest = _digest(code or "")
    with session_scope() as session:  # committed on its own: a refused code stays used
        row = session.get(SsoExchange, digest)
        deleted = session.execute(delete(SsoExchange).where(SsoExchange.code_hash == digest)).rowcount
    if not code or row is None or deleted != 1 or row.expires_at <= utcnow():
        raise SsoError("the sign-in code is invalid, expired or was already used; please sign in again")
    with session_scope() as session:
        user = session.get(User, row.user_id)
        if user is None or user.disabled:
            raise SsoError("this account is disabled")
        return issue_token(session, user, kind="login")
