"""What a connection offers to generic code: mail (MailAccess) and files (FileAccess).

A connection type (backend/connectors/types.py) that offers MAIL gives a `mail` factory, one that
offers FILES a `files` factory; each builds the access object for one connection's Credentials.
The generic actions (email.sendMail, email.checkEmail, the datasources toolbox), the UDB "Sources"
tab and the mail poller use only these two interfaces, so a new connector is usable everywhere
once it implements them. Every method raises ConnectionFailed with a message a user can act on
(never a secret); ids are opaque strings of the connector (a Graph id, an IMAP folder/UID pair …).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any


@dataclass(frozen=True)
class SourceItem:
    """One entry while browsing a source: a folder, site, drive or mailbox folder (`container`) or a
    file or message (not a container)."""

    id: str
    name: str
    kind: str  # "site" · "drive" · "folder" · "mailFolder" · "file" · "message"
    container: bool
    size: int | None = None
    modified: datetime | None = None
    mime_type: str | None = None
    path: str = ""  # a readable location, e.g. "/Shared Documents/Reports" or "INBOX"


@dataclass(frozen=True)
class Attachment:
    """An attachment of a mail (its content read on demand with MailAccess.attachment)."""

    id: str
    name: str
    mime_type: str
    size: int


@dataclass(frozen=True)
class Mail:
    """One mail as every mail connector reports it."""

    id: str
    folder: str
    sender: str
    to: tuple[str, ...]
    subject: str
    body: str
    received_at: datetime
    cc: tuple[str, ...] = ()
    attachments: tuple[Attachment, ...] = ()

    def to_output(self) -> dict[str, Any]:
        """The JSON a node or tool returns for this mail (attachments listed, not their content)."""
        return {"id": self.id, "folder": self.folder, "from": self.sender, "to": list(self.to), "cc": list(self.cc),
                "subject": self.subject, "body": self.body, "receivedAt": self.received_at.isoformat(),
                "attachments": [{"id": a.id, "name": a.name, "mimeType": a.mime_type, "size": a.size}
                                for a in self.attachments]}


@dataclass(frozen=True)
class MailPage:
    """Mails received after a cursor, oldest first, and the cursor to ask with next time (an IMAP
    UID, a Graph delta link …: opaque)."""

    mails: list[Mail]
    cursor: str


@dataclass(frozen=True)
class OutgoingMail:
    """A mail to send (attachments as (name, MIME type, bytes))."""

    to: tuple[str, ...]
    subject: str
    body: str
    cc: tuple[str, ...] = ()
    html: bool = False
    attachments: tuple[tuple[str, str, bytes], ...] = field(default=(), repr=False)


class MailAccess(ABC):
    """A mailbox behind one connection."""

    @abstractmethod
    def folders(self) -> list[SourceItem]:
        """The mail folders (kind "mailFolder")."""

    @abstractmethod
    def list(self, folder: str, limit: int = 25, query: str | None = None) -> list[Mail]:
        """The newest mails of `folder` (newest first), at most `limit`; with `query`, those whose
        subject, body or sender contain it."""

    @abstractmethod
    def since(self, folder: str, cursor: str | None) -> MailPage:
        """Mails that arrived in `folder` after `cursor` (None: none yet — the page is empty and its
        cursor marks now), oldest first: each mail is reported once per cursor chain."""

    @abstractmethod
    def get(self, mail_id: str) -> Mail:
        """One mail by id."""

    @abstractmethod
    def attachment(self, mail_id: str, attachment_id: str) -> tuple[str, str, bytes]:
        """(name, MIME type, content) of one attachment (limited by POWERON_FILE_MAX_BYTES)."""

    @abstractmethod
    def send(self, mail: OutgoingMail) -> str:
        """Send `mail`; returns what the server said it did (e.g. "sent to 2 recipients")."""


class FileAccess(ABC):
    """The files behind one connection (SharePoint sites and drives …)."""

    @abstractmethod
    def browse(self, container_id: str | None = None) -> list[SourceItem]:
        """The entries of a container (None: the top: sites, drives, root folders)."""

    @abstractmethod
    def search(self, query: str, container_id: str | None = None, limit: int = 25) -> list[SourceItem]:
        """Files whose name or content match `query` (within `container_id` when given)."""

    @abstractmethod
    def download(self, item_id: str) -> tuple[str, str, bytes]:
        """(name, MIME type, content) of one file (limited by POWERON_FILE_MAX_BYTES)."""

    @abstractmethod
    def upload(self, container_id: str, name: str, content: bytes, mime_type: str, overwrite: bool = False
               ) -> SourceItem:
        """Store a file in a container; refuses an existing name unless `overwrite`."""
