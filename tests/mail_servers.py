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
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from email import message_from_bytes
from email.message import Message
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

    def client(self) -> imaplib.IMAP4:
        """A signed-in client, e.g. to put mail into the box (`append`)."""
        client = imaplib.IMAP4(self.host, self.port, timeout=10)
        client.login(self.username, self.password)
        return client

    def deliver(self, raw: bytes, folder: str = "INBOX") -> None:
        """Put one RFC 822 message into `folder`, as a mail server receiving it would."""
        client = self.client()
        try:
            status, answer = client.append(folder, None, None, raw)
            assert status == "OK", answer
        finally:
            client.logout()


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
