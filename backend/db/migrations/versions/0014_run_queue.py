"""the shared run queue on PostgreSQL: procrastinate's tables, types and functions (procrastinate 3.10)

Revision ID: 0014_run_queue
Revises: 0013_connections
Create Date: 2026-12-02 08:20:00

SQLite has no shared queue (one process executes its runs on its own threads), so nothing is
created there. The schema is procrastinate's own (``SchemaManager.get_schema()``, the schema of the
pinned version); a later procrastinate upgrade adds its migration files as a new revision here.
"""

from alembic import op


revision = '0014_run_queue'
down_revision = '0013_connections'
branch_labels = None
depends_on = None


def upgrade() -> None:
    bind = op.get_bind()
    if bind.dialect.name != "postgresql":
        return
    from procrastinate.schema import SchemaManager

    # Straight to the driver without parameters: the schema holds % signs and colons that
    # parameter parsing would misread.
    with bind.connection.dbapi_connection.cursor() as cursor:
        cursor.execute(SchemaManager.get_schema())


def downgrade() -> None:
    bind = op.get_bind()
    if bind.dialect.name != "postgresql":
        return
    # Everything the schema made: its tables, then every procrastinate function and type.
    with bind.connection.dbapi_connection.cursor() as cursor:
        cursor.execute("""
            DROP TABLE IF EXISTS procrastinate_events, procrastinate_periodic_defers, procrastinate_jobs,
                procrastinate_workers CASCADE;
            DO $$
            DECLARE item record;
            BEGIN
                FOR item IN SELECT p.oid::regprocedure AS signature FROM pg_proc p
                        JOIN pg_namespace n ON n.oid = p.pronamespace
                        WHERE n.nspname = current_schema() AND p.proname LIKE 'procrastinate%' LOOP
                    EXECUTE 'DROP FUNCTION IF EXISTS ' || item.signature || ' CASCADE';
                END LOOP;
                FOR item IN SELECT t.typname FROM pg_type t JOIN pg_namespace n ON n.oid = t.typnamespace
                        WHERE n.nspname = current_schema() AND t.typname LIKE 'procrastinate%'
                        AND t.typtype IN ('c', 'e') LOOP
                    EXECUTE 'DROP TYPE IF EXISTS ' || quote_ident(item.typname) || ' CASCADE';
                END LOOP;
            END $$;
        """)
