"""REST routes of one Workspace instance: {base} = /api/workspace/{instanceId}.

Mounted automatically under /api/workspace by the feature registry. The file store routes
upload, list, search, download and delete the instance's files through backend.files.service,
which applies the caller's DATA rights on `data.feature.workspace.file`.
"""

from __future__ import annotations

from datetime import datetime
from typing import Annotated
from urllib.parse import quote

from fastapi import APIRouter, Depends, File, Form, HTTPException, Path, Query, Response, UploadFile

from backend.api.agent import add_agent_routes
from backend.api.deps import CurrentUser, DbSession
from backend.api.permissions import permission
from backend.api.schemas import CamelModel
from backend.errors import FieldError, InvalidInput
from backend.files import service
from backend.files.service import FileScope, FileTooLarge
from backend.rbac.access import AccessContext

router = APIRouter(prefix="/{instanceId}", tags=["workspace"])

FEATURE_CODE = "workspace"
FILE = "data.feature.workspace.file"


class FileOut(CamelModel):
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


class SearchHitOut(CamelModel):
    file: FileOut
    folder_path: str
    snippet: str


def file_scope(
    instance_id: Annotated[str, Path(alias="instanceId")], user: CurrentUser, session: DbSession
) -> FileScope:
    """The caller's scope in the instance; 404 when they may not open it (or it is no Workspace)."""
    access = AccessContext(session, user)
    instance = access.require_instance(instance_id, FEATURE_CODE)
    return FileScope(session, user, instance.mandate_id, instance.id, access)


Scope = Annotated[FileScope, Depends(file_scope)]
FileId = Annotated[str, Path(alias="fileId")]


def _too_large(exc: FileTooLarge) -> HTTPException:
    return HTTPException(status_code=413, detail=str(exc))


@router.post("/files", status_code=201, response_model=FileOut, **permission("DATA", FILE, "create"))
def upload_file(
    scope: Scope,
    file: Annotated[UploadFile | None, File(description="The file (multipart/form-data)")] = None,
    folder: Annotated[str, Form(description="Folder to store it in; missing folders are created")] = "/",
    name: Annotated[str | None, Form(description="File name (default: the uploaded file's name)")] = None,
    overwrite: Annotated[bool, Form(description="Replace a file of the same name")] = False,
) -> FileOut:
    """Upload a file; its text (text, PDF, DOCX) becomes searchable at once."""
    service.require_right(scope, "create")
    if file is None:
        raise InvalidInput([FieldError("file", "send the file as multipart/form-data field 'file'")])
    filename = name if name is not None else (file.filename or "").replace("\\", "/").rsplit("/", 1)[-1]
    service.validate_name(filename, "name")
    path = "/".join([*service.split_path(folder, "folder"), filename])
    try:
        if file.size is not None:
            service.check_file_size(file.size)
        data = file.file.read(service.get_limits().max_file_bytes + 1)
        entry = service.store_file(scope, path, data, file.content_type, overwrite=overwrite)
    except FileTooLarge as exc:
        raise _too_large(exc) from None
    return FileOut.model_validate(entry)


@router.get("/files", response_model=list[FileOut], **permission("DATA", FILE, "read"))
def list_files(
    scope: Scope,
    folder: Annotated[str, Query(description="Folder path; / is the root")] = "/",
    recursive: Annotated[bool, Query(description="Include the files of all subfolders")] = False,
) -> list[FileOut]:
    return [FileOut.model_validate(e) for e in service.list_files(scope, folder, recursive)]


@router.get("/files/search", response_model=list[SearchHitOut], **permission("DATA", FILE, "read"))
def search_files(
    scope: Scope,
    q: Annotated[str, Query(description="Words to find in the files' text (no words: no hits)")] = "",
    limit: Annotated[int, Query(ge=1, le=100)] = 20,
    folder: Annotated[str | None, Query(description="Only this folder and its subfolders")] = None,
) -> list[SearchHitOut]:
    """Full-text search over the instance's files: file, folder path and a snippet per hit."""
    service.require_right(scope, "read")
    if not any(c.isalnum() for c in q):
        return []
    return [SearchHitOut(file=FileOut.model_validate(h.file), folder_path=h.folder_path, snippet=h.snippet)
            for h in service.search_files(scope, q, limit, folder)]


@router.get("/files/{fileId}", response_model=FileOut, **permission("DATA", FILE, "read"))
def get_file(file_id: FileId, scope: Scope) -> FileOut:
    return FileOut.model_validate(service.get_file(scope, file_id))


def _content_disposition(name: str) -> str:
    fallback = "".join(c if c.isascii() and c.isprintable() and c not in '"\\' else "_" for c in name)
    return f"attachment; filename=\"{fallback}\"; filename*=UTF-8''{quote(name, safe='')}"


@router.get("/files/{fileId}/content", response_class=Response, **permission("DATA", FILE, "read"))
def download_file(file_id: FileId, scope: Scope) -> Response:
    """The file's bytes, always as an attachment (never rendered in the API's origin)."""
    entry, data = service.read_bytes(scope, file_id=file_id)
    return Response(content=data, media_type=entry.mime_type, headers={
        "Content-Disposition": _content_disposition(entry.name),
        "X-Content-Type-Options": "nosniff",
        "Content-Security-Policy": "sandbox",
    })


@router.delete("/files/{fileId}", status_code=204, **permission("DATA", FILE, "delete"))
def delete_file(file_id: FileId, scope: Scope) -> Response:
    service.delete_file(scope, file_id=file_id)
    return Response(status_code=204)


# --- the agent (issue 6): POST {base}/agent streams a run's events; chats, runs, cancel --------

add_agent_routes(router, FEATURE_CODE)
