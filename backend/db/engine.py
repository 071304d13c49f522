"""Engine, sessions and migrations for SQLite and PostgreSQL alike."""

from __future__ import annotations

import functools
import threading
from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager, nullcontext
from pathlib import Path
from typing import Any

from alembic import command
from alembic.config import Config
from sqlalchemy import event
from sqlalchemy.engine import Engine
from sqlmodel import Session, create_engine

from backend.config import get_settings

MIGRATIONS_DIR = Path(__file__).resolve().parent / "migrations"


def _enable_sqlite_foreign_keys(dbapi_connection, _record) -> None:
    cursor = dbapi_connection.cursor()
    cursor.execute("PRAGMA foreign_keys=ON")
    cursor.execute("PRAGMA busy_timeout=10000")
    # With WAL, NORMAL keeps every commit safe from a killed process; only a power loss may
    # lose the last commits. Every run step commits, so FULL's fsync per commit dominated.
    cursor.execute("PRAGMA synchronous=NORMAL")
    cursor.close()


def make_engine(url: str) -> Engine:
    """An engine for `url`; SQLite gets foreign keys, WAL and a busy timeout."""
    if url.startswith("sqlite"):
        engine = create_engine(url, connect_args={"check_same_thread": False, "timeout": 10})
        event.listen(engine, "connect", _enable_sqlite_foreign_keys)
        with engine.connect() as connection:
            connection.exec_driver_sql("PRAGMA journal_mode=WAL")
        return engine
    return create_engine(url, pool_pre_ping=True, pool_size=10, max_overflow=20)


@functools.cache
def get_engine() -> Engine:
    """The process-wide engine for the configured database."""
    return make_engine(get_settings().db_url)


def reset_engine() -> None:
    """Dispose the engine (tests switch databases with this)."""
    if get_engine.cache_info().currsize:
        get_engine().dispose()
    get_engine.cache_clear()


_SQLITE_WRITER = threading.RLock()


def write_gate() -> AbstractContextManager[Any]:
    """Where threads of this process queue for a short write transaction on SQLite.

    SQLite has one writer at a time, and its busy handler waits in sleeps of 1, 2, 5, 10 … ms;
    run threads that each commit a step in a millisecond lose most of their time there. Threads
    holding this gate take turns instead. Take it only while holding no write transaction (a
    holder may wait for SQLite's lock, never the other way round); it is re-entrant. On other
    databases it is a no-op.
    """
    return _SQLITE_WRITER if get_engine().dialect.name == "sqlite" else nullcontext()


@contextmanager
def session_scope() -> Iterator[Session]:
    """A session that commits on success and rolls back on any error."""
    with Session(get_engine(), expire_on_commit=False) as session:
        try:
            yield session
            session.commit()
        except BaseException:
            session.rollback()
            raise


def alembic_config(url: str | None = None) -> Config:
    """Alembic configuration pointing at our migrations and the given (or configured) URL."""
    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS_DIR))
    config.set_main_option("sqlalchemy.url", (url or get_settings().db_url).replace("%", "%%"))
    return config


# pg_advisory_lock key of schema changes and the first-start bootstrap ("PowerOn" in ASCII).
SCHEMA_LOCK_KEY = 0x506F7765724F6E


def migrate(url: str | None = None) -> None:
    """Bring the database schema to the newest migration."""
    command.upgrade(alembic_config(url), "head")


@contextmanager
def schema_lock() -> Iterator[None]:
    """Processes starting at once on one PostgreSQL database migrate and bootstrap one at a time
    (a session-level advisory lock on a connection of its own); a no-op on SQLite, where one
    process runs."""
    engine = get_engine()
    if engine.dialect.name != "postgresql":
        yield
        return
    with engine.connect() as connection:
        connection.exec_driver_sql(f"SELECT pg_advisory_lock({SCHEMA_LOCK_KEY})")
        connection.commit()
        try:
            yield
        finally:
            connection.exec_driver_sql(f"SELECT pg_advisory_unlock({SCHEMA_LOCK_KEY})")
            connection.commit()
