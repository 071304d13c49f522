"""IMAP + SMTP mailboxes (DESIGN §8: connection type `imap`), signed in with a username and an
(app) password, or with OAuth 2.0 (SASL XOAUTH2); TLS by default (IMAP over SSL on 993, SMTP with
STARTTLS on 587).

XOAUTH2 (`auth: "xoauth2"`): the connection names one of its owner's Microsoft 365 connections
(`tokenConnectionId`); at each sign-in the mail servers' token (Outlook's IMAP and SMTP scopes,
consented with that connection) comes from its refresh token (OAuthTokens.token_for: the Microsoft
identity platform issues tokens for every consented resource from one refresh token) and is sent
as `user=<username>\x01auth=Bearer <token>\x01\x01`. The Microsoft 365 connection must be the
same user's, active and of type msft; an expired one makes this one fail with the reason. No
password is stored then.

The connection is tested before it is stored: an IMAP login that lists the folders and, when an
SMTP server is given, an SMTP login. Messages name host, port and what failed, never the password.

A connection's mailbox (MailAccess: folders, newest mails, new mails since a cursor, one mail, an
attachment, sending) is backend/connectors/kinds/imap_mail.py.
"""

from __future__ import annotations

import imaplib
import smtplib
import socket
import ssl
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator
from pydantic.alias_generators import to_camel
from pydantic_core import InitErrorDetails, PydanticCustomError

from backend.connectors.access import MailAccess
from backend.connectors.types import ConnectionFailed, ConnectionType, Credentials, register_connection_type

TIMEOUT_SECONDS = 20
Security = Literal["ssl", "starttls", "none"]
Auth = Literal["password", "xoauth2"]
TOKEN_FIELD = "settings.tokenConnectionId"


class ImapSettings(BaseModel):
    """What a user types to connect a mailbox (camelCase in the API)."""

    model_config = ConfigDict(extra="forbid", alias_generator=to_camel, populate_by_name=True)

    host: str = Field(..., min_length=1, max_length=253, description="IMAP server, e.g. imap.example.com")
    port: int = Field(993, ge=1, le=65535)
    security: Security = "ssl"
    username: str = Field(..., min_length=1, max_length=320, description="the mailbox's login, e.g. its address")
    auth: Auth = Field("password", title="Sign-in",
                       description="with the (app) password, or with OAuth 2.0 (XOAUTH2) through one of your "
                                   "Microsoft 365 connections")
    password: str | None = Field(None, min_length=1, max_length=1000,
                                 description="the account's (app) password (sign-in: password)")
    token_connection_id: str | None = Field(None, min_length=1, max_length=64, title="Microsoft 365 connection",
                                            description="the Microsoft 365 connection that signs in "
                                                        "(sign-in: xoauth2)",
                                            json_schema_extra={"connectionType": "msft"})
    smtp_host: str | None = Field(None, max_length=253, description="SMTP server for sending; none: read only")
    smtp_port: int = Field(587, ge=1, le=65535)
    smtp_security: Security = "starttls"

    @model_validator(mode="after")
    def _what_the_sign_in_needs(self) -> ImapSettings:
        """A password for `password`, a Microsoft 365 connection for `xoauth2` (errors name the field)."""
        if self.auth == "password" and not self.password:
            _missing("password", "a password is required to sign in with a password")
        if self.auth == "xoauth2":
            if not self.token_connection_id:
                _missing("tokenConnectionId", "name the Microsoft 365 connection that signs in with XOAUTH2")
            self.password = None  # never stored when it is not used
        else:
            self.token_connection_id = None
        return self


def _missing(field: str, message: str) -> None:
    raise ValidationError.from_exception_data("ImapSettings", [InitErrorDetails(
        type=PydanticCustomError("missing", message), loc=(field,), input=None)])


def _tls() -> ssl.SSLContext:
    return ssl.create_default_context()


def _where(host: str, port: int) -> str:
    return f"{host}:{port}"


def xoauth2_string(username: str, token: str) -> str:
    """The SASL XOAUTH2 initial response (before base64): `user=…^Aauth=Bearer …^A^A`."""
    return f"user={username}\x01auth=Bearer {token}\x01\x01"


class _LoginRefused(ConnectionFailed):
    """The server refused the sign-in (an XOAUTH2 token is then asked for once more)."""


def mail_server_token(credentials: Credentials, refused: str | None = None) -> str:
    """The access token of the mail servers for an `xoauth2` connection, from the Microsoft 365
    connection its settings name (its owner's own, active, of type msft); a new one when a server
    `refused` the last.

    Raises:
        ConnectionFailed: that connection is missing, another user's, not Microsoft 365, not active
            (`expired` when it is expired), or Microsoft refused the token (the reason named).
    """
    from backend.connectors import store
    from backend.connectors.kinds import msft
    from backend.connectors.oauth import OAuthTokens
    from backend.db import session_scope
    from backend.db.models import Connection
    from backend.statemachines import connection as lifecycle

    token_id = credentials.settings.get("tokenConnectionId")
    with session_scope() as session:
        row = session.get(Connection, token_id) if isinstance(token_id, str) and token_id else None
        if row is None or not credentials.owner_id or row.owner_id != credentials.owner_id \
                or row.status == lifecycle.REVOKED:
            raise ConnectionFailed(f"{TOKEN_FIELD}: connection {token_id or '(none)'} was not found among your "
                                   "connections")
        if row.type != msft.TYPE_ID:
            raise ConnectionFailed(f"{TOKEN_FIELD}: connection '{row.label}' is not a {msft.LABEL} connection; "
                                   "XOAUTH2 signs in with one")
        if row.status != lifecycle.ACTIVE:
            why = f": {row.last_error}" if row.last_error else ""
            raise ConnectionFailed(f"{TOKEN_FIELD}: the {msft.LABEL} connection '{row.label}' is {row.status}{why} "
                                   "— reconnect it on the Connections page", expired=row.status == lifecycle.EXPIRED)
        token_credentials = store.credentials_of(row)
    try:
        return OAuthTokens(token_credentials, msft.PROVIDER, mark_expired=False).token_for(
            msft.MAIL_SERVER_SCOPES, refused)
    except ConnectionFailed as exc:
        if not exc.expired:
            raise
        if msft.CONSENT_MISSING in str(exc):  # consented before it asked for the mail servers' scopes
            raise ConnectionFailed(f"{TOKEN_FIELD}: the {msft.LABEL} connection '{token_credentials.label}' was not "
                                   "consented for IMAP and SMTP: connect Microsoft 365 again with the same account "
                                   "(that renews it)") from None
        store.mark_expired(token_credentials.connection_id, str(exc))
        raise


def _signed_in(credentials: Credentials, sign_in):
    """`sign_in(token)` with the password (token None), or with the mail servers' token: asked for
    anew once when the server refused it (revoked or expired before its time)."""
    if not _xoauth2(credentials):
        return sign_in(None)
    token = mail_server_token(credentials)
    try:
        return sign_in(token)
    except _LoginRefused:
        return sign_in(mail_server_token(credentials, refused=token))


def _xoauth2(credentials: Credentials) -> bool:
    return credentials.settings.get("auth") == "xoauth2"


def open_imap(credentials: Credentials) -> imaplib.IMAP4:
    """A signed-in IMAP session (the caller logs out): LOGIN with the password, or AUTHENTICATE
    XOAUTH2 with the mail servers' token.

    Raises:
        ConnectionFailed: unreachable, TLS failure, no token or login refused (saying which).
    """
    return _signed_in(credentials, lambda token: _open_imap(credentials, token))


def _open_imap(credentials: Credentials, token: str | None) -> imaplib.IMAP4:
    settings = credentials.settings
    host, port, security = settings["host"], int(settings["port"]), settings.get("security", "ssl")
    try:
        if security == "ssl":
            client: imaplib.IMAP4 = imaplib.IMAP4_SSL(host, port, ssl_context=_tls(), timeout=TIMEOUT_SECONDS)
        else:
            client = imaplib.IMAP4(host, port, timeout=TIMEOUT_SECONDS)
            if security == "starttls":
                client.starttls(ssl_context=_tls())
    except (OSError, imaplib.IMAP4.error) as exc:
        raise ConnectionFailed(f"cannot reach the IMAP server {_where(host, port)} ({security}): {_reason(exc)}") \
            from None
    try:
        if token is None:
            client.login(settings["username"], credentials.secret["password"])
        else:
            client.authenticate("XOAUTH2", _responder(xoauth2_string(settings["username"], token)))
    except (imaplib.IMAP4.error, OSError) as exc:
        _close(client)
        how = " with XOAUTH2" if token is not None else ""
        raise _LoginRefused(f"the IMAP server {_where(host, port)} refused the login of "
                               f"{settings['username']}{how}: {_reason(exc)}") from None
    return client


def _responder(initial: str):
    """imaplib's AUTHENTICATE callback: the XOAUTH2 string first; an empty answer to the error
    challenge a refusing server sends (so it answers NO)."""
    answers = [initial.encode()]

    def respond(_challenge: bytes) -> bytes:
        return answers.pop() if answers else b""

    return respond


def _close(client: imaplib.IMAP4) -> None:
    try:
        client.logout()
    except (OSError, imaplib.IMAP4.error):
        pass


def open_smtp(credentials: Credentials) -> smtplib.SMTP:
    """A signed-in SMTP session for sending (the caller quits): LOGIN/PLAIN with the password, or
    AUTH XOAUTH2 with the mail servers' token.

    Raises:
        ConnectionFailed: no SMTP server set, unreachable, TLS failure, no token or login refused.
    """
    if not credentials.settings.get("smtpHost"):
        raise ConnectionFailed("this mailbox connection has no SMTP server: it can read mail but not send it")
    return _signed_in(credentials, lambda token: _open_smtp(credentials, token))


def _open_smtp(credentials: Credentials, token: str | None) -> smtplib.SMTP:
    settings = credentials.settings
    host = settings["smtpHost"]
    port, security = int(settings.get("smtpPort") or 587), settings.get("smtpSecurity", "starttls")
    try:
        if security == "ssl":
            client: smtplib.SMTP = smtplib.SMTP_SSL(host, port, timeout=TIMEOUT_SECONDS, context=_tls())
        else:
            client = smtplib.SMTP(host, port, timeout=TIMEOUT_SECONDS)
            if security == "starttls":
                client.starttls(context=_tls())
    except (OSError, smtplib.SMTPException) as exc:
        raise ConnectionFailed(f"cannot reach the SMTP server {_where(host, port)} ({security}): {_reason(exc)}") \
            from None
    try:
        if token is None:
            client.login(settings["username"], credentials.secret["password"])
        else:
            client.ehlo_or_helo_if_needed()
            initial = xoauth2_string(settings["username"], token)
            client.auth("XOAUTH2", lambda challenge=None: initial if challenge is None else "")
    except smtplib.SMTPNotSupportedError:
        if token is not None:
            client.close()
            raise ConnectionFailed(f"the SMTP server {_where(host, port)} takes no XOAUTH2 sign-in") from None
        # a server that takes no login (a local relay): sending may still work
    except (smtplib.SMTPException, OSError) as exc:
        client.close()
        how = " with XOAUTH2" if token is not None else ""
        raise _LoginRefused(f"the SMTP server {_where(host, port)} refused the login of "
                               f"{settings['username']}{how}: {_reason(exc)}") from None
    return client


def _reason(exc: BaseException) -> str:
    if isinstance(exc, socket.timeout | TimeoutError):
        return f"no answer within {TIMEOUT_SECONDS} s"
    if isinstance(exc, smtplib.SMTPResponseException):
        return f"{exc.smtp_code} {_text(exc.smtp_error)}"
    if isinstance(exc, socket.gaierror):
        return f"the host name does not resolve ({exc.strerror or exc})"
    if isinstance(exc, OSError) and exc.strerror:
        return exc.strerror  # e.g. "Connection refused", not its errno
    return _text(exc.args[0] if exc.args else exc) or type(exc).__name__


def _text(value: object) -> str:
    return value.decode("utf-8", "replace") if isinstance(value, bytes) else str(value)


def check(credentials: Credentials) -> str:
    """Sign in to IMAP (and SMTP when set) and say what was found."""
    client = open_imap(credentials)
    try:
        status, folders = client.list()
    finally:
        _close(client)
    found = len(folders or []) if status == "OK" else 0
    how = " with XOAUTH2" if _xoauth2(credentials) else ""
    text = f"signed in to {credentials.settings['host']} as {credentials.settings['username']}{how}: {found} folders"
    if credentials.settings.get("smtpHost"):
        smtp = open_smtp(credentials)
        smtp.quit()
        text += f"; sending through {credentials.settings['smtpHost']} works"
    return text


def mail_access(credentials: Credentials) -> MailAccess:
    """The MailAccess of one `imap` connection (backend/connectors/kinds/imap_mail.py)."""
    from backend.connectors.kinds.imap_mail import ImapMail

    return ImapMail(credentials)


IMAP = register_connection_type(ConnectionType(
    id="imap", label="E-mail (IMAP/SMTP)",
    description="Any mailbox that speaks IMAP (reading) and SMTP (sending), signed in with an (app) password "
                "or with OAuth 2.0 (XOAUTH2) through a Microsoft 365 connection.",
    auth="password", check=check, settings_model=ImapSettings, secret_fields=("password",), mail=mail_access,
))
