"""login throttling per (username, client address) and per client address: login_failure gets
the column client_address in its primary key ("" username = the address's own counter) and an
index on last_failure_at for pruning. The counters are short-lived, so the table is recreated
(earlier counters are dropped) rather than converted.

Revision ID: 0010_login_throttle
Revises: 0009_run_graph
Create Date: 2026-12-01 22:00:00
"""

from alembic import op
import sqlalchemy as sa
import sqlmodel


revision = '0010_login_throttle'
down_revision = '0009_run_graph'
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.drop_table('login_failure')
    op.create_table('login_failure',
    sa.Column('username', sqlmodel.sql.sqltypes.AutoString(length=150), nullable=False),
    sa.Column('client_address', sqlmodel.sql.sqltypes.AutoString(length=64), nullable=False),
    sa.Column('failures', sa.Integer(), nullable=False),
    sa.Column('last_failure_at', sqlmodel.sql.sqltypes.UTCDateTime(), nullable=False),
    sa.PrimaryKeyConstraint('username', 'client_address')
    )
    op.create_index('ix_login_failure_last_failure_at', 'login_failure', ['last_failure_at'], unique=False)


def downgrade() -> None:
    op.drop_index('ix_login_failure_last_failure_at', table_name='login_failure')
    op.drop_table('login_failure')
    op.create_table('login_failure',
    sa.Column('username', sqlmodel.sql.sqltypes.AutoString(length=150), nullable=False),
    sa.Column('failures', sa.Integer(), nullable=False),
    sa.Column('last_failure_at', sqlmodel.sql.sqltypes.UTCDateTime(), nullable=False),
    sa.PrimaryKeyConstraint('username')
    )
