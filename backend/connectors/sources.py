"""The Sources door: what the UDB's "Sources" tab (Workspace and Editor) reads from connections.

As the signed-in user, and only through connections they may use (their own and those shared in
their mandates: `store.open_connection`, 404 for any other id), the door browses what a connection
offers — its files (FileAccess: sites → drives → folders → files) and its mail (MailAccess:
folders → mails → attachments) —, searches it, previews an item (text, images, PDFs as the Files
tab previews them; a mail as text) and copies an item into the file store of a feature instance
the user may write to (`FileStore.store_file`, with the store's rights and limits), under
`/sources/<connection>/…`, so it can be attached to a prompt or picked into a node like any file.

Where the user stands in a connection is a *location*: an opaque text the door hands out with
every entry and takes back (a JSON list: area "mail" or "files", what it is, the connector's ids).
The states keep locations and show names; they never build one.

The `datasources` toolbox (backend/actions/methods/datasources.py) is built on this door too:
besides locations it takes readable paths (:meth:`Sources.locate`: "/Inbox", "/Finance/Documents/
Reports"), reads items as text (:meth:`Sources.read_text`, :meth:`Sources.read_texts`: a mail as
text, files and attachments through the file store's extractors) and puts a file of the store into
a files connection's folder (:meth:`Sources.upload`, refusing an existing name unless asked).
"""

from __future__ import annotations

import io
import json
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from backend.config import get_settings
from backend.connectors import store
from backend.connectors.access import FileAccess, Mail, MailAccess, SourceItem
from backend.connectors.types import FILES, MAIL, ConnectionFailed, ConnectionType, connection_type, connection_types
from backend.errors import Conflict, DomainError, FieldError, Forbidden, InvalidInput, NotFound
from backend.files import extract
from backend.files.service import FileEntry, FileStore, human_size, join_path, split_path
from backend.rbac.access import AccessContext
from backend.rbac.door import Door, guarded
from backend.statemachines import connection as lifecycle

LIST_LIMIT = 50
SEARCH_LIMIT = 25
PREVIEW_CHARS = 3_000
IMAGE_PREVIEW_BYTES = 5 * 1024 * 1024
SOURCES_FOLDER = "sources"
NAME_MAX = 120
SAME_NAME_TRIES = 50

# Areas and kinds of a location.
MAIL_AREA, FILES_AREA = "mail", "files"
ROOT, FOLDER, MESSAGE, ATTACHMENT, CONTAINER, FILE = "root", "folder", "message", "attachment", "container", "file"
AREA_NAMES = {MAIL_AREA: "Mail", FILES_AREA: "Files"}
_KINDS = {MAIL_AREA: (ROOT, FOLDER, MESSAGE, ATTACHMENT), FILES_AREA: (ROOT, CONTAINER, FILE)}
PATH_MAX = 2000
NAMES_SHOWN = 10


class SourceFailed(DomainError):
    """The outside system refused or could not be reached (a ConnectionFailed, for the page)."""


@dataclass(frozen=True)
class SourceConnection:
    """A connection as the Sources tab lists it."""

    id: str
    label: str
    type: str
    type_label: str
    status: str
    last_error: str | None
    offers: tuple[str, ...]  # "files", "mail"

    @property
    def usable(self) -> bool:
        return self.status == lifecycle.ACTIVE


@dataclass(frozen=True)
class SourceEntry:
    """One row while browsing: a container to open, or an item to preview and copy."""

    location: str
    name: str
    kind: str  # area · mailFolder · message · attachment · site · drive · folder · file
    container: bool
    previewable: bool
    copyable: bool
    detail: str = ""  # e.g. "anna@example.com · 2024-05-02 09:14" or "12 KiB · text/plain"
    mime_type: str = ""
    modified: datetime | None = None


@dataclass(frozen=True)
class SourcePreview:
    """An item as the preview shows it."""

    title: str
    mime_type: str
    kind: str  # text · image · pdf · mail · none
    text: str = ""
    data: bytes = b""  # an image's bytes
    note: str = ""


@dataclass(frozen=True)
class SourceText:
    """An item read as text: a mail (its headers, body and attachments' names), or a file's or an
    attachment's text as the file store's extractors find it."""

    location: str
    name: str
    kind: str  # message · attachment · file
    mime_type: str
    text: str
    modified: datetime | None = None


@dataclass(frozen=True)
class _Item:
    """An item's content, read for copying."""

    name: str
    mime_type: str
    content: bytes
    folder: tuple[str, ...]  # sub-folders under /sources/<connection>/


def encode_location(area: str, kind: str, *ids: str) -> str:
    """A location as the door hands it out."""
    return json.dumps([area, kind, *ids], ensure_ascii=False, separators=(",", ":"))


def _decode(location: Any) -> tuple[str, str, list[str]]:
    """(area, kind, ids) of a location; "" is the top of the connection ("", ROOT, [])."""
    if location in (None, ""):
        return "", ROOT, []
    try:
        parts = json.loads(location) if isinstance(location, str) else None
    except (ValueError, RecursionError):  # RecursionError: "[[[[…" nested deeper than json's parser goes
        parts = None
    if not (isinstance(parts, list) and len(parts) >= 2 and all(isinstance(p, str) for p in parts)
            and parts[1] in _KINDS.get(parts[0], ())):
        raise InvalidInput([FieldError("location", "is not a place in this connection: open it from the list")])
    return parts[0], parts[1], parts[2:]


def is_container_location(location: Any) -> bool:
    """Whether `location` (one the door handed out; "" the top) names something that holds entries:
    the top, an area, a mail folder, a mail (its attachments), a site, library or folder."""
    area, what, _ids = _decode(location)
    return area == "" or what in (ROOT, FOLDER, MESSAGE, CONTAINER)


def _ids(ids: list[str], count: int) -> list[str]:
    if len(ids) != count or not all(ids):
        raise InvalidInput([FieldError("location", "is not a place in this connection: open it from the list")])
    return ids


def _names(names: Any) -> str:
    """At most NAMES_SHOWN names, for a message: "a, b, c …" or "nothing"."""
    listed = list(names)
    shown = ", ".join(listed[:NAMES_SHOWN]) + (" …" if len(listed) > NAMES_SHOWN else "")
    return shown or "nothing"


def _when(moment: datetime | None) -> str:
    return moment.strftime("%Y-%m-%d %H:%M") if moment else ""


def mail_text(mail: Mail) -> str:
    """A mail as readable text: its headers, its body and its attachments' names."""
    lines = [f"From: {mail.sender}", f"To: {', '.join(mail.to)}"]
    if mail.cc:
        lines.append(f"Cc: {', '.join(mail.cc)}")
    lines += [f"Date: {mail.received_at.strftime('%Y-%m-%d %H:%M %Z').strip()}", f"Subject: {mail.subject}"]
    if mail.attachments:
        lines.append("Attachments: " + ", ".join(f"{a.name} ({human_size(a.size)})" for a in mail.attachments))
    return "\n".join(lines) + "\n\n" + (mail.body or "")


def safe_name(name: Any, fallback: str = "item") -> str:
    """A name the file store takes: no slashes or control characters, not "." or "..", trimmed,
    at most NAME_MAX characters (the extension kept)."""
    text = "".join("-" if ch in "/\\" else ch for ch in str(name or "") if ch.isprintable()).strip()
    if len(text) > NAME_MAX:
        stem, dot, suffix = text.rpartition(".")
        text = (stem[: NAME_MAX - len(suffix) - 1].rstrip() + "." + suffix) if dot and len(suffix) <= 10 \
            else text[:NAME_MAX].rstrip()
    return text if text.strip(".") else fallback


def _numbered(name: str, number: int) -> str:
    """"report.pdf" → "report (2).pdf"."""
    if number == 1:
        return name
    stem, dot, suffix = name.rpartition(".")
    return f"{stem} ({number}).{suffix}" if dot and stem else f"{name} ({number})"


def _pdf_pages(data: bytes) -> int | None:
    try:
        from pypdf import PdfReader

        return len(PdfReader(io.BytesIO(data)).pages)
    except Exception:  # noqa: BLE001 - a broken PDF just has no page count
        return None


def _clipped(text: str) -> tuple[str, str]:
    """(the start of `text`, a note when it was cut)."""
    if len(text) <= PREVIEW_CHARS:
        return text, ""
    return text[:PREVIEW_CHARS], f"the first {PREVIEW_CHARS:,} of {len(text):,} characters"


def preview_of(name: str, mime_type: str, data: bytes) -> SourcePreview:
    """A file's preview as the Files tab shows one: an image itself, a PDF's page count and text,
    the start of a text, else what it is."""
    mime = extract.detect_type(name, mime_type, data)
    if mime.startswith("image/"):
        if len(data) > IMAGE_PREVIEW_BYTES:
            return SourcePreview(name, mime, "none",
                                 note=f"The image is {human_size(len(data))}: too large to preview.")
        return SourcePreview(name, mime, "image", data=data)
    if mime == extract.PDF:
        pages = _pdf_pages(data)
        text, cut = _clipped(extract.extract_text(data, mime) or "")
        note = f"PDF, {pages} page{'s' if pages != 1 else ''}" if pages is not None else \
            "PDF (its pages could not be counted)"
        return SourcePreview(name, mime, "pdf", text=text, note=f"{note} · {cut}" if cut else note)
    text = extract.extract_text(data, mime) if extract.is_extractable(mime) else None
    if text is None:
        return SourcePreview(name, mime, "none", note=f"No preview for {mime}.")
    shown, cut = _clipped(text)
    return SourcePreview(name, mime, "text", text=shown, note=cut)


def node_connection_types(type_id: Any) -> tuple[str, ...] | None:
    """The connection types a node of type `type_id` may use for its `connectionId` parameter, or
    None when it takes no connection.

    A node action names its types (`@action(connection_type=…)`, or several as
    `connection_types`; "mail" or "files" stand for every type offering that); a node type that
    needs a mail connection (`needs` "mail", e.g. email.checkEmail) takes every type offering
    mail; any other node with a `connectionId` parameter takes every type that offers something.
    """
    from backend.actions.catalogue import current_registry
    from backend.workflows.node_types import node_type

    kind = node_type(type_id)
    if kind is None or "connectionId" not in (kind.params_model.model_json_schema().get("properties") or {}):
        return None
    from backend.triggers.remote import remote_kind

    remote = remote_kind(type_id)
    if remote is not None:
        return (remote.id,)
    action = current_registry().actions.get(type_id)
    named = tuple(getattr(action, "connection_types", ()) or ()) if action is not None else ()
    if action is not None and not named and action.connection_type:
        named = (action.connection_type,)
    if named:
        found: list[str] = []
        for wanted in named:
            offering = [t.id for t in connection_types() if wanted in t.offers] if wanted in (MAIL, FILES) \
                else [wanted]
            found += [t for t in offering if t not in found]
        return tuple(found)
    if "mail" in kind.needs:
        return tuple(t.id for t in connection_types() if MAIL in t.offers)
    offering = tuple(t.id for t in connection_types() if t.offers)
    return offering or tuple(t.id for t in connection_types())


class Sources(Door):
    """The sources (connections that offer mail or files) one user may browse, and copying an item
    into a file store they may write to."""

    def __init__(self, access: AccessContext):
        self.access = access
        self.session = access.session
        self.user = access.user

    # --- reading --------------------------------------------------------------------------------

    @guarded("authenticated")
    def connections(self) -> list[SourceConnection]:
        """The connections the user may use that offer files or mail, by label (not only active
        ones: the tab says why one cannot be browsed now)."""
        found = []
        for row in store.usable_connections(self.session, self.user):
            kind = connection_type(row.type)
            if kind.offers:
                found.append(SourceConnection(row.id, row.label, row.type, kind.label, row.status, row.last_error,
                                              tuple(sorted(kind.offers))))
        return found

    @guarded("authenticated")
    def browse(self, connection_id: str, location: str = "", limit: int = LIST_LIMIT) -> list[SourceEntry]:
        """The entries at `location` of a connection ("" its top): folders first, then items (of a
        mail folder its newest `limit` mails).

        Raises:
            NotFound: not a connection the user may use.
            SourceFailed: it is not active, or the outside system failed (saying why).
            InvalidInput: `location` is not one the door handed out.
        """
        kind, credentials = self._open(connection_id)
        area, what, ids = _decode(location)
        if area == "":
            return self._top(kind, credentials)
        if area == MAIL_AREA:
            return self._call(lambda: self._browse_mail(self._mail(kind, credentials), what, ids, limit))
        return self._call(lambda: self._browse_files(self._files(kind, credentials), what, ids))

    @guarded("authenticated")
    def search(self, connection_id: str, query: Any, location: str = "", limit: int = SEARCH_LIMIT
               ) -> list[SourceEntry]:
        """Items of a connection matching `query`: mails (subject, body, sender) in the open mail
        folder or in every folder, files by name or content within the open folder or everywhere."""
        text = query.strip() if isinstance(query, str) else ""
        if not any(ch.isalnum() for ch in text):
            raise InvalidInput([FieldError("query", "type a word to search for")])
        if len(text) > 200:
            raise InvalidInput([FieldError("query", "must be at most 200 characters")])
        kind, credentials = self._open(connection_id)
        area, what, ids = _decode(location)
        found: list[SourceEntry] = []
        if area in ("", MAIL_AREA) and MAIL in kind.offers:
            folder = (ids[0], ids[1]) if area == MAIL_AREA and what in (FOLDER, MESSAGE) and len(ids) >= 2 else None
            found += self._call(lambda: self._search_mail(self._mail(kind, credentials), text, folder, limit))
        if area in ("", FILES_AREA) and FILES in kind.offers and len(found) < limit:
            container = ids[0] if area == FILES_AREA and what == CONTAINER and ids else None
            access = self._files(kind, credentials)
            found += [self._file_entry(item) for item in
                      self._call(lambda: access.search(text, container, limit - len(found)))]
        return found[:limit]

    @guarded("authenticated")
    def preview(self, connection_id: str, location: str) -> SourcePreview:
        """A mail as text, or a file or attachment as the Files tab previews one."""
        kind, credentials = self._open(connection_id)
        area, what, ids = _decode(location)
        if area == MAIL_AREA and what == MESSAGE:
            mail_id = _ids(ids, 3)[2]
            mail = self._call(lambda: self._mail(kind, credentials).get(mail_id))
            text, cut = _clipped(mail_text(mail))
            return SourcePreview(mail.subject or "(no subject)", "message/rfc822", "mail", text=text, note=cut)
        item = self._read(kind, credentials, area, what, ids)
        return preview_of(item.name, item.mime_type, item.content)

    @guarded("authenticated")
    def locate(self, connection_id: str, path: Any, field: str = "path") -> SourceEntry:
        """The entry a readable path names, for callers that cannot keep locations (graph nodes).

        The path's parts are names as the listings show them (any case): "/" is the top; "/Inbox" a
        mail folder (by its name or full path, e.g. "/Archive/2024"); "/Finance/Documents/Reports"
        a site, its library and a folder in it, down to a file ("…/budget.pdf"). A connection
        offering mail and files takes "/Mail/…" or "/Files/…"; without that a mail folder of the
        name is tried first. Mails and attachments have no path: they are reached by location.

        Raises:
            InvalidInput: nothing has that path (naming `field` and what is there instead).
        """
        if not isinstance(path, str) or len(path) > PATH_MAX:
            raise InvalidInput([FieldError(field, f"must be a path of at most {PATH_MAX} characters, such as "
                                                  "/Inbox or /Finance/Documents")])
        kind, credentials = self._open(connection_id)
        parts = [part.strip() for part in path.split("/") if part.strip()]
        if not parts:
            return SourceEntry("", credentials.label, "connection", True, False, False)
        problems = []
        for area, rest in self._path_attempts(kind, parts):
            found, problem = self._call(lambda a=area, r=rest: self._locate_in(kind, credentials, a, r))
            if found is not None:
                return found
            problems.append(problem)
        raise InvalidInput([FieldError(field, f"'{path}' is not in connection '{credentials.label}': "
                                              + "; ".join(problems))])

    @guarded("authenticated")
    def read_text(self, connection_id: str, location: str) -> SourceText:
        """A mail as text (headers, body, attachments' names), or the text of a file or attachment
        (text, PDF, DOCX … as the file store extracts it; limited by POWERON_FILE_MAX_BYTES).

        Raises:
            InvalidInput: `location` names a folder, not an item.
            SourceFailed: the item holds no text that can be read, or the outside system failed.
        """
        kind, credentials = self._open(connection_id)
        area, what, ids = _decode(location)
        if area == MAIL_AREA and what == MESSAGE:
            mail = self._call(lambda: self._mail(kind, credentials).get(_ids(ids, 3)[2]))
            return SourceText(location, mail.subject or "(no subject)", "message", "message/rfc822", mail_text(mail),
                              mail.received_at)
        return self._text_of(location, ATTACHMENT if area == MAIL_AREA else FILE,
                             self._read(kind, credentials, area, what, ids))

    @guarded("authenticated")
    def read_texts(self, connection_id: str, location: str, limit: int = 10) -> tuple[list[SourceText], list[str]]:
        """The items of a container read as text: a mail folder's newest `limit` mails, a mail's
        attachments, or the first `limit` files of a folder or library (sub-folders are not
        entered). Returns the texts and, per item that could not be read, why.

        Raises:
            InvalidInput: `location` is the top or an area, or an item rather than a container.
        """
        kind, credentials = self._open(connection_id)
        area, what, ids = _decode(location)
        if area == MAIL_AREA and what == FOLDER:
            folder = tuple(_ids(ids, 2))
            mails = self._call(lambda: self._mail(kind, credentials).list(folder[0], limit))
            return [SourceText(encode_location(MAIL_AREA, MESSAGE, *folder, m.id), m.subject or "(no subject)",
                               "message", "message/rfc822", mail_text(m), m.received_at) for m in mails], []
        if area == "" or (area == MAIL_AREA and what == ROOT):
            raise InvalidInput([FieldError("location", "names the top of the connection: give a mail folder "
                                                       "(e.g. /Inbox), a mail or a folder of files")])
        if not is_container_location(location):
            raise InvalidInput([FieldError("location", "names an item, not a folder: read it as an item")])
        entries = self._call(lambda: self._browse_mail(self._mail(kind, credentials), what, ids) if area == MAIL_AREA
                             else self._browse_files(self._files(kind, credentials), what, ids))
        texts, problems = [], []
        for entry in [e for e in entries if not e.container][:limit]:
            try:
                _area, item_kind, item_ids = _decode(entry.location)
                item = self._read(kind, credentials, _area, item_kind, item_ids)
                texts.append(self._text_of(entry.location, entry.kind, item, entry.modified))
            except (SourceFailed, InvalidInput, NotFound) as exc:
                problems.append(f"{entry.name}: {exc}")
        return texts, problems

    # --- copying --------------------------------------------------------------------------------

    @guarded("authenticated")
    def copy_to_files(self, connection_id: str, location: str, instance_id: str, folder: str | None = None
                      ) -> FileEntry:
        """Copy a file, an attachment or a mail (as text) into the file store of `instance_id`
        under /sources/<connection>/… (or into `folder` of the store, when given), with that
        store's rights (create) and limits (POWERON_FILE_MAX_BYTES, the instance's quota). The same
        content under the same name is not copied twice (its entry is returned); another file of
        that name gets " (2)" …

        Raises:
            NotFound: the connection or the instance is not the user's to use.
            Forbidden: the user may not create files there.
            FileTooLarge: the item is over the store's limits (named).
        """
        files = FileStore.of(self.access, instance_id)
        files.require("create")
        target = join_path(split_path(folder, "folder")) if folder is not None else None
        kind, credentials = self._open(connection_id)
        area, what, ids = _decode(location)
        item = self._read(kind, credentials, area, what, ids)
        if target is None:
            target = "/" + "/".join([SOURCES_FOLDER, safe_name(credentials.label, "connection"),
                                     *(safe_name(part, "folder") for part in item.folder)])
        return self._store(files, target.rstrip("/"), safe_name(item.name), item)

    @guarded("authenticated")
    def upload(self, connection_id: str, location: str, instance_id: str, file_path: str, name: str | None = None,
               overwrite: bool = False) -> SourceEntry:
        """Put a file of the store of `instance_id` (read with the user's rights) into the folder or
        library `location` of a files connection, as `name` (default: the file's name). A file of
        that name there is refused unless `overwrite`; a file over POWERON_FILE_MAX_BYTES too.

        Raises:
            InvalidInput: naming `folder` (not a folder of files), `file` (too large), `name` (not a
                file name) or `overwrite` (the name is taken).
            NotFound: the connection, the instance or the file is not the user's to use.
        """
        files = FileStore.of(self.access, instance_id)
        kind, credentials = self._open(connection_id)
        area, what, ids = _decode(location)
        if area != FILES_AREA or what != CONTAINER:
            raise InvalidInput([FieldError("folder", "is not a folder of files: name a document library or folder "
                                                     "(e.g. /Finance/Documents/Reports)")])
        entry, content = files.read_bytes(file_path)
        limit = get_settings().file_max_bytes
        if len(content) > limit:
            raise InvalidInput([FieldError("file", f"{entry.path} is {human_size(len(content))}; uploads may be at "
                                                   f"most {human_size(limit)} (POWERON_FILE_MAX_BYTES)")])
        target = entry.name if name is None else name.strip()
        if not target or target != safe_name(target, "") or len(target) > NAME_MAX:
            raise InvalidInput([FieldError("name", f"'{name}' cannot be a file name: no slashes or control "
                                                   f"characters, at most {NAME_MAX} characters")])
        access = self._files(kind, credentials)
        container = _ids(ids, 1)[0]
        if not overwrite:
            taken = self._call(lambda: access.browse(container))
            if any(i.name.casefold() == target.casefold() for i in taken):
                raise InvalidInput([FieldError("overwrite", f"a file named '{target}' is there already; set overwrite "
                                                            "to replace it")])
        uploaded = self._call(lambda: access.upload(container, target, content, entry.mime_type, overwrite))
        return self._file_entry(uploaded)

    # --- helpers: opening -----------------------------------------------------------------------

    def _open(self, connection_id: Any) -> tuple[ConnectionType, Any]:
        try:
            credentials = store.open_connection(self.session, self.user, connection_id)
        except ConnectionFailed as exc:
            raise SourceFailed(str(exc)) from None
        kind = connection_type(credentials.type)
        if not kind.offers:
            raise SourceFailed(f"connection '{credentials.label}' offers no files or mail to browse")
        return kind, credentials

    @staticmethod
    def _call(work: Callable[[], Any]) -> Any:
        """Run a connector call; its ConnectionFailed becomes SourceFailed (the page shows it)."""
        try:
            return work()
        except ConnectionFailed as exc:
            raise SourceFailed(str(exc)) from None

    @staticmethod
    def _mail(kind: ConnectionType, credentials: Any) -> MailAccess:
        if kind.mail is None:
            raise SourceFailed(f"{kind.label} connections offer no mail")
        return Sources._call(lambda: kind.mail(credentials))

    @staticmethod
    def _files(kind: ConnectionType, credentials: Any) -> FileAccess:
        if kind.files is None:
            raise SourceFailed(f"{kind.label} connections offer no files")
        return Sources._call(lambda: kind.files(credentials))

    # --- helpers: browsing ----------------------------------------------------------------------

    def _top(self, kind: ConnectionType, credentials: Any) -> list[SourceEntry]:
        """Mail and Files when the connection offers both, else the one it offers opened."""
        if MAIL in kind.offers and FILES in kind.offers:
            return [SourceEntry(encode_location(MAIL_AREA, ROOT), "Mail", "area", True, False, False),
                    SourceEntry(encode_location(FILES_AREA, ROOT), "Files", "area", True, False, False)]
        if MAIL in kind.offers:
            return self._call(lambda: self._browse_mail(self._mail(kind, credentials), ROOT, []))
        return self._call(lambda: self._browse_files(self._files(kind, credentials), ROOT, []))

    def _browse_mail(self, mail: MailAccess, what: str, ids: list[str], limit: int = LIST_LIMIT
                     ) -> list[SourceEntry]:
        if what == ROOT:
            return [self._folder_entry(f) for f in mail.folders()]
        if what == FOLDER:
            folder = tuple(_ids(ids, 2))
            return [self._mail_entry(m, folder) for m in mail.list(folder[0], limit)]
        if what == MESSAGE:
            folder_id, folder_name, mail_id = _ids(ids, 3)
            found = mail.get(mail_id)
            return [SourceEntry(encode_location(MAIL_AREA, ATTACHMENT, folder_id, folder_name, mail_id, a.id), a.name,
                                "attachment", False, True, True, detail=f"{human_size(a.size)} · {a.mime_type}",
                                mime_type=a.mime_type) for a in found.attachments]
        raise InvalidInput([FieldError("location", "is not a place in this connection: open it from the list")])

    @staticmethod
    def _folder_entry(folder: SourceItem) -> SourceEntry:
        """A mail folder as an entry."""
        return SourceEntry(encode_location(MAIL_AREA, FOLDER, folder.id, folder.name), folder.name, "mailFolder",
                           True, False, False, detail=folder.path if folder.path and folder.path != folder.name else "")

    @staticmethod
    def _mail_entry(mail: Mail, folder: tuple[str, str]) -> SourceEntry:
        """A mail of `folder` (its id and name)."""
        clip = f"📎 {len(mail.attachments)} · " if mail.attachments else ""
        return SourceEntry(encode_location(MAIL_AREA, MESSAGE, *folder, mail.id), mail.subject or "(no subject)",
                           "message", True, True, True, detail=f"{clip}{mail.sender} · {_when(mail.received_at)}",
                           mime_type="message/rfc822", modified=mail.received_at)

    def _search_mail(self, mail: MailAccess, text: str, folder: tuple[str, str] | None, limit: int = SEARCH_LIMIT
                     ) -> list[SourceEntry]:
        folders = [folder] if folder else [(f.id, f.name) for f in mail.folders()]
        found: list[SourceEntry] = []
        for one in folders:
            found += [self._mail_entry(m, one) for m in mail.list(one[0], limit - len(found), query=text)]
            if len(found) >= limit:
                break
        return found

    def _browse_files(self, files: FileAccess, what: str, ids: list[str]) -> list[SourceEntry]:
        if what == ROOT:
            items = files.browse(None)
        elif what == CONTAINER:
            items = files.browse(_ids(ids, 1)[0])
        else:
            raise InvalidInput([FieldError("location", "is not a place in this connection: open it from the list")])
        return sorted((self._file_entry(i) for i in items), key=lambda e: (not e.container, e.name.lower()))

    @staticmethod
    def _file_entry(item: SourceItem) -> SourceEntry:
        if item.container:
            return SourceEntry(encode_location(FILES_AREA, CONTAINER, item.id), item.name, item.kind, True, False,
                               False, detail=item.path if item.path else "", modified=item.modified)
        size = human_size(item.size) if item.size is not None else ""
        detail = " · ".join(p for p in (size, item.mime_type or "", _when(item.modified)) if p)
        return SourceEntry(encode_location(FILES_AREA, FILE, item.id), item.name, item.kind, False, True, True,
                           detail=detail, mime_type=item.mime_type or "", modified=item.modified)

    # --- helpers: paths ---------------------------------------------------------------------------

    @staticmethod
    def _path_attempts(kind: ConnectionType, parts: list[str]) -> list[tuple[str, list[str]]]:
        """Where a path may lead: the area its first part names ("Mail", "Files") when the
        connection offers both, else mail, then files."""
        areas = [area for area, offer in ((MAIL_AREA, MAIL), (FILES_AREA, FILES)) if offer in kind.offers]
        named = [(a, parts[1:]) for a in areas if parts[0].casefold() == AREA_NAMES[a].casefold()]
        return named if named and len(areas) > 1 else named + [(a, parts) for a in areas]

    def _locate_in(self, kind: ConnectionType, credentials: Any, area: str, rest: list[str]
                   ) -> tuple[SourceEntry | None, str]:
        """(the entry, "") at `rest` in one area, or (None, what is there instead)."""
        if not rest:
            return SourceEntry(encode_location(area, ROOT), AREA_NAMES[area], "area", True, False, False), ""
        if area == MAIL_AREA:
            folders = self._mail(kind, credentials).folders()
            wanted = "/".join(rest).casefold()
            found = next((f for f in folders if wanted in (f.path.casefold(), f.id.casefold())), None) or \
                next((f for f in folders if f.name.casefold() == wanted), None)
            if found is not None:
                return self._folder_entry(found), ""
            return None, f"no mail folder '{'/'.join(rest)}' (folders: {_names(f.path or f.name for f in folders)})"
        return self._walk_files(self._files(kind, credentials), rest)

    @classmethod
    def _walk_files(cls, files: FileAccess, rest: list[str]) -> tuple[SourceEntry | None, str]:
        """Down sites → libraries → folders → a file by names; (None, why) where a name is missing."""
        items, trail = files.browse(None), []
        for index, part in enumerate(rest):
            found = next((i for i in items if i.name == part), None) or \
                next((i for i in items if i.name.casefold() == part.casefold()), None)
            where = "/" + "/".join(trail) if trail else "the top"
            if found is None:
                return None, f"{where} holds no '{part}' (it holds {_names(i.name for i in items)})"
            trail.append(found.name)
            if index < len(rest) - 1:
                if not found.container:
                    return None, f"'/{'/'.join(trail)}' is a file, not a folder"
                items = files.browse(found.id)
        return cls._file_entry(found), ""

    # --- helpers: reading and storing -----------------------------------------------------------

    @staticmethod
    def _text_of(location: str, kind: str, item: _Item, modified: datetime | None = None) -> SourceText:
        """An item's text through the file store's extractors; SourceFailed when it holds none."""
        mime = extract.detect_type(item.name, item.mime_type, item.content)
        text = extract.extract_text(item.content, mime) if extract.is_extractable(mime) else None
        if text is None:
            raise SourceFailed(f"'{item.name}' ({mime}) holds no text that can be read")
        return SourceText(location, item.name, kind, mime, text, modified)

    def _read(self, kind: ConnectionType, credentials: Any, area: str, what: str, ids: list[str]) -> _Item:
        """An item's content (a mail as text), or InvalidInput for a location that is no item."""
        if area == MAIL_AREA and what == ATTACHMENT:
            _folder_id, folder, mail_id, attachment_id = _ids(ids, 4)
            name, mime, content = self._call(lambda: self._mail(kind, credentials).attachment(mail_id, attachment_id))
            return _Item(name, mime, content, (folder,))
        if area == MAIL_AREA and what == MESSAGE:
            _folder_id, folder, mail_id = _ids(ids, 3)
            mail = self._call(lambda: self._mail(kind, credentials).get(mail_id))
            name = safe_name(mail.subject or "mail", "mail")[:NAME_MAX - 4] + ".txt"
            return _Item(name, "text/plain", mail_text(mail).encode("utf-8"), (folder,))
        if area == FILES_AREA and what == FILE:
            item_id = _ids(ids, 1)[0]
            name, mime, content = self._call(lambda: self._files(kind, credentials).download(item_id))
            return _Item(name, mime, content, ())
        raise InvalidInput([FieldError("location", "names a folder, not a file, attachment or mail")])

    @staticmethod
    def _store(files: FileStore, folder: str, name: str, item: _Item) -> FileEntry:
        """Store the item as `folder/name`; the same bytes already there are that entry; another
        file of the name makes it "name (2)" and so on."""
        import hashlib

        digest = hashlib.sha256(item.content).hexdigest()
        for number in range(1, SAME_NAME_TRIES + 1):
            path = f"{folder}/{_numbered(name, number)}"
            try:
                return files.store_file(path, item.content, item.mime_type)
            except Conflict:
                try:
                    existing = files.find_file(path)
                except (NotFound, Forbidden):
                    continue
                if existing.sha256 == digest:
                    return existing
        raise Conflict(f"{folder} already holds {SAME_NAME_TRIES} files named like '{name}': tidy it up first")
