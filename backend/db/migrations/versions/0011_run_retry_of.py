"""workflow_run.retry_of: the failed run a retry continues, so a failed run is retried once
(a second retry of it is refused while the first is not failed or cancelled).

Revision ID: 0011_run_retry_of
Revises: 0010_login_throttle
Create Date: 2026-12-01 23:40:00
"""

from alembic import op
import sqlalchemy as sa
import sqlmodel


revision = '0011_run_retry_of'
down_revision = '0010_login_throttle'
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column('workflow_run', sa.Column('retry_of', sqlmodel.sql.sqltypes.AutoString(length=32), nullable=True))
    op.create_index(op.f('ix_workflow_run_retry_of'), 'workflow_run', ['retry_of'], unique=False)


def downgrade() -> None:
    with op.batch_alter_table('workflow_run') as batch:
        batch.drop_index('ix_workflow_run_retry_of')
        batch.drop_column('retry_of')
