"""workflow_run.graph: the graph a run executes, copied from its version when it starts, so that
later saves of the draft never change a run under way (test runs of the draft included); runs
from before this revision keep NULL and read their version's graph

Revision ID: 0009_run_graph
Revises: 0008_monitor
Create Date: 2026-12-01 22:00:00
"""

import sqlalchemy as sa
from alembic import op

revision = '0009_run_graph'
down_revision = '0008_monitor'
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column('workflow_run', sa.Column('graph', sa.JSON(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table('workflow_run') as batch:
        batch.drop_column('graph')
