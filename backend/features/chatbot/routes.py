"""REST routes of the Chatbot: {base} = /api/chatbot/{instanceId}, and the public embed.

Mounted automatically under /api/chatbot by the feature registry. The instance routes carry the
declarations of the door methods they call (declared_by) and only translate:

    GET|PUT {base}/settings                     the configuration (configure)
    GET|POST {base}/tables, DELETE {base}/tables/{fileId}   uploaded CSV/XLSX tables
    GET {base}/schema                            the tables the chatbot may query, with columns
    POST {base}/query {sql}                      one read-only query (what the agent's tool runs)
    POST|DELETE {base}/embed                     enable/rotate (the token is shown once) or revoke
    {base}/agent…                                the agent (backend/api/agent.py)

    POST /api/chatbot/embed/{token}/messages {prompt, chatKey?}   public: a visitor's message
"""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any

from fastapi import APIRouter, Body, Depends, File, Path, Request, Response, UploadFile
from fastapi.responses import JSONResponse

from backend.api.agent import add_agent_routes
from backend.api.deps import CurrentUser, DbSession
from backend.api.permissions import declared_by, permission
from backend.api.schemas import CamelModel
from backend.errors import FieldError, InvalidInput
from backend.features.chatbot import embed
from backend.features.chatbot.interface import ChatbotInterface, ConfigView, QueryFailed, get_interface
from backend.features.chatbot.main import FEATURE_CODE
from backend.files.service import FileTooLarge

router = APIRouter(tags=["chatbot"])
instance_router = APIRouter(prefix="/{instanceId}")


class SettingsOut(CamelModel):
    system_prompt: str
    data_source: str
    connection_id: str | None
    allowed_tables: list[str]
    row_limit: int
    time_limit_seconds: float
    configured_by: str | None
    embed_enabled: bool
    embed_enabled_by: str | None
    embed_enabled_at: str | None


class TableFileOut(CamelModel):
    id: str
    name: str
    table: str
    size_bytes: int
    sha256: str
    sys_modified_at: datetime


class ColumnOut(CamelModel):
    name: str
    type: str


class TableOut(CamelModel):
    name: str
    columns: list[ColumnOut]
    row_count: int | None = None


class QueryIn(CamelModel):
    sql: str


class QueryOut(CamelModel):
    sql: str
    columns: list[str]
    rows: list[list[Any]]
    row_count: int
    truncated: bool
    note: str | None


class EmbedOut(CamelModel):
    token: str
    path: str


class EmbedMessageIn(CamelModel):
    prompt: str
    chat_key: str | None = None


class EmbedMessageOut(CamelModel):
    answer: str | None
    chat_key: str
    error: str | None


def settings_out(view: ConfigView) -> SettingsOut:
    config = view.config
    return SettingsOut(system_prompt=config.system_prompt, data_source=config.data_source,
                       connection_id=config.connection_id, allowed_tables=config.allowed_tables,
                       row_limit=config.row_limit, time_limit_seconds=config.time_limit_seconds,
                       configured_by=view.configured_by, embed_enabled=view.embed_enabled,
                       embed_enabled_by=view.embed_enabled_by, embed_enabled_at=view.embed_enabled_at)


def chatbot(instance_id: Annotated[str, Path(alias="instanceId")], user: CurrentUser,
            session: DbSession) -> ChatbotInterface:
    """The caller's door to the instance; 404 when they may not open it (or it is no Chatbot)."""
    return get_interface(user, None, instance_id, session)


Chatbot = Annotated[ChatbotInterface, Depends(chatbot)]


# --- the public embed (before the instance routes: /embed is no instance id) ---------------------


@router.post("/embed/{token}/messages", response_model=EmbedMessageOut, **permission("public"))
def embed_message(token: Annotated[str, Path(max_length=100)], body: EmbedMessageIn, request: Request,
                  session: DbSession) -> Any:
    """A visitor's message to a chatbot through its embed link (no sign-in). It runs as the user who
    enabled the embed, with the chatbot toolbox only; `chatKey` of an answer continues that chat.
    404 for a wrong, rotated or revoked token; 429 with Retry-After beyond the rate limit per token and
    client address."""
    client = request.client.host if request.client else "unknown"
    try:
        answer = embed.ask(session, token, client, body.prompt, body.chat_key)
    except embed.EmbedLimited as exc:
        return JSONResponse({"detail": str(exc)}, status_code=429,
                            headers={"Retry-After": str(exc.retry_after_seconds)})
    return EmbedMessageOut(answer=answer.answer, chat_key=answer.chat_key, error=answer.error)


# --- configuration ---------------------------------------------------------------------------------


@instance_router.get("/settings", response_model=SettingsOut, **declared_by(ChatbotInterface.get_config))
def get_settings(iface: Chatbot) -> SettingsOut:
    return settings_out(iface.get_config())


@instance_router.put("/settings", response_model=SettingsOut, **declared_by(ChatbotInterface.configure))
def put_settings(iface: Chatbot, body: Annotated[dict[str, Any], Body(description=(
        "systemPrompt, dataSource (tables | connection), connectionId, allowedTables, rowLimit (default 200), "
        "timeLimitSeconds (default 5)"))]) -> SettingsOut:
    """Replace the configuration; a connection must be an sql connection the caller may use."""
    return settings_out(iface.configure(body))


# --- uploaded tables ---------------------------------------------------------------------------------


def _table_file(entry: Any) -> TableFileOut:
    from backend.features.chatbot.source import table_name

    return TableFileOut(id=entry.id, name=entry.name, table=table_name(entry.name), size_bytes=entry.size_bytes,
                        sha256=entry.sha256, sys_modified_at=entry.sys_modified_at)


@instance_router.get("/tables", response_model=list[TableFileOut], **declared_by(ChatbotInterface.table_files))
def list_table_files(iface: Chatbot) -> list[TableFileOut]:
    return [_table_file(e) for e in iface.table_files()]


@instance_router.post("/tables", status_code=201, response_model=TableFileOut,
                      **declared_by(ChatbotInterface.upload_table))
def upload_table(iface: Chatbot, file: Annotated[UploadFile | None, File(
        description="A .csv or .xlsx file (multipart/form-data); its first row names the columns")] = None
                 ) -> Any:
    """Upload a table (replacing one of the same name); the file is named after it."""
    try:
        entry = iface.upload_table(file.file if file else None, file.filename if file else None)
    except FileTooLarge as exc:
        return JSONResponse({"detail": str(exc)}, status_code=413)
    return _table_file(entry)


@instance_router.delete("/tables/{fileId}", status_code=204, response_class=Response,
                        **declared_by(ChatbotInterface.delete_table))
def delete_table(iface: Chatbot, file_id: Annotated[str, Path(alias="fileId")]) -> Response:
    iface.delete_table(file_id)
    return Response(status_code=204)


# --- schema and queries --------------------------------------------------------------------------------


@instance_router.get("/schema", response_model=list[TableOut], **declared_by(ChatbotInterface.list_tables))
def get_schema(iface: Chatbot) -> list[TableOut]:
    """The tables the chatbot may query, with their columns."""
    try:
        tables = iface.list_tables()
    except QueryFailed as exc:
        raise InvalidInput([FieldError("dataSource", str(exc))]) from None
    return [TableOut(name=t.name, columns=[ColumnOut(name=c, type=k) for c, k in t.columns], row_count=t.row_count)
            for t in tables]


@instance_router.post("/query", response_model=QueryOut, **declared_by(ChatbotInterface.query))
def run_query(iface: Chatbot, body: QueryIn) -> QueryOut:
    """Run one read-only SELECT over the allowed tables (422 naming why when it is refused)."""
    try:
        answer = iface.query(body.sql)
    except QueryFailed as exc:
        raise InvalidInput([FieldError("sql", str(exc))]) from None
    return QueryOut.model_validate(answer)


# --- the embed link ------------------------------------------------------------------------------------


@instance_router.post("/embed", status_code=201, response_model=EmbedOut,
                      **declared_by(ChatbotInterface.enable_embed))
def enable_embed(iface: Chatbot) -> EmbedOut:
    """Enable the public embed, or rotate its token: the token is shown this once (only its hash is kept)."""
    token = iface.enable_embed()
    return EmbedOut(token=token, path=f"/api/{FEATURE_CODE}/embed/{token}/messages")


@instance_router.delete("/embed", status_code=204, response_class=Response,
                        **declared_by(ChatbotInterface.disable_embed))
def disable_embed(iface: Chatbot) -> Response:
    """Revoke the embed link."""
    iface.disable_embed()
    return Response(status_code=204)


# --- the agent: POST {base}/agent streams a run's events; chats, runs, cancel ---------------------------

add_agent_routes(instance_router, FEATURE_CODE,
                 system_extra=lambda access, instance_id: get_interface(access.user, None, instance_id,
                                                                        access.session).system_extra())
router.include_router(instance_router)
