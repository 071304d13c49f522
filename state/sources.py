"""The UDB's "Sources" tab (Workspace and Editor): browse the user's connections, preview, and copy
an item into the instance's file store to attach it to a prompt or pick it into a node.

Mixed into WorkspaceState and (through EditorFilesMixin) EditorState; the host provides
`instance_id` and `_user_session`. Every call goes through the Sources door
(backend/connectors/sources.py), which opens only connections the user may use and copies with
the file store's rights and limits; the state keeps what the tab shows: the connections, where
the user stands (a trail of names and the door's locations), the entries there, a search and one
preview.
"""

from __future__ import annotations

import base64
from collections.abc import Callable
from typing import Any, TypedDict

import reflex as rx

from backend.connectors.sources import SourceEntry, Sources
from backend.errors import DomainError
from backend.files.service import FileEntry, FileStore
from backend.rbac.access import AccessContext
from state.auth import NotSignedIn
from state.page import user_message
from state.permissions import requires, requires_door

ICONS = {"area": "layers", "mailFolder": "folder", "message": "mail", "attachment": "paperclip", "site": "globe",
         "drive": "hard-drive", "folder": "folder", "file": "file"}


class SourceConnectionRow(TypedDict):
    id: str
    label: str
    type_label: str
    status: str
    usable: bool
    last_error: str


class SourceEntryRow(TypedDict):
    location: str
    name: str
    kind: str
    container: bool
    previewable: bool
    copyable: bool
    detail: str


class Crumb(TypedDict):
    name: str
    location: str


def entry_row(entry: SourceEntry) -> SourceEntryRow:
    return SourceEntryRow(location=entry.location, name=entry.name, kind=entry.kind, container=entry.container,
                          previewable=entry.previewable, copyable=entry.copyable, detail=entry.detail)


class SourcesMixin(rx.State, mixin=True):
    """The Sources tab's state (the host state provides instance_id and _user_session)."""

    sources_loaded: bool = False
    sources_connections: list[SourceConnectionRow] = []
    source_id: str = ""  # the open connection ("" : the list of connections)
    source_label: str = ""
    source_trail: list[Crumb] = []  # where the user stands below the connection's top
    source_entries: list[SourceEntryRow] = []
    source_query: str = ""
    source_searched: bool = False
    sources_error: str = ""
    sources_notice: str = ""
    sources_busy: bool = False
    source_preview_title: str = ""
    source_preview_location: str = ""
    source_preview_kind: str = ""  # text · image · pdf · mail · none
    source_preview_mime: str = ""
    source_preview_text: str = ""
    source_preview_note: str = ""
    source_preview_src: str = ""

    # --- helpers ---------------------------------------------------------------------------------

    def _with_sources(self, work: Callable[[Sources], Any]) -> Any:
        """Run `work(door)` in one transaction as the signed-in user; NotSignedIn and DomainError
        pass through."""
        with self._user_session() as (session, user):
            return work(Sources(AccessContext(session, user)))

    def _sources_attempt(self, work: Callable[[Sources], Any], success: str = "") -> tuple[bool, Any]:
        """(whether `work` succeeded, what it returned); on failure `sources_error` says why."""
        self.sources_error = self.sources_notice = ""
        try:
            found = self._with_sources(work)
        except NotSignedIn:
            self.sources_error = "Not signed in."
            return False, None
        except DomainError as exc:
            self.sources_error = user_message(exc)
            return False, None
        self.sources_notice = success
        return True, found

    def _load_source_connections(self) -> None:
        ok, found = self._sources_attempt(lambda door: door.connections())
        self.sources_loaded = True
        if not ok:
            return
        self.sources_connections = [
            SourceConnectionRow(id=c.id, label=c.label, type_label=c.type_label, status=c.status, usable=c.usable,
                                last_error=c.last_error or "") for c in found]
        if self.source_id and self.source_id not in {c.id for c in found}:
            self._leave_source()

    def _leave_source(self) -> None:
        self.source_id = self.source_label = ""
        self.source_trail, self.source_entries = [], []
        self.source_query, self.source_searched = "", False

    def _here(self) -> str:
        return self.source_trail[-1]["location"] if self.source_trail else ""

    def _browse_here(self) -> None:
        connection_id, location = self.source_id, self._here()
        self.source_searched = False
        ok, found = self._sources_attempt(lambda door: door.browse(connection_id, location))
        self.source_entries = [entry_row(e) for e in found] if ok else []

    def _busy(self, work: Callable[[], Any]):
        """Show the spinner, then do `work` (outside systems take their time): `yield from` it."""
        self.sources_busy = True
        yield
        try:
            work()
        finally:
            self.sources_busy = False

    def _copy_source(self, location: str) -> FileEntry | None:
        """Copy the item at `location` of the open connection into the host instance's file store."""
        connection_id, instance_id = self.source_id, self.instance_id
        if not instance_id:
            self.sources_error = "There is no instance here whose file store could take it."
            return None
        ok, entry = self._sources_attempt(lambda door: door.copy_to_files(connection_id, location, instance_id))
        return entry if ok else None

    # --- the tab ---------------------------------------------------------------------------------

    @rx.event
    @requires_door(Sources.connections)
    def load_sources(self):
        """The tab is shown: the connections (and the open one's entries, again)."""
        def load() -> None:
            self._load_source_connections()
            if self.source_id and not self.source_searched:
                self._browse_here()

        yield from self._busy(load)

    @rx.event
    @requires_door(Sources.browse)
    def open_source(self, connection_id: str):
        """Open a connection at its top."""
        found = next((c for c in self.sources_connections if c["id"] == connection_id), None)
        self._leave_source()
        self.source_id = connection_id
        self.source_label = found["label"] if found else ""
        yield from self._busy(self._browse_here)

    @rx.event
    @requires("ui")
    def close_source(self):
        """Back to the list of connections."""
        self._leave_source()
        self.sources_error = self.sources_notice = ""

    @rx.event
    @requires_door(Sources.browse)
    def open_source_entry(self, location: str, name: str):
        """Open a container (a folder, a mail, a site …) below where the user stands."""
        self.source_trail = [*self.source_trail, Crumb(name=name, location=location)]
        self.source_query = ""
        yield from self._busy(self._browse_here)

    @rx.event
    @requires_door(Sources.browse)
    def source_crumb(self, index: int):
        """Go back to the trail's entry `index` (-1: the connection's top)."""
        self.source_trail = self.source_trail[: max(int(index), -1) + 1]
        self.source_query = ""
        yield from self._busy(self._browse_here)

    @rx.event
    @requires_door(Sources.search)
    def search_source(self, form_data: dict):
        """Search the open connection, within where the user stands."""
        query = str(form_data.get("query") or "").strip()
        self.source_query = query
        if not query:
            yield from self._busy(self._browse_here)
            return
        connection_id, location = self.source_id, self._here()

        def search() -> None:
            ok, found = self._sources_attempt(lambda door: door.search(connection_id, query, location))
            if ok:
                self.source_entries = [entry_row(e) for e in found]
                self.source_searched = True

        yield from self._busy(search)

    @rx.event
    @requires_door(Sources.browse)
    def clear_source_search(self):
        self.source_query = ""
        self._browse_here()
        return rx.set_value("source-search-input", "")

    # --- preview ---------------------------------------------------------------------------------

    @rx.event
    @requires_door(Sources.preview)
    def preview_source(self, location: str):
        """Show a mail as text, or a file or attachment as the Files tab shows one."""
        yield from self._busy(lambda: self._show_preview(location))

    def _show_preview(self, location: str) -> None:
        connection_id = self.source_id
        ok, shown = self._sources_attempt(lambda door: door.preview(connection_id, location))
        if not ok:
            return
        self.source_preview_location = location
        self.source_preview_title, self.source_preview_mime = shown.title, shown.mime_type
        self.source_preview_kind, self.source_preview_text, self.source_preview_note = \
            shown.kind, shown.text, shown.note
        self.source_preview_src = \
            f"data:{shown.mime_type};base64,{base64.b64encode(shown.data).decode()}" if shown.data else ""

    def _forget_preview(self) -> None:
        self.source_preview_location = self.source_preview_title = self.source_preview_kind = ""
        self.source_preview_text = self.source_preview_note = self.source_preview_src = ""

    @rx.event
    @requires("ui")
    def close_source_preview(self):
        self._forget_preview()

    # --- attaching (the Workspace) ---------------------------------------------------------------

    @rx.event
    @requires_door(Sources.copy_to_files, FileStore.store_file)
    def attach_source(self, location: str):
        """Copy the item into the instance's file store and attach its copy to the next prompt."""
        yield from self._busy(lambda: self._attach(location))

    def _attach(self, location: str) -> None:
        entry = self._copy_source(location)
        if entry is None:
            return
        if entry.path not in self.attachments:
            self.attachments = [*self.attachments, entry.path]
        self.sources_notice = f"Copied to {entry.path} and attached to your next prompt."
        self._forget_preview()
