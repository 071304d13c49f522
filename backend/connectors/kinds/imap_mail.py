"""The mailbox of an `imap` connection (MailAccess, backend/connectors/access.py) over the standard
library's imaplib and smtplib; messages are read with the `email` package.

Nothing downloads a mailbox whole: a listing asks the server for the newest `limit` messages (by
sequence number, or the last UIDs of a SEARCH), and reads their headers and MIME structure
(BODYSTRUCTURE) in batches of :data:`BATCH`; of a mail's body only its text part is fetched (at
most :data:`TEXT_MAX_BYTES`), attachments only when asked for, one by one, after their size was
checked against POWERON_FILE_MAX_BYTES. At most POWERON_MAIL_MAX_MESSAGES mails per call.

Ids: a mail is ``<UIDVALIDITY>:<UID>:<folder>`` (the folder last: it may hold any character); an
attachment is its MIME part specifier ("2", "1.3"). The cursor of :meth:`ImapMail.since` is
``<UIDVALIDITY>:<last UID seen>``: a folder whose UIDVALIDITY changed (the server renumbered it)
starts over at its newest message, so no old mail is reported again.

Every command is read-only on the mailbox (EXAMINE, BODY.PEEK): mails stay unread.
"""

from __future__ import annotations

import imaplib
import mimetypes
import smtplib
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from email import message_from_bytes, policy
from email.message import EmailMessage, Message
from email.parser import BytesHeaderParser
from email.utils import formatdate, getaddresses, make_msgid, parseaddr
from typing import Any

from backend.config import get_settings
from backend.connectors.access import Attachment, Mail, MailAccess, MailPage, OutgoingMail, SourceItem
from backend.connectors.kinds import imap_wire as wire
from backend.connectors.kinds.imap import _close, _reason, _where, open_imap, open_smtp
from backend.connectors.mail import attachment_too_large, check_limit, max_messages
from backend.connectors.types import ConnectionFailed, Credentials
from backend.errors import FieldError, InvalidInput, NotFound

BATCH = 50
TEXT_MAX_BYTES = 256 * 1024
HEADER_FIELDS = "FROM TO CC SUBJECT DATE MESSAGE-ID CONTENT-TYPE CONTENT-TRANSFER-ENCODING CONTENT-DISPOSITION"
SUMMARY = f"(UID INTERNALDATE RFC822.SIZE BODYSTRUCTURE BODY.PEEK[HEADER.FIELDS ({HEADER_FIELDS})])"
_HEADERS = BytesHeaderParser(policy=policy.default)


@dataclass(frozen=True)
class _Box:
    """A folder as EXAMINE found it."""

    name: str
    validity: int
    uid_next: int | None
    exists: int


@dataclass(frozen=True)
class _Leaf:
    """A MIME leaf of one mail with what its own headers say."""

    part: wire.Part
    headers: Message
    name: str
    attachment: bool


def mail_id(box: _Box, uid: int) -> str:
    return f"{box.validity}:{uid}:{box.name}"


def split_mail_id(value: Any) -> tuple[int, int, str]:
    """(UIDVALIDITY, UID, folder) of a mail id, else NotFound."""
    parts = value.split(":", 2) if isinstance(value, str) else []
    if len(parts) != 3 or not parts[0].isdigit() or not parts[1].isdigit() or not parts[2]:
        raise NotFound(f"mail {value!r} not found (not a mail id of this mailbox)")
    return int(parts[0]), int(parts[1]), parts[2]


def split_cursor(cursor: str | None) -> tuple[int, int] | None:
    """(UIDVALIDITY, last UID) of a cursor; None for no cursor or one of another kind (start over)."""
    parts = cursor.split(":") if isinstance(cursor, str) else []
    if len(parts) != 2 or not all(p.isdigit() for p in parts):
        return None
    return int(parts[0]), int(parts[1])


class ImapMail(MailAccess):
    """The mailbox of one `imap` connection; each call is one IMAP (or SMTP) session."""

    def __init__(self, credentials: Credentials):
        self.credentials = credentials
        self.settings = credentials.settings
        self.where = _where(self.settings["host"], int(self.settings["port"]))

    # --- the session ------------------------------------------------------------------------

    @contextmanager
    def _session(self) -> Iterator[imaplib.IMAP4]:
        client = open_imap(self.credentials)
        try:
            yield client
        except (OSError, imaplib.IMAP4.error) as exc:
            raise ConnectionFailed(f"the IMAP server {self.where} failed: {_reason(exc)}") from None
        except wire.WireError as exc:
            raise ConnectionFailed(f"the IMAP server {self.where} sent an answer that cannot be read: {exc}") \
                from None
        finally:
            _close(client)

    def _ok(self, answer: tuple[str, list[Any]], what: str) -> list[Any]:
        status, data = answer
        if status != "OK":
            detail = b" ".join(d for d in data if isinstance(d, bytes)).decode("utf-8", "replace")
            raise ConnectionFailed(f"the IMAP server {self.where} refused to {what}: {detail or status}")
        return data

    def _examine(self, client: imaplib.IMAP4, folder: str) -> _Box:
        """Open `folder` read-only; NotFound when the mailbox has no such folder."""
        name = folder.strip() if isinstance(folder, str) else ""
        if not name:
            raise InvalidInput([FieldError("folder", "name a mail folder, e.g. INBOX")])
        status, data = client.select(wire.encode_folder(name), readonly=True)
        if status != "OK":
            raise NotFound(f"mail folder '{name}' not found in {self.settings['username']}'s mailbox on "
                           f"{self.where}")
        validity = _number(client.response("UIDVALIDITY")[1])
        if validity is None:
            raise ConnectionFailed(f"the IMAP server {self.where} gave folder '{name}' no UIDVALIDITY")
        exists = _number(data) or 0
        return _Box(name, validity, _number(client.response("UIDNEXT")[1]), exists)

    def _uids(self, client: imaplib.IMAP4, *criteria: str) -> list[int]:
        data = self._ok(client.uid("SEARCH", *criteria), "search")
        return sorted(int(u) for chunk in data if chunk for u in chunk.split())

    def _newest_uid(self, client: imaplib.IMAP4, box: _Box) -> int:
        """The highest UID in the folder (0 when it is empty)."""
        if box.uid_next is not None:
            return box.uid_next - 1
        if box.exists == 0:
            return 0
        found = wire.parse_fetch(self._ok(client.fetch(str(box.exists), "(UID)"), "read the newest mail"))
        return max(found, default=0)

    # --- reading ----------------------------------------------------------------------------

    def folders(self) -> list[SourceItem]:
        with self._session() as client:
            listed = wire.parse_list(self._ok(client.list(), "list the folders"))
        items = []
        for flags, delimiter, raw in listed:
            if any(flag.lower() == b"\\noselect" for flag in flags):
                continue
            name = wire.decode_folder(raw)
            short = name.rsplit(delimiter, 1)[-1] if delimiter else name
            items.append(SourceItem(id=name, name=short, kind="mailFolder", container=True, path=name))
        return sorted(items, key=lambda item: (item.path.upper() != "INBOX", item.path.casefold()))

    def list(self, folder: str, limit: int = 25, query: str | None = None) -> list[Mail]:
        limit = check_limit(limit)
        with self._session() as client:
            box = self._examine(client, folder)
            if query:
                uids = self._uids(client, *_search_criteria(client, query))[-limit:]
            else:
                uids = self._last_uids(client, box, limit)
            return self._mails(client, box, uids)[::-1]

    def _last_uids(self, client: imaplib.IMAP4, box: _Box, limit: int) -> list[int]:
        """The UIDs of the folder's last `limit` messages (by sequence number: no full SEARCH)."""
        if box.exists == 0:
            return []
        first = max(1, box.exists - limit + 1)
        found = wire.parse_fetch(self._ok(client.fetch(f"{first}:{box.exists}", "(UID)"), "list the mails"))
        return sorted(found)

    def since(self, folder: str, cursor: str | None) -> MailPage:
        with self._session() as client:
            box = self._examine(client, folder)
            known = split_cursor(cursor)
            if known is None or known[0] != box.validity:
                return MailPage([], f"{box.validity}:{self._newest_uid(client, box)}")
            last = known[1]
            uids = [u for u in self._uids(client, "UID", f"{last + 1}:*") if u > last][:max_messages()]
            if not uids:
                return MailPage([], f"{box.validity}:{last}")
            return MailPage(self._mails(client, box, uids), f"{box.validity}:{uids[-1]}")

    def get(self, mail_id: str) -> Mail:
        validity, uid, folder = split_mail_id(mail_id)
        with self._session() as client:
            box = self._checked_box(client, folder, validity, mail_id)
            found = self._mails(client, box, [uid])
        if not found:
            raise NotFound(f"mail {mail_id} not found: it was deleted or moved")
        return found[0]

    def _checked_box(self, client: imaplib.IMAP4, folder: str, validity: int, mail_id: str) -> _Box:
        box = self._examine(client, folder)
        if box.validity != validity:
            raise NotFound(f"mail {mail_id} not found: folder '{folder}' was renumbered by the server since")
        return box

    def attachment(self, mail_id: str, attachment_id: str) -> tuple[str, str, bytes]:
        validity, uid, folder = split_mail_id(mail_id)
        with self._session() as client:
            self._checked_box(client, folder, validity, mail_id)
            summary = wire.parse_fetch(self._ok(client.uid("FETCH", str(uid), SUMMARY), "read the mail")).get(uid)
            if summary is None:
                raise NotFound(f"mail {mail_id} not found: it was deleted or moved")
            leaves, _texts = self._leaves(client, uid, summary)
            leaf = next((x for x in leaves if x.attachment and x.part.section == attachment_id), None)
            if leaf is None:
                raise NotFound(f"attachment {attachment_id!r} of mail {mail_id} not found")
            limit = get_settings().file_max_bytes
            if leaf.part.decoded_size > limit:
                raise attachment_too_large(leaf.name, leaf.part.decoded_size)
            key = f"BODY[{leaf.part.section}]"
            data = wire.parse_fetch(self._ok(client.uid("FETCH", str(uid), f"(BODY.PEEK[{leaf.part.section}])"),
                                             "read the attachment")).get(uid, {})
        content = _decoded(leaf, data.get(key) or b"")
        if len(content) > limit:
            raise attachment_too_large(leaf.name, len(content))
        return leaf.name, leaf.part.mime_type, content

    # --- mails from FETCH answers -----------------------------------------------------------

    def _mails(self, client: imaplib.IMAP4, box: _Box, uids: list[int]) -> list[Mail]:
        """The mails of `uids` (ascending), their headers and structure fetched in batches."""
        mails = []
        for start in range(0, len(uids), BATCH):
            chunk = uids[start:start + BATCH]
            found = wire.parse_fetch(self._ok(client.uid("FETCH", ",".join(map(str, chunk)), SUMMARY),
                                              "read the mails"))
            mails += [self._mail(client, box, uid, found[uid]) for uid in chunk if uid in found]
        return mails

    def _leaves(self, client: imaplib.IMAP4, uid: int, summary: dict[str, Any], text: bool = False
                ) -> tuple[list[_Leaf], dict[str, bytes]]:
        """The MIME leaves of a mail with their own headers and, with `text`, the first
        TEXT_MAX_BYTES of the parts that may hold its text (by section): one FETCH."""
        headers = _HEADERS.parsebytes(_header_bytes(summary))
        parts = wire.body_parts(summary.get("BODYSTRUCTURE"))
        text_sections = _text_candidates(parts) if text else ()
        wanted = [f"BODY.PEEK[{p.section}.MIME]" for p in parts if not p.top]
        wanted += [f"BODY.PEEK[{s}]<0.{TEXT_MAX_BYTES}>" for s in text_sections]
        fetched = wire.parse_fetch(self._ok(client.uid("FETCH", str(uid), f"({' '.join(wanted)})"),
                                            "read the mail")).get(uid, {}) if wanted else {}
        texts = {s: _whole_lines(fetched.get(f"BODY[{s}]") or b"") for s in text_sections}
        leaves = []
        for part in parts:
            own = headers if part.top else _HEADERS.parsebytes(fetched.get(f"BODY[{part.section}.MIME]") or b"")
            leaves.append(_classify(part, own))
        return leaves, texts

    def _mail(self, client: imaplib.IMAP4, box: _Box, uid: int, summary: dict[str, Any]) -> Mail:
        headers = _HEADERS.parsebytes(_header_bytes(summary))
        leaves, texts = self._leaves(client, uid, summary, text=True)
        body = _body(leaves, texts)
        attachments = tuple(Attachment(leaf.part.section, leaf.name, leaf.part.mime_type, leaf.part.decoded_size)
                            for leaf in leaves if leaf.attachment)
        return Mail(id=mail_id(box, uid), folder=box.name, sender=_header(headers, "from"),
                    to=_addresses(headers, "to"), cc=_addresses(headers, "cc"), subject=_header(headers, "subject"),
                    body=body, received_at=_arrival(summary, headers), attachments=attachments)

    # --- sending ----------------------------------------------------------------------------

    def send(self, mail: OutgoingMail) -> str:
        message = build_message(self.sender(), mail)
        recipients = [address for _name, address in getaddresses([*mail.to, *mail.cc])]
        client = open_smtp(self.credentials)
        smtp = _where(self.settings.get("smtpHost") or "", int(self.settings.get("smtpPort") or 587))
        try:
            refused = client.send_message(message, to_addrs=recipients)
        except smtplib.SMTPRecipientsRefused as exc:
            names = ", ".join(f"{address} ({_reason_of(answer)})" for address, answer in exc.recipients.items())
            raise ConnectionFailed(f"the SMTP server {smtp} refused every recipient: {names}") from None
        except (smtplib.SMTPException, OSError) as exc:
            raise ConnectionFailed(f"the SMTP server {smtp} did not accept the mail: {_reason(exc)}") from None
        finally:
            try:
                client.quit()
            except (smtplib.SMTPException, OSError):
                client.close()
        accepted = len(recipients) - len(refused)
        text = f"sent to {accepted} recipient{'s' if accepted != 1 else ''} through {smtp}, " \
               f"Message-ID {message['Message-ID']}"
        if refused:
            text += "; refused: " + ", ".join(f"{address} ({_reason_of(answer)})"
                                              for address, answer in refused.items())
        return text

    def sender(self) -> str:
        """The From address: the username when it is an address, else username@IMAP host."""
        username = str(self.settings.get("username") or "")
        return username if "@" in username else f"{username}@{self.settings['host']}"


# --- helpers ------------------------------------------------------------------------------------


def _number(data: list[Any] | None) -> int | None:
    for item in data or []:
        if isinstance(item, bytes) and item.strip().isdigit():
            return int(item.strip())
    return None


def _search_criteria(client: imaplib.IMAP4, query: str) -> tuple[str, ...]:
    """Sender, subject or body containing `query`: quoted when ASCII, else one UTF-8 literal
    over the whole text (imaplib sends one literal per command)."""
    text = " ".join(query.split())
    if text.isascii():
        quoted = wire.quote(text)
        return ("OR", "OR", "FROM", quoted, "SUBJECT", quoted, "BODY", quoted)
    client.literal = text.encode("utf-8")
    return ("CHARSET", "UTF-8", "TEXT")


def _header_bytes(summary: dict[str, Any]) -> bytes:
    value = next((v for k, v in summary.items() if k.startswith("BODY[HEADER")), b"")
    return value if isinstance(value, bytes) else b""


def _header(headers: Message, name: str) -> str:
    try:
        return " ".join(str(headers.get(name) or "").split())
    except (ValueError, TypeError, IndexError):  # a header the parser cannot make sense of
        return ""


def _addresses(headers: Message, name: str) -> tuple[str, ...]:
    values = [str(v) for v in headers.get_all(name) or []]
    return tuple(f"{n} <{a}>" if n else a for n, a in getaddresses(values) if a)


def _arrival(summary: dict[str, Any], headers: Message) -> datetime:
    """When the mail arrived (INTERNALDATE), else its Date header, else now; aware UTC."""
    raw = summary.get("INTERNALDATE")
    if isinstance(raw, bytes):
        parsed = imaplib.Internaldate2tuple(b'INTERNALDATE "' + raw + b'"')
        if parsed is not None:  # a local time tuple
            return datetime.fromtimestamp(time.mktime(parsed), UTC)
    try:
        date = headers.get("date")
        if date is not None and date.datetime is not None:
            moment = date.datetime
            return moment.astimezone(UTC) if moment.tzinfo else moment.replace(tzinfo=UTC)
    except (AttributeError, ValueError, TypeError):
        pass
    return datetime.now(UTC)


def _whole_lines(raw: bytes) -> bytes:
    """A text part cut at TEXT_MAX_BYTES back to its last whole line (base64 decodes only whole
    groups)."""
    if len(raw) < TEXT_MAX_BYTES or b"\n" not in raw:
        return raw
    return raw[: raw.rfind(b"\n") + 1]


def _text_candidates(parts: list[wire.Part]) -> tuple[str, ...]:
    """The sections that may hold the mail's text: its first text/plain and first text/html leaf."""
    found = []
    for kind in ("text/plain", "text/html"):
        section = next((p.section for p in parts if p.mime_type == kind), None)
        if section is not None:
            found.append(section)
    return tuple(found)


def _classify(part: wire.Part, headers: Message) -> _Leaf:
    """Whether a leaf is an attachment (a disposition or a file name says so, or it is no text)
    and its file name."""
    try:
        filename = headers.get_filename()
        disposition = headers.get_content_disposition()
    except (ValueError, TypeError, IndexError):
        filename, disposition = None, None
    is_text = part.mime_type in ("text/plain", "text/html")
    attachment = disposition == "attachment" or bool(filename) or not is_text
    if part.top and not filename and is_text:
        attachment = False
    name = " ".join(str(filename).split()) if filename else ""
    if attachment and not name:
        extension = ".eml" if part.mime_type == "message/rfc822" else (mimetypes.guess_extension(part.mime_type)
                                                                        or ".bin")
        name = f"attachment-{part.section}{extension}"
    return _Leaf(part, headers, name.replace("/", "_").replace("\\", "_"), attachment)


def _decoded(leaf: _Leaf, raw: bytes) -> bytes:
    """The content of a leaf, its transfer encoding undone by the `email` package."""
    head = f"Content-Type: {leaf.part.mime_type}\r\nContent-Transfer-Encoding: {leaf.part.encoding}\r\n\r\n"
    payload = message_from_bytes(head.encode("ascii") + raw).get_payload(decode=True)
    return payload if isinstance(payload, bytes) else raw


def _body(leaves: list[_Leaf], texts: dict[str, bytes]) -> str:
    """The mail's text: its first text/plain part that is no attachment, else its HTML as text."""
    from backend.web.extract import decode, plain_html_text

    for kind in ("text/plain", "text/html"):
        leaf = next((x for x in leaves if x.part.mime_type == kind and not x.attachment
                     and x.part.section in texts), None)
        if leaf is None:
            continue
        content = _decoded(leaf, texts[leaf.part.section])
        text = decode(content, leaf.headers.get_content_charset(), html=kind == "text/html")
        if kind == "text/html":
            text = plain_html_text(text)[1]
        return text.replace("\r\n", "\n").strip()
    return ""


def _reason_of(answer: Any) -> str:
    if isinstance(answer, tuple) and len(answer) == 2:
        code, text = answer
        return f"{code} {text.decode('utf-8', 'replace') if isinstance(text, bytes) else text}"
    return str(answer)


def build_message(sender: str, mail: OutgoingMail) -> EmailMessage:
    """A MIME message (RFC 5322, SMTP line endings) for `mail`: Date and Message-ID set, the body
    as plain text or as HTML with a plain-text alternative, attachments with their names.

    Raises:
        InvalidInput: a header with a line break, an address that is none.
    """
    for field_name, values in (("to", mail.to), ("cc", mail.cc)):
        for value in values:
            _name, address = parseaddr(value)
            if "@" not in address or any(c in value for c in "\r\n"):
                raise InvalidInput([FieldError(field_name, f"{value!r} is not an e-mail address")])
    if any(c in mail.subject for c in "\r\n"):
        raise InvalidInput([FieldError("subject", "must be one line")])
    message = EmailMessage(policy=policy.SMTP)
    message["From"] = sender
    message["To"] = ", ".join(mail.to)
    if mail.cc:
        message["Cc"] = ", ".join(mail.cc)
    message["Subject"] = mail.subject
    message["Date"] = formatdate(localtime=False, usegmt=True)
    domain = sender.rsplit("@", 1)[-1] if "@" in sender else None
    message["Message-ID"] = make_msgid(domain=domain)
    if mail.html:
        from backend.web.extract import plain_html_text

        message.set_content(plain_html_text(mail.body)[1] or " ")
        message.add_alternative(mail.body, subtype="html")
    else:
        message.set_content(mail.body)
    for name, mime_type, content in mail.attachments:
        main, _, sub = (mime_type or "application/octet-stream").partition("/")
        message.add_attachment(content, maintype=main or "application", subtype=sub or "octet-stream",
                               filename=name)
    return message
