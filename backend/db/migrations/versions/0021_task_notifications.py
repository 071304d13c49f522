"""Task notifications (issue 23): how a task was decided, its reminder, its mail links, the
notification's task, per-user notification settings, Web Push subscriptions, a workflow's
one-click mail decisions and the platform's generated secrets (VAPID key)

Revision ID: 0021_task_notifications
Revises: 0020_trustee
Create Date: 2026-12-03 07:30:00
"""

from alembic import op
import sqlalchemy as sa
import sqlmodel


revision = '0021_task_notifications'
down_revision = '0020_trustee'
branch_labels = None
depends_on = None

ID = sqlmodel.sql.sqltypes.AutoString(length=32)


def upgrade() -> None:
    with op.batch_alter_table('human_task', schema=None) as batch_op:
        batch_op.add_column(sa.Column('decided_via', sqlmodel.sql.sqltypes.AutoString(length=16), nullable=True))
        batch_op.add_column(sa.Column('reminded_at', sqlmodel.sql.sqltypes.UTCDateTime(), nullable=True))
    with op.batch_alter_table('notification', schema=None) as batch_op:
        batch_op.add_column(sa.Column('task_id', ID, nullable=True))
    with op.batch_alter_table('workflow', schema=None) as batch_op:
        batch_op.add_column(sa.Column('mail_one_click', sa.Boolean(), nullable=False, server_default=sa.false()))
    op.create_table(
        'task_link',
        sa.Column('id', ID, nullable=False),
        sa.Column('token_hash', sqlmodel.sql.sqltypes.AutoString(length=64), nullable=False),
        sa.Column('task_id', ID, nullable=False),
        sa.Column('user_id', ID, nullable=False),
        sa.Column('expires_at', sqlmodel.sql.sqltypes.UTCDateTime(), nullable=False),
        sa.Column('used_at', sqlmodel.sql.sqltypes.UTCDateTime(), nullable=True),
        sa.Column('sys_created_at', sqlmodel.sql.sqltypes.UTCDateTime(), nullable=False),
        sa.ForeignKeyConstraint(['task_id'], ['human_task.id']),
        sa.ForeignKeyConstraint(['user_id'], ['user_account.id']),
        sa.PrimaryKeyConstraint('id'),
    )
    with op.batch_alter_table('task_link', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_task_link_token_hash'), ['token_hash'], unique=True)
        batch_op.create_index(batch_op.f('ix_task_link_task_id'), ['task_id'], unique=False)
        batch_op.create_index(batch_op.f('ix_task_link_user_id'), ['user_id'], unique=False)
    op.create_table(
        'notification_setting',
        sa.Column('id', ID, nullable=False),
        sa.Column('user_id', ID, nullable=False),
        sa.Column('event', sqlmodel.sql.sqltypes.AutoString(length=64), nullable=False),
        sa.Column('channel', sqlmodel.sql.sqltypes.AutoString(length=16), nullable=False),
        sa.Column('enabled', sa.Boolean(), nullable=False),
        sa.ForeignKeyConstraint(['user_id'], ['user_account.id']),
        sa.PrimaryKeyConstraint('id'),
        sa.UniqueConstraint('user_id', 'event', 'channel', name='uq_notification_setting'),
    )
    with op.batch_alter_table('notification_setting', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_notification_setting_user_id'), ['user_id'], unique=False)
    op.create_table(
        'push_subscription',
        sa.Column('id', ID, nullable=False),
        sa.Column('user_id', ID, nullable=False),
        sa.Column('endpoint', sa.Text(), nullable=False),
        sa.Column('endpoint_hash', sqlmodel.sql.sqltypes.AutoString(length=64), nullable=False),
        sa.Column('p256dh', sqlmodel.sql.sqltypes.AutoString(length=200), nullable=False),
        sa.Column('auth', sqlmodel.sql.sqltypes.AutoString(length=100), nullable=False),
        sa.Column('user_agent', sqlmodel.sql.sqltypes.AutoString(length=300), nullable=False),
        sa.Column('last_error', sqlmodel.sql.sqltypes.AutoString(length=500), nullable=True),
        sa.Column('sys_created_at', sqlmodel.sql.sqltypes.UTCDateTime(), nullable=False),
        sa.ForeignKeyConstraint(['user_id'], ['user_account.id']),
        sa.PrimaryKeyConstraint('id'),
    )
    with op.batch_alter_table('push_subscription', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_push_subscription_user_id'), ['user_id'], unique=False)
        batch_op.create_index(batch_op.f('ix_push_subscription_endpoint_hash'), ['endpoint_hash'], unique=True)
    op.create_table(
        'platform_secret',
        sa.Column('name', sqlmodel.sql.sqltypes.AutoString(length=64), nullable=False),
        sa.Column('value', sa.Text(), nullable=False),
        sa.Column('sys_created_at', sqlmodel.sql.sqltypes.UTCDateTime(), nullable=False),
        sa.PrimaryKeyConstraint('name'),
    )


def downgrade() -> None:
    op.drop_table('platform_secret')
    with op.batch_alter_table('push_subscription', schema=None) as batch_op:
        batch_op.drop_index(batch_op.f('ix_push_subscription_endpoint_hash'))
        batch_op.drop_index(batch_op.f('ix_push_subscription_user_id'))
    op.drop_table('push_subscription')
    with op.batch_alter_table('notification_setting', schema=None) as batch_op:
        batch_op.drop_index(batch_op.f('ix_notification_setting_user_id'))
    op.drop_table('notification_setting')
    with op.batch_alter_table('task_link', schema=None) as batch_op:
        batch_op.drop_index(batch_op.f('ix_task_link_user_id'))
        batch_op.drop_index(batch_op.f('ix_task_link_task_id'))
        batch_op.drop_index(batch_op.f('ix_task_link_token_hash'))
    op.drop_table('task_link')
    with op.batch_alter_table('workflow', schema=None) as batch_op:
        batch_op.drop_column('mail_one_click')
    with op.batch_alter_table('notification', schema=None) as batch_op:
        batch_op.drop_column('task_id')
    with op.batch_alter_table('human_task', schema=None) as batch_op:
        batch_op.drop_column('reminded_at')
        batch_op.drop_column('decided_via')
