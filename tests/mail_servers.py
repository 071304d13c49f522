"""Real mail servers for the tests, on 127.0.0.1: IMAP by pymap (pure-Python IMAP4rev1, in-memory
mailboxes, `pymap --no-tls dict --demo-data`) in a subprocess, SMTP by aiosmtpd (in this process)
with LOGIN/PLAIN authentication, keeping every message it accepts.

    with imap_server() as imap, smtp_server() as smtp:
        settings = {"host": imap.host, "port": imap.port, "security": "none",
                    "username": imap.username, "password": imap.password,
                    "smtpHost": smtp.host, "smtpPort": smtp.port, "smtpSecurity": "none"}
"""

from __future__ import annotations

import imaplib
import socket
import subprocess
import sys
import time
from collections.abc import Iterable, Iterator
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
def imap_server() -> Iterator[ImapServer]:
    """pymap on a free port of 127.0.0.1 (no TLS), with its demo mailbox (INBOX with 4 mails,
    Sent, Trash) for demouser/demopass; stopped afterwards."""
    port = free_port()
    process = subprocess.Popen([str(PYMAP), "--no-tls", "--host", "127.0.0.1", "--port", str(port),
                                "--no-service", "admin", "dict", "--demo-data"],
                               stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    server = ImapServer("127.0.0.1", port)
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


class _Handler:
    def __init__(self, server: SmtpServer):
        self.server = server

    async def handle_DATA(self, _smtp, _session, envelope):  # noqa: N802 - aiosmtpd's hook name
        self.server.envelopes.append((envelope.mail_from, list(envelope.rcpt_tos)))
        self.server.received.append(message_from_bytes(envelope.original_content or envelope.content))
        return "250 OK"


@contextmanager
def smtp_server() -> Iterator[SmtpServer]:
    """aiosmtpd on a free port of 127.0.0.1 that accepts LOGIN/PLAIN for demouser/demopass only
    (no TLS: the tests' connections say security "none") and keeps the messages it receives."""
    server = SmtpServer("127.0.0.1", free_port())

    def authenticate(_server, _session, _envelope, _mechanism, data):
        ok = isinstance(data, LoginPassword) and data.login.decode() == server.username \
            and data.password.decode() == server.password
        return AuthResult(success=ok)

    # On loopback, for tests, AUTH without TLS is what we want (pyproject.toml silences the warning).
    controller = Controller(_Handler(server), hostname=server.host, port=server.port,
                            authenticator=authenticate, auth_require_tls=False, auth_required=True)
    controller.start()
    try:
        yield server
    finally:
        controller.stop()
