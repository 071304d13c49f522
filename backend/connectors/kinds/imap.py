"""IMAP + SMTP mailboxes (DESIGN §8: connection type `imap`), signed in with a username and an
(app) password; TLS by default (IMAP over SSL on 993, SMTP with STARTTLS on 587).

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

from pydantic import BaseModel, ConfigDict, Field
from pydantic.alias_generators import to_camel

from backend.connectors.access import MailAccess
from backend.connectors.types import ConnectionFailed, ConnectionType, Credentials, register_connection_type

TIMEOUT_SECONDS = 20
Security = Literal["ssl", "starttls", "none"]


class ImapSettings(BaseModel):
    """What a user types to connect a mailbox (camelCase in the API)."""

    model_config = ConfigDict(extra="forbid", alias_generator=to_camel, populate_by_name=True)

    host: str = Field(..., min_length=1, max_length=253, description="IMAP server, e.g. imap.example.com")
    port: int = Field(993, ge=1, le=65535)
    security: Security = "ssl"
    username: str = Field(..., min_length=1, max_length=320)
    password: str = Field(..., min_length=1, max_length=1000, description="the account's (app) password")
    smtp_host: str | None = Field(None, max_length=253, description="SMTP server for sending; none: read only")
    smtp_port: int = Field(587, ge=1, le=65535)
    smtp_security: Security = "starttls"


def _tls() -> ssl.SSLContext:
    return ssl.create_default_context()


def _where(host: str, port: int) -> str:
    return f"{host}:{port}"


def open_imap(settings: dict, secret: dict) -> imaplib.IMAP4:
    """A signed-in IMAP session (the caller logs out).

    Raises:
        ConnectionFailed: unreachable, TLS failure or login refused (saying which).
    """
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
        client.login(settings["username"], secret["password"])
    except imaplib.IMAP4.error as exc:
        _close(client)
        raise ConnectionFailed(f"the IMAP server {_where(host, port)} refused the login of "
                               f"{settings['username']}: {_reason(exc)}") from None
    return client


def _close(client: imaplib.IMAP4) -> None:
    try:
        client.logout()
    except (OSError, imaplib.IMAP4.error):
        pass


def open_smtp(settings: dict, secret: dict) -> smtplib.SMTP:
    """A signed-in SMTP session for sending (the caller quits).

    Raises:
        ConnectionFailed: no SMTP server set, unreachable, TLS failure or login refused.
    """
    host = settings.get("smtpHost")
    if not host:
        raise ConnectionFailed("this mailbox connection has no SMTP server: it can read mail but not send it")
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
        client.login(settings["username"], secret["password"])
    except smtplib.SMTPNotSupportedError:
        pass  # a server that takes no login (a local relay): sending may still work
    except (smtplib.SMTPException, OSError) as exc:
        client.close()
        raise ConnectionFailed(f"the SMTP server {_where(host, port)} refused the login of "
                               f"{settings['username']}: {_reason(exc)}") from None
    return client


def _reason(exc: BaseException) -> str:
    if isinstance(exc, socket.timeout | TimeoutError):
        return f"no answer within {TIMEOUT_SECONDS} s"
    if isinstance(exc, smtplib.SMTPResponseException):
        return f"{exc.smtp_code} {_text(exc.smtp_error)}"
    return _text(exc.args[0] if exc.args else exc) or type(exc).__name__


def _text(value: object) -> str:
    return value.decode("utf-8", "replace") if isinstance(value, bytes) else str(value)


def check(credentials: Credentials) -> str:
    """Sign in to IMAP (and SMTP when set) and say what was found."""
    client = open_imap(credentials.settings, credentials.secret)
    try:
        status, folders = client.list()
    finally:
        _close(client)
    found = len(folders or []) if status == "OK" else 0
    text = f"signed in to {credentials.settings['host']} as {credentials.settings['username']}: {found} folders"
    if credentials.settings.get("smtpHost"):
        smtp = open_smtp(credentials.settings, credentials.secret)
        smtp.quit()
        text += f"; sending through {credentials.settings['smtpHost']} works"
    return text


def mail_access(credentials: Credentials) -> MailAccess:
    """The MailAccess of one `imap` connection (backend/connectors/kinds/imap_mail.py)."""
    from backend.connectors.kinds.imap_mail import ImapMail

    return ImapMail(credentials)


IMAP = register_connection_type(ConnectionType(
    id="imap", label="E-mail (IMAP/SMTP)",
    description="Any mailbox that speaks IMAP (reading) and SMTP (sending), signed in with an (app) password.",
    auth="password", check=check, settings_model=ImapSettings, secret_fields=("password",), mail=mail_access,
))
