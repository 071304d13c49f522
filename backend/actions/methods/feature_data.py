"""featureData toolbox: the read-only tools of a Feature Data Agent (spec §5.4).

They read the DATA tables of the ActionContext's feature instance only, with the caller's DATA
read rights on `data.feature.<featureCode>.<table>` (see backend.features.data_access, which
also renders the schema for the sub-agent's system prompt: `describe_tables`). Main agents are
never offered this toolbox; the sub-agent runner gives it to the Feature Data Agent.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field
from pydantic.alias_generators import to_camel
from sqlalchemy import func, select

from backend.actions.base import ActionContext, ActionParams, action
from backend.errors import FieldError, InvalidInput
from backend.features.data_access import (
    DEFAULT_CELL_CHARS,
    MAX_CELL_CHARS,
    MAX_IN_VALUES,
    InstanceData,
    ReadableTable,
    column_kind,
    condition,
    describe_tables,
    open_instance_data,
)

__all__ = ["browse_table", "describe_tables", "list_tables", "query_table"]

TOOLBOX = "featureData"
BROWSE_MAX = 100
QUERY_MAX = 200
TABLE_HELP = "Table name as listed by listTables, e.g. workflow_run"
CELL_HELP = (f"Cut text and json cells after this many characters (default {DEFAULT_CELL_CHARS}, "
             f"at most {MAX_CELL_CHARS})")


class _Output(BaseModel):
    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True)


def _open(context: ActionContext) -> InstanceData:
    return open_instance_data(context.session, context.user, context.mandate_id, context.feature_instance_id,
                              context.access)


def _order(data: InstanceData, readable: ReadableTable, order_by: str | None) -> Any:
    return data.column(readable, order_by, "orderBy") if order_by else None


def _note(shortened: bool, cell_chars: int) -> str | None:
    if not shortened:
        return None
    return (f"Some cells were longer than {cell_chars} characters and were shortened (marked '… [shortened: …]'); "
            f"select fewer columns with queryTable and raise maxCellChars (up to {MAX_CELL_CHARS}) to see more.")


# --- listTables ------------------------------------------------------------------------------------


class ColumnInfo(_Output):
    name: str
    type: str = Field(description="string, text, integer, number, boolean, date, datetime or json")
    description: str = ""


class TableInfo(_Output):
    name: str
    description: str
    access: Literal["all", "own"] = Field(description="own: only the rows you created are visible to you")
    row_count: int = Field(description="rows of this instance visible to you")
    columns: list[ColumnInfo]


class ListTablesOutput(_Output):
    feature_code: str
    instance_id: str
    instance_label: str
    tables: list[TableInfo]


@action("featureData.listTables", toolbox=TOOLBOX, label="List tables",
        description="List the tables of this feature instance you may read, with their columns (name, type, "
                    "meaning) and the number of rows visible to you.",
        output=ListTablesOutput, capabilities=("read",))
def list_tables(params: Any, context: ActionContext) -> ListTablesOutput:
    data = _open(context)
    tables = []
    for name, readable in data.readable.items():
        table = readable.table
        tables.append(TableInfo(
            name=name, description=table.description, access=str(readable.level), row_count=data.count(readable),
            columns=[ColumnInfo(name=c.name, type=column_kind(c), description=table.note(c.name))
                     for c in table.columns()],
        ))
    return ListTablesOutput(feature_code=data.feature.code, instance_id=data.instance.id,
                            instance_label=data.instance.label, tables=tables)


# --- browseTable -----------------------------------------------------------------------------------


class BrowseTableParams(ActionParams):
    table: str = Field(description=TABLE_HELP)
    limit: int = Field(20, ge=1, le=BROWSE_MAX, description=f"Rows per page (default 20, at most {BROWSE_MAX})")
    offset: int = Field(0, ge=0, description="Rows to skip (use nextOffset of the previous page)")
    order_by: str | None = Field(None, description="Column to sort by (default: the table's natural order, "
                                                   "usually newest first)")
    descending: bool | None = Field(None, description="Sort descending (default false when orderBy is given)")
    max_cell_chars: int = Field(DEFAULT_CELL_CHARS, ge=20, le=MAX_CELL_CHARS, description=CELL_HELP)


class RowsOutput(_Output):
    table: str
    columns: list[str]
    rows: list[dict[str, Any]]
    total: int = Field(description="rows matching in total (visible to you)")
    offset: int
    next_offset: int | None = Field(None, description="offset of the next page; null on the last page")
    note: str | None = None


def _page(data: InstanceData, readable: ReadableTable, columns: list[Any], where: list[Any], order_by: Any,
          descending: bool | None, limit: int, offset: int, cell_chars: int) -> RowsOutput:
    total = data.count(readable, where)
    rows, shortened = ([], False) if limit == 0 else data.rows(
        readable, columns, where, order_by, descending, limit, offset, cell_chars)
    following = offset + len(rows)
    return RowsOutput(table=readable.table.name, columns=[c.name for c in columns], rows=rows, total=total,
                      offset=offset, next_offset=following if rows and following < total else None,
                      note=_note(shortened, cell_chars))


@action("featureData.browseTable", toolbox=TOOLBOX, label="Browse table",
        description="Page through the rows of one table of this feature instance (all visible columns). "
                    "Returns the rows, the total and nextOffset for the next page.",
        params=BrowseTableParams, output=RowsOutput, capabilities=("read",))
def browse_table(params: BrowseTableParams, context: ActionContext) -> RowsOutput:
    data = _open(context)
    readable = data.table(params.table)
    order_by = _order(data, readable, params.order_by)
    return _page(data, readable, readable.table.columns(), [], order_by, params.descending, params.limit,
                 params.offset, params.max_cell_chars)


# --- queryTable ------------------------------------------------------------------------------------

Scalar = str | int | float | bool


class Filter(ActionParams):
    column: str = Field(description="Column name")
    op: Literal["=", "!=", "<", "<=", ">", ">=", "contains", "startsWith", "in", "isNull"] = Field(
        description="contains and startsWith ignore case; in takes a list; isNull takes true (empty) or false "
                    "(not empty); != also matches empty cells")
    value: Scalar | list[Scalar] | None = Field(
        None, description=f"Value to compare with (ISO 8601 for datetimes); a list of at most {MAX_IN_VALUES} for in")


class QueryTableParams(ActionParams):
    table: str = Field(description=TABLE_HELP)
    columns: list[str] | None = Field(None, description="Columns to return (default: all visible columns)")
    where: list[Filter] = Field(default_factory=list, description="Conditions that must all hold")
    order_by: str | None = Field(None, description="Column to sort by (default: the table's natural order)")
    descending: bool | None = Field(None, description="Sort descending (default false when orderBy is given)")
    limit: int = Field(50, ge=0, le=QUERY_MAX,
                       description=f"At most this many rows (default 50, at most {QUERY_MAX}; 0 only counts)")
    offset: int = Field(0, ge=0, description="Matching rows to skip (for the next page)")
    max_cell_chars: int = Field(DEFAULT_CELL_CHARS, ge=20, le=MAX_CELL_CHARS, description=CELL_HELP)
    sum: list[str] | None = Field(None, max_length=10,
                                  description="Number columns to total over ALL matching rows (not only this page); "
                                              "the totals come back in sums — use them instead of adding rows up")


class QueryRowsOutput(RowsOutput):
    sums: dict[str, float] | None = Field(None, description="column → total over all matching rows (with sum)")


@action("featureData.queryTable", toolbox=TOOLBOX, label="Query table",
        description="Find rows of one table of this feature instance: choose columns, filter with conditions "
                    "(=, !=, <, <=, >, >=, contains, startsWith, in, isNull; all must hold), sort and limit. "
                    "Returns the matching rows and how many match in total (limit 0 only counts).",
        params=QueryTableParams, output=QueryRowsOutput, capabilities=("read",))
def query_table(params: QueryTableParams, context: ActionContext) -> RowsOutput:
    data = _open(context)
    readable = data.table(params.table)
    if params.columns:
        columns = []
        for index, name in enumerate(params.columns):
            column = data.column(readable, name, f"columns[{index}]")
            if column not in columns:
                columns.append(column)
    else:
        columns = readable.table.columns()
    where = [condition(data.column(readable, f.column, f"where[{i}].column"), f.op, f.value, f"where[{i}]")
             for i, f in enumerate(params.where)]
    order_by = _order(data, readable, params.order_by)
    page = _page(data, readable, columns, where, order_by, params.descending, params.limit, params.offset,
                 params.max_cell_chars)
    if not params.sum:
        return page
    totals = _sums(data, readable, params.sum, where)
    return QueryRowsOutput(**page.model_dump(), sums=totals)


def _sums(data: InstanceData, readable: ReadableTable, names: list[str], where: list[Any]) -> dict[str, float]:
    """The totals of number columns over every matching row the caller may read."""
    columns = []
    for index, name in enumerate(names):
        column = data.column(readable, name, f"sum[{index}]")
        if column_kind(column) not in ("integer", "number"):
            raise InvalidInput([FieldError(f"sum[{index}]", f"column '{column.name}' is {column_kind(column)}: "
                                                            "only number columns can be summed")])
        columns.append(column)
    query = select(*(func.coalesce(func.sum(c), 0) for c in columns)).select_from(readable.table.sql_table)
    row = data.session.execute(data.narrow(readable, query.where(*where))).one()
    return {c.name: round(float(v), 2) for c, v in zip(columns, row, strict=True)}

