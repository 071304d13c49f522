"""connections to outside systems (connection) and OAuth consents under way (connection_oauth_state)

Revision ID: 0013_connections
Revises: 0012_first_hour
Create Date: 2026-12-02 03:40:00
"""

from alembic import op
import sqlalchemy as sa
import sqlmodel


revision = '0013_connections'
down_revision = '0012_first_hour'
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        'connection',
        sa.Column('id', sqlmodel.sql.sqltypes.AutoString(length=32), nullable=False),
        sa.Column('mandate_id', sqlmodel.sql.sqltypes.AutoString(length=32), nullable=False),
        sa.Column('owner_id', sqlmodel.sql.sqltypes.AutoString(length=32), nullable=False),
        sa.Column('type', sqlmodel.sql.sqltypes.AutoString(length=32), nullable=False),
        sa.Column('label', sqlmodel.sql.sqltypes.AutoString(length=200), nullable=False),
        sa.Column('status', sqlmodel.sql.sqltypes.AutoString(length=16), nullable=False),
        sa.Column('last_error', sa.Text(), nullable=True),
        sa.Column('shared', sa.Boolean(), nullable=False),
        sa.Column('settings', sa.JSON(), nullable=False),
        sa.Column('secret', sa.Text(), server_default='', nullable=False),
        sa.Column('expires_at', sqlmodel.sql.sqltypes.UTCDateTime(), nullable=True),
        sa.Column('sys_created_at', sqlmodel.sql.sqltypes.UTCDateTime(), nullable=False),
        sa.Column('sys_modified_at', sqlmodel.sql.sqltypes.UTCDateTime(), nullable=False),
        sa.Column('lock_version', sa.Integer(), nullable=False),
        sa.ForeignKeyConstraint(['mandate_id'], ['mandate.id'], ),
        sa.ForeignKeyConstraint(['owner_id'], ['user_account.id'], ),
        sa.PrimaryKeyConstraint('id'),
    )
    op.create_index(op.f('ix_connection_mandate_id'), 'connection', ['mandate_id'], unique=False)
    op.create_index(op.f('ix_connection_owner_id'), 'connection', ['owner_id'], unique=False)
    op.create_table(
        'connection_oauth_state',
        sa.Column('state_hash', sqlmodel.sql.sqltypes.AutoString(length=64), nullable=False),
        sa.Column('browser_hash', sqlmodel.sql.sqltypes.AutoString(length=64), nullable=False),
        sa.Column('user_id', sqlmodel.sql.sqltypes.AutoString(length=32), nullable=False),
        sa.Column('mandate_id', sqlmodel.sql.sqltypes.AutoString(length=32), nullable=False),
        sa.Column('type', sqlmodel.sql.sqltypes.AutoString(length=32), nullable=False),
        sa.Column('label', sqlmodel.sql.sqltypes.AutoString(length=200), nullable=False),
        sa.Column('connection_id', sqlmodel.sql.sqltypes.AutoString(length=32), nullable=True),
        sa.Column('code_verifier', sa.Text(), nullable=False),
        sa.Column('created_at', sqlmodel.sql.sqltypes.UTCDateTime(), nullable=False),
        sa.Column('expires_at', sqlmodel.sql.sqltypes.UTCDateTime(), nullable=False),
        sa.ForeignKeyConstraint(['mandate_id'], ['mandate.id'], ),
        sa.ForeignKeyConstraint(['user_id'], ['user_account.id'], ),
        sa.PrimaryKeyConstraint('state_hash'),
    )
    op.create_index(op.f('ix_connection_oauth_state_expires_at'), 'connection_oauth_state', ['expires_at'],
                    unique=False)
    op.create_index(op.f('ix_connection_oauth_state_user_id'), 'connection_oauth_state', ['user_id'],
                    unique=False)


def downgrade() -> None:
    op.drop_index(op.f('ix_connection_oauth_state_user_id'), table_name='connection_oauth_state')
    op.drop_index(op.f('ix_connection_oauth_state_expires_at'), table_name='connection_oauth_state')
    op.drop_table('connection_oauth_state')
    op.drop_index(op.f('ix_connection_owner_id'), table_name='connection')
    op.drop_index(op.f('ix_connection_mandate_id'), table_name='connection')
    op.drop_table('connection')
