"""workflow_graph_snapshot and workflow_run.graph_id: the graph a run executes, stored when it
starts (once per workflow and distinct content, by SHA-256), so that later saves of the draft never change a
run under way (test runs of the draft included); runs from before this revision keep NULL and
read their version's graph

Revision ID: 0009_run_graph
Revises: 0008_monitor
Create Date: 2026-12-01 22:00:00
"""

import sqlalchemy as sa
import sqlmodel
from alembic import op

revision = '0009_run_graph'
down_revision = '0008_monitor'
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        'workflow_graph_snapshot',
        sa.Column('id', sqlmodel.sql.sqltypes.AutoString(length=64), nullable=False),
        sa.Column('workflow_id', sqlmodel.sql.sqltypes.AutoString(length=32), nullable=False),
        sa.Column('graph', sa.JSON(), nullable=False),
        sa.Column('sys_created_at', sqlmodel.sql.sqltypes.UTCDateTime(), nullable=False),
        sa.ForeignKeyConstraint(['workflow_id'], ['workflow.id']),
        sa.PrimaryKeyConstraint('id'),
    )
    op.create_index(op.f('ix_workflow_graph_snapshot_workflow_id'), 'workflow_graph_snapshot', ['workflow_id'],
                    unique=False)
    op.add_column('workflow_run', sa.Column('graph_id', sqlmodel.sql.sqltypes.AutoString(length=64), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table('workflow_run') as batch:
        batch.drop_column('graph_id')
    op.drop_table('workflow_graph_snapshot')
