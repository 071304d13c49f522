"""Toolbox sharepoint (Microsoft 365, DESIGN §8): list sites and folders, find, read and upload SharePoint
documents through one of the caller's connections of type `msft` (backend/connectors/kinds/msft.py).

Places are named as people say them: a site (its name, or the id a listing returned) and a path in
it, "/Documents/Reports" (the library "Documents", its folder "Reports"; a site with one library
may leave the library out); or by the `folderId` / file ids the listings return (`folder:…`,
`file:…`). Text is extracted from downloaded documents with the file store's extractors (text,
PDF, DOCX). A path that does not exist, a file over POWERON_FILE_MAX_BYTES or a name taken in the
target folder is a clear error.
"""

from __future__ import annotations

from contextlib import AbstractContextManager
from datetime import datetime

from pydantic import BaseModel, ConfigDict, Field
from pydantic.alias_generators import to_camel

from backend.actions.base import ActionContext, ActionError, ActionParams, action
from backend.actions.connected import connected
from backend.connectors.access import SourceItem
from backend.connectors.kinds.msft import TYPE_ID, GraphFiles
from backend.connectors.types import ConnectionFailed
from backend.files import service as files
from backend.files.extract import detect_type, extract_text

CONNECTION_HELP = "Id of the Microsoft 365 connection to use (the Connections page lists the caller's connections)"
SITE_HELP = "The SharePoint site: its name (e.g. 'Finance') or the id sharepoint.listSites returned"
PATH_HELP = "Path in the site: '/' lists its document libraries, '/Documents/Reports' a folder of library 'Documents'"


class _Output(BaseModel):
    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True)


class ConnectionParams(ActionParams):
    # Empty is a valid graph (a template's node before one is chosen): the run's start says it is missing.
    connection_id: str = Field(max_length=32, description=CONNECTION_HELP)


def _sharepoint(context: ActionContext, connection_id: str) -> AbstractContextManager[GraphFiles]:
    """The SharePoint of a connection the caller may use; Microsoft 365's refusals as ActionError."""
    return connected(context, connection_id, [TYPE_ID], GraphFiles)


class ItemOut(_Output):
    id: str = Field(description="Use it as folderId, in readDocs, or as a container")
    name: str
    kind: str = Field(description="site, drive (a document library), folder or file")
    is_folder: bool
    path: str
    size: int | None = None
    mime_type: str | None = None
    modified: datetime | None = None

    @classmethod
    def of(cls, item: SourceItem) -> ItemOut:
        return cls(id=item.id, name=item.name, kind=item.kind, is_folder=item.container, path=item.path,
                   size=item.size, mime_type=item.mime_type, modified=item.modified)


# --- listing ----------------------------------------------------------------------------------------


class ListSitesParams(ConnectionParams):
    query: str | None = Field(None, max_length=200, description="Part of the sites' names; empty: every site")
    top: int = Field(25, ge=1, le=200, description="At most this many sites (default 25)")


class SitesOutput(_Output):
    sites: list[ItemOut]


@action("sharepoint.listSites", toolbox="sharepoint", label="List SharePoint sites",
        description="List the SharePoint sites the Microsoft 365 connection can open, optionally those whose name "
                    "matches a query; each with the id the other SharePoint actions take.",
        params=ListSitesParams, output=SitesOutput, graph_node=True, capabilities=("read",),
        connection_type=TYPE_ID)
def list_sites(params: ListSitesParams, context: ActionContext) -> SitesOutput:
    with _sharepoint(context, params.connection_id) as sharepoint:
        return SitesOutput(sites=[ItemOut.of(s) for s in sharepoint.sites(params.query, params.top)])


class ListFolderParams(ConnectionParams):
    site: str | None = Field(None, max_length=500, description=SITE_HELP)
    path: str = Field("/", max_length=2000, description=PATH_HELP)
    folder_id: str | None = Field(None, max_length=1000,
                                  description="Instead of site and path: a folder or library id from a listing")


class FolderOutput(_Output):
    folder: ItemOut | None = Field(description="What was listed (none for a folderId)")
    items: list[ItemOut]
    more: bool = Field(description="True when the folder holds more entries than were listed")


@action("sharepoint.listFolder", toolbox="sharepoint", label="List SharePoint folder",
        description="List a SharePoint site's document libraries, or the files and folders of a library or "
                    "folder, named by site and path (e.g. site 'Finance', path '/Documents/Reports') or by id.",
        params=ListFolderParams, output=FolderOutput, graph_node=True, capabilities=("read",),
        connection_type=TYPE_ID)
def list_folder(params: ListFolderParams, context: ActionContext) -> FolderOutput:
    with _sharepoint(context, params.connection_id) as sharepoint:
        where = _container(sharepoint, params.site, params.path, params.folder_id)
        if not where.container:
            raise ActionError(f"'{where.path}' is a file, not a folder: read it with sharepoint.readDocs")
        items, more = sharepoint.browse_listing(where.id)
        return FolderOutput(folder=ItemOut.of(where), items=[ItemOut.of(i) for i in items], more=more)


def _container(sharepoint: GraphFiles, site: str | None, path: str | None, folder_id: str | None) -> SourceItem:
    if folder_id:
        return SourceItem(id=folder_id, name=folder_id, kind=folder_id.split(":", 1)[0], container=True,
                          path=folder_id)
    if not site:
        raise ActionError("name the site (its name or id) and a path in it, or give a folderId")
    return sharepoint.resolve(site, path)


# --- finding and reading ----------------------------------------------------------------------------


class FindDocParams(ConnectionParams):
    query: str = Field(min_length=1, max_length=200, description="Words in the documents' names or content")
    site: str | None = Field(None, max_length=500, description=SITE_HELP + "; empty: every site")
    path: str | None = Field(None, max_length=2000, description="Only below this path of the site (optional)")
    top: int = Field(10, ge=1, le=50, description="At most this many documents (default 10)")


class FindOutput(_Output):
    query: str
    documents: list[ItemOut]


@action("sharepoint.findDoc", toolbox="sharepoint", label="Find SharePoint documents",
        description="Search SharePoint for documents whose name or content match words, in one site (or a folder "
                    "of it) or in every site; returns files with ids for sharepoint.readDocs.",
        params=FindDocParams, output=FindOutput, graph_node=True, capabilities=("read",), connection_type=TYPE_ID)
def find_doc(params: FindDocParams, context: ActionContext) -> FindOutput:
    with _sharepoint(context, params.connection_id) as sharepoint:
        within = sharepoint.resolve(params.site, params.path).id if params.site else None
        if params.path and not params.site:
            raise ActionError("a path needs its site: name the site too")
        found = sharepoint.search(params.query, within, params.top * 2)
        documents = [ItemOut.of(i) for i in found if not i.container][:params.top]
        return FindOutput(query=params.query, documents=documents)


class ReadDocsParams(ConnectionParams):
    documents: list[str] = Field(min_length=1, max_length=10,
                                 description="File ids (file:…, from findDoc or listFolder) or paths in `site` "
                                             "(e.g. /Documents/Reports/q1.pdf)")
    site: str | None = Field(None, max_length=500, description=SITE_HELP + " (needed for paths)")
    max_chars: int = Field(20_000, ge=100, le=200_000, description="Longest text returned per document")


class DocumentOut(_Output):
    id: str
    name: str
    path: str
    mime_type: str
    size: int
    text: str
    truncated: bool
    total_chars: int


class ReadDocsOutput(_Output):
    documents: list[DocumentOut]
    errors: list[str] = Field(description="Documents that could not be read, and why")


def _read_one(sharepoint: GraphFiles, reference: str, site: str | None, max_chars: int) -> DocumentOut:
    if reference.startswith("file:"):
        item = SourceItem(id=reference, name=reference, kind="file", container=False, path="")
    elif site:
        item = sharepoint.resolve(site, reference)
    else:
        raise ConnectionFailed(f"'{reference}' is neither a file id nor a path with its site: name the site")
    if item.container:
        raise ConnectionFailed(f"'{item.path}' is a {item.kind}, not a document")
    name, declared, data = sharepoint.download(item.id)
    mime_type = detect_type(name, declared, data)
    text = extract_text(data, mime_type)
    if text is None:
        raise ConnectionFailed(f"'{name}' ({mime_type}) holds no text that can be read")
    return DocumentOut(id=item.id, name=name, path=item.path or name, mime_type=mime_type, size=len(data),
                       text=text[:max_chars], truncated=len(text) > max_chars, total_chars=len(text))


@action("sharepoint.readDocs", toolbox="sharepoint", label="Read SharePoint documents",
        description="Download SharePoint documents (by id or by path in a site) and return their text (text, PDF "
                    "and DOCX files); long texts are cut at maxChars.",
        params=ReadDocsParams, output=ReadDocsOutput, graph_node=True, capabilities=("read",),
        connection_type=TYPE_ID)
def read_docs(params: ReadDocsParams, context: ActionContext) -> ReadDocsOutput:
    documents, errors = [], []
    with _sharepoint(context, params.connection_id) as sharepoint:
        for reference in params.documents:
            try:
                documents.append(_read_one(sharepoint, reference, params.site, params.max_chars))
            except ConnectionFailed as exc:
                errors.append(f"{reference}: {exc}")
    if not documents:
        raise ActionError("; ".join(errors))
    return ReadDocsOutput(documents=documents, errors=errors)


# --- uploading --------------------------------------------------------------------------------------


class UploadParams(ConnectionParams):
    file: str = Field(min_length=1, max_length=2000, description="Path of the file in this workspace's file store, "
                                                                "e.g. /reports/summary.pdf")
    site: str | None = Field(None, max_length=500, description=SITE_HELP)
    folder_path: str = Field("/", max_length=2000, description="Target folder in the site, e.g. /Documents/Reports "
                                                              "(it must exist)")
    folder_id: str | None = Field(None, max_length=1000, description="Instead of site and folderPath: a folder or "
                                                                     "library id from a listing")
    name: str | None = Field(None, max_length=255, description="Name in SharePoint (default: the file's name)")
    overwrite: bool = Field(False, description="Replace a file of that name (default: refuse)")


@action("sharepoint.upload", toolbox="sharepoint", label="Upload to SharePoint",
        description="Upload a file of the workspace's file store into a SharePoint folder (site and folder path, "
                    "or a folder id); a file of the same name is replaced only with overwrite.",
        params=UploadParams, output=ItemOut, graph_node=True, capabilities=("read", "externalSend"),
        connection_type=TYPE_ID)
def upload(params: UploadParams, context: ActionContext) -> ItemOut:
    with _sharepoint(context, params.connection_id) as sharepoint:
        entry, data = files.read_bytes(context, params.file)
        target = _container(sharepoint, params.site, params.folder_path, params.folder_id)
        if target.kind not in ("drive", "folder"):
            raise ActionError(f"'{target.path}' is a {target.kind}: upload into a document library or a folder "
                              "(e.g. /Documents/Reports)")
        return ItemOut.of(sharepoint.upload(target.id, params.name or entry.name, data, entry.mime_type,
                                            params.overwrite))
