"""Failure notifications by e-mail: POWERON_SMTP_URL parsed, mails sent with smtplib on a
background thread (one at a time, so a slow server delays mails, never runs or requests).

POWERON_SMTP_URL forms (user and password percent-encoded where they contain ``@:/?#%``):

- ``smtp://host:25`` plain SMTP, no login;
- ``smtp://user:password@host:587?starttls=true`` SMTP upgraded with STARTTLS, then login;
- ``smtps://user:password@host:465`` SMTP over TLS from the first byte.

Ports default to 25 (587 with STARTTLS) and 465 for ``smtps``; ``timeout=<seconds>`` (default
30) may be added. The password is never logged nor put into an error message: everything
that names the server uses :attr:`SmtpTarget.redacted`. The sender is POWERON_SMTP_FROM,
else the user name when it is an address, else ``poweron@localhost``.
"""

from __future__ import annotations

import logging
import smtplib
import ssl
import threading
from collections.abc import Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from concurrent.futures import wait as wait_futures
from dataclasses import dataclass, field
from email.message import EmailMessage
from email.utils import formatdate, make_msgid
from urllib.parse import parse_qs, unquote, urlsplit

from backend.config import get_settings

log = logging.getLogger(__name__)

SCHEMES = {"smtp": 25, "smtps": 465}
STARTTLS_PORT = 587
DEFAULT_TIMEOUT = 30.0
_TRUE, _FALSE = {"1", "true", "yes", "on"}, {"0", "false", "no", "off", ""}


@dataclass(frozen=True)
class SmtpTarget:
    """Where and how to send: parsed from POWERON_SMTP_URL (the password is left out of `repr`)."""

    host: str
    port: int
    tls: bool = False  # smtps: TLS from the first byte
    starttls: bool = False
    username: str | None = None
    password: str | None = field(default=None, repr=False)
    timeout: float = DEFAULT_TIMEOUT

    @property
    def redacted(self) -> str:
        """The server as it may be shown and logged: scheme, user, host and port, no password."""
        user = f"{self.username}@" if self.username else ""
        option = "?starttls=true" if self.starttls else ""
        return f"{'smtps' if self.tls else 'smtp'}://{user}{self.host}:{self.port}{option}"


def _redact(url: str) -> str:
    """`url` with anything between '://' and the last '@' of its authority replaced, for messages."""
    scheme, sep, rest = url.partition("://")
    if not sep:
        return "<not a URL>"
    authority, slash, path = rest.partition("/")
    if "@" in authority:
        user_info, _, host = authority.rpartition("@")
        authority = f"{user_info.split(':', 1)[0]}:***@{host}" if ":" in user_info else f"{user_info}@{host}"
    return f"{scheme}://{authority}{slash}{path}"


def parse_smtp_url(url: str, name: str = "POWERON_SMTP_URL") -> SmtpTarget:
    """The SmtpTarget of `url`; ValueError naming `name` and what is wrong (never the password)."""
    shown = _redact(url)
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError:
        raise ValueError(f"{name} has an invalid port or address: {shown}") from None
    scheme = parts.scheme.lower()
    if scheme not in SCHEMES:
        raise ValueError(f"{name} must start with smtp:// or smtps://, not {shown}")
    if not parts.hostname:
        raise ValueError(f"{name} names no host: {shown}")
    if parts.path not in ("", "/"):
        raise ValueError(f"{name} must not have a path: {shown}")
    query = {key: values[-1] for key, values in parse_qs(parts.query, keep_blank_values=True).items()}
    unknown = sorted(set(query) - {"starttls", "timeout"})
    if unknown:
        raise ValueError(f"{name}: unknown option {unknown[0]!r} (known: starttls, timeout)")
    starttls_text = query.get("starttls", "").strip().lower()
    if starttls_text not in _TRUE | _FALSE:
        raise ValueError(f"{name}: starttls must be true or false, not {query['starttls']!r}")
    starttls = starttls_text in _TRUE
    if starttls and scheme == "smtps":
        raise ValueError(f"{name}: starttls is for smtp://; smtps:// is encrypted from the start")
    timeout = DEFAULT_TIMEOUT
    if "timeout" in query:
        try:
            timeout = float(query["timeout"])
        except ValueError:
            timeout = -1.0
        if not 0 < timeout < 3600:
            raise ValueError(f"{name}: timeout must be a number of seconds, not {query['timeout']!r}")
    default_port = STARTTLS_PORT if starttls else SCHEMES[scheme]
    return SmtpTarget(
        host=parts.hostname, port=port or default_port, tls=scheme == "smtps", starttls=starttls,
        username=unquote(parts.username) if parts.username else None,
        password=unquote(parts.password) if parts.password is not None else None,
        timeout=timeout,
    )


def configured_target() -> SmtpTarget | None:
    """The SMTP server of POWERON_SMTP_URL, or None when mail is not configured."""
    url = get_settings().smtp_url
    return parse_smtp_url(url) if url else None


def sender() -> str:
    """POWERON_SMTP_FROM, else the SMTP user name when it is an address, else poweron@localhost."""
    settings = get_settings()
    if settings.smtp_from:
        return settings.smtp_from
    target = configured_target()
    if target and target.username and "@" in target.username:
        return target.username
    return "poweron@localhost"


def build_message(to: str, subject: str, body: str, from_addr: str | None = None,
                  html: str | None = None) -> EmailMessage:
    """A mail of plain `body` (and, with `html`, that as the alternative a mail client shows)."""
    message = EmailMessage()
    message["From"] = from_addr or sender()
    message["To"] = to
    message["Subject"] = subject
    message["Date"] = formatdate(localtime=False, usegmt=True)
    message["Message-ID"] = make_msgid(domain="poweron")
    message.set_content(body)
    if html is not None:
        message.add_alternative(html, subtype="html")
    return message


def send_now(target: SmtpTarget, message: EmailMessage) -> None:
    """Deliver `message` through `target` (blocking); smtplib's errors are raised."""
    context = ssl.create_default_context()
    if target.tls:
        client: smtplib.SMTP = smtplib.SMTP_SSL(target.host, target.port, timeout=target.timeout, context=context)
    else:
        client = smtplib.SMTP(target.host, target.port, timeout=target.timeout)
    with client:
        client.ehlo()
        if target.starttls:
            client.starttls(context=context)
            client.ehlo()
        if target.username:
            client.login(target.username, target.password or "")
        client.send_message(message)


_pool: ThreadPoolExecutor | None = None
_pending: set[Future] = set()
_lock = threading.Lock()


def _deliver(target: SmtpTarget, message: EmailMessage) -> bool:
    try:
        send_now(target, message)
    except (OSError, smtplib.SMTPException) as exc:
        # The exception carries the server's reply, never the password; the server is named redacted.
        log.warning("could not mail %r to %s via %s: %s: %s", message["Subject"], message["To"],
                    target.redacted, type(exc).__name__, exc)
        return False
    log.info("mailed %r to %s via %s", message["Subject"], message["To"], target.redacted)
    return True


def send_in_background(to: str, subject: str, body: str, html: str | None = None) -> Future | None:
    """Queue a mail for the mail thread; None (nothing sent) when SMTP is not configured.

    The future's result is whether the server accepted it; failures are logged, not raised.
    """
    global _pool  # noqa: PLW0603 - one mail thread per process
    target = configured_target()
    if target is None:
        return None
    message = build_message(to, subject, body, html=html)
    with _lock:
        if _pool is None:
            _pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="poweron-mail")
        future = _pool.submit(_deliver, target, message)
        _pending.add(future)
    future.add_done_callback(_forget)
    return future


def _forget(future: Future) -> None:
    with _lock:
        _pending.discard(future)


def wait_idle(timeout: float = 30.0) -> bool:
    """Wait until every queued mail was tried (tests); whether that happened in time."""
    with _lock:
        pending: Sequence[Future] = list(_pending)
    _done, not_done = wait_futures(pending, timeout=timeout)
    return not not_done
