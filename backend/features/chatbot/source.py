"""Where a Chatbot's queries run: its uploaded tables or its SQL connection.

- "tables": every CSV/XLSX file in the instance's file store folder /tables is one table, named
  after the file (`Sales 2024.csv` → `sales_2024`). The parsed tables are cached by the file's
  SHA-256; each query gets a fresh in-memory SQLite database built from them, switched to
  `query_only` and interrupted at its time limit.
- "connection": the `sql` connection (backend/connectors/kinds/sql.py) the configuring user chose,
  opened read only with the instance's time limit; only the allow-listed tables are described.

The statement has passed backend.sqlguard before anything here runs.
"""

from __future__ import annotations

import csv
import functools
import io
import re
import sqlite3
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import PurePosixPath
from typing import Any

from backend.connectors.kinds import sql as sql_kind
from backend.connectors.kinds.sql import QueryResult
from backend.connectors.types import Credentials

TABLE_SUFFIXES = (".csv", ".xlsx")
MAX_TABLE_ROWS = 100_000
MAX_COLUMNS = 200


class TableFileError(ValueError):
    """An uploaded file cannot be read as a table; the message says why."""


@dataclass(frozen=True)
class ParsedTable:
    """A table read from a file: its SQL name, column names and SQLite types, rows."""

    name: str
    columns: tuple[str, ...]
    types: tuple[str, ...]
    rows: tuple[tuple[Any, ...], ...]


@dataclass(frozen=True)
class TableSchema:
    """What the model is told about one table."""

    name: str
    columns: list[tuple[str, str]]
    row_count: int | None = None


def table_name(file_name: str) -> str:
    """The SQL name of the table a file holds: its stem in lower case, other characters as `_`."""
    stem = PurePosixPath(file_name).stem.lower()
    name = re.sub(r"[^a-z0-9_]+", "_", stem).strip("_") or "table"
    return f"t_{name}" if name[0].isdigit() else name[:63]


def is_table_file(file_name: str) -> bool:
    return PurePosixPath(file_name).suffix.lower() in TABLE_SUFFIXES


def _column_names(header: list[Any]) -> tuple[str, ...]:
    names: list[str] = []
    for index, raw in enumerate(header):
        name = re.sub(r"[^a-z0-9_]+", "_", str(raw if raw is not None else "").strip().lower()).strip("_")
        name = name or f"column_{index + 1}"
        name = f"c_{name}" if name[0].isdigit() else name
        base, n = name, 2
        while name in names:
            name, n = f"{base}_{n}", n + 1
        names.append(name)
    return tuple(names)


def _number(value: Any) -> Any:
    if not isinstance(value, str):
        return value
    text = value.strip()
    if re.fullmatch(r"[+-]?\d{1,18}", text):
        return int(text)
    if re.fullmatch(r"[+-]?(\d+\.\d*|\.\d+|\d+)([eE][+-]?\d+)?", text):
        return float(text)
    return value


def _typed(columns: int, rows: list[list[Any]]) -> tuple[tuple[str, ...], tuple[tuple[Any, ...], ...]]:
    """Column types (INTEGER, REAL or TEXT, by what every value of the column is) and the rows."""
    values = [[_number(row[i]) if i < len(row) else None for i in range(columns)] for row in rows]
    types = []
    for i in range(columns):
        seen = [row[i] for row in values if row[i] not in (None, "")]
        if seen and all(isinstance(v, int) and not isinstance(v, bool) for v in seen):
            types.append("INTEGER")
        elif seen and all(isinstance(v, int | float) and not isinstance(v, bool) for v in seen):
            types.append("REAL")
        else:
            types.append("TEXT")
    typed = tuple(tuple(None if row[i] == "" else (row[i] if types[i] != "TEXT" or row[i] is None else str(row[i]))
                        for i in range(columns)) for row in values)
    return tuple(types), typed


def _csv_rows(data: bytes) -> list[list[Any]]:
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError:
        text = data.decode("latin-1")
    try:
        dialect = csv.Sniffer().sniff(text[:4096], delimiters=",;\t|")
    except csv.Error:
        dialect = csv.excel
    return [row for row in csv.reader(io.StringIO(text), dialect) if any(cell.strip() for cell in row)]


def _xlsx_rows(data: bytes) -> list[list[Any]]:
    try:
        import openpyxl
    except ImportError:
        raise TableFileError("XLSX files need the openpyxl package, which is not installed on this server") from None
    try:
        book = openpyxl.load_workbook(io.BytesIO(data), read_only=True, data_only=True)
    except Exception as exc:  # noqa: BLE001 - any unreadable workbook is the user's file's fault
        raise TableFileError(f"not a readable XLSX workbook ({type(exc).__name__})") from None
    try:
        sheet = book.worksheets[0]
        rows = []
        for row in sheet.iter_rows(values_only=True):
            if any(v not in (None, "") for v in row):
                rows.append([sql_kind.cell(v) for v in row])
            if len(rows) > MAX_TABLE_ROWS + 1:
                break
        return rows
    finally:
        book.close()


@functools.lru_cache(maxsize=64)
def parse_table(sha256: str, file_name: str, data: bytes) -> ParsedTable:
    """The table in a CSV or XLSX file (first row: column names); cached by checksum and name."""
    del sha256  # the cache key: the same bytes parse the same
    rows = _xlsx_rows(data) if file_name.lower().endswith(".xlsx") else _csv_rows(data)
    if not rows:
        raise TableFileError(f"{file_name} holds no rows; the first row must name the columns")
    header, body = rows[0], rows[1:]
    if len(header) > MAX_COLUMNS:
        raise TableFileError(f"{file_name} has {len(header)} columns; at most {MAX_COLUMNS} are accepted")
    if len(body) > MAX_TABLE_ROWS:
        raise TableFileError(f"{file_name} has more than {MAX_TABLE_ROWS:,} rows")
    columns = _column_names(header)
    types, typed = _typed(len(columns), body)
    return ParsedTable(table_name(file_name), columns, types, typed)


def _quoted(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


@contextmanager
def memory_database(tables: list[ParsedTable], time_limit: float) -> Iterator[sqlite3.Connection]:
    """An in-memory SQLite database holding `tables`, read only from then on, with a time limit."""
    connection = sqlite3.connect(":memory:", check_same_thread=False)
    try:
        for table in tables:
            columns = ", ".join(f"{_quoted(c)} {t}" for c, t in zip(table.columns, table.types, strict=True))
            connection.execute(f"CREATE TABLE {_quoted(table.name)} ({columns})")
            marks = ", ".join("?" for _ in table.columns)
            connection.executemany(f"INSERT INTO {_quoted(table.name)} VALUES ({marks})", table.rows)
        connection.commit()
        connection.execute("PRAGMA query_only = ON")
        deadline = time.monotonic() + time_limit
        connection.set_progress_handler(lambda: 1 if time.monotonic() > deadline else 0, 10_000)
        yield connection
    finally:
        connection.close()


def run_in_memory(tables: list[ParsedTable], sql: str, max_rows: int, time_limit: float) -> QueryResult:
    """Run a checked query over `tables` (at most `max_rows` rows; one more tells it was cut)."""
    with memory_database(tables, time_limit) as connection:
        cursor = connection.execute(sql)
        columns = [d[0] for d in cursor.description or ()]
        rows = cursor.fetchmany(max_rows + 1)
    return QueryResult(columns, [[sql_kind.cell(v) for v in row] for row in rows[:max_rows]], len(rows) > max_rows)


def run_on_connection(credentials: Credentials, sql: str, max_rows: int, time_limit: float) -> QueryResult:
    """Run a checked query on the connection's database, read only, within `time_limit` seconds."""
    with sql_kind.read_only(credentials, time_limit) as connection:
        return sql_kind.fetch(connection, sql, max_rows)


def connection_schema(credentials: Credentials, tables: list[str]) -> list[TableSchema]:
    """The allow-listed tables of the connection's database that exist, with their columns."""
    with sql_kind.read_only(credentials, sql_kind.CONNECT_TIMEOUT_SECONDS) as connection:
        found = sql_kind.table_columns(connection, tables)
    return [TableSchema(name, columns) for name, columns in found.items()]


def dialect_of(credentials: Credentials | None) -> str:
    """The sqlglot dialect the statements are checked in."""
    if credentials is None:
        return "sqlite"
    return sql_kind.SQLGLOT_DIALECTS.get(str(credentials.settings.get("dialect")), "sqlite")
