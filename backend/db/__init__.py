"""Database access: engine, sessions, migrations and the data model."""

from backend.db.engine import get_engine, migrate, reset_engine, session_scope

__all__ = ["get_engine", "migrate", "reset_engine", "session_scope"]
