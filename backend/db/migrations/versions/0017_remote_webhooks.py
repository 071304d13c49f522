"""ClickUp and Jira (issue 20): webhooks registered at outside systems for trigger nodes

Revision ID: 0017_remote_webhooks
Revises: 0016_mcp
Create Date: 2026-12-02 16:00:00
"""

from alembic import op
import sqlalchemy as sa
import sqlmodel


revision = '0017_remote_webhooks'
down_revision = '0016_mcp'
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        'remote_webhook',
        sa.Column('id', sqlmodel.sql.sqltypes.AutoString(length=32), nullable=False),
        sa.Column('token', sqlmodel.sql.sqltypes.AutoString(length=64), nullable=False),
        sa.Column('workflow_id', sqlmodel.sql.sqltypes.AutoString(length=32), nullable=False),
        sa.Column('node_id', sqlmodel.sql.sqltypes.AutoString(length=100), nullable=False),
        sa.Column('type', sqlmodel.sql.sqltypes.AutoString(length=32), nullable=False),
        sa.Column('connection_id', sqlmodel.sql.sqltypes.AutoString(length=32), nullable=False),
        sa.Column('remote_id', sqlmodel.sql.sqltypes.AutoString(length=300), nullable=False),
        sa.Column('secret', sa.Text(), server_default='', nullable=False),
        sa.Column('fingerprint', sqlmodel.sql.sqltypes.AutoString(length=64), nullable=False),
        sa.Column('events', sa.JSON(), nullable=False),
        sa.Column('created_at', sqlmodel.sql.sqltypes.UTCDateTime(), nullable=False),
        sa.Column('last_delivery_at', sqlmodel.sql.sqltypes.UTCDateTime(), nullable=True),
        sa.ForeignKeyConstraint(['workflow_id'], ['workflow.id']),
        sa.PrimaryKeyConstraint('id'),
        sa.UniqueConstraint('token'),
    )
    with op.batch_alter_table('remote_webhook', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_remote_webhook_workflow_id'), ['workflow_id'], unique=False)


def downgrade() -> None:
    with op.batch_alter_table('remote_webhook', schema=None) as batch_op:
        batch_op.drop_index(batch_op.f('ix_remote_webhook_workflow_id'))
    op.drop_table('remote_webhook')
