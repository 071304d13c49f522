"""Read-only SQL checked before it reaches a database (backend/sqlguard.py, for issue 22's chatbot).

What passes is run against a real SQLite database; what is refused says why, and a write never
changes the data."""

from __future__ import annotations

import sqlite3

import pytest

from backend.sqlguard import SqlRefused, check_read_only

ALLOWED = {"orders", "customers", "sales.invoices"}


@pytest.fixture
def db(tmp_path):
    path = tmp_path / "shop.db"
    with sqlite3.connect(path) as connection:
        connection.executescript(
            "CREATE TABLE customers (id INTEGER PRIMARY KEY, name TEXT);"
            "CREATE TABLE orders (id INTEGER PRIMARY KEY, customer_id INTEGER, amount REAL);"
            "CREATE TABLE users (id INTEGER PRIMARY KEY, password TEXT);"
            "INSERT INTO customers VALUES (1, 'Anna'), (2, 'Ben');"
            "INSERT INTO users VALUES (1, 'secret');")
        connection.executemany("INSERT INTO orders (customer_id, amount) VALUES (?, ?)",
                               [(1 + i % 2, 10.0 * i) for i in range(1, 51)])
    return path


def run(db, sql: str, max_rows: int = 1000) -> list[tuple]:
    query = check_read_only(sql, "sqlite", ALLOWED, max_rows)
    with sqlite3.connect(f"file:{db}?mode=ro", uri=True) as connection:
        return connection.execute(query.sql).fetchall()


def test_reading_queries_run_with_the_row_limit(db):
    assert run(db, "select name, count(*) from orders join customers on customers.id = orders.customer_id "
                   "group by name order by name") == [("Anna", 25), ("Ben", 25)]
    assert len(run(db, "SELECT * FROM orders", max_rows=10)) == 10  # no LIMIT: the limit is added
    assert len(run(db, "SELECT * FROM orders LIMIT 50000", max_rows=7)) == 7  # a larger one is lowered
    assert len(run(db, "SELECT * FROM orders LIMIT 3", max_rows=7)) == 3  # a smaller one stays
    assert len(run(db, "SELECT id FROM orders UNION SELECT id FROM customers", max_rows=5)) == 5
    assert run(db, "WITH big AS (SELECT * FROM orders WHERE amount > 480) SELECT count(*) FROM big") == [(2,)]
    assert run(db, "SELECT 2 + 2") == [(4,)]
    checked = check_read_only("SELECT * FROM sales.invoices", "postgres", ALLOWED, 100)
    assert checked.tables == ("sales.invoices",) and checked.sql == "SELECT * FROM sales.invoices LIMIT 100"


@pytest.mark.parametrize(("sql", "why"), [
    ("DELETE FROM orders", "only SELECT queries are accepted, not DELETE"),
    ("UPDATE orders SET amount = 0", "not UPDATE"),
    ("INSERT INTO orders SELECT * FROM orders", "not INSERT"),
    ("DROP TABLE orders", "not DROP"),
    ("PRAGMA table_info(orders)", "not PRAGMA"),
    ("SELECT * FROM orders; DROP TABLE orders", "exactly one statement is accepted, not 2"),
    ("SELECT * FROM users", "table 'users' may not be read; allowed: customers, orders, sales.invoices"),
    ("SELECT * FROM orders WHERE customer_id IN (SELECT id FROM users)", "table 'users' may not be read"),
    ("SELECT * FROM sqlite_master", "table 'sqlite_master' may not be read"),
    ("SELECT load_extension('evil') FROM orders", "the function load_extension() is not accepted"),
    ("SELECT * FROM json_each('[1]')", "table functions are not accepted"),
    ("SELEC * FRM orders", "the text does not read as one"),
    ("", "the query is empty"),
])
def test_what_is_refused_says_why_and_changes_nothing(db, sql, why):
    with pytest.raises(SqlRefused, match=why.replace("(", r"\(").replace(")", r"\)")):
        check_read_only(sql, "sqlite", ALLOWED)
    assert run(db, "SELECT count(*) FROM orders") == [(50,)]


@pytest.mark.parametrize(("sql", "dialect", "why"), [
    ("SELECT * INTO copy FROM orders", "postgres", "SELECT … INTO writes a table"),
    ("SELECT * FROM orders FOR UPDATE", "postgres", "locking clauses"),
    ("SELECT pg_sleep(10) FROM orders", "postgres", "pg_sleep() is not accepted"),
    ("WITH gone AS (DELETE FROM orders RETURNING *) SELECT * FROM gone", "postgres", "contains a DELETE"),
    ("SELECT sleep(5) FROM orders", "mysql", "sleep() is not accepted"),
    ("SELECT * FROM orders", "oracle", "unknown SQL dialect 'oracle'"),
])
def test_other_dialects_refuse_their_own_ways_to_write_or_stall(sql, dialect, why):
    with pytest.raises(SqlRefused, match=why.replace("(", r"\(").replace(")", r"\)")):
        check_read_only(sql, dialect, ALLOWED)
