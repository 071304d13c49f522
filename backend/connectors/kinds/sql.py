"""SQL databases (DESIGN §8: connection type `sql`): read-only access for the Chatbot.

Settings `{dialect: "postgresql"|"mysql"|"sqlite", host, port, database, username, password, path}`;
the password is sealed and never returned. A connection is tested on creation (`SELECT 1`).

Every query runs read only at the connection level as well — the Chatbot checks each statement
with backend.sqlguard first, this is the second line of defence:

- PostgreSQL (psycopg): the session starts with `default_transaction_read_only=on` (what
  `SET SESSION CHARACTERISTICS AS TRANSACTION READ ONLY` sets) and a `statement_timeout`;
- MySQL (PyMySQL): `SET SESSION TRANSACTION READ ONLY` and `max_execution_time` on connect;
- SQLite: the file is opened `file:…?mode=ro` (and `PRAGMA query_only`), a progress handler
  interrupts a query at its time limit.

Security: a SQLite file must lie below the directory POWERON_SQLITE_ROOT names (unset: SQLite
connections are refused, saying so), and neither SQLite nor a server may be the platform's own
database. Host names and ports are checked for their form.
"""

from __future__ import annotations

import datetime as dt
import decimal
import ipaddress
import os
import re
import sqlite3
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal
from urllib.parse import quote

from pydantic import BaseModel, ConfigDict, Field, ValidationInfo, field_validator
from pydantic.alias_generators import to_camel
from sqlalchemy import create_engine, inspect
from sqlalchemy.engine import URL, Connection, Engine, make_url
from sqlalchemy.exc import DBAPIError, SQLAlchemyError
from sqlalchemy.pool import NullPool

from backend.connectors.types import ConnectionFailed, ConnectionType, Credentials, register_connection_type

TYPE_ID = "sql"
LABEL = "SQL database"
SQLITE_ROOT_ENV = "POWERON_SQLITE_ROOT"
DEFAULT_PORTS = {"postgresql": 5432, "mysql": 3306}
SQLGLOT_DIALECTS = {"postgresql": "postgres", "mysql": "mysql", "sqlite": "sqlite"}
CONNECT_TIMEOUT_SECONDS = 5
_HOST_LABEL = re.compile(r"^(?!-)[A-Za-z0-9-]{1,63}(?<!-)$")
Dialect = Literal["postgresql", "mysql", "sqlite"]


def mysql_available() -> bool:
    """Whether the MySQL driver (PyMySQL) is installed."""
    try:
        import pymysql  # noqa: F401
    except ImportError:
        return False
    return True


def sqlite_root() -> Path | None:
    """The directory SQLite files must lie below (POWERON_SQLITE_ROOT), or None when unset."""
    value = os.environ.get(SQLITE_ROOT_ENV, "").strip()
    return Path(value).resolve() if value else None


def _valid_host(host: str) -> bool:
    """A host name or IP address; link-local addresses (cloud metadata services) are not databases."""
    try:
        address = ipaddress.ip_address(host.strip("[]"))
    except ValueError:
        pass
    else:
        return not (address.is_link_local or address.is_multicast or address.is_unspecified)
    labels = host.rstrip(".").split(".")
    return 0 < len(host) <= 253 and all(_HOST_LABEL.match(label) for label in labels)


def _platform_url() -> URL | None:
    from backend.config import get_settings

    try:
        return make_url(get_settings().db_url)
    except Exception:  # noqa: BLE001 - an unreadable platform URL cannot match anything
        return None


def _same_host(a: str | None, b: str | None) -> bool:
    loopback = {"localhost", "127.0.0.1", "::1", "", None}
    return (a or "").lower() == (b or "").lower() or (a in loopback and b in loopback)


def resolve_sqlite_path(path: str) -> Path:
    """The real path of a SQLite file the platform may open, else ValueError saying why.

    The file must exist below POWERON_SQLITE_ROOT (a relative path is taken from there) and must
    not be the platform's own database.
    """
    root = sqlite_root()
    if root is None:
        raise ValueError(f"SQLite connections are switched off on this server: set {SQLITE_ROOT_ENV} to the "
                         "directory that holds the SQLite files it may read")
    candidate = Path(path)
    real = (candidate if candidate.is_absolute() else root / candidate).resolve()
    if os.path.commonpath([str(root), str(real)]) != str(root):
        raise ValueError(f"the file must lie below {SQLITE_ROOT_ENV} ({root})")
    platform = _platform_url()
    if platform is not None and platform.get_backend_name() == "sqlite" and platform.database:
        own = Path(platform.database).resolve()
        if real == own or real.name.startswith(own.name + "-") and real.parent == own.parent:
            raise ValueError("this is the platform's own database; it cannot be connected")
    if not real.is_file():
        raise ValueError(f"no such file below {SQLITE_ROOT_ENV}: {path}")
    return real


class SqlSettings(BaseModel):
    """What a user types to connect a database (camelCase in the API); each check names its field."""

    model_config = ConfigDict(extra="forbid", alias_generator=to_camel, populate_by_name=True)

    dialect: Dialect = Field(..., description="postgresql, mysql or sqlite")
    host: str | None = Field(None, max_length=253, validate_default=True,
                             description="server host name or IP address (not for sqlite)")
    port: int | None = Field(None, ge=1, le=65535, validate_default=True,
                             description="server port (default 5432 / 3306)")
    database: str | None = Field(None, max_length=200, validate_default=True,
                                 description="database name (not for sqlite)")
    username: str | None = Field(None, max_length=200)
    password: str | None = Field(None, max_length=500, json_schema_extra={"format": "password", "writeOnly": True})
    path: str | None = Field(None, max_length=1000, validate_default=True,
                             description=f"sqlite: the file, below the server's {SQLITE_ROOT_ENV} directory")

    @field_validator("dialect")
    @classmethod
    def _driver(cls, value: str) -> str:
        if value == "mysql" and not mysql_available():
            raise ValueError("MySQL needs the PyMySQL driver, which is not installed on this server "
                             "(pip install PyMySQL)")
        return value

    @field_validator("host")
    @classmethod
    def _host(cls, value: str | None, info: ValidationInfo) -> str | None:
        if info.data.get("dialect") in (None, "sqlite"):
            return value
        if not value or not _valid_host(value.strip()):
            raise ValueError("expected a host name (db.example.com) or an IP address (not link-local)")
        return value.strip()

    @field_validator("port")
    @classmethod
    def _port(cls, value: int | None, info: ValidationInfo) -> int | None:
        dialect = info.data.get("dialect")
        return value or DEFAULT_PORTS.get(dialect) if dialect != "sqlite" else value

    @field_validator("database")
    @classmethod
    def _database(cls, value: str | None, info: ValidationInfo) -> str | None:
        dialect = info.data.get("dialect")
        if dialect in (None, "sqlite") or "host" not in info.data:
            return value
        if not value or any(c in value for c in "/?#\x00"):
            raise ValueError("expected the database's name")
        platform = _platform_url()
        if platform is not None and platform.get_backend_name() == dialect and \
                _same_host(platform.host, info.data.get("host")) and platform.database == value and \
                (platform.port or DEFAULT_PORTS[dialect]) == info.data.get("port"):
            raise ValueError("this is the platform's own database; it cannot be connected")
        return value

    @field_validator("path")
    @classmethod
    def _path(cls, value: str | None, info: ValidationInfo) -> str | None:
        if info.data.get("dialect") != "sqlite":
            return value
        if not value:
            raise ValueError("a SQLite connection needs the file's path")
        resolve_sqlite_path(value)
        return value


@dataclass(frozen=True)
class QueryResult:
    """Rows of a read-only query: column names, rows (as lists) and whether more rows existed."""

    columns: list[str]
    rows: list[list[Any]]
    truncated: bool


def cell(value: Any) -> Any:
    """A database value as JSON can carry it."""
    if value is None or isinstance(value, bool | int | float | str):
        return value
    if isinstance(value, decimal.Decimal):
        return int(value) if value == value.to_integral_value() and abs(value) < 2**53 else float(value)
    if isinstance(value, dt.datetime | dt.date | dt.time):
        return value.isoformat()
    if isinstance(value, bytes | bytearray | memoryview):
        return f"<{len(bytes(value))} bytes>"
    if isinstance(value, uuid.UUID):
        return str(value)
    return str(value)


def fetch(connection: Connection, sql: str, max_rows: int) -> QueryResult:
    """Run `sql` (already checked) and read at most `max_rows` rows (one more tells it was cut)."""
    result = connection.exec_driver_sql(sql)
    columns = list(result.keys())
    rows = result.fetchmany(max_rows + 1)
    return QueryResult(columns, [[cell(v) for v in row] for row in rows[:max_rows]], len(rows) > max_rows)


def _engine(credentials: Credentials, time_limit: float) -> Engine:
    settings, secret = credentials.settings, credentials.secret
    dialect = settings.get("dialect")
    millis = max(1, int(time_limit * 1000))
    if dialect == "sqlite":
        real = resolve_sqlite_path(str(settings.get("path") or ""))

        def creator() -> sqlite3.Connection:
            return sqlite3.connect(f"file:{quote(str(real))}?mode=ro", uri=True, check_same_thread=False,
                                   timeout=time_limit)

        return create_engine("sqlite://", creator=creator, poolclass=NullPool)
    url = URL.create("postgresql+psycopg" if dialect == "postgresql" else "mysql+pymysql",
                     username=settings.get("username") or None, password=secret.get("password") or None,
                     host=settings.get("host"), port=settings.get("port"), database=settings.get("database"))
    if dialect == "postgresql":
        args = {"connect_timeout": CONNECT_TIMEOUT_SECONDS,
                "options": f"-c default_transaction_read_only=on -c statement_timeout={millis}"}
    elif dialect == "mysql":
        if not mysql_available():
            raise ConnectionFailed("MySQL needs the PyMySQL driver, which is not installed on this server")
        args = {"connect_timeout": CONNECT_TIMEOUT_SECONDS, "read_timeout": int(time_limit) + 5,
                # SET SESSION TRANSACTION READ ONLY, as a variable so that one statement also sets the time limit
                "init_command": f"SET SESSION transaction_read_only = 1, SESSION max_execution_time = {millis}"}
    else:
        raise ConnectionFailed(f"unknown SQL dialect {dialect!r}; expected postgresql, mysql or sqlite")
    return create_engine(url, poolclass=NullPool, connect_args=args)


def _reason(exc: Exception) -> str:
    original = getattr(exc, "orig", None) or exc
    text = " ".join(str(original).split())
    return text[:500] or type(original).__name__


@contextmanager
def read_only(credentials: Credentials, time_limit: float = 5.0) -> Iterator[Connection]:
    """A read-only connection to the database of `credentials`, its queries limited to `time_limit`
    seconds; failures to connect become ConnectionFailed (never with the password)."""
    try:
        engine = _engine(credentials, time_limit)
    except ValueError as exc:
        raise ConnectionFailed(str(exc)) from None
    try:
        try:
            connection = engine.connect()
        except SQLAlchemyError as exc:
            raise ConnectionFailed(f"cannot connect to the database of '{credentials.label}': {_reason(exc)}") \
                from None
        with connection:
            if credentials.settings.get("dialect") == "sqlite":
                _limit_sqlite(connection.connection.driver_connection, time_limit)
            else:
                connection.exec_driver_sql("SET TRANSACTION READ ONLY")
            yield connection
            connection.rollback()
    finally:
        engine.dispose()


def _limit_sqlite(raw: sqlite3.Connection, time_limit: float) -> None:
    raw.execute("PRAGMA query_only = ON")
    deadline = time.monotonic() + time_limit
    raw.set_progress_handler(_interrupt_after(deadline), 10_000)


def _interrupt_after(deadline: float) -> Callable[[], int]:
    return lambda: 1 if time.monotonic() > deadline else 0


def is_timeout(exc: Exception) -> bool:
    """Whether a driver error means the query was stopped at its time limit."""
    text = str(getattr(exc, "orig", exc)).lower()
    return any(s in text for s in ("statement timeout", "interrupted", "max_execution_time", "maximum statement "
                                   "execution time", "canceling statement"))


def table_columns(connection: Connection, tables: list[str]) -> dict[str, list[tuple[str, str]]]:
    """(column name, type) of each of `tables` (`table` or `schema.table`) that exists."""
    inspector = inspect(connection)
    found: dict[str, list[tuple[str, str]]] = {}
    for name in tables:
        schema, _, table = name.rpartition(".")
        try:
            columns = inspector.get_columns(table, schema=schema or None)
        except (SQLAlchemyError, DBAPIError):
            continue
        if columns:
            found[name] = [(c["name"], str(c["type"])) for c in columns]
    return found


def check(credentials: Credentials) -> str:
    """Connect read-only and run `SELECT 1`; what was reached, or ConnectionFailed."""
    settings = credentials.settings
    try:
        with read_only(credentials, CONNECT_TIMEOUT_SECONDS) as connection:
            connection.exec_driver_sql("SELECT 1").fetchall()
    except SQLAlchemyError as exc:
        raise ConnectionFailed(f"the database refused a test query: {_reason(exc)}") from None
    if settings.get("dialect") == "sqlite":
        return f"opened the SQLite file {settings.get('path')} read only"
    return (f"connected to the {settings.get('dialect')} database {settings.get('database')} on "
            f"{settings.get('host')}:{settings.get('port')} read only")


SQL = register_connection_type(ConnectionType(
    id=TYPE_ID, label=LABEL,
    description="A PostgreSQL, MySQL or SQLite database the Chatbot reads (read only); the password is sealed and "
                "never shown again.",
    auth="password", check=check, settings_model=SqlSettings, secret_fields=("password",),
))
