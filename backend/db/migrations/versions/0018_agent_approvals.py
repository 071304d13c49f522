"""Agent approvals (issue 21): human tasks of agent runs, the state a waiting run continues from,
and the per-mandate approval policy of agent profiles

Revision ID: 0018_agent_approvals
Revises: 0017_remote_webhooks
Create Date: 2026-12-02 22:30:00
"""

from alembic import op
import sqlalchemy as sa
import sqlmodel


revision = '0018_agent_approvals'
down_revision = '0017_remote_webhooks'
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        'agent_approval_policy',
        sa.Column('id', sqlmodel.sql.sqltypes.AutoString(length=32), nullable=False),
        sa.Column('mandate_id', sqlmodel.sql.sqltypes.AutoString(length=32), nullable=False),
        sa.Column('profile', sqlmodel.sql.sqltypes.AutoString(length=64), nullable=False),
        sa.Column('consequences', sa.JSON(), nullable=False),
        sa.Column('sys_modified_by', sqlmodel.sql.sqltypes.AutoString(length=32), nullable=True),
        sa.Column('sys_modified_at', sqlmodel.sql.sqltypes.UTCDateTime(), nullable=False),
        sa.ForeignKeyConstraint(['mandate_id'], ['mandate.id']),
        sa.ForeignKeyConstraint(['sys_modified_by'], ['user_account.id']),
        sa.PrimaryKeyConstraint('id'),
        sa.UniqueConstraint('mandate_id', 'profile', name='uq_agent_approval_policy'),
    )
    with op.batch_alter_table('agent_approval_policy', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_agent_approval_policy_mandate_id'), ['mandate_id'], unique=False)
    with op.batch_alter_table('agent_run', schema=None) as batch_op:
        batch_op.add_column(sa.Column('resume_state', sa.JSON(), nullable=True))
    with op.batch_alter_table('human_task', schema=None) as batch_op:
        batch_op.add_column(sa.Column('agent_run_id', sqlmodel.sql.sqltypes.AutoString(length=32), nullable=True))
        batch_op.alter_column('run_id', existing_type=sqlmodel.sql.sqltypes.AutoString(length=32), nullable=True)
        batch_op.create_index(batch_op.f('ix_human_task_agent_run_id'), ['agent_run_id'], unique=False)
        batch_op.create_foreign_key('fk_human_task_agent_run_id', 'agent_run', ['agent_run_id'], ['id'])


def downgrade() -> None:
    with op.batch_alter_table('human_task', schema=None) as batch_op:
        batch_op.drop_constraint('fk_human_task_agent_run_id', type_='foreignkey')
        batch_op.drop_index(batch_op.f('ix_human_task_agent_run_id'))
        batch_op.drop_column('agent_run_id')
    op.execute("DELETE FROM human_task WHERE run_id IS NULL")
    with op.batch_alter_table('human_task', schema=None) as batch_op:
        batch_op.alter_column('run_id', existing_type=sqlmodel.sql.sqltypes.AutoString(length=32), nullable=False)
    with op.batch_alter_table('agent_run', schema=None) as batch_op:
        batch_op.drop_column('resume_state')
    with op.batch_alter_table('agent_approval_policy', schema=None) as batch_op:
        batch_op.drop_index(batch_op.f('ix_agent_approval_policy_mandate_id'))
    op.drop_table('agent_approval_policy')
