"""monitor: AI cost per run step (run_step_log.cost_chf) and per run (workflow_run.cost_chf, the
sum of its steps' costs), and workflow_run indexes by start time for the monitoring dashboard

Revision ID: 0008_monitor
Revises: 0007_editor
Create Date: 2026-11-30 04:30:00
"""

from alembic import op
import sqlalchemy as sa


revision = '0008_monitor'
down_revision = '0007_editor'
branch_labels = None
depends_on = None

INDEXES = (
    # covering for the monitor's counts and costs per day (feature_instance_id, started_at first)
    ('ix_workflow_run_instance_started', ['feature_instance_id', 'started_at', 'status', 'workflow_id', 'cost_chf']),
    ('ix_workflow_run_status_started', ['status', 'started_at']),
    ('ix_workflow_run_workflow_started', ['workflow_id', 'started_at']),
)


def upgrade() -> None:
    op.add_column('run_step_log', sa.Column('cost_chf', sa.Float(), nullable=True))
    op.add_column('workflow_run', sa.Column('cost_chf', sa.Float(), nullable=True))
    existing = {index['name'] for index in sa.inspect(op.get_bind()).get_indexes('workflow_run')}
    for name, columns in INDEXES:
        if name not in existing:
            op.create_index(name, 'workflow_run', columns, unique=False)


def downgrade() -> None:
    for name, _columns in reversed(INDEXES):
        op.drop_index(name, table_name='workflow_run')
    with op.batch_alter_table('workflow_run') as batch:
        batch.drop_column('cost_chf')
    with op.batch_alter_table('run_step_log') as batch:
        batch.drop_column('cost_chf')
