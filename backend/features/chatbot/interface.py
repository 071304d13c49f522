"""The door of one Chatbot instance: its chats, its configuration, its tables, its queries, its embed.

Every read and write of a Chatbot's data from REST (routes.py), the UI (state/chatbot.py) and the
action `chatbot.queryDatabase` goes through :class:`ChatbotInterface`; its methods declare their
permission with the Chatbot's items (main.py) and enforce it (backend/rbac/door.py).

A query is checked by backend.sqlguard (one read-only SELECT over the allowed tables, the row
limit) before anything reaches a database; the instance's SQL connection is opened as the user who
configured it (they had to be allowed to use it), read only, with the time limit.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
import sqlite3
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, BinaryIO

from sqlalchemy.exc import SQLAlchemyError
from sqlmodel import Session

from backend.connectors import store
from backend.connectors.kinds import sql as sql_kind
from backend.connectors.kinds.sql import QueryResult
from backend.connectors.types import ConnectionFailed, Credentials
from backend.db.models import FeatureInstance, User, utcnow
from backend.errors import FieldError, InvalidInput, NotFound
from backend.features.chat_door import chat_door
from backend.features.chatbot import source
from backend.features.chatbot.config import (
    CONFIGURED_BY,
    EMBED,
    TABLES_FOLDER,
    ChatbotConfig,
    parse_config,
    stored_config,
)
from backend.features.chatbot.main import CHAT_DATA, CONFIGURE, FEATURE_CODE, FILE_DATA, MANAGE_EMBED, USE_AGENT
from backend.files import service as files
from backend.files.service import FileEntry, FileStore
from backend.rbac.access import AccessContext
from backend.rbac.door import guarded
from backend.rbac.rights import DATA, RESOURCE
from backend.sqlguard import CheckedQuery, SqlRefused, check_read_only

PROFILE = "chatbot"
SCHEMA_TABLES = 50  # tables described in the system prompt at most


class QueryFailed(Exception):
    """A query was refused or failed; the message says why, in words the model and a user can act on."""


@dataclass(frozen=True)
class QueryAnswer:
    """The rows of one query, cut to the row limit (`note` says so)."""

    sql: str
    columns: list[str]
    rows: list[list[Any]]
    row_count: int
    truncated: bool
    note: str | None


@dataclass(frozen=True)
class ConfigView:
    """The configuration as the settings panel and the REST API show it (never the embed token)."""

    config: ChatbotConfig
    configured_by: str | None
    embed_enabled: bool
    embed_enabled_by: str | None
    embed_enabled_at: str | None


def token_hash(token: str) -> str:
    """How an embed token is stored: its SHA-256 (hex)."""
    return hashlib.sha256(token.encode()).hexdigest()


class ChatbotInterface(chat_door(CHAT_DATA, USE_AGENT)):
    """The chats, configuration, tables and queries of one Chatbot instance, authorised as one user.

    The agent and chat methods (can_use_agent, prepare_run, chat_rows, chat_history, rename_chat,
    delete_chat) come from backend.features.chat_door, guarded with the Chatbot's items.
    """

    def __init__(self, access: AccessContext, instance: FeatureInstance):
        super().__init__(access, instance)
        self.files = FileStore(access, instance)

    @property
    def config(self) -> ChatbotConfig:
        return stored_config(self.instance.settings)

    # --- the agent ----------------------------------------------------------------------------

    def can_configure(self) -> bool:
        """Whether the settings panel is offered (configure is granted)."""
        return self.may_call(ChatbotInterface.configure)

    def run_setup(self) -> tuple[str | None, str]:
        """A run gets the profile `chatbot` and the instance's system prompt and its database's
        schema (AgentRequest.system_extra), see prepare_run."""
        return PROFILE, self.system_extra()

    def system_extra(self) -> str:
        """The instance's system prompt and its data source's schema, for the agent's system prompt."""
        config = self.config
        lines = []
        if config.system_prompt.strip():
            lines += ["Instructions of this chatbot:", config.system_prompt.strip(), ""]
        try:
            tables = self._schema()
        except QueryFailed as exc:
            tables, problem = [], str(exc)
        else:
            problem = ""
        dialect = self._dialect()
        lines.append(f"Answer from the chatbot's database with chatbot_queryDatabase (one read-only SELECT in the "
                     f"{dialect} dialect; at most {config.row_limit} rows, {config.time_limit_seconds:g} s). "
                     "Quote the values you found; never invent data.")
        if tables:
            lines.append("Its tables:")
            lines += [f"- {t.name}({', '.join(f'{c} {k}' for c, k in t.columns)})" for t in tables[:SCHEMA_TABLES]]
        else:
            lines.append(f"Its tables cannot be listed now{': ' + problem if problem else ''}.")
        return "\n".join(lines)

    # --- configuration ----------------------------------------------------------------------------

    def _view(self) -> ConfigView:
        settings = self.instance.settings or {}
        embed = settings.get(EMBED) or {}
        return ConfigView(self.config, settings.get(CONFIGURED_BY), bool(embed.get("tokenHash")),
                          embed.get("enabledBy"), embed.get("enabledAt"))

    @guarded(RESOURCE, CONFIGURE)
    def get_config(self) -> ConfigView:
        """The instance's configuration."""
        return self._view()

    @guarded(RESOURCE, CONFIGURE)
    def configure(self, raw: Any) -> ConfigView:
        """Replace the configuration with `raw` (camelCase JSON); a connection must be an `sql`
        connection the caller may use, and it is then used on the caller's behalf.

        Raises:
            InvalidInput: naming each wrong field.
        """
        config = parse_config(raw)
        if config.data_source == "connection":
            problems = []
            if not config.connection_id:
                problems.append(FieldError("connectionId", "choose the sql connection to query"))
            else:
                try:
                    store.open_connection(self.session, self.user, config.connection_id, [sql_kind.TYPE_ID])
                except NotFound:
                    problems.append(FieldError("connectionId", f"connection {config.connection_id} not found among "
                                                               "the connections you may use"))
                except ConnectionFailed as exc:
                    problems.append(FieldError("connectionId", str(exc)))
            if not config.allowed_tables:
                problems.append(FieldError("allowedTables", "name at least one table the chatbot may read"))
            if problems:
                raise InvalidInput(problems)
        settings = dict(self.instance.settings or {})
        settings.update(config.model_dump(by_alias=True))
        settings[CONFIGURED_BY] = self.user.id
        self.instance.settings = settings
        self.session.add(self.instance)
        self.session.flush()
        return self._view()

    # --- uploaded tables --------------------------------------------------------------------------

    @guarded(RESOURCE, CONFIGURE)
    @guarded(DATA, FILE_DATA, "create")
    def upload_table(self, content: BinaryIO | None, uploaded_name: str | None) -> FileEntry:
        """Store a CSV or XLSX file in /tables (replacing one of the same name); it must read as a table.

        Raises:
            InvalidInput: no file, not .csv/.xlsx, or not readable as a table (field `file`).
        """
        if content is None:
            raise InvalidInput([FieldError("file", "send the file as multipart/form-data field 'file'")])
        name = (uploaded_name or "").replace("\\", "/").rsplit("/", 1)[-1]
        files.validate_name(name, "file")
        if not source.is_table_file(name):
            raise InvalidInput([FieldError("file", f"'{name}' is no table file: upload a .csv or .xlsx file")])
        data = content.read(files.get_limits().max_file_bytes + 1)
        try:
            source.parse_table(hashlib.sha256(data).hexdigest(), name, data)
        except source.TableFileError as exc:
            raise InvalidInput([FieldError("file", str(exc))]) from None
        return self.files.store_file(f"{TABLES_FOLDER}/{name}", data, None, overwrite=True)

    @guarded(DATA, FILE_DATA, "read")
    def table_files(self) -> list[FileEntry]:
        """The CSV/XLSX files of /tables the user may read."""
        try:
            entries = self.files.list_files(TABLES_FOLDER)
        except (NotFound, InvalidInput):  # no /tables folder yet
            return []
        return [e for e in entries if source.is_table_file(e.name)]

    @guarded(RESOURCE, CONFIGURE)
    @guarded(DATA, FILE_DATA, "delete")
    def delete_table(self, file_id: str) -> FileEntry:
        """Delete one uploaded table file."""
        entry = self.files.get_file(file_id)
        if entry.folder_path.rstrip("/") != TABLES_FOLDER or not source.is_table_file(entry.name):
            raise NotFound(f"table file {file_id} not found")
        return self.files.delete_file(file_id=file_id)

    # --- queries ------------------------------------------------------------------------------------

    def _tables(self) -> list[source.ParsedTable]:
        tables: dict[str, source.ParsedTable] = {}
        for entry in self.table_files():
            _entry, data = self.files.read_bytes(file_id=entry.id)
            try:
                table = source.parse_table(entry.sha256, entry.name, data)
            except source.TableFileError:
                continue  # refused at upload; a file written otherwise is left out
            tables.setdefault(table.name, table)
        return list(tables.values())

    def _credentials(self) -> Credentials:
        """The instance's connection, opened as the user who configured it."""
        config = self.config
        owner_id = (self.instance.settings or {}).get(CONFIGURED_BY)
        owner = self.session.get(User, owner_id) if owner_id else None
        if not config.connection_id or owner is None or owner.disabled:
            raise QueryFailed("the chatbot has no usable database connection: ask its administrator to configure it")
        try:
            return store.open_connection(self.session, owner, config.connection_id, [sql_kind.TYPE_ID])
        except NotFound:
            raise QueryFailed("the chatbot's database connection is gone or no longer shared with the user who "
                              "configured it: ask its administrator to configure it again") from None
        except ConnectionFailed as exc:
            raise QueryFailed(str(exc)) from None

    def _dialect(self) -> str:
        config = self.config
        if config.data_source == "tables":
            return "sqlite"
        try:
            return source.dialect_of(self._credentials())
        except QueryFailed:
            return "sqlite"

    def _schema(self) -> list[source.TableSchema]:
        config = self.config
        if config.data_source == "tables":
            return [source.TableSchema(t.name, list(zip(t.columns, t.types, strict=True)), len(t.rows))
                    for t in self._tables()]
        try:
            return source.connection_schema(self._credentials(), config.allowed_tables)
        except ConnectionFailed as exc:
            raise QueryFailed(str(exc)) from None

    @guarded(RESOURCE, USE_AGENT)
    def list_tables(self) -> list[source.TableSchema]:
        """The tables the chatbot may query, with their columns (and row counts of uploaded tables)."""
        return self._schema()

    @guarded(RESOURCE, USE_AGENT)
    def query(self, sql: Any) -> QueryAnswer:
        """Run one read-only SELECT over the allowed tables: checked first (a write or another table
        never reaches a database), then executed read only within the row and time limits.

        Raises:
            QueryFailed: refused (naming why) or failed at the database (timeout, error).
        """
        config = self.config
        if config.data_source == "tables":
            tables = self._tables()
            checked = self._check(sql, "sqlite", {t.name for t in tables}, config.row_limit)

            def run() -> QueryResult:
                return source.run_in_memory(tables, checked.sql, config.row_limit, config.time_limit_seconds)
        else:
            credentials = self._credentials()
            checked = self._check(sql, source.dialect_of(credentials), set(config.allowed_tables), config.row_limit)

            def run() -> QueryResult:
                return source.run_on_connection(credentials, checked.sql, config.row_limit, config.time_limit_seconds)
        result = self._execute(run, config.time_limit_seconds)
        note = (f"Only the first {config.row_limit} rows are shown (the chatbot's row limit); narrow the query or "
                "aggregate to see the rest." if result.truncated else None)
        return QueryAnswer(checked.sql, result.columns, result.rows, len(result.rows), result.truncated, note)

    @staticmethod
    def _check(sql: Any, dialect: str, allowed: set[str], row_limit: int) -> CheckedQuery:
        try:
            # One row more than the limit tells whether the answer was cut.
            return check_read_only(sql if isinstance(sql, str) else "", dialect, allowed, row_limit + 1)
        except SqlRefused as exc:
            raise QueryFailed(f"refused before it reached the database: {exc}") from None

    @staticmethod
    def _execute(run: Callable[[], QueryResult], time_limit: float) -> QueryResult:
        try:
            return run()
        except ConnectionFailed as exc:
            raise QueryFailed(str(exc)) from None
        except (SQLAlchemyError, sqlite3.Error) as exc:
            if sql_kind.is_timeout(exc):
                raise QueryFailed(f"the query was stopped at the chatbot's time limit of {time_limit:g} s; "
                                  "simplify it") from None
            reason = " ".join(str(getattr(exc, "orig", None) or exc).split())[:500]
            raise QueryFailed(f"the database refused the query: {reason}") from None

    # --- the public embed ---------------------------------------------------------------------------

    @guarded(RESOURCE, MANAGE_EMBED)
    def enable_embed(self) -> str:
        """Create (or rotate) the embed link's token; only its hash is kept, the token is shown once.
        Visitors' messages run as the caller."""
        token = secrets.token_urlsafe(32)
        settings = dict(self.instance.settings or {})
        settings[EMBED] = {"tokenHash": token_hash(token), "enabledBy": self.user.id,
                           "enabledAt": utcnow().isoformat()}
        self.instance.settings = settings
        self.session.add(self.instance)
        self.session.flush()
        return token

    @guarded(RESOURCE, MANAGE_EMBED)
    def disable_embed(self) -> None:
        """Revoke the embed link (its token answers 404 from now on)."""
        settings = dict(self.instance.settings or {})
        settings.pop(EMBED, None)
        self.instance.settings = settings
        self.session.add(self.instance)
        self.session.flush()


def instance_for_token(session: Session, token: str) -> FeatureInstance | None:
    """The Chatbot instance whose embed token is `token`, or None (wrong, rotated or revoked)."""
    from sqlmodel import select

    if not isinstance(token, str) or not 20 <= len(token) <= 100:
        return None
    wanted = token_hash(token)
    for instance in session.exec(select(FeatureInstance).where(FeatureInstance.feature_code == FEATURE_CODE)).all():
        stored = ((instance.settings or {}).get(EMBED) or {}).get("tokenHash")
        if isinstance(stored, str) and hmac.compare_digest(stored, wanted):
            return instance
    return None


def open_interface(access: AccessContext, feature_instance_id: str, mandate_id: str | None = None
                   ) -> ChatbotInterface:
    """The door of Chatbot instance `feature_instance_id` for `access.user`, else NotFound."""
    return ChatbotInterface(access, access.require_instance(feature_instance_id, FEATURE_CODE, mandate_id))


def get_interface(user: User, mandate_id: str | None, feature_instance_id: str, session: Session) -> ChatbotInterface:
    """The feature's data access (backend/features/registry.py): the door of one instance."""
    return open_interface(AccessContext(session, user), feature_instance_id, mandate_id)
