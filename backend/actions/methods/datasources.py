"""Toolbox `datasources` (spec §5.2): browse, search and move data of every connection that offers
mail or files (IMAP/SMTP mailboxes, Microsoft 365's Outlook and SharePoint, and any connector that
implements MailAccess or FileAccess), through the one door the UDB "Sources" tab uses
(backend/connectors/sources.py). Everything runs as the caller (the agent's user, the run's starter):
their own connections and those shared in their mandates; any other id is "not found", and an
expired or failing connection fails the call with its reason.

Where things are is said in one of two ways, wherever a parameter takes a place or an item:

- a **location**, the opaque text every listing returns with each entry (`entries[].location`) —
  the only way to name a mail or an attachment; pass it back as it is;
- a **path** of names as the listings show them (any case): "/" the top, "/Inbox" a mail folder,
  "/Finance/Documents/Reports" a SharePoint site, its library and a folder, ".../budget.pdf" a file.
  A connection offering mail and files (Microsoft 365) takes "/Mail/…" or "/Files/…"; without that
  a mail folder of the name is tried first.

The eight actions:

- `listConnections`: the caller's connections that offer mail or files (id, label, type, status,
  last error, what they offer; never a secret), not only active ones — `usable` says which work now.
- `browseDataSource`: what a connection holds at its top (its mail folders, its sites, or "Mail" and
  "Files" when it has both), or at any location or path: one step of browsing.
- `browseContainer`: the entries inside one container, which must be given and be one: a mail folder
  (its newest mails), a mail (its attachments), a site (its libraries), a library or folder.
- `searchDataSource`: mails (subject, body, sender) and files (name, content) matching words, in the
  whole connection or within a mail folder or files folder.
- `downloadFromDataSource`: copies a file, an attachment or a mail (as text) into the file store of
  the caller's feature instance — under /sources/<connection>/… or a folder of choice —, with the
  store's rights and limits (POWERON_FILE_MAX_BYTES, quota); the same content is not copied twice.
  Returns the stored file.
- `uploadToExternal`: puts a file of the file store into a library or folder of a files connection;
  a name taken there is refused unless `overwrite`, a file over POWERON_FILE_MAX_BYTES too (each
  error names its field).
- `readContentObjects`: the text of items — mails as text, files and attachments through the file
  store's extractors (text, PDF, DOCX …) — given one by one (`items`) or as the newest items of a
  container (`container` + `limit`, e.g. the 20 newest mails of "/Inbox"); long texts are cut at
  `maxChars`; items that cannot be read are listed in `errors` with the reason.
- `extractContainerItem`: one item out of a container into the file store — an attachment out of a
  mail (by its name, or the only one), a file out of a folder.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator
from pydantic.alias_generators import to_camel

from backend.actions.base import ActionContext, ActionError, ActionParams, action
from backend.actions.methods.core_files import FileInfo
from backend.connectors.sources import (
    SEARCH_LIMIT,
    SourceConnection,
    SourceEntry,
    SourceFailed,
    Sources,
    SourceText,
    is_container_location,
)
from backend.connectors.types import FILES, MAIL, connection_types
from backend.errors import FieldError, InvalidInput, NotFound


def _offering(*wanted: str) -> tuple[str, ...]:
    """The ids of the registered connection types that offer any of `wanted` ("mail", "files")."""
    return tuple(t.id for t in connection_types() if any(w in t.offers for w in wanted))


SOURCE_TYPES = _offering(MAIL, FILES)
FILE_TYPES = _offering(FILES) or SOURCE_TYPES

CONNECTION_HELP = ("Id of the connection (datasources.listConnections lists the caller's; a mailbox, Microsoft "
                   "365 …)")
PLACE_HELP = ("a location returned by an earlier datasources listing (entries[].location), or a path of names such "
              "as /Inbox (a mail folder) or /Finance/Documents/Reports (site, library, folder)")
MAX_ITEMS = 20
LOCATION_MAX = 4000


class _Output(BaseModel):
    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True)


class ConnectionParams(ActionParams):
    # No min_length: a graph node starts with none chosen (its requirement says so before a run).
    connection_id: str = Field(max_length=64, description=CONNECTION_HELP)


# --- the door, places and errors ----------------------------------------------------------------------


@contextmanager
def _field(name: str) -> Iterator[None]:
    """Errors of the door that name its own parameter ("location", "path", a connector's
    "attachmentId") name `name` instead."""
    try:
        yield
    except InvalidInput as exc:
        raise InvalidInput([FieldError(name if e.field in _DOOR_FIELDS else e.field, e.message)
                            for e in exc.errors]) from None


_DOOR_FIELDS = ("location", "path", "attachmentId")


def _door(context: ActionContext, connection_id: str) -> Sources:
    if not connection_id.strip():
        raise InvalidInput([FieldError("connectionId", "choose a connection (datasources.listConnections lists "
                                                       "yours)")])
    return Sources(context.access)


def _is_location(place: str) -> bool:
    return place.lstrip().startswith("[")


def _where(door: Sources, connection_id: str, place: str | None, name: str) -> str:
    """The door location of `place` (a location as it is, a path resolved; "" the top)."""
    if place is None or not place.strip():
        return ""
    if _is_location(place):
        with _field(name):
            is_container_location(place)  # only to refuse a location the door never handed out, naming `name`
        return place.strip()
    with _field(name):
        return door.locate(connection_id, place, name).location


def _instance(context: ActionContext) -> str:
    if not context.feature_instance_id:
        raise ActionError("this needs a feature instance with a file store (run it in a workspace or a workflow)")
    return context.feature_instance_id


# --- outputs ------------------------------------------------------------------------------------------


class EntryOut(_Output):
    location: str = Field(description="Pass it back to browse, read or copy this entry")
    name: str
    kind: str = Field(description="area, mailFolder, message, attachment, site, drive, folder or file")
    is_container: bool = Field(description="True when it holds entries (browseContainer lists them)")
    detail: str = Field(description="e.g. sender and date of a mail, size and type of a file")
    mime_type: str | None = None
    modified: datetime | None = None

    @classmethod
    def of(cls, entry: SourceEntry) -> EntryOut:
        return cls(location=entry.location, name=entry.name, kind=entry.kind, is_container=entry.container,
                   detail=entry.detail, mime_type=entry.mime_type or None, modified=entry.modified)


class ListingOutput(_Output):
    connection_id: str
    location: str = Field(description="The location listed ('' the top)")
    count: int
    more: bool = Field(description="True when there are more entries than `limit`")
    entries: list[EntryOut]


def _listing(connection_id: str, location: str, entries: list[SourceEntry], limit: int) -> ListingOutput:
    shown = entries[:limit]
    return ListingOutput(connection_id=connection_id, location=location, count=len(shown),
                         more=len(entries) > limit, entries=[EntryOut.of(e) for e in shown])


# --- listConnections ----------------------------------------------------------------------------------


class ListConnectionsParams(ActionParams):
    offers: Literal["mail", "files"] | None = Field(None, description="Only connections offering this (mail or "
                                                                      "files); empty: all")


class ConnectionOut(_Output):
    id: str
    label: str
    type: str
    type_label: str
    status: str = Field(description="active, expired, error …: only active connections can be used")
    usable: bool
    last_error: str | None = None
    offers: list[str] = Field(description="mail and/or files")

    @classmethod
    def of(cls, found: SourceConnection) -> ConnectionOut:
        return cls(id=found.id, label=found.label, type=found.type, type_label=found.type_label, status=found.status,
                   usable=found.usable, last_error=found.last_error, offers=list(found.offers))


class ConnectionsOutput(_Output):
    connections: list[ConnectionOut]


@action("datasources.listConnections", toolbox="datasources", label="List data source connections",
        description="List the caller's connections that offer mail or files (id, label, type, status); the id is "
                    "the connectionId the other datasources actions take.",
        params=ListConnectionsParams, output=ConnectionsOutput, graph_node=True, capabilities=("read",),
        connection_types=SOURCE_TYPES)
def list_connections(params: ListConnectionsParams, context: ActionContext) -> ConnectionsOutput:
    found = Sources(context.access).connections()
    return ConnectionsOutput(connections=[ConnectionOut.of(c) for c in found
                                          if params.offers is None or params.offers in c.offers])


# --- browsing -----------------------------------------------------------------------------------------


class BrowseDataSourceParams(ConnectionParams):
    location: str = Field("", max_length=LOCATION_MAX, description="Where to list: '' or / for the top, or "
                                                                   + PLACE_HELP)
    limit: int = Field(50, ge=1, le=500, description="At most this many entries (mails: the newest; default 50)")


@action("datasources.browseDataSource", toolbox="datasources", label="Browse data source",
        description="List what a connection holds: its top (mail folders, SharePoint sites, or Mail and Files) or "
                    "the entries at a location or path; each entry has a location to go on with.",
        params=BrowseDataSourceParams, output=ListingOutput, graph_node=True, capabilities=("read",),
        connection_types=SOURCE_TYPES)
def browse_data_source(params: BrowseDataSourceParams, context: ActionContext) -> ListingOutput:
    door = _door(context, params.connection_id)
    location = _where(door, params.connection_id, params.location, "location")
    return _listing(params.connection_id, location, _browse(door, params.connection_id, location, params.limit,
                                                            "location"), params.limit)


def _browse(door: Sources, connection_id: str, location: str, limit: int, name: str) -> list[SourceEntry]:
    """The entries at `location`, which must hold some (an item is refused naming `name`)."""
    with _field(name):
        if not is_container_location(location):
            raise InvalidInput([FieldError(name, "names a file or an attachment, not a container: read it with "
                                                 "datasources.readContentObjects")])
        return door.browse(connection_id, location, limit)


class BrowseContainerParams(ConnectionParams):
    container: str = Field(min_length=1, max_length=LOCATION_MAX,
                           description="The container to list (a mail folder, a mail — its attachments —, a site, "
                                       "library or folder): " + PLACE_HELP)
    limit: int = Field(50, ge=1, le=500, description="At most this many entries (mails: the newest; default 50)")


@action("datasources.browseContainer", toolbox="datasources", label="Browse container",
        description="List the entries inside one container of a connection: a mail folder's newest mails, a mail's "
                    "attachments, a site's libraries, a library's or folder's files and folders.",
        params=BrowseContainerParams, output=ListingOutput, graph_node=True, capabilities=("read",),
        connection_types=SOURCE_TYPES)
def browse_container(params: BrowseContainerParams, context: ActionContext) -> ListingOutput:
    door = _door(context, params.connection_id)
    location = _where(door, params.connection_id, params.container, "container")
    if not location:
        raise InvalidInput([FieldError("container", "names the top of the connection: list it with "
                                                    "datasources.browseDataSource, or name a container in it")])
    entries = _browse(door, params.connection_id, location, params.limit, "container")
    return _listing(params.connection_id, location, entries, params.limit)


class SearchDataSourceParams(ConnectionParams):
    query: str = Field(min_length=1, max_length=200, description="Words to find in mails (subject, body, sender) "
                                                                 "or files (name, content)")
    location: str = Field("", max_length=LOCATION_MAX, description="Only within this mail folder or files folder "
                                                                   "(optional): " + PLACE_HELP)
    limit: int = Field(SEARCH_LIMIT, ge=1, le=50, description=f"At most this many hits (default {SEARCH_LIMIT})")


@action("datasources.searchDataSource", toolbox="datasources", label="Search data source",
        description="Search a connection's mails and files for words, everywhere or within one mail folder or "
                    "folder; each hit has a location for readContentObjects or downloadFromDataSource.",
        params=SearchDataSourceParams, output=ListingOutput, graph_node=True, capabilities=("read",),
        connection_types=SOURCE_TYPES)
def search_data_source(params: SearchDataSourceParams, context: ActionContext) -> ListingOutput:
    door = _door(context, params.connection_id)
    location = _where(door, params.connection_id, params.location, "location")
    with _field("location"):
        if not is_container_location(location):
            raise InvalidInput([FieldError("location", "names a file or an attachment: search within a mail folder "
                                                       "or a folder")])
        found = door.search(params.connection_id, params.query, location, params.limit)
    return _listing(params.connection_id, location, found, params.limit)


# --- moving into and out of the file store ------------------------------------------------------------


class DownloadParams(ConnectionParams):
    item: str = Field(min_length=1, max_length=LOCATION_MAX,
                      description="The file, attachment or mail to copy: " + PLACE_HELP)
    folder: str | None = Field(None, max_length=1000, description="Folder of this workspace's file store to copy "
                                                                  "into (default /sources/<connection>/…)")


class StoredOutput(_Output):
    file: FileInfo = Field(description="The file in this workspace's file store")
    source: str = Field(description="The location it was copied from")


@action("datasources.downloadFromDataSource", toolbox="datasources", label="Download from data source",
        description="Copy a file, an attachment or a mail (as text) of a connection into this workspace's file "
                    "store and return the stored file (its path for core_readFile and other nodes).",
        params=DownloadParams, output=StoredOutput, graph_node=True, capabilities=("read", "write"),
        connection_types=SOURCE_TYPES, instance_table="file")
def download_from_data_source(params: DownloadParams, context: ActionContext) -> StoredOutput:
    door = _door(context, params.connection_id)
    instance = _instance(context)
    location = _where(door, params.connection_id, params.item, "item")
    with _field("item"):
        stored = door.copy_to_files(params.connection_id, location, instance, params.folder)
    return StoredOutput(file=FileInfo.of(stored), source=location)


class UploadParams(ConnectionParams):
    file: str = Field(min_length=1, max_length=1000, description="Path of the file in this workspace's file store, "
                                                                 "e.g. /reports/summary.pdf")
    folder: str = Field(min_length=1, max_length=LOCATION_MAX,
                        description="The library or folder of a files connection to put it in: " + PLACE_HELP)
    name: str | None = Field(None, max_length=255, description="Name there (default: the file's name)")
    overwrite: bool = Field(False, description="Replace a file of that name (default: refuse)")


class UploadOutput(_Output):
    item: EntryOut = Field(description="The file as the connection now holds it")
    file: str = Field(description="The file-store path that was uploaded")


@action("datasources.uploadToExternal", toolbox="datasources", label="Upload to data source",
        description="Upload a file of this workspace's file store into a library or folder of a files connection "
                    "(e.g. SharePoint); a file of the same name there is replaced only with overwrite.",
        params=UploadParams, output=UploadOutput, graph_node=True, capabilities=("read", "externalSend"),
        connection_types=FILE_TYPES, instance_table="file")
def upload_to_external(params: UploadParams, context: ActionContext) -> UploadOutput:
    door = _door(context, params.connection_id)
    instance = _instance(context)
    location = _where(door, params.connection_id, params.folder, "folder")
    with _field("folder"):
        uploaded = _upload(door, params, location, instance)
    return UploadOutput(item=EntryOut.of(uploaded), file=params.file)


def _upload(door: Sources, params: UploadParams, location: str, instance: str) -> SourceEntry:
    try:
        return door.upload(params.connection_id, location, instance, params.file, params.name, params.overwrite)
    except InvalidInput as exc:  # the store names a bad file path "path"
        raise InvalidInput([FieldError("file" if e.field == "path" else e.field, e.message)
                            for e in exc.errors]) from None


# --- reading ------------------------------------------------------------------------------------------


class ReadContentParams(ConnectionParams):
    items: list[str] = Field(default_factory=list, max_length=MAX_ITEMS,
                             description=f"Up to {MAX_ITEMS} items to read (mails, files, attachments): each "
                                         + PLACE_HELP)
    container: str | None = Field(None, max_length=LOCATION_MAX,
                                  description="Instead of items: read the newest items of this container (a mail "
                                              "folder such as /Inbox, a mail's attachments, a folder's files): "
                                              + PLACE_HELP)
    limit: int = Field(10, ge=1, le=50, description="With container: at most this many items (default 10)")
    max_chars: int = Field(20_000, ge=100, le=200_000, description="Longest text returned per item (default 20000)")

    @model_validator(mode="after")
    def _items_or_container(self) -> ReadContentParams:
        if bool(self.items) == bool(self.container and self.container.strip()):
            raise ValueError("give items or a container (exactly one of them)")
        return self


class ContentOut(_Output):
    location: str
    name: str
    kind: str = Field(description="message, attachment or file")
    mime_type: str
    text: str
    truncated: bool
    total_chars: int
    modified: datetime | None = None

    @classmethod
    def of(cls, found: SourceText, max_chars: int) -> ContentOut:
        return cls(location=found.location, name=found.name, kind=found.kind, mime_type=found.mime_type,
                   text=found.text[:max_chars], truncated=len(found.text) > max_chars, total_chars=len(found.text),
                   modified=found.modified)


class ContentOutput(_Output):
    connection_id: str
    count: int
    items: list[ContentOut]
    errors: list[str] = Field(description="Items that could not be read, and why")


@action("datasources.readContentObjects", toolbox="datasources", label="Read content",
        description="Read items of a connection as text — mails with their headers, files and attachments (text, "
                    "PDF, DOCX …) — given one by one or as the newest items of a container (e.g. the newest mails "
                    "of /Inbox).",
        params=ReadContentParams, output=ContentOutput, graph_node=True, capabilities=("read",),
        connection_types=SOURCE_TYPES)
def read_content_objects(params: ReadContentParams, context: ActionContext) -> ContentOutput:
    door = _door(context, params.connection_id)
    if params.container and params.container.strip():
        location = _where(door, params.connection_id, params.container, "container")
        with _field("container"):
            texts, errors = door.read_texts(params.connection_id, location, params.limit)
    else:
        texts, errors = _read_each(door, params.connection_id, params.items)
        if not texts:
            raise ActionError("; ".join(errors))
    return ContentOutput(connection_id=params.connection_id, count=len(texts),
                         items=[ContentOut.of(t, params.max_chars) for t in texts], errors=errors)


def _read_each(door: Sources, connection_id: str, items: list[str]) -> tuple[list[SourceText], list[str]]:
    """Each item's text, and per item that failed "items[i] (<place>): why"; an unusable connection
    fails the whole call once (it is checked first)."""
    door.locate(connection_id, "/")  # NotFound / SourceFailed for a connection the caller cannot use now
    texts, errors = [], []
    for index, place in enumerate(items):
        field = f"items[{index}]"
        try:
            location = _where(door, connection_id, place, field)
            with _field(field):
                texts.append(door.read_text(connection_id, location))
        except InvalidInput as exc:
            errors.append(str(exc))
        except (SourceFailed, NotFound) as exc:
            errors.append(f"{field} ({place[:80]}): {exc}")
    return texts, errors


class ExtractParams(ConnectionParams):
    container: str = Field(min_length=1, max_length=LOCATION_MAX,
                           description="The mail (or folder) holding the item: " + PLACE_HELP)
    item: str | None = Field(None, max_length=LOCATION_MAX,
                             description="The item's name (e.g. invoice.pdf) or location; empty: the container's "
                                         "only item")
    folder: str | None = Field(None, max_length=1000, description="Folder of this workspace's file store to put it "
                                                                  "in (default /sources/<connection>/…)")


class ExtractOutput(StoredOutput):
    item: EntryOut = Field(description="The item that was extracted")


@action("datasources.extractContainerItem", toolbox="datasources", label="Extract item from container",
        description="Take one item out of a container into this workspace's file store — an attachment out of a "
                    "mail (by its name, or the only one), a file out of a folder — and return the stored file.",
        params=ExtractParams, output=ExtractOutput, graph_node=True, capabilities=("read", "write"),
        connection_types=SOURCE_TYPES, instance_table="file")
def extract_container_item(params: ExtractParams, context: ActionContext) -> ExtractOutput:
    door = _door(context, params.connection_id)
    instance = _instance(context)
    container = _where(door, params.connection_id, params.container, "container")
    with _field("container"):
        if not container or not is_container_location(container):
            raise InvalidInput([FieldError("container", "names no container: give a mail (its attachments) or a "
                                                        "folder")])
        entries = [e for e in door.browse(params.connection_id, container) if e.copyable]
    chosen = _choose(entries, params.item)
    with _field("item"):
        stored = door.copy_to_files(params.connection_id, chosen.location, instance, params.folder)
    return ExtractOutput(file=FileInfo.of(stored), source=chosen.location, item=EntryOut.of(chosen))


def _choose(entries: list[SourceEntry], wanted: str | None) -> SourceEntry:
    """The entry `wanted` names (its location, its name, its name in any case), or the only one."""
    names = ", ".join(e.name for e in entries[:20]) or "nothing"
    if wanted is None or not wanted.strip():
        if len(entries) == 1:
            return entries[0]
        raise InvalidInput([FieldError("item", f"the container holds {len(entries)} items ({names}): name one")])
    text = wanted.strip()
    for matches in (lambda e: e.location == text, lambda e: e.name == text,
                    lambda e: e.name.casefold() == text.casefold()):
        found = [e for e in entries if matches(e)]
        if found:
            return found[0]
    raise InvalidInput([FieldError("item", f"the container holds no '{text}' (it holds {names})")])
