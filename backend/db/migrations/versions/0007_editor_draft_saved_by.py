"""workflow_version.sys_modified_by: who saved a draft last (draft save conflicts name them)

Revision ID: 0007_editor
Revises: 0006_scheduler
Create Date: 2026-11-30 03:35:00
"""

from alembic import op
import sqlalchemy as sa
import sqlmodel


revision = '0007_editor'
down_revision = '0006_scheduler'
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column('workflow_version',
                  sa.Column('sys_modified_by', sqlmodel.sql.sqltypes.AutoString(length=32), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table('workflow_version') as batch:
        batch.drop_column('sys_modified_by')
