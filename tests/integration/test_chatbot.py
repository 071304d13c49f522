"""The Chatbot (issue 22 part 2) over real databases: a SQLite file below POWERON_SQLITE_ROOT and a
PostgreSQL server, with the scripted model (tests/ai_server.py) calling chatbot_queryDatabase.

A write, several statements or a table not allowed is refused before it reaches the database: the
table stays as it was and, on PostgreSQL, the server's statement log never shows the statement.
"""

from __future__ import annotations

import io
import sqlite3
import uuid

import pytest

from backend.connectors.kinds import sql as sql_kind
from backend.connectors.types import ConnectionFailed, Credentials
from tests.integration.chatbot_helpers import (
    add_user,
    call,
    create_chatbot,
    default_mandate_id,
    final_text,
    shop_database,
    sqlite_rows,
    stream,
    tool_names,
    tool_results,
)

pytestmark = pytest.mark.parametrize("db_url", ["sqlite"], indirect=True)

WRITES = {
    "DELETE FROM products": "DELETE",
    "UPDATE products SET price = 0": "UPDATE",
    "INSERT INTO products VALUES ('Free', 0, 1)": "INSERT",
    "WITH gone AS (DELETE FROM products RETURNING *) SELECT * FROM gone": "DELETE",
    "SELECT * FROM products; DELETE FROM products": "exactly one statement",
    "DROP TABLE products": "DROP",
    "SELECT * FROM salaries": "'salaries' may not be read",
}


@pytest.fixture
def sqlite_root(tmp_path, monkeypatch):
    root = tmp_path / "databases"
    root.mkdir()
    monkeypatch.setenv("POWERON_SQLITE_ROOT", str(root))
    return root


def connect(api, settings: dict, label: str = "Shop DB", headers: dict | None = None):
    return api.client.post("/api/connections", json={"type": "sql", "label": label, "settings": settings},
                           headers=headers or api.auth)


def configure(api, instance_id: str, body: dict, headers: dict | None = None):
    return api.client.put(f"/api/chatbot/{instance_id}/settings", json=body, headers=headers or api.auth)


def query(api, instance_id: str, sql: str, headers: dict | None = None):
    return api.client.post(f"/api/chatbot/{instance_id}/query", json={"sql": sql}, headers=headers or api.auth)


def sqlite_chatbot(api, root) -> tuple[str, object]:
    db = shop_database(root / "shop.db")
    made = connect(api, {"dialect": "sqlite", "path": "shop.db"})
    assert made.status_code == 201, made.text
    instance_id = create_chatbot(api)
    configured = configure(api, instance_id, {
        "systemPrompt": "You are the shop's assistant. Answer with prices in CHF.", "dataSource": "connection",
        "connectionId": made.json()["id"], "allowedTables": ["products"], "rowLimit": 2})
    assert configured.status_code == 200, configured.text
    return instance_id, db


# --- SQLite: answering, refusing -----------------------------------------------------------------------


def test_the_chatbot_answers_from_an_external_sqlite_table(api, ai_server, sqlite_root):
    instance_id, db = sqlite_chatbot(api, sqlite_root)
    ai_server.reply(None, tool_calls=[call("chatbot_queryDatabase",
                                           {"sql": "SELECT name, price FROM products WHERE name = 'Lamp'"}, "q1")])
    ai_server.reply("The Lamp costs 42.5 CHF.")

    events = stream(api, instance_id, "What does the lamp cost?")

    assert final_text(events) == "The Lamp costs 42.5 CHF."
    first, second = ai_server.chat_requests
    assert "You are the shop's assistant" in first.system_text and "products(name" in first.system_text
    offered = tool_names(first)
    assert "chatbot_queryDatabase" in offered and "chatbot_listTables" in offered
    assert "requestToolbox" not in offered and "queryFeatureInstance" not in offered  # no escalation
    result = tool_results(second)["q1"]
    assert '"Lamp"' in result and "42.5" in result
    # The run is the chatbot profile's, and the chat is listed.
    runs = api.client.get(f"/api/chatbot/{instance_id}/agent/runs", headers=api.auth).json()
    assert runs[0]["profile"] == "chatbot" and runs[0]["answer"] == "The Lamp costs 42.5 CHF."
    assert sqlite_rows(db, "SELECT count(*) FROM products") == [(3,)]


def test_writes_and_other_tables_are_refused_before_they_reach_the_database(api, ai_server, sqlite_root):
    instance_id, db = sqlite_chatbot(api, sqlite_root)
    before = sqlite_rows(db, "SELECT * FROM products ORDER BY name")
    for sql, reason in WRITES.items():
        refused = query(api, instance_id, sql)
        assert refused.status_code == 422, (sql, refused.text)
        error = refused.json()["errors"][0]
        assert error["field"] == "sql" and "refused before it reached the database" in error["message"], sql
        assert reason in error["message"], (sql, error)
    assert sqlite_rows(db, "SELECT * FROM products ORDER BY name") == before

    # The model's write is refused the same way, and the model is told why.
    ai_server.reply(None, tool_calls=[call("chatbot_queryDatabase", {"sql": "DELETE FROM products"}, "w1")])
    ai_server.reply("I may only read the data.")
    assert final_text(stream(api, instance_id, "Delete all products")) == "I may only read the data."
    told = tool_results(ai_server.chat_requests[1])["w1"]
    assert "refused before it reached the database" in told and "DELETE" in told
    assert sqlite_rows(db, "SELECT * FROM products ORDER BY name") == before


def test_rows_are_cut_to_the_row_limit_with_a_note_and_slow_queries_stop(api, sqlite_root):
    instance_id, _db = sqlite_chatbot(api, sqlite_root)
    answer = query(api, instance_id, "SELECT name FROM products ORDER BY price").json()
    assert answer["rows"] == [["Lamp"], ["Chair"]] and answer["truncated"] is True
    assert "first 2 rows" in answer["note"]
    settings = api.client.get(f"/api/chatbot/{instance_id}/settings", headers=api.auth).json()
    configure(api, instance_id, {**{k: settings[k] for k in ("dataSource", "connectionId", "allowedTables")},
                                 "timeLimitSeconds": 0.3})
    slow = query(api, instance_id, "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c "
                                   "WHERE x < 500000000) SELECT count(*) FROM c")
    assert slow.status_code == 422 and "time limit of 0.3 s" in slow.text


def test_sqlite_files_only_below_the_configured_root(api, tmp_path, sqlite_root, monkeypatch):
    outside = shop_database(tmp_path / "outside.db")
    refused = connect(api, {"dialect": "sqlite", "path": str(outside)})
    assert refused.status_code == 422 and "below POWERON_SQLITE_ROOT" in refused.text
    escaping = connect(api, {"dialect": "sqlite", "path": "../outside.db"})
    assert escaping.status_code == 422 and "below POWERON_SQLITE_ROOT" in escaping.text
    missing = connect(api, {"dialect": "sqlite", "path": "nope.db"})
    assert missing.status_code == 422 and "no such file" in missing.text
    assert missing.json()["errors"][0]["field"] == "settings.path"
    # The platform's own database is never connected.
    monkeypatch.setenv("POWERON_SQLITE_ROOT", str(tmp_path))
    own = connect(api, {"dialect": "sqlite", "path": "poweron.db"})
    assert own.status_code == 422 and "platform's own database" in own.text
    monkeypatch.delenv("POWERON_SQLITE_ROOT")
    off = connect(api, {"dialect": "sqlite", "path": "shop.db"})
    assert off.status_code == 422 and "set POWERON_SQLITE_ROOT" in off.text
    bad_host = connect(api, {"dialect": "postgresql", "host": "db host/evil", "database": "x"})
    assert bad_host.status_code == 422 and bad_host.json()["errors"][0]["field"] == "settings.host"
    bad_port = connect(api, {"dialect": "postgresql", "host": "db.example.com", "port": 70000, "database": "x"})
    assert bad_port.status_code == 422 and bad_port.json()["errors"][0]["field"] == "settings.port"


def test_the_sqlite_connection_itself_is_read_only(app_config, sqlite_root):
    db = shop_database(sqlite_root / "shop.db")
    credentials = Credentials("c1", "sql", "Shop", {"dialect": "sqlite", "path": "shop.db"}, {})
    with sql_kind.read_only(credentials, 2) as connection, pytest.raises(Exception, match="readonly|read-only|query"):
        connection.exec_driver_sql("DELETE FROM products")
    assert sqlite_rows(db, "SELECT count(*) FROM products") == [(3,)]


# --- configuration: who, what -------------------------------------------------------------------------


def test_configuration_is_checked_and_only_for_those_who_may_configure(api, sqlite_root):
    instance_id = create_chatbot(api)
    mandate_id = default_mandate_id(api)
    empty = configure(api, instance_id, {"dataSource": "connection", "rowLimit": 0, "allowedTables": ["a b"]})
    assert empty.status_code == 422
    assert {e["field"] for e in empty.json()["errors"]} == {"rowLimit", "allowedTables"}
    unknown = configure(api, instance_id, {"dataSource": "connection", "connectionId": "nope",
                                           "allowedTables": ["products"]})
    assert unknown.status_code == 422 and unknown.json()["errors"][0]["field"] == "connectionId"
    defaults = api.client.get(f"/api/chatbot/{instance_id}/settings", headers=api.auth).json()
    assert defaults["rowLimit"] == 200 and defaults["timeLimitSeconds"] == 5 and defaults["dataSource"] == "tables"

    user = add_user("ursula", mandate_id, [], instance_id, ("chatbot-user",))
    assert configure(api, instance_id, {"systemPrompt": "x"}, headers=user).status_code == 403
    assert api.client.get(f"/api/chatbot/{instance_id}/settings", headers=user).status_code == 403
    # Another user's connection is not the configuring user's to choose.
    shop_database(sqlite_root / "shop.db")
    theirs = connect(api, {"dialect": "sqlite", "path": "shop.db"}, headers=user)
    assert theirs.status_code == 201, theirs.text
    foreign = configure(api, instance_id, {"dataSource": "connection", "connectionId": theirs.json()["id"],
                                           "allowedTables": ["products"]})
    assert foreign.status_code == 422 and "not found" in foreign.text


def test_a_foreign_instance_answers_404(api, sqlite_root):
    instance_id, _db = sqlite_chatbot(api, sqlite_root)
    other = api.client.post("/api/mandates", json={"name": "Other"}, headers=api.auth).json()["id"]
    stranger = add_user("stranger", other, ["admin"])
    base = f"/api/chatbot/{instance_id}"
    assert api.client.get(f"{base}/settings", headers=stranger).status_code == 404
    assert query(api, instance_id, "SELECT * FROM products", headers=stranger).status_code == 404
    assert api.client.post(f"{base}/agent", json={"prompt": "hi"}, headers=stranger).status_code == 404
    assert api.client.post(f"{base}/embed", headers=stranger).status_code == 404
    # A Workspace id is no Chatbot.
    me = api.client.get("/api/me", headers=api.auth).json()
    workspace = next(i["id"] for i in me["instances"] if i["featureCode"] == "workspace")
    assert api.client.get(f"/api/chatbot/{workspace}/settings", headers=api.auth).status_code == 404


# --- the "tables" data source ------------------------------------------------------------------------


def test_the_chatbot_answers_from_an_uploaded_csv(api, ai_server):
    instance_id = create_chatbot(api, "Sales bot")
    base = f"/api/chatbot/{instance_id}"
    csv_text = "City;Amount;Month\nZurich;1200.50;Jan\nBern;800;Jan\nZurich;300;Feb\n"
    uploaded = api.client.post(f"{base}/tables", files={"file": ("Sales 2024.csv", io.BytesIO(csv_text.encode()),
                                                                 "text/csv")}, headers=api.auth)
    assert uploaded.status_code == 201, uploaded.text
    assert uploaded.json()["table"] == "sales_2024"
    not_table = api.client.post(f"{base}/tables", files={"file": ("notes.txt", io.BytesIO(b"hi"), "text/plain")},
                                headers=api.auth)
    assert not_table.status_code == 422 and not_table.json()["errors"][0]["field"] == "file"
    schema = api.client.get(f"{base}/schema", headers=api.auth).json()
    assert schema == [{"name": "sales_2024", "rowCount": 3, "columns": [
        {"name": "city", "type": "TEXT"}, {"name": "amount", "type": "REAL"}, {"name": "month", "type": "TEXT"}]}]

    sql = "SELECT city, SUM(amount) AS total FROM sales_2024 GROUP BY city ORDER BY total DESC"
    ai_server.reply(None, tool_calls=[call("chatbot_queryDatabase", {"sql": sql}, "t1")])
    ai_server.reply("Zurich sold the most: 1500.5.")
    assert final_text(stream(api, instance_id, "Which city sold the most?")) == "Zurich sold the most: 1500.5."
    assert "sales_2024(city TEXT, amount REAL, month TEXT)" in ai_server.chat_requests[0].system_text
    assert '["Zurich", 1500.5]' in tool_results(ai_server.chat_requests[1])["t1"]
    refused = query(api, instance_id, "DELETE FROM sales_2024")
    assert refused.status_code == 422 and "DELETE" in refused.text
    assert query(api, instance_id, "SELECT count(*) FROM sales_2024").json()["rows"] == [[3]]


def test_an_uploaded_xlsx_is_a_table_too(api):
    openpyxl = pytest.importorskip("openpyxl")
    book = openpyxl.Workbook()
    book.active.append(["Product", "Stock"])
    book.active.append(["Lamp", 7])
    data = io.BytesIO()
    book.save(data)
    instance_id = create_chatbot(api, "Stock bot")
    uploaded = api.client.post(f"/api/chatbot/{instance_id}/tables",
                               files={"file": ("stock.xlsx", io.BytesIO(data.getvalue()), "application/octet-stream")},
                               headers=api.auth)
    assert uploaded.status_code == 201, uploaded.text
    assert query(api, instance_id, "SELECT product, stock FROM stock").json()["rows"] == [["Lamp", 7]]


# --- PostgreSQL --------------------------------------------------------------------------------------


@pytest.fixture
def shop_pg(postgres_server):
    """A database `shop_…` with `products` and `salaries`; every statement it receives is logged."""
    name = f"shop_{uuid.uuid4().hex[:8]}"
    postgres_server.execute(f'CREATE DATABASE "{name}"', f"ALTER DATABASE \"{name}\" SET log_statement = 'all'")
    import psycopg

    with psycopg.connect(host="127.0.0.1", port=postgres_server.port, user="postgres", dbname=name,
                         autocommit=True) as db:
        db.execute("CREATE TABLE products (name text, price numeric(10,2), stock integer)")
        db.execute("INSERT INTO products VALUES ('Lamp', 42.50, 7), ('Chair', 120, 3)")
        db.execute("CREATE TABLE salaries (person text, amount integer)")
    try:
        yield name
    finally:
        postgres_server.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def pg_count(postgres_server, database: str) -> int:
    import psycopg

    with psycopg.connect(host="127.0.0.1", port=postgres_server.port, user="postgres", dbname=database) as db:
        return db.execute("SELECT count(*) FROM products").fetchone()[0]


@pytest.mark.postgres
def test_the_chatbot_answers_from_postgresql_and_writes_never_reach_it(api, ai_server, postgres_server, shop_pg):
    made = connect(api, {"dialect": "postgresql", "host": "127.0.0.1", "port": postgres_server.port,
                         "database": shop_pg, "username": "postgres", "password": "unused-secret"})
    assert made.status_code == 201, made.text
    assert "unused-secret" not in made.text
    instance_id = create_chatbot(api, "PG bot")
    assert configure(api, instance_id, {"dataSource": "connection", "connectionId": made.json()["id"],
                                        "allowedTables": ["products"]}).status_code == 200
    marker = uuid.uuid4().hex[:10]
    ai_server.reply(None, tool_calls=[call("chatbot_queryDatabase", {
        "sql": f"SELECT name, price FROM products WHERE name = 'Lamp' AND '{marker}' = '{marker}'"}, "p1")])
    ai_server.reply("The Lamp costs 42.50 CHF.")
    assert final_text(stream(api, instance_id, "Price of the lamp?")) == "The Lamp costs 42.50 CHF."
    assert "products(name" in ai_server.chat_requests[0].system_text
    assert '["Lamp", 42.5]' in tool_results(ai_server.chat_requests[1])["p1"]

    for sql, reason in {**WRITES, f"DELETE FROM products WHERE name <> '{marker}-w'": "DELETE",
                        "SELECT pg_sleep(10)": "pg_sleep"}.items():
        refused = query(api, instance_id, sql)
        assert refused.status_code == 422 and reason in refused.text, (sql, refused.text)
    assert pg_count(postgres_server, shop_pg) == 2
    log = postgres_server.logfile.read_text(errors="replace")
    assert marker in log  # the allowed query was logged …
    assert f"{marker}-w" not in log and "DELETE FROM products" not in log  # … the refused ones never arrived
    assert "FROM salaries" not in log

    # The time limit is the server's statement_timeout.
    settings = api.client.get(f"/api/chatbot/{instance_id}/settings", headers=api.auth).json()
    configure(api, instance_id, {**{k: settings[k] for k in ("dataSource", "connectionId", "allowedTables")},
                                 "timeLimitSeconds": 0.3})
    slow = query(api, instance_id, "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c "
                                   "WHERE x < 500000000) SELECT count(*) FROM c")
    assert slow.status_code == 422 and "time limit of 0.3 s" in slow.text

    # The connection itself is read only too (the second line of defence).
    credentials = Credentials("c", "sql", "PG", {"dialect": "postgresql", "host": "127.0.0.1",
                                                 "port": postgres_server.port, "database": shop_pg,
                                                 "username": "postgres"}, {})
    with sql_kind.read_only(credentials, 2) as connection, pytest.raises(Exception, match="read-only"):
        connection.exec_driver_sql("DELETE FROM products")
    assert pg_count(postgres_server, shop_pg) == 2


@pytest.mark.postgres
def test_an_unreachable_server_is_refused_on_creation(api, postgres_server):
    refused = connect(api, {"dialect": "postgresql", "host": "127.0.0.1", "port": postgres_server.port,
                            "database": "no_such_database", "username": "postgres"})
    assert refused.status_code in (422, 502), refused.text
    assert "no_such_database" in refused.text
    with pytest.raises(ConnectionFailed):
        with sql_kind.read_only(Credentials("c", "sql", "x", {"dialect": "postgresql", "host": "127.0.0.1",
                                                              "port": 1, "database": "x"}, {}), 1):
            pass


def test_the_mysql_dialect_needs_its_driver(app_config):
    assert sql_kind.mysql_available()  # PyMySQL is pinned in requirements.txt
    assert sqlite3.sqlite_version


def test_query_database_as_a_graph_node_names_its_chatbot(api, sqlite_root):
    """In a workflow (the Graphical Editor's instance) the node names the Chatbot it queries; a user who
    may not open that Chatbot gets "not found", outside a Chatbot without an id a clear message."""
    from tests.integration.action_calls import run

    instance_id, _db = sqlite_chatbot(api, sqlite_root)
    found = run("chatbot.queryDatabase", {"sql": "SELECT name FROM products WHERE stock > 2 ORDER BY name",
                                          "chatbotInstanceId": instance_id}, instance_id=api.instance_id)
    assert found.ok, found.error
    assert found.output["rows"] == [["Chair"], ["Lamp"]]
    unnamed = run("chatbot.queryDatabase", {"sql": "SELECT 1"}, instance_id=api.instance_id)
    assert not unnamed.ok and "chatbotInstanceId" in unnamed.error
    write = run("chatbot.queryDatabase", {"sql": "DELETE FROM products", "chatbotInstanceId": instance_id},
                instance_id=api.instance_id)
    assert not write.ok and "refused before it reached the database" in write.error
    add_user("outsider", default_mandate_id(api), ["user"], api.instance_id, ("graphicalEditor-user",))
    hidden = run("chatbot.queryDatabase", {"sql": "SELECT 1", "chatbotInstanceId": instance_id},
                 username="outsider", instance_id=api.instance_id)
    assert not hidden.ok and "not found" in hidden.error
