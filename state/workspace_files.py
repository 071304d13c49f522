"""The Files tab of the Workspace's UDB panel: the instance's file store, and the attachments.

Mixed into WorkspaceState (and the Editor's EditorFilesMixin). Every call goes through the
file store's door (backend.files.service.FileStore) of the host's instance inside one
`session_scope()` (via `_user_session`), which applies the DATA rights on the instance's
file data object; the flags it returns only hide what the user may not do. The state holds
what the panel shows: the open folder, its folders and files, one preview, the search hits and
the paths of the attached files.
"""

from __future__ import annotations

import base64
import io
from collections.abc import Callable
from typing import Any, TypedDict

import reflex as rx

from backend.errors import DomainError
from backend.files import service as files
from backend.files.service import FileStore
from backend.rbac.access import AccessContext
from state.auth import NotSignedIn
from state.page import user_message
from state.permissions import requires, requires_door

PREVIEW_CHARS = 3_000
IMAGE_PREVIEW_BYTES = 5 * 1024 * 1024
ATTACHED_HEADER = "Attached files (read them with core_readFile): "


class FolderRow(TypedDict):
    name: str
    path: str


class FileRow(TypedDict):
    name: str
    path: str
    mime: str
    size: str
    may_rename: bool
    may_delete: bool


class SnippetSegment(TypedDict):
    text: str
    match: bool


class HitRow(TypedDict):
    """A search hit: its file and the text around the matches as plain-text segments (matches
    flagged), which the panel renders as text with the matches highlighted."""

    name: str
    path: str
    segments: list[SnippetSegment]


def attachment_appendix(paths: list[str]) -> str:
    """What a prompt gets appended for its attached files ("" for none)."""
    return f"\n\n{ATTACHED_HEADER}{', '.join(paths)}" if paths else ""


def limit_message(name: str, limit: int) -> str:
    return (f"{name or 'The file'} is too large: files may be at most {files.human_size(limit)} "
            "(POWERON_FILE_MAX_BYTES).")


def _pdf_pages(data: bytes) -> int | None:
    try:
        from pypdf import PdfReader

        return len(PdfReader(io.BytesIO(data)).pages)
    except Exception:  # noqa: BLE001 - a broken PDF just has no page count
        return None


class FilesMixin(rx.State, mixin=True):
    """The Files tab's state (the host state provides instance_id and _user_session)."""

    udb_tab: str = "chats"
    folder: str = "/"
    folders: list[FolderRow] = []
    files: list[FileRow] = []
    files_error: str = ""
    files_notice: str = ""
    can_read_files: bool = False
    can_upload: bool = False
    file_max_bytes: int = 0
    file_limit: str = ""
    uploading: bool = False
    upload_percent: int = 0
    preview_path: str = ""
    preview_mime: str = ""
    preview_kind: str = ""  # text, image, pdf or none
    preview_text: str = ""
    preview_note: str = ""
    preview_src: str = ""
    file_rename_path: str = ""
    file_rename_value: str = ""
    file_delete_path: str = ""
    search_query: str = ""
    search_hits: list[HitRow] = []
    searched: bool = False
    attachments: list[str] = []

    # --- helpers ---------------------------------------------------------------------------------

    def _with_scope(self, work: Callable[[FileStore], Any]) -> Any:
        """Run `work(store)` on the host instance's file store in one transaction; NotSignedIn
        and DomainError pass through."""
        with self._user_session() as (session, user):
            return work(FileStore.of(AccessContext(session, user), self.instance_id))

    def _files_attempt(self, work: Callable[[FileStore], Any], success: str = "") -> bool:
        self.files_error = self.files_notice = ""
        try:
            self._with_scope(work)
        except NotSignedIn:
            self.files_error = "Not signed in."
            return False
        except DomainError as exc:
            self.files_error = user_message(exc)
            return False
        self.files_notice = success
        return True

    def _load_folder(self, store: FileStore) -> None:
        """The open folder as the door lists it (the root when it went away), and the flags."""
        limit = files.get_limits().max_file_bytes
        self.file_max_bytes, self.file_limit = limit, files.human_size(limit)
        self.can_upload = store.may_call(FileStore.store_file)
        self.can_read_files = store.may_call(FileStore.folder_view)
        if not self.can_read_files:
            self.folders, self.files = [], []
            return
        view = store.folder_view(self.folder)
        self.folder = view.folder
        self.folders = [FolderRow(name=f.name, path=f.path) for f in view.folders]
        self.files = [FileRow(name=r.entry.name, path=r.entry.path, mime=r.entry.mime_type,
                              size=files.human_size(r.entry.size_bytes), may_rename=r.can_rename,
                              may_delete=r.can_delete) for r in view.files]

    def _refresh_files(self) -> None:
        if not self.instance_id:
            self.folders, self.files = [], []
            return
        try:
            self._with_scope(self._load_folder)
        except NotSignedIn:
            self.files_error = "Not signed in."
        except DomainError as exc:
            self.files_error = user_message(exc)

    # --- tabs and folders ------------------------------------------------------------------------

    @rx.event
    @requires_door(FileStore.folder_view)
    def set_udb_tab(self, tab: str):
        """Switch the UDB tab; the Files tab loads the open folder."""
        self.udb_tab = tab
        if tab == "files":
            self._refresh_files()

    @rx.event
    @requires_door(FileStore.folder_view)
    def open_folder(self, path: str):
        self.folder = path or "/"
        self.files_error = self.files_notice = ""
        self._refresh_files()

    @rx.event
    @requires_door(FileStore.folder_view)
    def folder_up(self):
        parts = [p for p in self.folder.split("/") if p]
        self.folder = "/" + "/".join(parts[:-1])
        self.files_error = self.files_notice = ""
        self._refresh_files()

    # --- upload ----------------------------------------------------------------------------------

    @rx.event
    @requires("ui")
    def upload_progress(self, progress: dict):
        """The browser's upload progress (0..1) as the bar's percent; the bar goes at 100 %
        (a late progress event must not bring it back after the upload handler finished)."""
        fraction = float(progress.get("progress") or 0)
        self.uploading = fraction < 1
        self.upload_percent = int(round(fraction * 100))

    @rx.event
    @requires("ui")
    def upload_rejected(self, names: list[str]):
        """Files the drop zone refused before sending (over POWERON_FILE_MAX_BYTES); only their names come."""
        names = [str(n) for n in names]
        self.files_notice = ""
        self.files_error = " ".join(limit_message(n, self.file_max_bytes) for n in names) or \
            limit_message("", self.file_max_bytes)

    @rx.event
    @requires_door(FileStore.store_file)
    async def handle_upload(self, uploads: list[rx.UploadFile]):
        """Store the uploaded files in the open folder; the service checks rights and sizes."""
        if not uploads:  # the drop zone calls this with no files when it refused them all
            self.uploading, self.upload_percent = False, 0
            return
        stored, problems = [], []
        limit = files.get_limits().max_file_bytes
        for upload in uploads:
            name = (upload.name or "upload").replace("\\", "/").rsplit("/", 1)[-1]
            if upload.size is not None and upload.size > limit:
                problems.append(limit_message(name, limit))
                continue
            data = await upload.read()
            content_type = upload.headers.get("content-type") if upload.headers else None
            path = self.folder.rstrip("/") + "/" + name

            def store(door: FileStore, path=path, data=data, content_type=content_type):
                door.store_file(path, data, content_type)

            try:
                self._with_scope(store)
                stored.append(path)
            except files.FileTooLarge as exc:
                problems.append(f"{name}: {user_message(exc)}")
            except NotSignedIn:
                problems.append("Not signed in.")
                break
            except DomainError as exc:
                problems.append(f"{name}: {user_message(exc)}")
        self.uploading, self.upload_percent = False, 0
        self.files_error = " ".join(problems)
        self.files_notice = f"Uploaded {', '.join(stored)}." if stored else ""
        self._refresh_files()

    # --- preview ---------------------------------------------------------------------------------

    @rx.event
    @requires_door(FileStore.find_file, FileStore.read_bytes)
    def preview_file(self, path: str):
        """Show the start of a text, a PDF's page count and text, or an image."""

        def load(store: FileStore) -> None:
            entry = store.find_file(path)
            mime = entry.mime_type
            self.preview_path, self.preview_mime = entry.path, mime
            self.preview_text = self.preview_note = self.preview_src = ""
            if mime.startswith("image/"):
                if entry.size_bytes > IMAGE_PREVIEW_BYTES:
                    self.preview_kind = "none"
                    self.preview_note = f"The image is {files.human_size(entry.size_bytes)}: too large to preview."
                    return
                _, data = store.read_bytes(file_id=entry.id)
                self.preview_kind = "image"
                self.preview_src = f"data:{mime};base64,{base64.b64encode(data).decode()}"
            elif mime == "application/pdf":
                _, data = store.read_bytes(file_id=entry.id)
                pages = _pdf_pages(data)
                self.preview_kind = "pdf"
                self.preview_note = (f"PDF, {pages} page{'s' if pages != 1 else ''}" if pages is not None
                                     else "PDF (its pages could not be counted)")
                self._preview_text(store, entry)
            elif entry.has_text:
                self.preview_kind = "text"
                self._preview_text(store, entry)
            else:
                self.preview_kind = "none"
                self.preview_note = f"No preview for {mime}."

        self._files_attempt(load)

    def _preview_text(self, store: FileStore, entry: files.FileEntry) -> None:
        if not entry.has_text:
            return
        piece = store.read_text(entry.path, 0, PREVIEW_CHARS)
        self.preview_text = piece.text
        if piece.truncated:
            self.preview_note = (self.preview_note + " · " if self.preview_note else "") + \
                f"the first {len(piece.text):,} of {piece.total_chars:,} characters"

    @rx.event
    @requires("ui")
    def close_preview(self):
        self.preview_path = self.preview_kind = self.preview_text = self.preview_note = self.preview_src = ""

    # --- rename and delete -----------------------------------------------------------------------

    @rx.event
    @requires("ui")
    def start_file_rename(self, path: str, name: str):
        self.file_rename_path, self.file_rename_value = path, name

    @rx.event
    @requires("ui")
    def set_file_rename_value(self, value: str):
        self.file_rename_value = value

    @rx.event
    @requires("ui")
    def cancel_file_rename(self):
        self.file_rename_path = self.file_rename_value = ""

    @rx.event
    @requires_door(FileStore.rename_file)
    def save_file_rename(self):
        path, name = self.file_rename_path, self.file_rename_value.strip()
        renamed: list[str] = []

        def rename(store: FileStore) -> None:
            renamed.append(store.rename_file(path, name).path)

        if self._files_attempt(rename, f"Renamed to '{name}'."):
            self.file_rename_path = ""
            self.attachments = [renamed[0] if p == path else p for p in self.attachments]
            self._refresh_files()

    @rx.event
    @requires("ui")
    def ask_file_delete(self, path: str):
        self.file_delete_path = path

    @rx.event
    @requires("ui")
    def cancel_file_delete(self):
        self.file_delete_path = ""

    @rx.event
    @requires_door(FileStore.delete_file)
    def confirm_file_delete(self):
        path, self.file_delete_path = self.file_delete_path, ""
        if self._files_attempt(lambda store: store.delete_file(path), f"Deleted {path}."):
            self.attachments = [p for p in self.attachments if p != path]
            if self.preview_path == path:
                self.preview_path = ""
            self._refresh_files()

    # --- search ----------------------------------------------------------------------------------

    @rx.event
    @requires_door(FileStore.search_files)
    def search_files(self, form_data: dict):
        """Full-text search over the instance's files (every word must occur)."""
        query = str(form_data.get("query") or "").strip()
        self.search_query = query
        if not any(c.isalnum() for c in query):
            self.search_hits, self.searched = [], False
            return

        def search(store: FileStore) -> None:
            self.search_hits = [
                HitRow(name=h.file.name, path=h.file.path,
                       segments=[SnippetSegment(text=part.text, match=part.match) for part in h.segments])
                for h in store.search_files(query, 20)]

        self.searched = self._files_attempt(search)

    @rx.event
    @requires("ui")
    def clear_search(self):
        self.search_query, self.search_hits, self.searched = "", [], False
        return rx.set_value("file-search-input", "")

    # --- attachments -----------------------------------------------------------------------------

    @rx.event
    @requires("ui")
    def attach_file(self, path: str):
        """Attach a file to the next prompt (the agent reads it with its core tools)."""
        if path and path not in self.attachments:
            self.attachments = [*self.attachments, path]

    @rx.event
    @requires("ui")
    def detach_file(self, path: str):
        self.attachments = [p for p in self.attachments if p != path]
