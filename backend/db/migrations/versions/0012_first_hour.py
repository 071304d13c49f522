"""The first hour of a new user: the instance each user worked in last
(user_account.recent_instances), a workflow's test input (workflow.test_input), test runs kept
apart from production runs (workflow_run.test, also in the Monitor's covering index) and the last
calls of each webhook: accepted ones with their path and method (webhook_delivery.path, .method),
the others in webhook_call.

Revision ID: 0012_first_hour
Revises: 0011_run_retry_of
Create Date: 2026-12-02 01:30:00
"""

from alembic import op
import sqlalchemy as sa
import sqlmodel


revision = '0012_first_hour'
down_revision = '0011_run_retry_of'
branch_labels = None
depends_on = None

MONITOR_INDEX = 'ix_workflow_run_instance_started'
MONITOR_COLUMNS = ['feature_instance_id', 'started_at', 'status', 'workflow_id', 'cost_chf']


def upgrade() -> None:
    op.add_column('user_account', sa.Column('recent_instances', sa.JSON(), nullable=True))
    op.add_column('workflow', sa.Column('test_input', sa.JSON(), nullable=True))
    op.add_column('webhook_delivery', sa.Column('path', sqlmodel.sql.sqltypes.AutoString(length=200), nullable=True))
    op.add_column('webhook_delivery', sa.Column('method', sqlmodel.sql.sqltypes.AutoString(length=8), nullable=True))
    op.add_column('workflow_run', sa.Column('test', sa.Boolean(), nullable=False, server_default=sa.false()))
    # Runs of a version that is still a draft were test runs of the editor or the API.
    op.execute("UPDATE workflow_run SET test = true WHERE version_id IN "
               "(SELECT id FROM workflow_version WHERE status = 'draft')")
    op.drop_index(MONITOR_INDEX, table_name='workflow_run')
    op.create_index(MONITOR_INDEX, 'workflow_run', [*MONITOR_COLUMNS, 'test'], unique=False)
    op.create_table(
        'webhook_call',
        sa.Column('id', sqlmodel.sql.sqltypes.AutoString(length=32), nullable=False),
        sa.Column('workflow_id', sqlmodel.sql.sqltypes.AutoString(length=32), nullable=False),
        sa.Column('path', sqlmodel.sql.sqltypes.AutoString(length=200), nullable=False),
        sa.Column('method', sqlmodel.sql.sqltypes.AutoString(length=8), nullable=False),
        sa.Column('status_code', sa.Integer(), nullable=False),
        sa.Column('message', sqlmodel.sql.sqltypes.AutoString(length=500), nullable=False),
        sa.Column('run_id', sqlmodel.sql.sqltypes.AutoString(length=32), nullable=True),
        sa.Column('received_at', sqlmodel.sql.sqltypes.UTCDateTime(), nullable=False),
        sa.ForeignKeyConstraint(['workflow_id'], ['workflow.id'], ),
        sa.PrimaryKeyConstraint('id'),
    )
    op.create_index('ix_webhook_call_workflow_received', 'webhook_call', ['workflow_id', 'received_at'],
                    unique=False)


def downgrade() -> None:
    op.drop_index('ix_webhook_call_workflow_received', table_name='webhook_call')
    op.drop_table('webhook_call')
    op.drop_index(MONITOR_INDEX, table_name='workflow_run')
    op.create_index(MONITOR_INDEX, 'workflow_run', MONITOR_COLUMNS, unique=False)
    with op.batch_alter_table('workflow_run') as batch:
        batch.drop_column('test')
    with op.batch_alter_table('webhook_delivery') as batch:
        batch.drop_column('method')
        batch.drop_column('path')
    with op.batch_alter_table('workflow') as batch:
        batch.drop_column('test_input')
    with op.batch_alter_table('user_account') as batch:
        batch.drop_column('recent_instances')
