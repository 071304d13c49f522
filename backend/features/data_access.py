"""Read-only access to the DATA tables of one feature instance, for Feature Data Agents (spec §5.4).

A feature declares its tables by name in DATA_TABLES (e.g. `workflow`, `file`); this module
maps each name to its model, to how its rows belong to an instance and to who "owns" a row.
Every read goes through :func:`open_instance_data`, which checks on the server, every time:

- the instance exists, lies in the caller's mandate and the caller may open it (else NotFound,
  the same answer as for a missing id);
- the table is one of the feature's DATA_TABLES and the caller's DATA read level on
  `data.feature.<featureCode>.<table>` is not `none` (else "table not found": a table the caller
  may not read is not revealed);
- rows are those of the instance only; with `own` only rows the caller created (the one own/all
  rule, backend.rbac.access.owner_filter, over each table's owner column or its parent's).

Secret columns (password and token hashes, encrypted secrets, nonces, file bytes) are never
selected: an explicit deny list, name patterns and binary column types exclude them, together
with the scope columns (mandate_id, feature_instance_id) and bookkeeping (lock_version).

Queries are SQLAlchemy expressions with bound parameters (never SQL strings) and only SELECT.
:func:`describe_tables` renders the schema for a sub-agent's system prompt.
"""

from __future__ import annotations

import importlib
import json
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import UTC, date, datetime
from decimal import Decimal
from typing import Any

from sqlalchemy import JSON, Boolean, Date, DateTime, Float, Integer, Numeric, String, cast, func, literal, select
from sqlalchemy import types as sqltypes
from sqlalchemy.sql.elements import ColumnElement
from sqlmodel import Session, SQLModel

from backend.db.models import (
    AgentChat,
    FeatureInstance,
    HumanTask,
    StoredFile,
    User,
    Workflow,
    WorkflowRun,
    WorkflowVersion,
)
from backend.errors import FieldError, InvalidInput, NotFound
from backend.features.registry import FeatureDefinition, get_feature
from backend.rbac.access import AccessContext, owner_filter
from backend.rbac.rights import Level

# The names under which agents see the featureData actions (backend/actions/methods/feature_data.py).
TOOL_NAMES = ("featureData_listTables", "featureData_browseTable", "featureData_queryTable")
DEFAULT_CELL_CHARS = 300
MAX_CELL_CHARS = 4_000
MAX_IN_VALUES = 100

# --- what is never shown ---------------------------------------------------------------------------

# Bare column names, or `table.column` for one table only.
SECRET_COLUMNS = frozenset({
    "password_hash", "token_hash", "code_hash", "state_hash", "nonce", "code_verifier", "secret",
    "client_secret", "api_key", "encrypted_secret", "credentials",
    # File contents: read through the core file tools, never as table cells.
    "stored_file_data.content", "stored_file_data.text_content",
})
SECRET_PATTERN = re.compile(
    r"(^|_)(password|passwd|pwd|secret|credentials?|api_?key|private_?key|salt|nonce|verifier)(_|$)"
    r"|(^|_)(hash|digest)$|(^|_)token$|(access|refresh|id|auth|bearer|session)_token"
    r"|encrypt|cipher",
    re.IGNORECASE,
)
SCOPE_COLUMNS = frozenset({"mandate_id", "feature_instance_id"})
INTERNAL_COLUMNS = frozenset({"lock_version"})

COMMON_NOTES = {
    "id": "unique id of the row",
    "sys_created_by": "id of the user who created the row",
    "sys_created_at": "when the row was created",
    "sys_modified_at": "when the row was last changed",
}


def is_secret_column(table_name: str, column: Any) -> bool:
    """True for columns that must never leave the server (by name, pattern or binary type)."""
    name = column.name
    if name in SECRET_COLUMNS or f"{table_name}.{name}" in SECRET_COLUMNS or SECRET_PATTERN.search(name):
        return True
    try:
        return _base_type(column.type).python_type is bytes
    except NotImplementedError:
        return False


def _base_type(sql_type: Any) -> Any:
    return sql_type.impl_instance if isinstance(sql_type, sqltypes.TypeDecorator) else sql_type


def column_kind(column: Any) -> str:
    """A short type name for the agent: string, text, integer, number, boolean, datetime, json."""
    sql_type = _base_type(column.type)
    if isinstance(sql_type, JSON):
        return "json"
    if isinstance(sql_type, Boolean):
        return "boolean"
    if isinstance(sql_type, Integer):
        return "integer"
    if isinstance(sql_type, Float | Numeric):
        return "number"
    if isinstance(sql_type, DateTime):
        return "datetime"
    if isinstance(sql_type, Date):
        return "date"  # a calendar date (e.g. a booking date): compared with YYYY-MM-DD
    if isinstance(sql_type, sqltypes.Text):
        return "text"
    if isinstance(sql_type, String):
        return "string"
    return "string"


# --- the tables ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Link:
    """A column of this table that points at a parent row: `fk` → parent.id, filtered on the parent's `column`."""

    fk: str
    parent: type[SQLModel]
    column: str


@dataclass(frozen=True)
class DataTable:
    """How one DATA table name maps onto the database.

    Attributes:
        name: the DATA table name as features declare it (`data.feature.<code>.<name>`).
        model: the SQLModel class holding the rows.
        description: one sentence for the agent.
        instance_column: column naming the feature instance, or None when `instance_via` is used.
        instance_via: the parent row that carries the instance (workflow_version → workflow).
        owner_column: column naming the creator, for the `own` read level.
        owner_via: the parent row that carries the creator (human_task → the run's starter).
        default_order: column and direction the rows are listed in when no order is given.
        notes: what columns mean, where the name does not say it.
    """

    name: str
    model: type[SQLModel]
    description: str
    instance_column: str | None = "feature_instance_id"
    instance_via: Link | None = None
    owner_column: str | None = "sys_created_by"
    owner_via: Link | None = None
    default_order: tuple[str, bool] = ("sys_created_at", True)
    notes: dict[str, str] = field(default_factory=dict)

    @property
    def sql_table(self) -> Any:
        return self.model.__table__

    def columns(self) -> list[Any]:
        """The columns an agent may see, in table order."""
        return [c for c in self.sql_table.columns
                if c.name not in SCOPE_COLUMNS | INTERNAL_COLUMNS and not is_secret_column(self.sql_table.name, c)]

    def note(self, column_name: str) -> str:
        return self.notes.get(column_name) or COMMON_NOTES.get(column_name, "")

    def instance_condition(self, instance: FeatureInstance) -> ColumnElement[bool]:
        table = self.sql_table
        if self.instance_column:
            condition = table.c[self.instance_column] == instance.id
            if "mandate_id" in table.c:
                condition = condition & (table.c.mandate_id == instance.mandate_id)
            return condition
        if self.instance_via is None:
            raise ValueError(f"data table {self.name} has neither instance_column nor instance_via")
        via = self.instance_via
        parent = via.parent.__table__
        parents = select(parent.c.id).where(parent.c[via.column] == instance.id)
        if "mandate_id" in parent.c:
            parents = parents.where(parent.c.mandate_id == instance.mandate_id)
        return table.c[via.fk].in_(parents)

    def owner(self) -> Any:
        """The expression naming a row's creator: its owner column, or its parent's (a correlated
        subquery); NULL when the table cannot tell (then `own` sees nothing)."""
        table = self.sql_table
        if self.owner_column:
            return table.c[self.owner_column]
        if self.owner_via is not None:
            parent = self.owner_via.parent.__table__
            return (select(parent.c[self.owner_via.column])
                    .where(parent.c.id == table.c[self.owner_via.fk]).scalar_subquery())
        return literal(None, String)


@dataclass(frozen=True)
class _Owned:
    """What backend.rbac.access.owner_filter narrows on: the rows' creator (`sys_created_by`)."""

    sys_created_by: Any


# The platform's tables, by DATA table name. A feature may add or override entries with a
# `DATA_TABLE_SPECS = {name: DataTable(...)}` in its main.py.
PLATFORM_TABLES: dict[str, DataTable] = {t.name: t for t in (
    DataTable(
        "workflow", Workflow, "Automations of this instance; their graphs are in workflow_version.",
        default_order=("sys_modified_at", True),
        notes={"name": "name, unique within the instance", "description": "what the workflow is for",
               "active": "true when its triggers (schedule, events) are switched on",
               "event_id": "event the workflow listens to, if any",
               "execution_logs": "audit trail of changes (newest last, at most 50 entries)"},
    ),
    DataTable(
        "workflow_version", WorkflowVersion,
        "Numbered graphs of each workflow: at most one draft and one published version, older ones archived.",
        instance_column=None, instance_via=Link("workflow_id", Workflow, "feature_instance_id"),
        notes={"workflow_id": "the workflow (workflow.id)", "version_number": "1, 2, 3 … per workflow",
               "status": "draft, published or archived",
               "graph": "the nodes and edges of the workflow ({nodes: [...], edges: [...]})",
               "published_at": "when it was published"},
    ),
    DataTable(
        "workflow_run", WorkflowRun, "Executions of workflow versions with their input, output and outcome.",
        default_order=("started_at", True),
        notes={"workflow_id": "the workflow (workflow.id)", "version_id": "the version run (workflow_version.id)",
               "status": "running, paused, completed, failed or cancelled",
               "pause_reason": "why a paused run waits: humanTask, email, wait (timer) or step (debugger)",
               "mode": "full or step (step-by-step debugging)",
               "trigger": "kind of trigger that started it, e.g. manual, schedule, event",
               "input": "the run's input", "output": "the run's result", "error": "why it failed",
               "context": "outputs of the nodes executed so far", "sys_created_by": "id of the user who started it",
               "started_at": "when it started", "finished_at": "when it ended (empty while running or paused)"},
    ),
    DataTable(
        "human_task", HumanTask, "Steps of runs waiting for a person: approvals and forms to fill.",
        owner_column=None, owner_via=Link("run_id", WorkflowRun, "sys_created_by"),
        notes={"run_id": "the run waiting for it (workflow_run.id)", "node_id": "the node of the graph",
               "kind": "approval or form", "title": "what is asked", "message": "details for the person",
               "fields": "form fields to fill", "assignee": "who should decide (users or roles)",
               "status": "pending, completed, expired or cancelled", "data": "the answer given",
               "due_at": "deadline, if any", "on_timeout": "at the deadline: cancel or default (use defaults)",
               "completed_by": "id of the user who completed or cancelled it", "sys_created_at": "when it was created",
               "finished_at": "when it was completed, cancelled or expired"},
    ),
    DataTable(
        "file", StoredFile, "Files in the instance's file store (metadata only; read contents with the core tools).",
        default_order=("sys_modified_at", True),
        notes={"folder_id": "id of the folder it is in (empty: root folder)", "name": "file name",
               "mime_type": "content type, e.g. text/plain", "size_bytes": "size in bytes",
               "sha256": "SHA-256 checksum of the contents", "has_text": "false for binary files without text"},
    ),
    DataTable(
        "chat", AgentChat, "Conversations with the AI agent of this instance (their turns are agent runs).",
        default_order=("sys_modified_at", True),
        notes={"title": "the first line of the conversation's first question",
               "sys_created_by": "id of the user who chats", "sys_modified_at": "when it was last continued"},
    ),
)}


def tables_of(feature: FeatureDefinition) -> list[DataTable]:
    """The feature's DATA_TABLES that map onto a model, in declaration order."""
    overrides: dict[str, DataTable] = {}
    if feature.package:
        main = importlib.import_module(f"{feature.package}.main")
        overrides = dict(getattr(main, "DATA_TABLE_SPECS", {}) or {})
    found = []
    for name in feature.data_tables:
        spec = overrides.get(name) or PLATFORM_TABLES.get(name)
        if spec is not None:
            found.append(spec)
    return found


# --- the caller's view of one instance -------------------------------------------------------------


@dataclass(frozen=True)
class ReadableTable:
    """A table the caller may read, with their level (own or all)."""

    table: DataTable
    level: Level

    @property
    def only_own(self) -> bool:
        """Whether the caller reads only the rows they created (says the schema text)."""
        return self.level == Level.OWN


@dataclass
class InstanceData:
    """The tables of one feature instance as one user may read them."""

    session: Session
    user: User
    instance: FeatureInstance
    feature: FeatureDefinition
    readable: dict[str, ReadableTable]

    # --- tables ---

    def table(self, name: Any, field_name: str = "table") -> ReadableTable:
        if isinstance(name, str) and name in self.readable:
            return self.readable[name]
        known = ", ".join(self.readable) or "none"
        raise NotFound(f"{field_name}: table '{name}' not found in this {self.feature.label} instance; "
                       f"tables you can read: {known}")

    def column(self, readable: ReadableTable, name: Any, field_name: str) -> Any:
        """The visible column `name` (snake_case, or its camelCase spelling), else InvalidInput naming both."""
        columns = {c.name: c for c in readable.table.columns()}
        if isinstance(name, str):
            key = name if name in columns else _snake(name)
            if key in columns:
                return columns[key]
        raise InvalidInput([FieldError(field_name, (
            f"unknown column '{name}' in table {readable.table.name}; columns: {', '.join(columns)}"))])

    # --- queries ---

    def narrow(self, readable: ReadableTable, query: Any) -> Any:
        """`query` over the table narrowed to the rows this caller may read: the instance's, and
        by the own/all rule (owner_filter) on the table's creator."""
        table = readable.table
        query = query.where(table.instance_condition(self.instance))
        return owner_filter(query, _Owned(table.owner()), readable.level, self.user.id)

    def count(self, readable: ReadableTable, extra: Iterable[ColumnElement[bool]] = ()) -> int:
        query = select(func.count()).select_from(readable.table.sql_table).where(*extra)
        return int(self.session.execute(self.narrow(readable, query)).scalar_one())

    def rows(self, readable: ReadableTable, columns: list[Any], where: Iterable[ColumnElement[bool]] = (),
             order_by: Any = None, descending: bool | None = None, limit: int = 20, offset: int = 0,
             cell_chars: int = DEFAULT_CELL_CHARS) -> tuple[list[dict[str, Any]], bool]:
        """Rows as JSON-safe dicts, and whether a cell was shortened."""
        table = readable.table
        sql_table = table.sql_table
        if order_by is None:
            order_by = sql_table.c[table.default_order[0]]
            descending = table.default_order[1] if descending is None else descending
        if column_kind(order_by) == "json":
            raise InvalidInput([FieldError("orderBy", f"cannot order by the json column '{order_by.name}'")])
        ordering = [order_by.desc() if descending else order_by.asc()]
        primary = list(sql_table.primary_key.columns)
        ordering += [c.asc() for c in primary if c is not order_by]  # stable pages
        query = self.narrow(readable, select(*columns).where(*where)).order_by(*ordering).limit(limit).offset(offset)
        shortened = False
        found = []
        for row in self.session.execute(query).all():
            record = {}
            for column, value in zip(columns, row, strict=True):
                record[column.name], cut = json_cell(value, cell_chars)
                shortened = shortened or cut
            found.append(record)
        return found, shortened


def _snake(name: str) -> str:
    return re.sub(r"(?<!^)(?=[A-Z])", "_", name).lower()


def open_instance_data(session: Session, user: User, mandate_id: str | None, instance: FeatureInstance | str | None,
                       access: AccessContext | None = None) -> InstanceData:
    """The caller's view of an instance's tables, after every check (NotFound when not allowed)."""
    instance_id = instance.id if isinstance(instance, FeatureInstance) else instance
    if not instance_id:
        raise InvalidInput([FieldError("featureInstanceId",
                                       "feature data belongs to a feature instance and none was given")])
    access = access or AccessContext(session, user)
    found = access.require_instance(instance_id)
    if mandate_id is None or found.mandate_id != mandate_id:
        raise NotFound(f"feature instance {instance_id} not found")
    try:
        feature = get_feature(found.feature_code)
    except KeyError:
        raise NotFound(f"feature instance {instance_id} not found") from None
    readable = {}
    for table in tables_of(feature):
        level = access.data_level(feature.data_item(table.name), "read", found.mandate_id, found.id)
        if level != Level.NONE:
            readable[table.name] = ReadableTable(table, level)
    return InstanceData(session, user, found, feature, readable)


# --- values ----------------------------------------------------------------------------------------


def _shorten(text: str, limit: int) -> tuple[str, bool]:
    if len(text) <= limit:
        return text, False
    return f"{text[:limit]}… [shortened: {len(text):,} characters in total]", True


def json_cell(value: Any, limit: int = DEFAULT_CELL_CHARS) -> tuple[Any, bool]:
    """A cell as a JSON-safe value; long text and JSON are cut to `limit` characters with a note."""
    if value is None or isinstance(value, bool | int | float):
        return value, False
    if isinstance(value, datetime):
        return (value if value.tzinfo else value.replace(tzinfo=UTC)).isoformat(), False
    if isinstance(value, date):
        return value.isoformat(), False
    if isinstance(value, Decimal):
        return float(value), False
    if isinstance(value, bytes | bytearray | memoryview):
        return f"[{len(value):,} bytes]", False
    if isinstance(value, str):
        return _shorten(value, limit)
    text = json.dumps(value, ensure_ascii=False, default=str)
    if len(text) <= limit:
        return json.loads(text), False
    return _shorten(text, limit)


def coerce_value(column: Any, value: Any, field_name: str) -> Any:
    """`value` as the column's Python type (ISO strings for datetimes, numbers for integers)."""
    kind = column_kind(column)

    def bad(expected: str) -> InvalidInput:
        return InvalidInput([FieldError(field_name, f"column '{column.name}' is {kind}: expected {expected}, "
                                                    f"got {json.dumps(value)}")])

    if value is None:
        return None
    if kind == "date":
        try:
            return date.fromisoformat(str(value).strip()[:10])
        except ValueError:
            raise bad("a date as YYYY-MM-DD, e.g. 2025-07-01") from None
    if kind == "datetime":
        if not isinstance(value, str):
            raise bad("an ISO 8601 date or time such as 2024-05-01 or 2024-05-01T12:00:00Z")
        try:
            parsed = datetime.fromisoformat(value.strip())
        except ValueError:
            raise bad("an ISO 8601 date or time such as 2024-05-01 or 2024-05-01T12:00:00Z") from None
        return parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)
    if kind == "boolean":
        if isinstance(value, bool):
            return value
        if isinstance(value, str) and value.lower() in ("true", "false"):
            return value.lower() == "true"
        raise bad("true or false")
    if kind in ("integer", "number"):
        if isinstance(value, bool):
            raise bad("a number")
        if isinstance(value, int | float):
            if kind == "integer" and isinstance(value, float) and not value.is_integer():
                raise bad("a whole number")
            return int(value) if kind == "integer" else value
        try:
            return int(value) if kind == "integer" else float(value)
        except (TypeError, ValueError):
            raise bad("a number") from None
    if isinstance(value, bool | int | float):
        return str(value).lower() if isinstance(value, bool) else str(value)
    if isinstance(value, str):
        return value
    raise bad("a single value")


OPERATORS = ("=", "!=", "<", "<=", ">", ">=", "contains", "startsWith", "in", "isNull")


def condition(column: Any, op: str, value: Any, field_name: str) -> ColumnElement[bool]:
    """One filter as a SQLAlchemy expression with bound parameters."""
    kind = column_kind(column)
    if op not in OPERATORS:
        raise InvalidInput([FieldError(f"{field_name}.op",
                                       f"unknown operator '{op}'; use one of {', '.join(OPERATORS)}")])
    if op == "isNull":
        if value in (None, True, "true"):
            return column.is_(None)
        if value in (False, "false"):
            return column.is_not(None)
        raise InvalidInput([FieldError(f"{field_name}.value", "isNull takes true (is empty) or false (is not empty)")])
    if value is None:
        raise InvalidInput([FieldError(f"{field_name}.value", f"operator '{op}' needs a value; "
                                                              "to find empty cells use op isNull")])
    if op in ("contains", "startsWith"):
        if isinstance(value, list | dict):
            raise InvalidInput([FieldError(f"{field_name}.value", f"operator '{op}' takes one text value")])
        text = str(value).lower()
        target = func.lower(column if kind in ("string", "text") else cast(column, String))
        return target.contains(text, autoescape=True) if op == "contains" else target.startswith(
            text, autoescape=True)
    if kind == "json":
        raise InvalidInput([FieldError(f"{field_name}.op", (
            f"column '{column.name}' is json: only contains and isNull can be used on it"))])
    if op == "in":
        if not isinstance(value, list) or not value:
            raise InvalidInput([FieldError(f"{field_name}.value", "operator 'in' takes a non-empty list of values")])
        if len(value) > MAX_IN_VALUES:
            raise InvalidInput([FieldError(f"{field_name}.value",
                                           f"operator 'in' takes at most {MAX_IN_VALUES} values (got {len(value)})")])
        return column.in_([coerce_value(column, v, f"{field_name}.value[{i}]") for i, v in enumerate(value)])
    if isinstance(value, list | dict):
        raise InvalidInput([FieldError(f"{field_name}.value", f"operator '{op}' takes one value, not a list")])
    coerced = coerce_value(column, value, f"{field_name}.value")
    if op in ("<", "<=", ">", ">=") and kind == "boolean":
        raise InvalidInput([FieldError(f"{field_name}.op", f"column '{column.name}' is boolean: use = or !=")])
    return {
        "=": lambda: column == coerced,
        "!=": lambda: (column != coerced) | column.is_(None),
        "<": lambda: column < coerced,
        "<=": lambda: column <= coerced,
        ">": lambda: column > coerced,
        ">=": lambda: column >= coerced,
    }[op]()


# --- the schema for a prompt -----------------------------------------------------------------------


def describe_tables(session: Session, user: User, mandate_id: str | None, instance: FeatureInstance | str,
                    access: AccessContext | None = None, with_counts: bool = True) -> str:
    """The schema of the instance's tables that `user` may read, as text for a system prompt.

    Raises NotFound exactly when the tools would (instance unknown, foreign or not openable).
    """
    data = open_instance_data(session, user, mandate_id, instance, access)
    lines = [
        f'Feature instance "{data.instance.label}" of the feature {data.feature.label} '
        f"(featureCode {data.feature.code}, instance id {data.instance.id}).",
        f"Read its tables with the tools {', '.join(TOOL_NAMES)} (read-only). Use the table and column names "
        "exactly as written below. Times are ISO 8601 in UTC. Long text and json cells come back shortened. "
        f"Columns ending in _by hold user ids; your own user id is {user.id}.",
    ]
    if not data.readable:
        lines.append("")
        lines.append("Your roles allow you to read none of this instance's tables.")
        return "\n".join(lines)
    for name, readable in data.readable.items():
        table = readable.table
        head = f"## {name}: {table.description}"
        extras = []
        if with_counts:
            count = data.count(readable)
            extras.append(f"{count:,} {'row' if count == 1 else 'rows'} visible to you")
        if readable.only_own:
            extras.append("you may read only the rows you created")
        lines += ["", head + (f" ({'; '.join(extras)})" if extras else "")]
        for column in table.columns():
            note = table.note(column.name)
            lines.append(f"- {column.name} ({column_kind(column)})" + (f": {note}" if note else ""))
    return "\n".join(lines)
