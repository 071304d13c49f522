"""Read-only SQL, checked before it reaches a database (issue 22's `chatbot.queryDatabase`).

A statement written by a model or a stranger is parsed with sqlglot in the database's dialect and
refused, naming why, unless it is exactly one query that only reads: a SELECT (with its WITH,
UNION/INTERSECT/EXCEPT, subqueries and joins) over allow-listed tables only, without SELECT … INTO,
locking clauses or functions that reach outside the database or stall it. The query that runs is
sqlglot's rendering of the checked tree with a row limit on the outermost query, never the text
as sent. Executing it read-only (a read-only transaction, a statement timeout, a read-only SQLite
connection) is the caller's second line of defence, not a replacement for this check.
"""

from __future__ import annotations

from dataclasses import dataclass

import sqlglot
from sqlglot import exp
from sqlglot.errors import ParseError

DIALECTS = ("sqlite", "postgres", "mysql")
MAX_SQL_CHARS = 20_000
# Functions that read files, reach other servers, change settings or stall: refused by name.
FORBIDDEN_FUNCTIONS = frozenset({
    "load_extension", "readfile", "writefile", "edit", "fts3_tokenizer",  # SQLite
    "pg_sleep", "pg_sleep_for", "pg_sleep_until", "pg_read_file", "pg_read_binary_file", "pg_ls_dir",
    "pg_stat_file", "lo_import", "lo_export", "lo_get", "lo_put", "dblink", "dblink_exec", "set_config",
    "pg_terminate_backend", "pg_cancel_backend", "pg_reload_conf", "pg_advisory_lock", "pg_notify",
    "current_setting", "query_to_xml", "txid_current",  # PostgreSQL
    "sleep", "benchmark", "load_file", "get_lock", "release_lock", "master_pos_wait", "sys_exec", "sys_eval",
})
# Statement kinds that write, define, grant or change the session: never a query.
_QUERY_ROOTS = (exp.Select, exp.Union, exp.Intersect, exp.Except, exp.Subquery)
_STATEMENTS = (exp.Insert, exp.Update, exp.Delete, exp.Merge, exp.Create, exp.Drop, exp.Alter, exp.Command,
               exp.Set, exp.Transaction, exp.Commit, exp.Rollback, exp.Copy, exp.Pragma, exp.Grant)


class SqlRefused(ValueError):
    """The statement is not a read-only query over the allowed tables; the message says why."""


@dataclass(frozen=True)
class CheckedQuery:
    """A query that passed the check.

    Attributes:
        sql: The query to run, rendered from the checked tree in the dialect, with the row limit.
        tables: The allow-listed tables it reads (lower case, as named in the allow-list; none for a
            query of constants).
        limit: The row limit it carries.
    """

    sql: str
    tables: tuple[str, ...]
    limit: int


def check_read_only(sql: str, dialect: str, allowed_tables: set[str] | frozenset[str],
                    max_rows: int = 1000) -> CheckedQuery:
    """Check `sql` and return the query to run (:class:`CheckedQuery`).

    Args:
        sql: The statement as written.
        dialect: sqlite, postgres or mysql.
        allowed_tables: The tables it may read, as `table` or `schema.table` (case-insensitive).
        max_rows: The most rows it may return; a larger or missing LIMIT becomes this one.

    Raises:
        SqlRefused: not exactly one read-only query over the allowed tables, or not valid SQL.
    """
    if dialect not in DIALECTS:
        raise SqlRefused(f"unknown SQL dialect {dialect!r}; expected one of {', '.join(DIALECTS)}")
    if not isinstance(sql, str) or not sql.strip():
        raise SqlRefused("the query is empty")
    if len(sql) > MAX_SQL_CHARS:
        raise SqlRefused(f"the query has {len(sql):,} characters; at most {MAX_SQL_CHARS:,} are accepted")
    tree = _one_statement(sql, dialect)
    _only_reads(tree)
    tables = _tables_read(tree, {t.lower() for t in allowed_tables})
    limited = _with_limit(tree, max_rows)
    return CheckedQuery(limited.sql(dialect=dialect), tables, max_rows)


def _one_statement(sql: str, dialect: str) -> exp.Expression:
    try:
        statements = [s for s in sqlglot.parse(sql, dialect=dialect) if s is not None]
    except ParseError as exc:
        first = exc.errors[0] if exc.errors else {}
        where = f" (line {first.get('line')}, column {first.get('col')})" if first.get("line") else ""
        raise SqlRefused(f"the query is not valid SQL{where}: {first.get('description') or exc}") from None
    if len(statements) != 1:
        raise SqlRefused(f"exactly one statement is accepted, not {len(statements)}")
    return statements[0]


def _only_reads(tree: exp.Expression) -> None:
    """Refuse anything but a query, and queries that write, lock or reach outside."""
    if not isinstance(tree, _QUERY_ROOTS):
        if isinstance(tree, _STATEMENTS):
            raise SqlRefused(f"only SELECT queries are accepted, not {tree.key.upper()}")
        raise SqlRefused("only SELECT queries are accepted; the text does not read as one")
    for node in tree.walk():
        if isinstance(node, _STATEMENTS):
            raise SqlRefused(f"the query contains a {node.key.upper()} statement; only reading is accepted")
        if isinstance(node, exp.Into):
            raise SqlRefused("SELECT … INTO writes a table; only reading is accepted")
        if isinstance(node, exp.Lock):
            raise SqlRefused("locking clauses (FOR UPDATE / FOR SHARE) are not accepted")
        if isinstance(node, exp.Func):
            name = (node.name if isinstance(node, exp.Anonymous) else node.sql_name()).lower()
            if name in FORBIDDEN_FUNCTIONS:
                raise SqlRefused(f"the function {name}() is not accepted in queries")


def _tables_read(tree: exp.Expression, allowed: set[str]) -> tuple[str, ...]:
    """The allow-listed tables the query reads; refuses any other table (CTE names excepted)."""
    ctes = {cte.alias_or_name.lower() for cte in tree.find_all(exp.CTE)}
    found: list[str] = []
    for table in tree.find_all(exp.Table):
        if not table.name:  # a table function such as generate_series(…) or json_each(…)
            raise SqlRefused(f"table functions are not accepted ({table.sql()[:80]})")
        name = table.name.lower()
        qualified = f"{table.db.lower()}.{name}" if table.db else name
        if not table.db and name in ctes:
            continue
        if qualified not in allowed and not (table.db == "" and name in allowed):
            raise SqlRefused(f"table {qualified!r} may not be read; allowed: {', '.join(sorted(allowed)) or 'none'}")
        if qualified not in found:
            found.append(qualified)
    return tuple(found)  # none: a query of constants such as SELECT 2 + 2


def _with_limit(tree: exp.Expression, max_rows: int) -> exp.Expression:
    """The tree with LIMIT max_rows on its outermost query (a smaller LIMIT stays)."""
    if max_rows < 1:
        raise SqlRefused("the row limit must be at least 1")
    current = tree.args.get("limit")
    if current is not None:
        value = current.expression if isinstance(current, exp.Limit) else None
        if isinstance(value, exp.Literal) and value.is_int and int(value.this) <= max_rows:
            return tree
    if isinstance(tree, exp.Select):
        return tree.limit(max_rows, copy=True)
    # UNION/INTERSECT/EXCEPT or a parenthesised query: limit the whole result.
    return exp.select("*").from_(tree.subquery("limited")).limit(max_rows)
