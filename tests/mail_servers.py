"""Real mail servers for the tests, on 127.0.0.1: IMAP by pymap (pure-Python IMAP4rev1, in-memory
mailboxes, `pymap --no-tls dict --demo-data`) in a subprocess, SMTP by aiosmtpd (in this process)
with LOGIN/PLAIN authentication, keeping every message it accepts.

Both also take OAuth 2.0 bearer tokens (SASL XOAUTH2) when asked to: `imap_server(xoauth2_check=url)`
runs pymap with a backend plugin (registered through pymap's own plugin registry) whose IMAP offers
pysasl's XOAUTH2 mechanism and checks each token at `url` (the Graph stand-in's
`/test/outlook-tokens`); `smtp_server(xoauth2_user=…)` adds an `auth_XOAUTH2` mechanism to aiosmtpd
that asks the callable whose token it is. The user in the XOAUTH2 string must be the token's.

    with imap_server() as imap, smtp_server() as smtp:
        settings = {"host": imap.host, "port": imap.port, "security": "none",
                    "username": imap.username, "password": imap.password,
                    "smtpHost": smtp.host, "smtpPort": smtp.port, "smtpSecurity": "none"}
"""

from __future__ import annotations

import base64
import imaplib
import re
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from email import message_from_bytes, policy
from email.message import EmailMessage, Message
from email.utils import formatdate, make_msgid
from pathlib import Path

from aiosmtpd.controller import Controller
from aiosmtpd.smtp import AuthResult, LoginPassword

PYMAP = Path(sys.executable).with_name("pymap")
USERNAME, PASSWORD = "demouser", "demopass"


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@dataclass
class ImapServer:
    host: str
    port: int
    username: str = USERNAME
    password: str = PASSWORD

    def settings(self, smtp: SmtpServer | None = None) -> dict[str, object]:
        """The settings of an `imap` connection to this server (and `smtp`, when given)."""
        found: dict[str, object] = {"host": self.host, "port": self.port, "security": "none",
                                    "username": self.username, "password": self.password}
        if smtp is not None:
            found.update(smtpHost=smtp.host, smtpPort=smtp.port, smtpSecurity="none")
        return found

    def client(self) -> imaplib.IMAP4:
        """A signed-in client, e.g. to put mail into the box (`append`)."""
        client = imaplib.IMAP4(self.host, self.port, timeout=10)
        client.login(self.username, self.password)
        return client

    def deliver(self, raw: bytes | EmailMessage, folder: str = "INBOX") -> None:
        """Put one RFC 822 message into `folder`, as a mail server receiving it would."""
        client = self.client()
        try:
            status, answer = client.append(folder, None, None, _raw(raw))
            assert status == "OK", answer
        finally:
            client.logout()

    def deliver_many(self, messages: Iterable[bytes], folder: str = "INBOX") -> int:
        """Put many messages into `folder` at once: the APPENDs are pipelined with non-synchronising
        literals (LITERAL+), 10,000 small mails in seconds. Returns how many."""
        with socket.create_connection((self.host, self.port), timeout=60) as sock:
            reader = sock.makefile("rb")
            reader.readline()
            sock.sendall(f"a LOGIN {self.username} {self.password}\r\n".encode())
            assert b"a OK" in reader.readline()
            batch, count = bytearray(), 0
            for raw in messages:
                batch += b"t%d APPEND %s {%d+}\r\n" % (count, folder.encode(), len(raw)) + raw + b"\r\n"
                count += 1
            sock.sendall(bytes(batch))
            done = 0
            while done < count:
                line = reader.readline()
                assert line, "the IMAP server closed the connection"
                if line.startswith(b"t"):
                    assert b" OK" in line, line
                    done += 1
        return count


def _raw(message: bytes | EmailMessage) -> bytes:
    return message if isinstance(message, bytes) else message.as_bytes(policy=policy.SMTP)


def minimal_pdf(text: str = "Invoice 42: CHF 1,234.50") -> bytes:
    """A small, valid one-page PDF showing `text` (the text extractors read it back)."""
    stream = f"BT /F1 12 Tf 72 720 Td ({text}) Tj ET".encode("latin-1")
    objects = [b"<< /Type /Catalog /Pages 2 0 R >>", b"<< /Type /Pages /Kids [3 0 R] /Count 1 >>",
               b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents 4 0 R "
               b"/Resources << /Font << /F1 5 0 R >> >> >>",
               b"<< /Length %d >>\nstream\n" % len(stream) + stream + b"\nendstream",
               b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>"]
    out, offsets = bytearray(b"%PDF-1.4\n"), []
    for number, body in enumerate(objects, start=1):
        offsets.append(len(out))
        out += b"%d 0 obj\n" % number + body + b"\nendobj\n"
    xref = len(out)
    out += b"xref\n0 %d\n0000000000 65535 f \n" % (len(objects) + 1)
    out += b"".join(b"%010d 00000 n \n" % offset for offset in offsets)
    out += b"trailer\n<< /Size %d /Root 1 0 R >>\nstartxref\n%d\n%%%%EOF\n" % (len(objects) + 1, xref)
    return bytes(out)


def mail(subject: str, body: str = "Hello", sender: str = "Anna Muster <anna@example.com>",
         to: str = "demouser@example.com", attachments: Iterable[tuple[str, str, bytes]] = ()) -> EmailMessage:
    """A mail as a sender's program writes it (attachments as (name, MIME type, content))."""
    message = EmailMessage()
    message["From"], message["To"], message["Subject"] = sender, to, subject
    message["Date"] = formatdate(usegmt=True)
    message["Message-ID"] = make_msgid(domain="example.com")
    message.set_content(body)
    for name, mime_type, content in attachments:
        main, _, sub = mime_type.partition("/")
        message.add_attachment(content, maintype=main, subtype=sub, filename=name)
    return message


@contextmanager
def imap_server(xoauth2_check: str | None = None, username: str = USERNAME) -> Iterator[ImapServer]:
    """pymap on a free port of 127.0.0.1 (no TLS), with its demo mailbox (INBOX with 4 mails,
    Sent, Trash) for `username`/demopass; stopped afterwards. With `xoauth2_check` (a URL) it also
    takes AUTHENTICATE XOAUTH2, each bearer token checked there (see :func:`_pymap_with_xoauth2`)."""
    port = free_port()
    options = ["--no-tls", "--host", "127.0.0.1", "--port", str(port), "--no-service", "admin"]
    if xoauth2_check:
        command = [sys.executable, "-m", "tests.mail_servers", xoauth2_check, *options, "xoauth2"]
    else:
        command = [str(PYMAP), *options, "dict"]
    process = subprocess.Popen([*command, "--demo-data", "--demo-user", username],
                               cwd=Path(__file__).resolve().parent.parent,
                               stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    server = ImapServer("127.0.0.1", port, username=username)
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                server.client().logout()
                break
            except OSError:
                if process.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(f"pymap did not start: {process.stderr.read().decode()[-2000:]}") from None
                time.sleep(0.1)
        yield server
    finally:
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()


@dataclass
class SmtpServer:
    host: str
    port: int
    username: str = USERNAME
    password: str = PASSWORD
    received: list[Message] = field(default_factory=list)
    envelopes: list[tuple[str, list[str]]] = field(default_factory=list)
    refused_tokens: int = 0


class _Handler:
    def __init__(self, server: SmtpServer):
        self.server = server

    async def handle_DATA(self, _smtp, _session, envelope):  # noqa: N802 - aiosmtpd's hook name
        self.server.envelopes.append((envelope.mail_from, list(envelope.rcpt_tos)))
        self.server.received.append(message_from_bytes(envelope.original_content or envelope.content))
        return "250 OK"


XOAUTH2 = re.compile(rb"^user=(.*?)\x01auth=Bearer (.*?)\x01\x01$")


class _XOAuth2Handler(_Handler):
    """Also takes AUTH XOAUTH2 (aiosmtpd calls a handler's `auth_<MECHANISM>` methods)."""

    def __init__(self, server: SmtpServer, token_user: Callable[[str], str | None]):
        super().__init__(server)
        self.token_user = token_user

    async def auth_XOAUTH2(self, smtp, args):  # noqa: N802 - aiosmtpd's naming
        if len(args) > 1:
            try:
                answer: object = base64.b64decode(args[1].encode(), validate=True)
            except ValueError:
                answer = b""
        else:
            answer = await smtp.challenge_auth("")
        match = XOAUTH2.match(answer) if isinstance(answer, bytes) else None
        user = match and self.token_user(match.group(2).decode())
        if not match or user != match.group(1).decode():
            self.server.refused_tokens += 1
            return AuthResult(success=False)
        return AuthResult(success=True, auth_data=user)


@contextmanager
def smtp_server(xoauth2_user: Callable[[str], str | None] | None = None) -> Iterator[SmtpServer]:
    """aiosmtpd on a free port of 127.0.0.1 that accepts LOGIN/PLAIN for demouser/demopass only
    (no TLS: the tests' connections say security "none") and keeps the messages it receives. With
    `xoauth2_user` (token → its user, or None) it also takes AUTH XOAUTH2 for that user."""
    server = SmtpServer("127.0.0.1", free_port())

    def authenticate(_server, _session, _envelope, _mechanism, data):
        ok = isinstance(data, LoginPassword) and data.login.decode() == server.username \
            and data.password.decode() == server.password
        return AuthResult(success=ok)

    # On loopback, for tests, AUTH without TLS is what we want (pyproject.toml silences the warning).
    handler = _Handler(server) if xoauth2_user is None else _XOAuth2Handler(server, xoauth2_user)
    controller = Controller(handler, hostname=server.host, port=server.port,
                            authenticator=authenticate, auth_require_tls=False, auth_required=True)
    controller.start()
    try:
        yield server
    finally:
        controller.stop()


def _pymap_with_xoauth2() -> None:
    """`python -m tests.mail_servers CHECK_URL <pymap options> xoauth2 <dict options>`: pymap's
    in-memory backend whose IMAP also offers AUTHENTICATE XOAUTH2 (pysasl's mechanism); a bearer
    token is good when CHECK_URL (POST token=…) answers `{"active": true, "upn": <the user named>}`."""
    import asyncio
    import json
    import urllib.parse
    import urllib.request

    from pymap.backend import backends
    from pymap.backend.dict import Config, DictBackend, Identity, Login
    from pymap.exceptions import InvalidAuth
    from pymap.main import main
    from pysasl import SASLAuth
    from pysasl.creds.external import ExternalCredentials, ExternalVerificationRequired

    check_url = sys.argv.pop(1)

    def token_user(token: str) -> str | None:
        body = urllib.parse.urlencode({"token": token}).encode()
        with urllib.request.urlopen(check_url, body, timeout=10) as answer:  # noqa: S310 - the test's own URL
            found = json.load(answer)
        return found.get("upn") if found.get("active") else None

    class XOAuth2Config(Config):
        @property
        def tls_auth(self) -> SASLAuth:
            return SASLAuth.named([b"PLAIN", b"LOGIN", b"XOAUTH2"])

    class XOAuth2Login(Login):
        async def authenticate(self, credentials):
            if not isinstance(credentials, ExternalCredentials):
                return await super().authenticate(credentials)
            try:
                credentials.verify(None)
            except ExternalVerificationRequired as exc:
                token = exc.token or ""
            user = await asyncio.to_thread(token_user, token)
            if user is None or user != credentials.authzid:
                raise InvalidAuth()
            return Identity(user, self, None, set())

    @backends.register("xoauth2")
    class XOAuth2Backend(DictBackend):
        @classmethod
        async def init(cls, args, **overrides):
            config = XOAuth2Config.from_args(args, **overrides)
            login = XOAuth2Login(config)
            await cls._add_demo_user(config, login)
            return cls(login, config), config

    main()


if __name__ == "__main__":
    _pymap_with_xoauth2()
