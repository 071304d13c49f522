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
    bind.exec_driver_sql(
        "DROP TABLE IF EXISTS procrastinate_events, procrastinate_periodic_defers, procrastinate_jobs, "
        "procrastinate_workers CASCADE; "
        "DROP TYPE IF EXISTS procrastinate_job_status, procrastinate_job_event_type CASCADE")
