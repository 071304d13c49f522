"""Alembic environment: the schema is the SQLModel metadata of backend.db.models."""

from alembic import context
from sqlalchemy import pool
from sqlmodel import SQLModel, create_engine

import backend.db.models  # noqa: F401  (registers the tables)
import backend.features.registry as _features  # a feature's own tables live in backend/features/<name>/models.py
from backend.config import get_settings

for _feature in _features.get_features().values():
    _feature._optional_module("models")  # registers the feature's tables, if it has any
target_metadata = SQLModel.metadata

# Structures that migrations create by hand and the model does not describe, so autogenerate must
# not offer to drop them: full-text search of 0004_files (one dialect each) and the run queue of
# 0014_run_queue (procrastinate's own schema, PostgreSQL).
UNMODELLED_TABLE_PREFIXES = ("stored_file_fts", "procrastinate_")  # SQLite FTS5 and its shadow tables; the queue
UNMODELLED_NAMES = {("column", "search_vector"), ("index", "ix_stored_file_data_search")}  # PostgreSQL


def include_name(name, type_, _parent_names) -> bool:
    """Leave the hand-made structures out of autogenerate's comparison."""
    if type_ == "table" and name and name.startswith(UNMODELLED_TABLE_PREFIXES):
        return False
    return (type_, name) not in UNMODELLED_NAMES


def _url() -> str:
    return context.config.get_main_option("sqlalchemy.url") or get_settings().db_url


def run_migrations_offline() -> None:
    context.configure(url=_url(), target_metadata=target_metadata, literal_binds=True,
                      render_as_batch=True, include_name=include_name)
    with context.begin_transaction():
        context.run_migrations()


def run_migrations_online() -> None:
    connectable = context.config.attributes.get("connection")
    if connectable is None:
        engine = create_engine(_url(), poolclass=pool.NullPool)
        with engine.connect() as connection:
            _run(connection)
        engine.dispose()
    else:
        _run(connectable)


def _run(connection) -> None:
    context.configure(connection=connection, target_metadata=target_metadata,
                      render_as_batch=True, compare_type=True, include_name=include_name)
    with context.begin_transaction():
        context.run_migrations()


if context.is_offline_mode():
    run_migrations_offline()
else:
    run_migrations_online()
