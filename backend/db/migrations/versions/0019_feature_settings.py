"""Feature settings (issue 22): an instance's own configuration (a Chatbot's system prompt and data
source, a Coach's prompt) and a chat's saved summary

Revision ID: 0019_feature_settings
Revises: 0018_agent_approvals
Create Date: 2026-12-03 04:15:00
"""

from alembic import op
import sqlalchemy as sa


revision = '0019_feature_settings'
down_revision = '0018_agent_approvals'
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table('feature_instance') as batch_op:
        batch_op.add_column(sa.Column('settings', sa.JSON(), nullable=False, server_default='{}'))
    with op.batch_alter_table('agent_chat') as batch_op:
        batch_op.add_column(sa.Column('summary', sa.Text(), nullable=False, server_default=''))


def downgrade() -> None:
    with op.batch_alter_table('agent_chat') as batch_op:
        batch_op.drop_column('summary')
    with op.batch_alter_table('feature_instance') as batch_op:
        batch_op.drop_column('settings')
