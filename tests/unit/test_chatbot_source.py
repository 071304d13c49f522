"""The Chatbot's uploaded tables and the `sql` connection's settings (issue 22 part 2)."""

from __future__ import annotations

import hashlib
import sqlite3

import pytest
from pydantic import ValidationError

from backend.connectors.kinds.sql import SqlSettings, cell
from backend.errors import InvalidInput
from backend.features.chatbot import source
from backend.features.chatbot.config import parse_config, stored_config


def parsed(name: str, text: str) -> source.ParsedTable:
    data = text.encode()
    return source.parse_table(hashlib.sha256(data).hexdigest(), name, data)


def test_a_file_is_a_table_named_after_it():
    assert source.table_name("Sales 2024.csv") == "sales_2024"
    assert source.table_name("2024-orders.xlsx") == "t_2024_orders"
    assert source.is_table_file("a.CSV") and source.is_table_file("b.xlsx") and not source.is_table_file("c.txt")


def test_csv_columns_are_named_and_typed_by_their_values():
    table = parsed("people.csv", "Name;Age;Score;Age\nAnna;34;1.5;x\nBen;;2;y\n")
    assert table.columns == ("name", "age", "score", "age_2")
    assert table.types == ("TEXT", "INTEGER", "REAL", "TEXT")
    assert table.rows == (("Anna", 34, 1.5, "x"), ("Ben", None, 2, "y"))


def test_an_empty_file_is_refused_saying_why():
    with pytest.raises(source.TableFileError, match="no rows"):
        parsed("empty.csv", "\n\n")


def test_the_memory_database_is_read_only_and_stops_at_its_time_limit():
    table = parsed("nums.csv", "n\n1\n2\n3\n")
    result = source.run_in_memory([table], "SELECT n FROM nums ORDER BY n LIMIT 3", 2, 5)
    assert result.columns == ["n"] and result.rows == [[1], [2]] and result.truncated
    with source.memory_database([table], 5) as db, pytest.raises(sqlite3.OperationalError, match="readonly"):
        db.execute("DELETE FROM nums")
    slow = "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c WHERE x < 900000000) SELECT count(*) FROM c"
    with pytest.raises(sqlite3.OperationalError, match="interrupted"):
        source.run_in_memory([table], slow, 1, 0.2)


def test_database_values_become_json():
    import datetime as dt
    import decimal

    assert cell(decimal.Decimal("42.50")) == 42.5 and cell(decimal.Decimal("7")) == 7
    assert cell(dt.date(2025, 3, 1)) == "2025-03-01" and cell(b"\x00\x01") == "<2 bytes>"


def test_sql_settings_name_the_wrong_field(monkeypatch, tmp_path):
    monkeypatch.delenv("POWERON_SQLITE_ROOT", raising=False)
    with pytest.raises(ValidationError) as refused:
        SqlSettings.model_validate({"dialect": "sqlite", "path": "x.db"})
    assert refused.value.errors()[0]["loc"] == ("path",) and "POWERON_SQLITE_ROOT" in str(refused.value)
    with pytest.raises(ValidationError) as no_host:
        SqlSettings.model_validate({"dialect": "postgresql", "database": "shop"})
    assert no_host.value.errors()[0]["loc"] == ("host",)
    settings = SqlSettings.model_validate({"dialect": "postgresql", "host": "db.example.com", "database": "shop"})
    assert settings.port == 5432
    with pytest.raises(ValidationError):
        SqlSettings.model_validate({"dialect": "oracle", "host": "db", "database": "x"})


def test_the_configuration_has_defaults_and_names_bad_fields():
    config = stored_config({})
    assert (config.row_limit, config.time_limit_seconds, config.data_source) == (200, 5.0, "tables")
    with pytest.raises(InvalidInput) as refused:
        parse_config({"rowLimit": 5000, "timeLimitSeconds": 0, "allowedTables": ["ok", "bad name"], "nope": 1})
    assert {e.field for e in refused.value.errors} == {"rowLimit", "timeLimitSeconds", "allowedTables", "nope"}


def test_the_embed_limiter_counts_per_token_and_address_in_a_sliding_window(monkeypatch):
    from backend.features.chatbot import embed

    monkeypatch.setenv("POWERON_CHATBOT_EMBED_LIMIT", "2")
    monkeypatch.setenv("POWERON_CHATBOT_EMBED_WINDOW_SECONDS", "60")
    clock = [1000.0]
    limiter = embed.RateLimiter(clock=lambda: clock[0])
    limiter.take(("t", "1.2.3.4"))
    clock[0] += 10
    limiter.take(("t", "1.2.3.4"))
    with pytest.raises(embed.EmbedLimited) as limited:
        limiter.take(("t", "1.2.3.4"))
    assert limited.value.retry_after_seconds == 50 and "at most 2 per 60 seconds" in str(limited.value)
    limiter.take(("t", "5.6.7.8"))  # another address
    limiter.take(("u", "1.2.3.4"))  # another token
    clock[0] += 51  # the first message left the window
    limiter.take(("t", "1.2.3.4"))
