"""MCP both ways (issue 19): external MCP servers, workflows exposed as MCP tools, narrowed API tokens

Revision ID: 0016_mcp
Revises: 0015_run_execution
Create Date: 2026-12-02 12:40:00
"""

from alembic import op
import sqlalchemy as sa
import sqlmodel


revision = '0016_mcp'
down_revision = '0015_run_execution'
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        'mcp_server',
        sa.Column('id', sqlmodel.sql.sqltypes.AutoString(length=32), nullable=False),
        sa.Column('mandate_id', sqlmodel.sql.sqltypes.AutoString(length=32), nullable=False),
        sa.Column('name', sqlmodel.sql.sqltypes.AutoString(length=40), nullable=False),
        sa.Column('url', sqlmodel.sql.sqltypes.AutoString(length=2000), nullable=False),
        sa.Column('description', sa.Text(), server_default='', nullable=False),
        sa.Column('auth_kind', sqlmodel.sql.sqltypes.AutoString(length=16), nullable=False),
        sa.Column('secret', sa.Text(), server_default='', nullable=False),
        sa.Column('tools', sa.JSON(), nullable=True),
        sa.Column('tools_refreshed_at', sqlmodel.sql.sqltypes.UTCDateTime(), nullable=True),
        sa.Column('status', sqlmodel.sql.sqltypes.AutoString(length=16), nullable=False),
        sa.Column('last_error', sa.Text(), nullable=True),
        sa.Column('sys_created_by', sqlmodel.sql.sqltypes.AutoString(length=32), nullable=True),
        sa.Column('sys_created_at', sqlmodel.sql.sqltypes.UTCDateTime(), nullable=False),
        sa.Column('sys_modified_at', sqlmodel.sql.sqltypes.UTCDateTime(), nullable=False),
        sa.Column('lock_version', sa.Integer(), nullable=False),
        sa.ForeignKeyConstraint(['mandate_id'], ['mandate.id']),
        sa.ForeignKeyConstraint(['sys_created_by'], ['user_account.id']),
        sa.PrimaryKeyConstraint('id'),
        sa.UniqueConstraint('mandate_id', 'name', name='uq_mcp_server_name'),
    )
    with op.batch_alter_table('mcp_server', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_mcp_server_mandate_id'), ['mandate_id'], unique=False)
    with op.batch_alter_table('workflow', schema=None) as batch_op:
        batch_op.add_column(sa.Column('mcp_tool', sa.Boolean(), server_default=sa.false(), nullable=False))
    with op.batch_alter_table('auth_token', schema=None) as batch_op:
        batch_op.add_column(sa.Column('instance_id', sqlmodel.sql.sqltypes.AutoString(length=32), nullable=True))
        batch_op.add_column(sa.Column('read_only', sa.Boolean(), server_default=sa.false(), nullable=False))


def downgrade() -> None:
    with op.batch_alter_table('auth_token', schema=None) as batch_op:
        batch_op.drop_column('read_only')
        batch_op.drop_column('instance_id')
    with op.batch_alter_table('workflow', schema=None) as batch_op:
        batch_op.drop_column('mcp_tool')
    with op.batch_alter_table('mcp_server', schema=None) as batch_op:
        batch_op.drop_index(batch_op.f('ix_mcp_server_mandate_id'))
    op.drop_table('mcp_server')
