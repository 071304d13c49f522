"""OAuth 2.0 connections (DESIGN §8): consent by authorization code with PKCE, tokens kept fresh.

A connection type with `auth="oauth"` names its :class:`OAuthProvider` (`ConnectionType.oauth`:
endpoints and client credentials from the configuration, scopes, and how to tell whose account
was connected). Authlib's OAuth 2.0 client builds the authorization URL with the PKCE challenge
(S256), trades the code (client_secret_post) and refreshes tokens; nothing here hand-rolls a
protocol step.

The consent, as the REST routes of backend/api/connections_oauth.py drive it:

1. A signed-in user asks for a start: with their bearer token (`GET …/oauth/{type}/start`), or —
   because a browser navigation carries no bearer header — with a one-time start ticket
   (:meth:`OAuthConsents.ticket`, `POST …/oauth/{type}/tickets`; 2 minutes, single use) that the
   UI puts into the start URL. The start stores a pending consent (ConnectionOAuthState: the
   SHA-256 digest of `state`, the sealed PKCE verifier, user, mandate, label, the connection to
   renew, and the digest of a random browser secret) and sends the browser to the provider with
   that secret in an HttpOnly, SameSite=Lax cookie limited to the callback path.
2. The provider sends the browser back to the callback: the pending consent is deleted first
   (single use, ten minutes), the cookie must match (the same browser), the user must still
   exist, be enabled and belong to the mandate; the code is traded (with the verifier), the
   account read, and the connection created — or, for a re-consent, restored — with its tokens
   sealed. The browser lands on the UI's Connections page (`?connected=<id>` or `?error=…`).

At run time :class:`OAuthTokens` hands connectors an access token: refreshed when it expires
within five minutes or when the API refused it, the rotated refresh token stored at once in a
transaction of its own that holds the connection's row lock (PostgreSQL `FOR UPDATE`; SQLite,
one process only, through a lock per connection), so concurrent refreshes never lose a rotated
token. A refresh the provider refuses (`invalid_grant`: revoked, expired, password changed …)
makes the connection `expired` and notifies its owner (store.mark_expired). No token, verifier,
code or client secret is ever logged or put into a message.
"""

from __future__ import annotations

import hashlib
import hmac
import logging
import secrets
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any
from urllib.parse import urlencode

import httpx2
from authlib.integrations.base_client import OAuthError
from authlib.integrations.httpx_client import OAuth2Client
from sqlalchemy import delete
from sqlmodel import Session, select

from backend.config import get_settings
from backend.connectors import store
from backend.connectors.types import ConnectionFailed, ConnectionType, Credentials, connection_type
from backend.crypto import seal, unseal
from backend.db import session_scope
from backend.db.models import Connection, ConnectionOAuthState, User, UserMandate, utcnow
from backend.errors import FieldError, InvalidInput, NotFound
from backend.names import clean_name
from backend.rbac.access import AccessContext
from backend.rbac.door import Door, guarded
from backend.statemachines import ConcurrentTransition, IllegalTransition
from backend.statemachines import connection as lifecycle

log = logging.getLogger(__name__)

CONSENT_TTL = timedelta(minutes=10)
TICKET_TTL = timedelta(minutes=2)
REFRESH_MARGIN_SECONDS = 300
LABEL_MAX = 200
ROUTES = "/api/connections/oauth/{type}"
COOKIE_PREFIX = "poweron_oauth_"
EXPIRED_ERRORS = frozenset({"invalid_grant", "interaction_required", "login_required", "consent_required"})
CLIENT_ERRORS = frozenset({"invalid_client", "unauthorized_client"})
DESCRIPTION_MAX = 160


class OAuthFailed(Exception):
    """A consent could not be finished; the message is short, names no secret and is shown to the user."""


# --- what a provider is -----------------------------------------------------------------------------


@dataclass(frozen=True)
class OAuthClientConfig:
    """Where a provider's consent and tokens are, and this installation's client there."""

    authorize_url: str
    token_url: str
    client_id: str
    client_secret: str = field(repr=False)


@dataclass(frozen=True)
class Identity:
    """Whose account a consent connected.

    Attributes:
        subject: The provider's stable id of the account (a re-consent must sign in as the same).
        account: What people recognise it by (an e-mail address).
        settings: The public settings to store with the connection (never a token).
    """

    subject: str
    account: str
    settings: dict[str, Any]


@dataclass(frozen=True)
class OAuthProvider:
    """One OAuth 2.0 provider of a connection type.

    Attributes:
        name: The provider as messages name it ("Microsoft").
        scopes: What the consent asks for (space-joined into `scope`).
        client: The endpoints and client credentials, read from the configuration when called
            (only when the type is available).
        identify: Reads whose account a fresh access token belongs to (raises ConnectionFailed).
        authorize_params: Extra parameters of the authorization URL (e.g. ("prompt", "select_account")).
        token_scopes: What a refresh of the connection's own token asks for, when the consent also
            covers other resources (Microsoft issues a token for one resource at a time); default:
            `scopes`.
        unavailable: None when this installation can make consents with this provider, else why not
            (for a type that is also made with typed settings, whose `unavailable` is then None).
        lasting_tokens: The provider issues access tokens that do not expire and no refresh token
            (ClickUp): a token answer without `expires_in` is then kept until it is refused.
    """

    name: str
    scopes: tuple[str, ...]
    client: Callable[[], OAuthClientConfig]
    identify: Callable[[str], Identity]
    authorize_params: tuple[tuple[str, str], ...] = ()
    token_scopes: tuple[str, ...] = ()
    unavailable: Callable[[], str | None] = lambda: None
    lasting_tokens: bool = False


def _digest(value: str) -> str:
    return hashlib.sha256(value.encode()).hexdigest()


def _ticket_digest(ticket: str) -> str:
    # A namespace of its own: a ticket can never pass for a consent's state, nor the other way round.
    return _digest("ticket:" + ticket)


def cookie_name(state: str) -> str:
    """The browser cookie of one consent (named after its state, so consents in two tabs coexist)."""
    return COOKIE_PREFIX + _digest(state)[:16]


def redirect_uri(type_id: str) -> str:
    """The callback registered at the provider: `{POWERON_API_URL}/api/connections/oauth/{type}/callback`."""
    return get_settings().api_url + ROUTES.format(type=type_id) + "/callback"


def start_path(type_id: str) -> str:
    """The path of the start route of `type_id` (the cookie of the callback is limited to its sibling)."""
    return ROUTES.format(type=type_id) + "/start"


def callback_path(type_id: str) -> str:
    return ROUTES.format(type=type_id) + "/callback"


def ui_result_url(connected: str | None = None, error: str | None = None) -> str:
    """The UI's Connections page with the outcome: `?connected=<id>` or `?error=<message>`."""
    query = {"connected": connected} if connected else {"error": error or "the connection failed"}
    return f"{get_settings().ui_url}/connections?{urlencode(query)}"


def _consent_type(type_id: Any) -> ConnectionType:
    """The connection type `type_id` when it is made by consent (available here or not).

    Raises:
        NotFound: no such type.
        InvalidInput: a type made with typed settings (field `type`).
    """
    try:
        kind = connection_type(type_id)
    except InvalidInput:
        raise NotFound(f"connection type {type_id!r} not found") from None
    if kind.oauth is None:
        raise InvalidInput([FieldError("type", f"'{kind.id}' connections are made with typed settings "
                                               "(POST /api/connections), not by consent")])
    return kind


def oauth_type(type_id: Any) -> tuple[ConnectionType, OAuthProvider]:
    """The connection type `type_id` when it is made by consent and available here, with its provider.

    Raises:
        NotFound: no such type.
        InvalidInput: a type made with typed settings, or one this installation cannot make (the
            missing settings named); field `type`.
    """
    kind = _consent_type(type_id)
    unavailable = kind.unavailable() or kind.oauth.unavailable()
    if unavailable:
        raise InvalidInput([FieldError("type", unavailable)])
    return kind, kind.oauth


def _client(provider: OAuthProvider, config: OAuthClientConfig, redirect: str | None = None,
            scopes: tuple[str, ...] | None = None) -> OAuth2Client:
    """Authlib's OAuth 2.0 client for one exchange (client_secret_post, PKCE S256), asking for
    `scopes` (default: the provider's)."""
    return OAuth2Client(client_id=config.client_id, client_secret=config.client_secret,
                        token_endpoint_auth_method="client_secret_post", scope=" ".join(scopes or provider.scopes),
                        redirect_uri=redirect, code_challenge_method="S256",
                        timeout=get_settings().graph_timeout_seconds)


# --- 1. start ---------------------------------------------------------------------------------------


@dataclass(frozen=True)
class ConsentRequest:
    """What a consent will make: a new connection of `type_id` in a mandate, or a renewed one."""

    type_id: str
    mandate_id: str
    label: str
    connection_id: str | None = None


@dataclass(frozen=True)
class ConsentStart:
    """Where to send the browser, and the cookie that binds the consent to it."""

    url: str
    cookie_name: str
    cookie_value: str = field(repr=False)
    cookie_path: str = ""
    max_age: int = int(CONSENT_TTL.total_seconds())


@dataclass(frozen=True)
class StartTicket:
    """A one-time start of a consent for a browser navigation.

    Attributes:
        ticket: The single-use ticket (also inside `url`).
        url: The absolute start URL to send the browser to.
        expires_at: When the ticket stops working.
    """

    ticket: str = field(repr=False)
    url: str
    expires_at: datetime


def consent_request(session: Session, user: User, type_id: Any, mandate_id: Any = None, label: Any = None,
                    connection_id: Any = None) -> ConsentRequest:
    """Check what a user asks to connect.

    Raises:
        NotFound: unknown type, a mandate that is not theirs, a connection they may not renew.
        InvalidInput: a type not made by consent or not available here, a bad label, a connection
            of another type or a revoked one.
    """
    kind = _consent_type(type_id)
    name = "" if label is None else clean_name(label, "label", LABEL_MAX)
    if connection_id is None:
        mandate = store.mandate_for_new(session, user, mandate_id)
        oauth_type(kind.id)  # a foreign id is "not found" before "not available here"
        return ConsentRequest(kind.id, mandate.id, name)
    found = session.get(Connection, connection_id) if isinstance(connection_id, str) and connection_id else None
    if found is None or found.owner_id != user.id:
        # Another user's connection is renewed by its owner only, and looks like a missing one.
        raise NotFound("the connection to renew (connectionId) was not found among yours")
    if found.type != kind.id:
        raise InvalidInput([FieldError("connectionId", f"connection '{found.label}' is not a {kind.label} "
                                                       "connection")])
    if found.status == lifecycle.REVOKED:
        raise InvalidInput([FieldError("connectionId", f"connection '{found.label}' was revoked: add a new one")])
    if mandate_id is not None and mandate_id != found.mandate_id:
        raise InvalidInput([FieldError("mandateId", f"connection '{found.label}' belongs to another mandate")])
    oauth_type(kind.id)
    return ConsentRequest(kind.id, found.mandate_id, name or found.label, found.id)


def _purge(session: Session) -> None:
    session.execute(delete(ConnectionOAuthState).where(ConnectionOAuthState.expires_at < utcnow()))


def begin(session: Session, user_id: str, request: ConsentRequest) -> ConsentStart:
    """Store a pending consent for `request` and return the provider's authorization URL."""
    _kind, provider = oauth_type(request.type_id)
    config = provider.client()
    state, verifier, browser = secrets.token_urlsafe(32), secrets.token_urlsafe(64), secrets.token_urlsafe(32)
    now = utcnow()
    _purge(session)
    session.add(ConnectionOAuthState(
        state_hash=_digest(state), browser_hash=_digest(browser), user_id=user_id, mandate_id=request.mandate_id,
        type=request.type_id, label=request.label, connection_id=request.connection_id,
        code_verifier=seal(verifier), created_at=now, expires_at=now + CONSENT_TTL))
    session.flush()
    client = _client(provider, config, redirect_uri(request.type_id))
    try:
        url, _state = client.create_authorization_url(config.authorize_url, state=state, code_verifier=verifier,
                                                      **dict(provider.authorize_params))
    finally:
        client.close()
    return ConsentStart(url=url, cookie_name=cookie_name(state), cookie_value=browser,
                        cookie_path=callback_path(request.type_id))


class OAuthConsents(Door):
    """Consents a signed-in user starts (REST with a bearer token, or the UI through a ticket)."""

    def __init__(self, access: AccessContext):
        self.access = access
        self.session = access.session
        self.user = access.user

    @guarded("authenticated")
    def ticket(self, type_id: Any, mandate_id: Any = None, label: Any = None, connection_id: Any = None
               ) -> StartTicket:
        """A one-time ticket (two minutes) that starts this consent when the browser opens its URL.

        Args:
            type_id: The connection type (e.g. "msft").
            mandate_id: The mandate of a new connection (default: the user's only one, or Default).
            label: Its label (default: the type and the account, e.g. "Microsoft 365 (anna@…)").
            connection_id: One of the user's connections of that type to renew (re-consent).
        """
        request = consent_request(self.session, self.user, type_id, mandate_id, label, connection_id)
        ticket = secrets.token_urlsafe(32)
        now = utcnow()
        _purge(self.session)
        self.session.add(ConnectionOAuthState(
            state_hash=_ticket_digest(ticket), browser_hash="", user_id=self.user.id, mandate_id=request.mandate_id,
            type=request.type_id, label=request.label, connection_id=request.connection_id, code_verifier="",
            created_at=now, expires_at=now + TICKET_TTL))
        self.session.flush()
        url = f"{get_settings().api_url}{start_path(request.type_id)}?{urlencode({'ticket': ticket})}"
        return StartTicket(ticket=ticket, url=url, expires_at=now + TICKET_TTL)

    @guarded("authenticated")
    def start(self, type_id: Any, mandate_id: Any = None, label: Any = None, connection_id: Any = None
              ) -> ConsentStart:
        """Start a consent for the caller at once (an API client that keeps cookies)."""
        request = consent_request(self.session, self.user, type_id, mandate_id, label, connection_id)
        return begin(self.session, self.user.id, request)


def start_with_ticket(type_id: str, ticket: str | None) -> ConsentStart:
    """Start the consent a ticket stands for (the ticket is used up, whatever follows).

    Raises:
        OAuthFailed: unknown, expired or used ticket, a ticket of another type, a user who is gone
            or disabled, or a consent that cannot start any more (the reason said).
    """
    digest = _ticket_digest(ticket or "")
    with session_scope() as session:  # committed on its own: a refused ticket stays used
        row = session.get(ConnectionOAuthState, digest)
        deleted = session.execute(delete(ConnectionOAuthState).where(
            ConnectionOAuthState.state_hash == digest, ConnectionOAuthState.browser_hash == "")).rowcount
    if not ticket or row is None or deleted != 1 or row.expires_at <= utcnow() or row.type != type_id:
        raise OAuthFailed("the link to connect was invalid, expired or already used: start again from the "
                          "Connections page")
    with session_scope() as session:
        user = _member(session, row.user_id, row.mandate_id)
        try:
            request = consent_request(session, user, row.type, row.mandate_id, row.label or None, row.connection_id)
        except (NotFound, InvalidInput) as exc:
            raise OAuthFailed(str(exc)) from None
        return begin(session, user.id, request)


def _member(session: Session, user_id: str, mandate_id: str) -> User:
    """The user of a consent, still there, enabled and in its mandate, else OAuthFailed."""
    user = session.get(User, user_id)
    if user is None or user.disabled:
        raise OAuthFailed("your account is disabled or no longer exists; nothing was connected")
    if session.exec(select(UserMandate.user_id).where(UserMandate.user_id == user.id,
                                                     UserMandate.mandate_id == mandate_id)).first() is None:
        raise OAuthFailed("you no longer belong to the mandate this connection was for; nothing was connected")
    return user


# --- 2. callback ------------------------------------------------------------------------------------


def _consume(state: str) -> ConnectionOAuthState:
    """The pending consent of `state`, deleted in its own committed transaction (single use)."""
    digest = _digest(state)
    with session_scope() as session:
        pending = session.get(ConnectionOAuthState, digest)
        deleted = session.execute(delete(ConnectionOAuthState).where(
            ConnectionOAuthState.state_hash == digest, ConnectionOAuthState.browser_hash != "")).rowcount
    # Of two concurrent callbacks with the same state only one deletes the row.
    if pending is None or deleted != 1 or pending.expires_at <= utcnow():
        raise OAuthFailed("the answer of the sign-in was invalid, expired or already used: connect again from the "
                          "Connections page")
    return pending


def _short(text: Any) -> str:
    """The first line of a provider's error description, cut (never more than a summary)."""
    line = str(text or "").strip().splitlines()[0] if str(text or "").strip() else ""
    return line[:DESCRIPTION_MAX] + ("…" if len(line) > DESCRIPTION_MAX else "")


def _provider_said(error: Any, description: Any) -> str:
    said = _short(description)
    return f"{_short(error)}: {said}" if said else _short(error)


def finish(type_id: str, *, state: str | None, code: str | None, error: str | None = None,
           error_description: str | None = None, cookies: Mapping[str, str] | None = None) -> str:
    """Complete a consent the provider sent back; returns the id of the connection made (or renewed).

    Raises:
        OAuthFailed: anything refused, in words fit for the user (never a token or a code).
    """
    if not state:
        raise OAuthFailed("the answer of the sign-in lacks its state: connect again from the Connections page")
    pending = _consume(state)
    cookie = (cookies or {}).get(cookie_name(state), "")
    if not cookie or not hmac.compare_digest(_digest(cookie), pending.browser_hash):
        raise OAuthFailed("this connection was started in another browser: connect again from the Connections page")
    if pending.type != type_id:
        raise OAuthFailed("the answer of the sign-in belongs to another kind of connection: connect again")
    kind, provider = _available(type_id)
    with session_scope() as session:
        _member(session, pending.user_id, pending.mandate_id)
    if error:
        if error == "access_denied":
            raise OAuthFailed(f"the consent at {provider.name} was declined; nothing was connected")
        raise OAuthFailed(f"{provider.name} refused the sign-in ({_provider_said(error, error_description)}); "
                          "nothing was connected")
    if not code:
        raise OAuthFailed(f"{provider.name} sent no authorization code; nothing was connected")
    tokens = _redeem(provider, type_id, code, unseal(pending.code_verifier))
    try:
        identity = provider.identify(tokens["accessToken"])
    except ConnectionFailed as exc:
        raise OAuthFailed(f"the new connection could not read its account: {exc}") from None
    return _store(kind, pending, identity, tokens)


def _available(type_id: str) -> tuple[ConnectionType, OAuthProvider]:
    try:
        return oauth_type(type_id)
    except (NotFound, InvalidInput) as exc:
        raise OAuthFailed(str(exc)) from None


LASTING_SECONDS = 100 * 365 * 86400


def _token_secret(token: Mapping[str, Any], refresh_token: str | None = None, lasting: bool = False
                  ) -> dict[str, Any]:
    """The sealed part of a connection from a token answer (the old refresh token kept when none came;
    `lasting`: a token without `expires_in` does not expire)."""
    expires_at = token.get("expires_at")  # authlib's OAuth2Token derives it from expires_in
    if not isinstance(expires_at, int | float):
        expires_at = time.time() + (LASTING_SECONDS if lasting else 3600)
    return {"accessToken": token["access_token"], "refreshToken": token.get("refresh_token") or refresh_token or "",
            "expiresAt": int(expires_at), "scope": token.get("scope") or ""}


def _expiry(secret: Mapping[str, Any]) -> datetime:
    return datetime.fromtimestamp(int(secret.get("expiresAt") or 0), UTC)


def _redeem(provider: OAuthProvider, type_id: str, code: str, verifier: str) -> dict[str, Any]:
    """Trade the code at the token endpoint (PKCE verifier, redirect URI, client secret)."""
    config = provider.client()
    client = _client(provider, config, redirect_uri(type_id), scopes=provider.token_scopes or None)
    try:
        token = client.fetch_token(config.token_url, grant_type="authorization_code", code=code,
                                   code_verifier=verifier)
    except OAuthError as exc:
        log.warning("oauth: %s refused the code: %s", provider.name, exc.error)
        raise OAuthFailed(f"{provider.name} refused the sign-in ({_provider_said(exc.error, exc.description)}); "
                          "nothing was connected") from None
    except (httpx2.HTTPError, ValueError) as exc:
        log.warning("oauth: %s token endpoint failed: %s", provider.name, type(exc).__name__)
        raise OAuthFailed(f"{provider.name}'s sign-in service could not be reached or answered unreadably "
                          f"({_transport_reason(exc)}); nothing was connected") from None
    finally:
        client.close()
    if not token.get("access_token"):
        # Some providers answer a refused code in their API's own error shape (ClickUp: err, ECODE).
        said = " ".join(str(token.get(key) or "") for key in ("err", "ECODE", "error", "error_description")).strip()
        raise OAuthFailed(f"{provider.name} sent no access token" + (f" ({said[:200]})" if said else "")
                          + "; nothing was connected")
    if not token.get("refresh_token") and not provider.lasting_tokens:
        raise OAuthFailed(f"{provider.name} granted no refresh token (the offline_access permission): without it "
                          "the connection would stop working within the hour; nothing was connected")
    return _token_secret(token, lasting=provider.lasting_tokens)


def _transport_reason(exc: Exception) -> str:
    if isinstance(exc, httpx2.TimeoutException):
        return f"no answer within {get_settings().graph_timeout_seconds:g} s"
    if isinstance(exc, httpx2.HTTPStatusError):
        return f"HTTP {exc.response.status_code}"
    return type(exc).__name__


def _store(kind: ConnectionType, pending: ConnectionOAuthState, identity: Identity, secret: dict[str, Any]) -> str:
    """Create the connection, or renew the one the consent named (or this user's of the same account)."""
    # `consented`: made by consent (a type made either way tells its consented connections by it).
    settings = {**identity.settings, "consented": True, "tested": f"signed in as {identity.account}"}
    with session_scope() as session:
        user = _member(session, pending.user_id, pending.mandate_id)
        row = session.get(Connection, pending.connection_id) if pending.connection_id else \
            _same_account(session, user.id, pending.mandate_id, kind.id, identity.subject)
        if row is None:
            if pending.connection_id:
                raise OAuthFailed("the connection to renew was deleted meanwhile; nothing was connected")
            label = pending.label or f"{kind.label} ({identity.account})"[:LABEL_MAX]
            row = Connection(mandate_id=pending.mandate_id, owner_id=user.id, type=kind.id, label=label,
                             settings=settings, secret=store.seal_secret(secret), expires_at=_expiry(secret))
            session.add(row)
            session.flush()
            log.info("oauth: user %s connected %s connection %s", user.id, kind.id, row.id)
            return row.id
        _renew(session, row, user, kind, identity, settings, secret, pending.label)
        return row.id


def _same_account(session: Session, user_id: str, mandate_id: str, type_id: str, subject: str) -> Connection | None:
    """The user's connection of this type and account in the mandate (connecting it again renews it)."""
    rows = session.exec(select(Connection).where(
        Connection.owner_id == user_id, Connection.mandate_id == mandate_id, Connection.type == type_id,
        Connection.status != lifecycle.REVOKED)).all()
    return next((r for r in rows if (r.settings or {}).get("accountId") == subject), None)


def _renew(session: Session, row: Connection, user: User, kind: ConnectionType, identity: Identity,
           settings: dict[str, Any], secret: dict[str, Any], label: str) -> None:
    if row.owner_id != user.id or row.type != kind.id:
        raise OAuthFailed("the connection to renew is not yours; nothing was connected")
    known = (row.settings or {}).get("accountId")
    if known and known != identity.subject:
        was = (row.settings or {}).get("account") or "another account"
        raise OAuthFailed(f"you signed in as {identity.account}, but connection '{row.label}' is for {was}: sign "
                          "in as that account, or add a new connection")
    try:
        lifecycle.restore(session, row, settings={**(row.settings or {}), **settings},
                          secret=store.seal_secret(secret), expires_at=_expiry(secret),
                          **({"label": label} if label and label != row.label else {}))
    except IllegalTransition:
        raise OAuthFailed(f"connection '{row.label}' was revoked: add a new one") from None
    except ConcurrentTransition:
        raise OAuthFailed(f"connection '{row.label}' was changed meanwhile: connect it again") from None
    log.info("oauth: user %s renewed %s connection %s", user.id, kind.id, row.id)


# --- 3. tokens at run time --------------------------------------------------------------------------

_locks: dict[str, threading.Lock] = {}
_locks_guard = threading.Lock()


def _lock_for(connection_id: str) -> threading.Lock:
    with _locks_guard:
        return _locks.setdefault(connection_id, threading.Lock())


def _fresh(secret: Mapping[str, Any]) -> bool:
    return bool(secret.get("accessToken")) and \
        float(secret.get("expiresAt") or 0) - time.time() > REFRESH_MARGIN_SECONDS


class _Expired(Exception):
    """The provider will not renew the sign-in any more (the message says why)."""


class OAuthTokens:
    """The access token of one OAuth connection for a connector, kept fresh.

    Args:
        credentials: The connection (its secret holds accessToken, refreshToken, expiresAt).
        provider: Its provider.
        mark_expired: Make the connection `expired` (and notify its owner) when the provider
            refuses to renew it. The Connections door's live test passes False: it records the
            outcome itself.
    """

    def __init__(self, credentials: Credentials, provider: OAuthProvider, mark_expired: bool = True):
        self.connection_id = credentials.connection_id
        self.label = credentials.label
        self.provider = provider
        self.mark_expired = mark_expired
        self._secret = dict(credentials.secret)

    def access_token(self) -> str:
        """A token that stays valid for at least five more minutes (refreshed when needed).

        Raises:
            ConnectionFailed: the refresh failed; `expired` when the owner must connect again.
        """
        if _fresh(self._secret):
            return self._secret["accessToken"]
        return self._renew(self._secret.get("accessToken"))

    def renew(self, refused: str) -> str:
        """A new token after the API refused `refused` (401): refreshed unless another caller
        renewed it meanwhile."""
        return self._renew(refused)

    def _renew(self, stale: str | None) -> str:
        if not self.connection_id:  # a connection being made: nothing stored yet
            self._secret = self._refreshed(self._secret.get("refreshToken"), self.provider.token_scopes)
            return self._secret["accessToken"]
        expired: str | None = None
        with _lock_for(self.connection_id), session_scope() as session:
            row = session.exec(select(Connection).where(Connection.id == self.connection_id).with_for_update()).first()
            self._check_usable(row)
            current = store.unseal_secret(row)
            if current.get("accessToken") != stale and _fresh(current):
                self._secret = current  # another caller refreshed it meanwhile
                return current["accessToken"]
            try:
                renewed = self._refreshed(current.get("refreshToken"), self.provider.token_scopes)
            except _Expired as exc:
                expired = str(exc)
            else:
                # Stored in this transaction, under the row lock: the rotated refresh token is
                # committed before the token is used, and no concurrent refresh reuses the old one.
                row.secret = store.seal_secret(renewed)
                row.expires_at = _expiry(renewed)
                session.add(row)
                self._secret = renewed
        if expired is not None:
            if self.mark_expired:
                store.mark_expired(self.connection_id, expired)
            raise ConnectionFailed(expired, expired=True)
        return self._secret["accessToken"]

    def token_for(self, scopes: tuple[str, ...], refused: str | None = None) -> str:
        """An access token for other scopes of the same consent (another resource, e.g. Outlook's
        IMAP and SMTP), by the refresh-token grant: kept with the connection's secret until five
        minutes before it expires, or until a server refused it (`refused`); the rotated refresh
        token is stored at once (under the row lock, like a refresh of the connection's own token,
        which stays as it is).

        Raises:
            ConnectionFailed: the grant failed; `expired` when the owner must connect again (the
                connection is then marked expired, as for its own token).
        """
        key = " ".join(sorted(scopes))
        if not self.connection_id:  # a connection being made: nothing stored yet
            renewed = self._refreshed(self._secret.get("refreshToken"), scopes)
            self._secret["refreshToken"] = renewed["refreshToken"]
            return renewed["accessToken"]
        expired: str | None = None
        with _lock_for(self.connection_id), session_scope() as session:
            row = session.exec(select(Connection).where(Connection.id == self.connection_id).with_for_update()).first()
            self._check_usable(row)
            current = store.unseal_secret(row)
            cached = (current.get("scopedTokens") or {}).get(key) or {}
            if _fresh(cached) and cached["accessToken"] != refused:
                return cached["accessToken"]
            try:
                renewed = self._refreshed(current.get("refreshToken"), scopes)
            except _Expired as exc:
                expired = str(exc)
            else:
                kept = {**current, "refreshToken": renewed["refreshToken"], "scopedTokens": {
                    **(current.get("scopedTokens") or {}),
                    key: {"accessToken": renewed["accessToken"], "expiresAt": renewed["expiresAt"]}}}
                row.secret = store.seal_secret(kept)
                session.add(row)
                self._secret = kept
        if expired is not None:
            if self.mark_expired:
                store.mark_expired(self.connection_id, expired)
            raise ConnectionFailed(expired, expired=True)
        return renewed["accessToken"]

    def _check_usable(self, row: Connection | None) -> None:
        if row is None:
            raise ConnectionFailed(f"connection '{self.label}' was deleted")
        if row.status == lifecycle.REVOKED:
            raise ConnectionFailed(f"connection '{self.label}' was revoked")
        if row.status == lifecycle.EXPIRED:
            why = f": {row.last_error}" if row.last_error else ""
            raise ConnectionFailed(f"connection '{self.label}' is expired{why} — reconnect it on the Connections page",
                                   expired=True)

    def _refreshed(self, refresh_token: str | None, scopes: tuple[str, ...] = ()) -> dict[str, Any]:
        """New tokens for `refresh_token` from the provider (for `scopes`; default: the provider's).

        Raises:
            _Expired: the provider refuses to renew the sign-in (invalid_grant …).
            ConnectionFailed: anything else (unreachable, this installation's client refused).
        """
        name = self.provider.name
        if not refresh_token:
            raise _Expired(f"connection '{self.label}' holds no refresh token: reconnect it on the Connections page")
        config = self.provider.client()
        client = _client(self.provider, config, scopes=scopes or None)
        try:
            token = client.refresh_token(config.token_url, refresh_token=refresh_token)
        except OAuthError as exc:
            log.warning("oauth: %s refused to refresh connection %s: %s", name, self.connection_id, exc.error)
            said = _provider_said(exc.error, exc.description)
            if exc.error in EXPIRED_ERRORS:
                raise _Expired(f"{name} no longer accepts the sign-in of connection '{self.label}' ({said}): "
                               "reconnect it on the Connections page") from None
            if exc.error in CLIENT_ERRORS:
                raise ConnectionFailed(f"{name} refused this server's app credentials ({said}): an administrator "
                                       "must check the client id and secret") from None
            raise ConnectionFailed(f"{name} could not renew the sign-in of connection '{self.label}' ({said})") \
                from None
        except (httpx2.HTTPError, ValueError) as exc:
            log.warning("oauth: refreshing connection %s failed: %s", self.connection_id, type(exc).__name__)
            raise ConnectionFailed(f"{name}'s sign-in service could not renew connection '{self.label}' "
                                   f"({_transport_reason(exc)}); try again later") from None
        finally:
            client.close()
        if not token.get("access_token"):
            raise ConnectionFailed(f"{name} renewed connection '{self.label}' without an access token")
        return _token_secret(token, refresh_token)
