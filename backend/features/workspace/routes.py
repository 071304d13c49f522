"""REST routes of one Workspace instance: {base} = /api/workspace/{instanceId}.

Mounted automatically under /api/workspace by the feature registry. The file store routes
upload, list, search, download and delete the instance's files through the Workspace's door
(backend/features/workspace/interface.py), whose methods declare and enforce the rights; the
routes carry those declarations (declared_by) and only translate.
"""

from __future__ import annotations

from datetime import datetime
from typing import Annotated
from urllib.parse import quote

from fastapi import APIRouter, Depends, File, Form, HTTPException, Path, Query, Response, UploadFile

from backend.api.agent import add_agent_routes
from backend.api.deps import CurrentUser, DbSession
from backend.api.permissions import declared_by
from backend.api.schemas import CamelModel
from backend.features.workspace.interface import WorkspaceInterface, get_interface
from backend.features.workspace.main import FEATURE_CODE
from backend.files.service import FileTooLarge

router = APIRouter(prefix="/{instanceId}", tags=["workspace"])


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


def workspace(
    instance_id: Annotated[str, Path(alias="instanceId")], user: CurrentUser, session: DbSession
) -> WorkspaceInterface:
    """The caller's door to the instance; 404 when they may not open it (or it is no Workspace)."""
    return get_interface(user, None, instance_id, session)


Workspace = Annotated[WorkspaceInterface, Depends(workspace)]
FileId = Annotated[str, Path(alias="fileId")]


def _too_large(exc: FileTooLarge) -> HTTPException:
    return HTTPException(status_code=413, detail=str(exc))


@router.post("/files", status_code=201, response_model=FileOut, **declared_by(WorkspaceInterface.upload_file))
def upload_file(
    iface: Workspace,
    file: Annotated[UploadFile | None, File(description="The file (multipart/form-data)")] = None,
    folder: Annotated[str, Form(description="Folder to store it in; missing folders are created")] = "/",
    name: Annotated[str | None, Form(description="File name (default: the uploaded file's name)")] = None,
    overwrite: Annotated[bool, Form(description="Replace a file of the same name")] = False,
) -> FileOut:
    """Upload a file; its text (text, PDF, DOCX) becomes searchable at once."""
    try:
        entry = iface.upload_file(file.file if file else None, file.filename if file else None, folder, name,
                                  file.size if file else None, file.content_type if file else None, overwrite)
    except FileTooLarge as exc:
        raise _too_large(exc) from None
    return FileOut.model_validate(entry)


@router.get("/files", response_model=list[FileOut], **declared_by(WorkspaceInterface.list_files))
def list_files(
    iface: Workspace,
    folder: Annotated[str, Query(description="Folder path; / is the root")] = "/",
    recursive: Annotated[bool, Query(description="Include the files of all subfolders")] = False,
) -> list[FileOut]:
    return [FileOut.model_validate(e) for e in iface.list_files(folder, recursive)]


@router.get("/files/search", response_model=list[SearchHitOut], **declared_by(WorkspaceInterface.search_files))
def search_files(
    iface: Workspace,
    q: Annotated[str, Query(description="Words to find in the files' text (no words: no hits)")] = "",
    limit: Annotated[int, Query(ge=1, le=100)] = 20,
    folder: Annotated[str | None, Query(description="Only this folder and its subfolders")] = None,
) -> list[SearchHitOut]:
    """Full-text search over the instance's files: file, folder path and a snippet per hit."""
    return [SearchHitOut(file=FileOut.model_validate(h.file), folder_path=h.folder_path, snippet=h.snippet)
            for h in iface.search_files(q, limit, folder)]


@router.get("/files/{fileId}", response_model=FileOut, **declared_by(WorkspaceInterface.get_file))
def get_file(file_id: FileId, iface: Workspace) -> FileOut:
    return FileOut.model_validate(iface.get_file(file_id))


def _content_disposition(name: str) -> str:
    fallback = "".join(c if c.isascii() and c.isprintable() and c not in '"\\' else "_" for c in name)
    return f"attachment; filename=\"{fallback}\"; filename*=UTF-8''{quote(name, safe='')}"


@router.get("/files/{fileId}/content", response_class=Response, **declared_by(WorkspaceInterface.read_file))
def download_file(file_id: FileId, iface: Workspace) -> Response:
    """The file's bytes, always as an attachment (never rendered in the API's origin)."""
    entry, data = iface.read_file(file_id)
    return Response(content=data, media_type=entry.mime_type, headers={
        "Content-Disposition": _content_disposition(entry.name),
        "X-Content-Type-Options": "nosniff",
        "Content-Security-Policy": "sandbox",
    })


@router.delete("/files/{fileId}", status_code=204, **declared_by(WorkspaceInterface.delete_file))
def delete_file(file_id: FileId, iface: Workspace) -> Response:
    iface.delete_file(file_id)
    return Response(status_code=204)


# --- the agent (issue 6): POST {base}/agent streams a run's events; chats, runs, cancel --------

add_agent_routes(router, FEATURE_CODE)
