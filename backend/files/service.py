"""The file store of a feature instance: the only way to its folders, files and search index.

:class:`FileStore` is the door (backend/rbac/door.py) to the files of an instance of ANY
feature (the Workspace's, the Graphical Editor's …): its public methods declare and enforce the
caller's DATA right on `data.feature.{featureCode}.file` of the instance's feature
(``FeatureItem.data("file")``). Open it with :meth:`FileStore.of` (an AccessContext and an
instance id) or :func:`open_store` (a *scope*). The module functions below take a scope —
anything with `session`, `user`, `mandate_id` and `feature_instance_id` (an ActionContext, or
:class:`FileScope`) — and call the door; they work inside that instance only:

- read `all` sees every file, `own` only the files the user created, `none` nothing (folders
  are structure: everyone who may read files sees every folder);
- create is needed for writing files (new or replaced) and creating folders, update (own: rows
  the user created) in addition for overwriting, and for renaming; delete (own likewise) for
  deleting.

Paths look like `/reports/2024/summary.md` (the leading slash is optional, `/` is the root).
Names must not be empty, `.` or `..`, contain `/` or control characters, or start or end with
spaces; a folder holds at most one file or folder of a name. Files may be at most
POWERON_FILE_MAX_BYTES (20 MiB) and an instance holds at most POWERON_INSTANCE_QUOTA_BYTES
(1 GiB). Bad input raises InvalidInput, NotFound, Conflict, Forbidden or NotText before
anything is written.

Text is extracted on write (backend.files.extract) and indexed by the database: an FTS5 table
on SQLite, a tsvector column on PostgreSQL (migration 0004_files); :func:`search_files` hides
the difference.
"""

from __future__ import annotations

import hashlib
import re
import secrets
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Protocol

from sqlalchemy import column, delete, func, literal_column, table
from sqlalchemy.exc import IntegrityError
from sqlmodel import Session, select

from backend.config import get_settings
from backend.db.models import FeatureInstance, FileFolder, StoredFile, StoredFileData, User, utcnow
from backend.errors import Conflict, DomainError, FieldError, Forbidden, InvalidInput, NotFound
from backend.files import extract
from backend.names import name_problem
from backend.rbac.access import AccessContext
from backend.rbac.door import Door, FeatureItem, Permission, guarded
from backend.rbac.rights import DATA

MIB = 1024 * 1024
NAME_MAX = 255
DEFAULT_READ_CHARS = 50_000
MAX_READ_CHARS = 200_000
SEARCH_INDEX_CHARS = 200_000  # as in migration 0004_files
SEARCH_MAX_WORDS = 16
SNIPPET_MARK = "**"  # how SearchHit.snippet (agents, REST) marks a match; the UI uses SearchHit.segments
FILE = FeatureItem.data("file")  # data.feature.{featureCode}.file of the store's instance


class NotText(DomainError):
    """A binary file (or a document without extractable text) where text was expected."""


class FileTooLarge(InvalidInput):
    """A file over POWERON_FILE_MAX_BYTES, or one that would overrun the instance's quota."""


class Scope(Protocol):
    """What the service needs to know about its caller (ActionContext fits)."""

    session: Session
    user: User
    mandate_id: str
    feature_instance_id: str | None


@dataclass
class FileScope:
    """A scope for callers that have no ActionContext (REST routes, UI state)."""

    session: Session
    user: User
    mandate_id: str
    feature_instance_id: str
    access: AccessContext | None = None


@dataclass(frozen=True)
class FileLimits:
    max_file_bytes: int
    instance_quota_bytes: int


@dataclass(frozen=True)
class FileEntry:
    """A file as callers see it (never the ORM row)."""

    id: str
    name: str
    path: str
    folder_path: str
    mime_type: str
    size_bytes: int
    sha256: str
    has_text: bool
    sys_created_by: str | None
    sys_created_at: datetime
    sys_modified_at: datetime


@dataclass(frozen=True)
class FolderEntry:
    id: str
    name: str
    path: str
    parent_path: str
    sys_created_by: str | None
    sys_created_at: datetime


@dataclass(frozen=True)
class FileText:
    """A slice of a file's text."""

    file: FileEntry
    text: str
    offset: int
    total_chars: int
    truncated: bool


@dataclass(frozen=True)
class SnippetPart:
    """A piece of a search snippet: text as it is in the file, and whether it is a match."""

    text: str
    match: bool


@dataclass(frozen=True)
class SearchHit:
    """A file found by full-text search.

    `segments` is the text around the matches as plain-text pieces, the matches flagged: what a
    UI renders (as text, never as markup: a file's own `**`, `# title` or `<b>` stay what they
    are). `snippet` is the same text with each match between `**` (SNIPPET_MARK), for agents
    and the REST API.
    """

    file: FileEntry
    folder_path: str
    snippet: str
    segments: tuple[SnippetPart, ...] = ()


@dataclass(frozen=True)
class DeletedFolder:
    path: str
    files: int
    folders: int


@dataclass(frozen=True)
class FileRowView:
    """A file as a listing shows it, with what the caller may do to it."""

    entry: FileEntry
    can_rename: bool
    can_delete: bool


@dataclass(frozen=True)
class FolderView:
    """One folder of the store as a page shows it (:meth:`FileStore.folder_view`)."""

    folder: str
    folders: list[FolderEntry]
    files: list[FileRowView]
    can_upload: bool


# --- configuration and input ------------------------------------------------------------------------


def get_limits() -> FileLimits:
    """The size limits of the configuration (POWERON_FILE_MAX_BYTES, POWERON_INSTANCE_QUOTA_BYTES)."""
    settings = get_settings()
    return FileLimits(max_file_bytes=settings.file_max_bytes, instance_quota_bytes=settings.instance_quota_bytes)


def human_size(size: int) -> str:
    """1536 → '1.5 KiB'."""
    value = float(size)
    for unit in ("bytes", "KiB", "MiB", "GiB"):
        if value < 1024 or unit == "GiB":
            return f"{size} bytes" if unit == "bytes" else f"{value:.1f} {unit}".replace(".0 ", " ")
        value /= 1024
    return f"{size} bytes"


def _count(number: int, noun: str) -> str:
    return f"{number} {noun}" if number == 1 else f"{number} {noun}s"


def validate_name(name: Any, field_name: str = "name") -> str:
    """A file or folder name as given, or InvalidInput saying what is wrong with it."""
    problem = None
    if not isinstance(name, str) or not name:
        problem = "must not be empty"
    elif "/" in name:
        problem = f"'{name}' must not contain '/'"
    elif name in (".", ".."):
        problem = f"'{name}' is not allowed as a name"
    elif (bad_character := name_problem(name)) is not None:
        problem = bad_character
    elif name != name.strip():
        problem = f"'{name}' must not start or end with spaces"
    elif len(name) > NAME_MAX:
        problem = f"must be at most {NAME_MAX} characters (got {len(name)})"
    if problem:
        raise InvalidInput([FieldError(field_name, problem)])
    return name


def split_path(path: Any, field_name: str = "path") -> list[str]:
    """`/a/b/c.txt` → ['a', 'b', 'c.txt'] with every part validated; `/` → []."""
    if not isinstance(path, str):
        raise InvalidInput([FieldError(field_name, "must be a path such as /folder/file.txt")])
    parts = [p for p in path.split("/") if p != ""]
    for part in parts:
        try:
            validate_name(part, field_name)
        except InvalidInput as exc:
            raise InvalidInput([FieldError(field_name, f"in '{path}': {exc.errors[0].message}")]) from None
    return parts


def join_path(parts: Iterable[str]) -> str:
    return "/" + "/".join(parts)


# --- the store of one instance ----------------------------------------------------------------------

EXTRACT = object()  # marker for `FileStore.write`: extract the text from the bytes


class FileStore(Door):
    """The file store of one feature instance, as one user may use it (the door to its files).

    Build it with :meth:`of` or :func:`open_store`, which check the instance first (NotFound
    when the user may not open it). One store serves one request or UI event: it caches the
    instance's folders.
    """

    def __init__(self, access: AccessContext, instance: FeatureInstance):
        self.access = access
        self.instance = instance
        self.session: Session = access.session
        self.user: User = access.user
        self._folders: dict[str, FileFolder] | None = None

    @classmethod
    def of(cls, access: AccessContext, instance_id: str, mandate_id: str | None = None) -> FileStore:
        """The store of instance `instance_id` (in `mandate_id` when given), else NotFound."""
        if not instance_id:
            raise InvalidInput([FieldError("featureInstanceId",
                                           "the file store belongs to a feature instance and none was given")])
        return cls(access, access.require_instance(instance_id, mandate_id=mandate_id))

    # --- rights (the row rule is AccessContext.may's) ---

    def require(self, operation: str, row: Any = None, what: str = "files") -> None:
        """Forbidden unless the caller may `operation` files here (and `row`, when given)."""
        self.enforce(Permission(DATA, FILE, operation))
        if row is not None and not self.may(operation, FILE, row):
            raise Forbidden(f"your roles allow {operation} only on {what} you created")

    def can_read(self, row: StoredFile) -> bool:
        return self.may("read", FILE, row)

    # --- folders ---

    def folders(self) -> dict[str, FileFolder]:
        if self._folders is None:
            rows = self.session.exec(select(FileFolder).where(FileFolder.feature_instance_id == self.instance.id))
            self._folders = {f.id: f for f in rows.all()}
        return self._folders

    def folder_parts(self, folder_id: str | None) -> list[str]:
        parts: list[str] = []
        folders = self.folders()
        while folder_id is not None:
            folder = folders[folder_id]
            parts.append(folder.name)
            folder_id = folder.parent_id
        return parts[::-1]

    def folder_path(self, folder_id: str | None) -> str:
        return join_path(self.folder_parts(folder_id))

    def child_folder(self, parent_id: str | None, name: str) -> FileFolder | None:
        return next((f for f in self.folders().values() if f.parent_id == parent_id and f.name == name), None)

    def walk_folders(self, parts: list[str]) -> tuple[str | None, list[str]]:
        """The deepest existing folder along `parts` and the names below it that do not exist."""
        folder_id: str | None = None
        for index, name in enumerate(parts):
            child = self.child_folder(folder_id, name)
            if child is None:
                return folder_id, parts[index:]
            folder_id = child.id
        return folder_id, []

    def resolve_folder(self, parts: list[str], field_name: str = "path") -> str | None:
        folder_id, missing = self.walk_folders(parts)
        if missing:
            if self.file_row(folder_id, missing[0]) is not None and len(missing) == 1:
                raise InvalidInput([FieldError(field_name, f"{join_path(parts)} is a file, not a folder")])
            raise NotFound(f"folder {join_path(parts)} not found")
        return folder_id

    def subtree(self, folder_id: str | None) -> list[FileFolder]:
        """Every folder below `folder_id` (not itself), parents before children."""
        children: dict[str | None, list[FileFolder]] = {}
        for folder in self.folders().values():
            children.setdefault(folder.parent_id, []).append(folder)
        found, queue = [], list(children.get(folder_id, []))
        while queue:
            folder = queue.pop(0)
            found.append(folder)
            queue.extend(children.get(folder.id, []))
        return found

    def make_folders(self, parent_id: str | None, names: list[str]) -> str | None:
        for name in names:
            if self.file_row(parent_id, name) is not None:
                raise Conflict(f"{join_path([*self.folder_parts(parent_id), name])} is a file, not a folder")
            folder = FileFolder(mandate_id=self.instance.mandate_id, feature_instance_id=self.instance.id,
                                parent_id=parent_id, name=name, sys_created_by=self.user.id)
            self.savepoint(f"a folder named '{name}' already exists in {self.folder_path(parent_id)}",
                         lambda folder=folder: self.session.add(folder))
            self.folders()[folder.id] = folder
            parent_id = folder.id
        return parent_id

    def folder_entry(self, folder: FileFolder) -> FolderEntry:
        return FolderEntry(id=folder.id, name=folder.name, path=self.folder_path(folder.id),
                           parent_path=self.folder_path(folder.parent_id), sys_created_by=folder.sys_created_by,
                           sys_created_at=folder.sys_created_at)

    # --- files ---

    def file_row(self, folder_id: str | None, name: str) -> StoredFile | None:
        query = select(StoredFile).where(StoredFile.feature_instance_id == self.instance.id, StoredFile.name == name)
        query = query.where(StoredFile.folder_id == folder_id if folder_id else StoredFile.folder_id.is_(None))
        return self.session.exec(query).first()

    def file_by_path(self, path: str, field_name: str = "path") -> StoredFile:
        parts = split_path(path, field_name)
        if not parts:
            raise InvalidInput([FieldError(field_name, "names a folder (/), not a file")])
        self.require("read")
        folder_id, missing = self.walk_folders(parts[:-1])
        row = None if missing else self.file_row(folder_id, parts[-1])
        if row is None or not self.can_read(row):
            if not missing and self.child_folder(folder_id, parts[-1]) is not None:
                raise InvalidInput([FieldError(field_name, f"{join_path(parts)} is a folder, not a file")])
            raise NotFound(f"file {join_path(parts)} not found")
        return row

    def file_by_id(self, file_id: str) -> StoredFile:
        self.require("read")
        row = self.session.get(StoredFile, file_id)
        if row is None or row.feature_instance_id != self.instance.id or not self.can_read(row):
            raise NotFound(f"file {file_id} not found")
        return row

    def data(self, row: StoredFile) -> StoredFileData:
        return self.session.get(StoredFileData, row.id)

    def entry(self, row: StoredFile) -> FileEntry:
        folder_path = self.folder_path(row.folder_id)
        return FileEntry(
            id=row.id, name=row.name, path=folder_path.rstrip("/") + "/" + row.name, folder_path=folder_path,
            mime_type=row.mime_type, size_bytes=row.size_bytes, sha256=row.sha256, has_text=row.has_text,
            sys_created_by=row.sys_created_by, sys_created_at=row.sys_created_at,
            sys_modified_at=row.sys_modified_at,
        )

    def used_bytes(self) -> int:
        total = self.session.exec(
            select(func.coalesce(func.sum(StoredFile.size_bytes), 0)).where(
                StoredFile.feature_instance_id == self.instance.id)
        ).one()
        return int(total)

    def check_size(self, size: int, replacing: int = 0) -> None:
        check_file_size(size)
        limits = get_limits()
        after = self.used_bytes() - replacing + size
        if after > limits.instance_quota_bytes:
            raise FileTooLarge([FieldError("content", (
                f"the file store of this instance would hold {human_size(after)}, over its quota of "
                f"{human_size(limits.instance_quota_bytes)} (POWERON_INSTANCE_QUOTA_BYTES); delete files first"))])

    def savepoint(self, clash: str, change: Callable[[], Any]) -> None:
        """Make `change` and flush it in a savepoint: a unique-name clash with a concurrent
        writer becomes Conflict(clash) and leaves the rest of the transaction usable."""
        try:
            with self.session.begin_nested():
                change()
                self.session.flush()
        except IntegrityError:
            raise Conflict(clash) from None

    def write(self, path: str, data: bytes, mime_type: str | None, overwrite: bool, create_folders: bool,
              text: Any = EXTRACT, field_name: str = "path") -> FileEntry:
        """Create or replace one file; every check runs before the first write.

        `text` is the file's text if the caller knows it (None: binary), else it is extracted.
        """
        parts = split_path(path, field_name)
        if not parts:
            raise InvalidInput([FieldError(field_name, "names the root folder (/), not a file")])
        *folder_parts, name = parts
        folder_id, missing = self.walk_folders(folder_parts)
        if missing and not create_folders:
            raise NotFound(f"folder {join_path(folder_parts)} not found")
        if missing and self.file_row(folder_id, missing[0]) is not None:
            raise Conflict(f"{join_path([*self.folder_parts(folder_id), missing[0]])} is a file, not a folder")
        existing = None if missing else self.file_row(folder_id, name)
        if not missing and self.child_folder(folder_id, name) is not None:
            raise Conflict(f"{join_path(parts)} is a folder; choose another file name")
        if existing is not None:
            if not overwrite:
                raise Conflict(f"a file named '{name}' already exists in {join_path(folder_parts)} "
                               "(set overwrite to replace it)")
            self.require("update", existing)
        else:
            self.require("create")
        if missing:
            self.require("create", what="folders")
        self.check_size(len(data), existing.size_bytes if existing else 0)
        mime = extract.detect_type(name, mime_type, data)
        if text is EXTRACT:
            text = extract.extract_text(data, mime)
        folder_id = self.make_folders(folder_id, missing)
        digest = hashlib.sha256(data).hexdigest()
        clash = f"a file named '{name}' already exists in {join_path(folder_parts)}"
        if existing is None:
            row = StoredFile(mandate_id=self.instance.mandate_id, feature_instance_id=self.instance.id,
                             folder_id=folder_id, name=name, sys_created_by=self.user.id, mime_type=mime,
                             size_bytes=len(data), sha256=digest, has_text=text is not None)

            def insert() -> None:
                self.session.add(row)
                self.session.flush()
                self.session.add(StoredFileData(file_id=row.id, content=data, text_content=text))

            self.savepoint(clash, insert)
        else:
            row, stored = existing, self.data(existing)

            def replace() -> None:
                row.mime_type, row.size_bytes, row.sha256, row.has_text = mime, len(data), digest, text is not None
                row.sys_modified_at = utcnow()
                stored.content, stored.text_content = data, text
                self.session.add_all([row, stored])

            self.savepoint(clash, replace)
        return self.entry(row)

    def remove_files(self, rows: list[StoredFile]) -> None:
        ids = [r.id for r in rows]
        if not ids:
            return
        self.session.flush()
        for row in rows:
            self.session.expunge(row)
            loaded = self.session.identity_map.get(self.session.identity_key(StoredFileData, row.id))
            if loaded is not None:
                self.session.expunge(loaded)
        self.session.exec(delete(StoredFileData).where(StoredFileData.file_id.in_(ids)))
        self.session.exec(delete(StoredFile).where(StoredFile.id.in_(ids)))

    # --- the door: every public method checks the caller's right on the instance's files ---

    @guarded(DATA, FILE, "read")
    def list_files(self, folder: str = "/", recursive: bool = False) -> list[FileEntry]:
        """The files of a folder (and of its subfolders when `recursive`) the caller may read, by path."""
        folder_id = self.resolve_folder(split_path(folder, "folder"), "folder")
        query = select(StoredFile).where(StoredFile.feature_instance_id == self.instance.id)
        if recursive:
            if folder_id is not None:
                ids = [folder_id, *(f.id for f in self.subtree(folder_id))]
                query = query.where(StoredFile.folder_id.in_(ids))
        else:
            query = query.where(StoredFile.folder_id == folder_id if folder_id else StoredFile.folder_id.is_(None))
        rows = self.session.exec(self.visible(query, StoredFile, FILE)).all()
        return sorted((self.entry(r) for r in rows), key=lambda e: e.path)

    @guarded(DATA, FILE, "read")
    def get_file(self, file_id: str) -> FileEntry:
        """One file by id (NotFound for files of other instances and files the user may not read)."""
        return self.entry(self.file_by_id(file_id))

    @guarded(DATA, FILE, "read")
    def find_file(self, path: str) -> FileEntry:
        """One file by path."""
        return self.entry(self.file_by_path(path))

    @guarded(DATA, FILE, "read")
    def read_bytes(self, path: str | None = None, *, file_id: str | None = None) -> tuple[FileEntry, bytes]:
        """A file's metadata and content, by path or id."""
        row = self.file_by_id(file_id) if file_id else self.file_by_path(path)
        return self.entry(row), bytes(self.data(row).content)

    @guarded(DATA, FILE, "read")
    def read_text(self, path: str, offset: int = 0, max_chars: int = DEFAULT_READ_CHARS) -> FileText:
        """Up to `max_chars` characters of a file's text from `offset`; NotText for binary files.

        Text files give their content, PDF and DOCX files the text extracted from them.
        """
        if offset < 0:
            raise InvalidInput([FieldError("offset", "must not be negative")])
        if not 1 <= max_chars <= MAX_READ_CHARS:
            raise InvalidInput([FieldError("maxChars", f"must be between 1 and {MAX_READ_CHARS}")])
        row = self.file_by_path(path)
        entry = self.entry(row)
        text = self.data(row).text_content
        if text is None:
            reason = ("no text could be extracted from it" if extract.is_extractable(row.mime_type)
                      else "it is a binary file")
            raise NotText(f"{entry.path} has no text ({row.mime_type}, {human_size(row.size_bytes)}): {reason}; "
                          "only text, PDF and DOCX files can be read as text")
        piece = text[offset:offset + max_chars]
        return FileText(entry, piece, offset, len(text), offset + len(piece) < len(text))

    @guarded(DATA, FILE, "create")
    def store_file(self, path: str, data: bytes, mime_type: str | None = None, overwrite: bool = False,
                   create_folders: bool = True) -> FileEntry:
        """Store bytes at `path` (an upload); the type comes from `mime_type`, the name or the bytes.

        Replacing a file (`overwrite`) needs the update right on it as well.
        """
        return self.write(path, data, mime_type, overwrite, create_folders)

    @guarded(DATA, FILE, "create")
    def write_text(self, path: str, text: str, overwrite: bool = True, create_folders: bool = True) -> FileEntry:
        """Create or replace a text file (UTF-8); names of binary types (.pdf, .png, …) are refused."""
        name = (split_path(path) or [""])[-1]
        guessed = extract.guess_type(name) if name else None
        if guessed and not extract.is_text_type(guessed):
            raise InvalidInput([FieldError("path", f"'{name}' names a {guessed} file; only text files can be "
                                                   "written (use a name such as .txt, .md, .csv or .json)")])
        if "\x00" in text:
            raise InvalidInput([FieldError("content", "text must not contain NUL characters")])
        return self.write(path, text.encode("utf-8"), guessed or "text/plain", overwrite, create_folders, text)

    @guarded(DATA, FILE, "delete")
    def delete_file(self, path: str | None = None, *, file_id: str | None = None) -> FileEntry:
        """Delete one file, by path or id; returns what it was."""
        row = self.file_by_id(file_id) if file_id else self.file_by_path(path)
        self.require("delete", row)
        entry = self.entry(row)
        self.remove_files([row])
        return entry

    @guarded(DATA, FILE, "update")
    def rename_file(self, path: str, new_name: str) -> FileEntry:
        """Give a file another name in the same folder."""
        row = self.file_by_path(path)
        validate_name(new_name, "newName")
        self.require("update", row)
        if new_name == row.name:
            return self.entry(row)
        folder_path = self.folder_path(row.folder_id)
        if self.file_row(row.folder_id, new_name) is not None or self.child_folder(row.folder_id, new_name):
            raise Conflict(f"'{new_name}' already exists in {folder_path}")

        def change() -> None:
            row.name, row.sys_modified_at = new_name, utcnow()
            self.session.add(row)

        self.savepoint(f"'{new_name}' already exists in {folder_path}", change)
        return self.entry(row)

    @guarded(DATA, FILE, "create")
    def copy_file(self, path: str, target: str, overwrite: bool = False) -> FileEntry:
        """Copy a file to `target`: a file path, or an existing folder to copy into under the same name."""
        row = self.file_by_path(path)
        target_parts = split_path(target, "targetPath")
        _folder_id, missing = self.walk_folders(target_parts)
        if not missing:  # the target is an existing folder (or the root)
            target_parts = [*target_parts, row.name]
        source = self.data(row)
        return self.write(join_path(target_parts), bytes(source.content), row.mime_type, overwrite, True,
                          source.text_content, "targetPath")

    # --- folders (structure: whoever may read files sees every folder) ---

    @guarded(DATA, FILE, "read")
    def list_folders(self, path: str = "/", recursive: bool = False) -> list[FolderEntry]:
        """The folders in a folder (all below it when `recursive`), by path."""
        folder_id = self.resolve_folder(split_path(path))
        folders = self.subtree(folder_id) if recursive else [
            f for f in self.folders().values() if f.parent_id == folder_id]
        return sorted((self.folder_entry(f) for f in folders), key=lambda e: e.path)

    @guarded(DATA, FILE, "create")
    def create_folder(self, path: str) -> FolderEntry:
        """Create a folder and any missing parents; Conflict when it exists already."""
        parts = split_path(path)
        if not parts:
            raise InvalidInput([FieldError("path", "the root folder (/) always exists")])
        folder_id, missing = self.walk_folders(parts)
        if not missing:
            raise Conflict(f"folder {join_path(parts)} already exists")
        return self.folder_entry(self.folders()[self.make_folders(folder_id, missing)])

    @guarded(DATA, FILE, "delete")
    def delete_folder(self, path: str, recursive: bool = False) -> DeletedFolder:
        """Delete a folder; with files or folders in it only when `recursive` (and all of them may go)."""
        parts = split_path(path)
        if not parts:
            raise InvalidInput([FieldError("path", "the root folder (/) cannot be deleted")])
        folder_id = self.resolve_folder(parts)
        folder = self.folders()[folder_id]
        below = self.subtree(folder_id)
        folder_ids = [folder_id, *(f.id for f in below)]
        files = list(self.session.exec(select(StoredFile).where(StoredFile.folder_id.in_(folder_ids))).all())
        if (files or below) and not recursive:
            raise Conflict(f"folder {join_path(parts)} is not empty ({_count(len(files), 'file')} and "
                           f"{_count(len(below), 'folder')} in it); set recursive to delete it with everything in it")
        for row in [folder, *below]:
            self.require("delete", row, "folders")
        for row in files:
            self.require("delete", row)
        self.remove_files(files)
        for row in reversed([folder, *below]):  # children before parents
            self.session.delete(row)
            self.session.flush()
            self.folders().pop(row.id, None)
        return DeletedFolder(join_path(parts), len(files), len(folder_ids))

    # --- what a page shows ---

    @guarded(DATA, FILE, "read")
    def folder_view(self, folder: str = "/") -> FolderView:
        """One folder as the UDB's Files tab shows it: its folders, its files with what the caller
        may do to each, and whether they may upload. A folder gone meanwhile shows the root."""
        try:
            folders, entries = self.list_folders(folder), self.list_files(folder)
        except DomainError:
            folder = "/"
            folders, entries = self.list_folders(folder), self.list_files(folder)
        return FolderView(folder=folder, folders=folders, files=[self.file_row_view(e) for e in entries],
                          can_upload=self.may_call(FileStore.store_file))

    def file_row_view(self, entry: FileEntry) -> FileRowView:
        """`entry` with whether the caller may rename and delete it."""
        return FileRowView(entry=entry, can_rename=self.may("update", FILE, entry),
                           can_delete=self.may("delete", FILE, entry))

    # --- full-text search ---

    @guarded(DATA, FILE, "read")
    def search_files(self, query: str, limit: int = 20, folder: str | None = None) -> list[SearchHit]:
        """Files whose text contains every word of `query` (word prefixes match), best first.

        Case-insensitive, no stemming. Each hit carries the file, its folder path and the text
        around the matches, as plain-text segments and as a snippet with the matches between `**`.
        Binary files are not indexed; only files the caller may read are found.
        """
        words = search_words(query)
        if not 1 <= limit <= 100:
            raise InvalidInput([FieldError("limit", "must be between 1 and 100")])
        where = [StoredFile.feature_instance_id == self.instance.id]
        if folder is not None:
            folder_id = self.resolve_folder(split_path(folder, "folder"), "folder")
            if folder_id is not None:
                where.append(StoredFile.folder_id.in_([folder_id, *(f.id for f in self.subtree(folder_id))]))
        dialect = self.session.get_bind().dialect.name
        marks = _SnippetMarks.fresh()
        if dialect == "sqlite":
            statement = self._sqlite_search(words, where, limit, marks)
        elif dialect == "postgresql":
            statement = self._postgres_search(words, where, limit, marks)
        else:  # pragma: no cover - the platform supports SQLite and PostgreSQL
            raise NotImplementedError(f"full-text search is not available on {dialect}")
        self.session.flush()
        rows = self.session.execute(statement).all()
        files = {r.id: r for r in self.session.exec(
            select(StoredFile).where(StoredFile.id.in_([row.file_id for row in rows]))).all()}
        hits = []
        for row in rows:
            entry = self.entry(files[row.file_id])
            segments = marks.segments(row.snippet or "", tags_escaped=dialect == "postgresql")
            hits.append(SearchHit(entry, entry.folder_path, marked_snippet(segments), segments))
        return hits

    def _sqlite_search(self, words: list[str], where: list[Any], limit: int, marks: _SnippetMarks) -> Any:
        """FTS5 over `stored_file_fts`, best (lowest bm25) first, narrowed to the readable files."""
        fts = literal_column("stored_file_fts")
        index = table("stored_file_fts", column("file_id"))
        statement = (
            select(StoredFile.id.label("file_id"),
                   func.snippet(fts, 1, marks.start, marks.stop, "…", 16).label("snippet"))
            .select_from(index.join(StoredFile, StoredFile.id == index.c.file_id))
            .where(fts.op("MATCH")(" ".join(f'"{w}"*' for w in words)), *where)
            .order_by(func.bm25(fts), StoredFile.name).limit(limit))
        return self.visible(statement, StoredFile, FILE)

    def _postgres_search(self, words: list[str], where: list[Any], limit: int, marks: _SnippetMarks) -> Any:
        """The tsvector column of stored_file_data, best rank first; headlines only for the hits."""
        query = func.to_tsquery("simple", " & ".join(f"{w}:*" for w in words))
        vector = literal_column("stored_file_data.search_vector")
        score = func.ts_rank(vector, query).label("score")
        best = (select(StoredFile.id.label("file_id"), StoredFile.name.label("name"), score)
                .join(StoredFileData, StoredFileData.file_id == StoredFile.id)
                .where(vector.op("@@")(query), *where)
                .order_by(score.desc(), StoredFile.name).limit(limit))
        hit = self.visible(best, StoredFile, FILE).subquery("hit")
        text_data = StoredFileData.__table__.alias("d")
        source = func.left(text_data.c.text_content, SEARCH_INDEX_CHARS)
        headline = func.ts_headline("simple", _escape_tags(source), query, marks.headline_options())
        return (select(hit.c.file_id, headline.label("snippet"))
                .join(text_data, text_data.c.file_id == hit.c.file_id)
                .order_by(hit.c.score.desc(), hit.c.name))


def open_store(scope: Scope) -> FileStore:
    """The store of the scope's instance, after checking the instance exists in its mandate
    and the user may open it (else NotFound, as for any foreign id)."""
    access = getattr(scope, "access", None) or AccessContext(scope.session, scope.user)
    return FileStore.of(access, getattr(scope, "feature_instance_id", None), scope.mandate_id)


def require_right(scope: Scope, operation: str) -> None:
    """Forbidden unless the caller has some (own or all) right for `operation` on the instance's files.

    For callers that want to refuse early, before reading a request body.
    """
    open_store(scope).require(operation)


def check_file_size(size: int) -> None:
    """FileTooLarge when a file of `size` bytes is over POWERON_FILE_MAX_BYTES."""
    limit = get_limits().max_file_bytes
    if size > limit:
        raise FileTooLarge([FieldError("content", (
            f"the file is {human_size(size)}; files may be at most {human_size(limit)} (POWERON_FILE_MAX_BYTES)"))])


# --- the door for callers with a scope (actions, the engine, the Inbox) ---------------------------


def list_files(scope: Scope, folder: str = "/", recursive: bool = False) -> list[FileEntry]:
    """The files of a folder (and of its subfolders when `recursive`), by path."""
    return open_store(scope).list_files(folder, recursive)


def get_file(scope: Scope, file_id: str) -> FileEntry:
    """One file by id (NotFound for files of other instances and files the user may not read)."""
    return open_store(scope).get_file(file_id)


def find_file(scope: Scope, path: str) -> FileEntry:
    """One file by path."""
    return open_store(scope).find_file(path)


def read_bytes(scope: Scope, path: str | None = None, *, file_id: str | None = None) -> tuple[FileEntry, bytes]:
    """A file's metadata and content, by path or id."""
    return open_store(scope).read_bytes(path, file_id=file_id)


def read_text(scope: Scope, path: str, offset: int = 0, max_chars: int = DEFAULT_READ_CHARS) -> FileText:
    """Up to `max_chars` characters of a file's text from `offset` (:meth:`FileStore.read_text`)."""
    return open_store(scope).read_text(path, offset, max_chars)


def store_file(scope: Scope, path: str, data: bytes, mime_type: str | None = None, overwrite: bool = False,
               create_folders: bool = True) -> FileEntry:
    """Store bytes at `path` (an upload); the type comes from `mime_type`, the name or the bytes."""
    return open_store(scope).store_file(path, data, mime_type, overwrite, create_folders)


def write_text(scope: Scope, path: str, text: str, overwrite: bool = True, create_folders: bool = True) -> FileEntry:
    """Create or replace a text file (UTF-8); names of binary types (.pdf, .png, …) are refused."""
    return open_store(scope).write_text(path, text, overwrite, create_folders)


def delete_file(scope: Scope, path: str | None = None, *, file_id: str | None = None) -> FileEntry:
    """Delete one file, by path or id; returns what it was."""
    return open_store(scope).delete_file(path, file_id=file_id)


def rename_file(scope: Scope, path: str, new_name: str) -> FileEntry:
    """Give a file another name in the same folder."""
    return open_store(scope).rename_file(path, new_name)


def copy_file(scope: Scope, path: str, target: str, overwrite: bool = False) -> FileEntry:
    """Copy a file to `target`: a file path, or an existing folder to copy into under the same name."""
    return open_store(scope).copy_file(path, target, overwrite)


def list_folders(scope: Scope, path: str = "/", recursive: bool = False) -> list[FolderEntry]:
    """The folders in a folder (all below it when `recursive`), by path."""
    return open_store(scope).list_folders(path, recursive)


def create_folder(scope: Scope, path: str) -> FolderEntry:
    """Create a folder and any missing parents; Conflict when it exists already."""
    return open_store(scope).create_folder(path)


def delete_folder(scope: Scope, path: str, recursive: bool = False) -> DeletedFolder:
    """Delete a folder; with files or folders in it only when `recursive` (and all of them may go)."""
    return open_store(scope).delete_folder(path, recursive)


# --- full-text search -------------------------------------------------------------------------------

_HEADLINE = 'MaxWords=30, MinWords=12, MaxFragments=2, FragmentDelimiter=" … "'


@dataclass(frozen=True)
class _SnippetMarks:
    """The markers the database puts around each match of one search: private-use characters
    around a random token, so no file's text can hold them (its own `**`, `<b>` or `[a](b)` are
    just text); :meth:`segments` splits the database's snippet at them."""

    start: str
    stop: str

    @classmethod
    def fresh(cls) -> _SnippetMarks:
        token = secrets.token_hex(8)
        return cls(f"\ue000{token}\ue000", f"\ue001{token}\ue001")

    def headline_options(self) -> str:
        """PostgreSQL ts_headline's options with these markers."""
        return f'StartSel="{self.start}", StopSel="{self.stop}", {_HEADLINE}'

    def segments(self, marked: str, tags_escaped: bool = False) -> tuple[SnippetPart, ...]:
        """The snippet as plain-text pieces, matches flagged; runs of white space become one space.
        `tags_escaped`: the snippet was made from :func:`_escape_tags`'s text (PostgreSQL)."""
        text = " ".join(marked.split())
        parts: list[SnippetPart] = []
        for index, piece in enumerate(re.split(f"{re.escape(self.start)}(.*?){re.escape(self.stop)}", text)):
            if piece:
                parts.append(SnippetPart(_unescape_tags(piece) if tags_escaped else piece, match=index % 2 == 1))
        return tuple(parts)


# PostgreSQL's ts_headline replaces what looks like an HTML tag (`<b>`, `<!-- … -->`) by a space,
# so the text it is given has each "<" escaped as \x01\x03 (and a \x01 of the file as \x01\x02):
# its parser takes those characters for blanks, and a headline starts and ends with a word, so an
# escape is never cut in two.
_ESCAPE, _ESCAPED_ESCAPE, _ESCAPED_LT = "\x01", "\x01\x02", "\x01\x03"


def _escape_tags(text: Any) -> Any:
    """The SQL expression of `text` with "<" (and the escape character itself) escaped."""
    return func.replace(func.replace(text, _ESCAPE, _ESCAPED_ESCAPE), "<", _ESCAPED_LT)


def _unescape_tags(text: str) -> str:
    return re.sub("\x01([\x02\x03])", lambda m: _ESCAPE if m.group(1) == "\x02" else "<", text)


def marked_snippet(segments: Iterable[SnippetPart]) -> str:
    """The segments as one text, each match between `**` (SNIPPET_MARK)."""
    return "".join(f"{SNIPPET_MARK}{part.text}{SNIPPET_MARK}" if part.match else part.text for part in segments)


def search_words(query: Any) -> list[str]:
    """The words of a search query (runs of letters and digits), at most SEARCH_MAX_WORDS."""
    words = re.findall(r"[^\W_]+", query) if isinstance(query, str) else []
    if not words:
        raise InvalidInput([FieldError("query", "must contain at least one word")])
    return words[:SEARCH_MAX_WORDS]


def search_files(scope: Scope, query: str, limit: int = 20, folder: str | None = None) -> list[SearchHit]:
    """Files whose text contains every word of `query` (:meth:`FileStore.search_files`)."""
    words = search_words(query)  # a query without words is refused before the scope is opened
    if not 1 <= limit <= 100:
        raise InvalidInput([FieldError("limit", "must be between 1 and 100")])
    return open_store(scope).search_files(" ".join(words), limit, folder)
