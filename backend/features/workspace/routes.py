"""REST routes of one Workspace instance: {base} = /api/workspace/{instanceId}.

Mounted automatically under /api/workspace by the feature registry. The file store routes
upload, list, search, download and delete the instance's files through backend.files.service,
which applies the caller's DATA rights on `data.feature.workspace.file`.
"""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any
from urllib.parse import quote

from fastapi import APIRouter, Depends, File, Form, HTTPException, Path, Query, Response, UploadFile
from fastapi.responses import StreamingResponse

from backend.agent import service as agent_service
from backend.api.deps import CurrentUser, DbSession
from backend.api.permissions import permission
from backend.api.schemas import CamelModel
from backend.db.models import AgentRun
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


# --- the agent (issue 6): POST {base}/agent streams a run's events ---------------------------

CHAT = "data.feature.workspace.chat"
USE_AGENT = "resource.feature.workspace.useAgent"
AgentRunId = Annotated[str, Path(alias="agentRunId")]
InstanceId = Annotated[str, Path(alias="instanceId")]


class AgentPrompt(CamelModel):
    prompt: str
    chat_id: str | None = None


class AgentChatOut(CamelModel):
    id: str
    title: str
    sys_created_by: str
    sys_created_at: datetime
    sys_modified_at: datetime


class AgentStepOut(CamelModel):
    seq: int
    round: int
    kind: str
    name: str | None
    call_id: str | None
    arguments: Any
    result: str | None
    ok: bool | None
    detail: Any
    prompt_tokens: int | None
    completion_tokens: int | None
    cost_chf: float | None
    duration_ms: int | None
    created_at: datetime


class AgentRunOut(CamelModel):
    id: str
    chat_id: str | None
    parent_run_id: str | None
    profile: str
    prompt: str
    status: str
    answer: str | None
    error: str | None
    config: Any
    toolboxes: Any
    rounds: int
    tool_calls: int
    prompt_tokens: int
    completion_tokens: int
    cost_chf: float | None
    sys_created_by: str
    started_at: datetime
    finished_at: datetime | None
    steps: list[AgentStepOut] | None = None
    sub_runs: list[AgentRunOut] | None = None


def _run_out(access: AccessContext, run: AgentRun, with_steps: bool = False) -> AgentRunOut:
    out = AgentRunOut.model_validate(run)
    if not with_steps:
        return out
    return out.model_copy(update={
        "steps": [AgentStepOut.model_validate(s) for s in agent_service.run_steps(access, run)],
        "sub_runs": [_run_out(access, sub, True) for sub in agent_service.sub_runs(access, run)]})


@router.post("/agent", response_class=StreamingResponse, **permission("RESOURCE", USE_AGENT),
             responses={200: {"content": {"text/event-stream": {}},
                              "description": "server-sent events of the agent run"}})
def run_agent(instance_id: InstanceId, body: AgentPrompt, user: CurrentUser, session: DbSession) -> StreamingResponse:
    """Run the agent on `prompt` (continuing chat `chatId` when given) and stream its events:
    run.started, round.started, text.delta, tool.started/finished, toolbox.escalated/refused,
    subagent.started/finished, guard, final, error, cancelled."""
    request = agent_service.prepare_run(AccessContext(session, user), instance_id, body.prompt, body.chat_id)
    events = (event.to_sse() for event in agent_service.stream_run(request))
    return StreamingResponse(events, media_type="text/event-stream",
                             headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"})


@router.get("/agent/chats", response_model=list[AgentChatOut], **permission("DATA", CHAT, "read"))
def list_agent_chats(instance_id: InstanceId, user: CurrentUser, session: DbSession) -> list[AgentChatOut]:
    return [AgentChatOut.model_validate(c) for c in agent_service.list_chats(AccessContext(session, user), instance_id)]


@router.get("/agent/runs", response_model=list[AgentRunOut], **permission("DATA", CHAT, "read"))
def list_agent_runs(instance_id: InstanceId, user: CurrentUser, session: DbSession,
                    chat_id: Annotated[str | None, Query(alias="chatId")] = None) -> list[AgentRunOut]:
    access = AccessContext(session, user)
    return [_run_out(access, run) for run in agent_service.list_runs(access, instance_id, chat_id)]


@router.get("/agent/runs/{agentRunId}", response_model=AgentRunOut, **permission("DATA", CHAT, "read"))
def get_agent_run(instance_id: InstanceId, run_id: AgentRunId, user: CurrentUser, session: DbSession) -> AgentRunOut:
    """A run with its trace: rounds (tools offered, tokens, cost), tool calls with arguments and
    results, escalations, guard interventions, and its sub-agent runs."""
    access = AccessContext(session, user)
    return _run_out(access, agent_service.get_run(access, instance_id, run_id), with_steps=True)


@router.post("/agent/runs/{agentRunId}/cancel", response_model=AgentRunOut, **permission("DATA", CHAT, "update"))
def cancel_agent_run(instance_id: InstanceId, run_id: AgentRunId, user: CurrentUser,
                     session: DbSession) -> AgentRunOut:
    """Cancel a run still working (409 when it has ended); it stops before its next step."""
    access = AccessContext(session, user)
    return _run_out(access, agent_service.cancel_run(access, instance_id, run_id))
