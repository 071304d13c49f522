"""workflow_run.execution: the token of the execution that may write the run's steps (fencing)

Revision ID: 0015_run_execution
Revises: 0014_run_queue
Create Date: 2026-12-02 09:25:00
"""

from alembic import op
import sqlalchemy as sa
import sqlmodel


revision = '0015_run_execution'
down_revision = '0014_run_queue'
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table('workflow_run', schema=None) as batch_op:
        batch_op.add_column(sa.Column('execution', sqlmodel.sql.sqltypes.AutoString(length=32), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table('workflow_run', schema=None) as batch_op:
        batch_op.drop_column('execution')
