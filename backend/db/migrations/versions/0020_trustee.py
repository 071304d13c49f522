"""Trustee (issue 22): receipts, booking lines, chart of accounts and VAT codes per instance

Revision ID: 0020_trustee
Revises: 0019_feature_settings
Create Date: 2026-12-03 04:20:00
"""

from alembic import op
import sqlalchemy as sa
import sqlmodel


revision = '0020_trustee'
down_revision = '0019_feature_settings'
branch_labels = None
depends_on = None

_ID = sqlmodel.sql.sqltypes.AutoString(length=32)


def _s(length: int) -> sqlmodel.sql.sqltypes.AutoString:
    return sqlmodel.sql.sqltypes.AutoString(length=length)


def _when() -> sqlmodel.sql.sqltypes.UTCDateTime:
    return sqlmodel.sql.sqltypes.UTCDateTime()


def _scope() -> list:
    return [
        sa.Column('id', _ID, nullable=False),
        sa.Column('mandate_id', _ID, nullable=False),
        sa.Column('feature_instance_id', _ID, nullable=False),
    ]


def _keys() -> list:
    return [
        sa.ForeignKeyConstraint(['mandate_id'], ['mandate.id']),
        sa.ForeignKeyConstraint(['feature_instance_id'], ['feature_instance.id']),
        sa.ForeignKeyConstraint(['sys_created_by'], ['user_account.id']),
        sa.PrimaryKeyConstraint('id'),
    ]


def _indexes(table: str, *columns: str) -> None:
    with op.batch_alter_table(table, schema=None) as batch_op:
        for column in ('mandate_id', 'feature_instance_id', *columns):
            batch_op.create_index(batch_op.f(f'ix_{table}_{column}'), [column], unique=False)


def upgrade() -> None:
    op.create_table(
        'trustee_receipt', *_scope(),
        sa.Column('file_id', _s(32), nullable=True),
        sa.Column('file_name', _s(255), nullable=False),
        sa.Column('supplier', _s(200), nullable=False),
        sa.Column('receipt_date', sa.Date(), nullable=True),
        sa.Column('total', sa.Float(), nullable=True),
        sa.Column('currency', _s(3), nullable=False),
        sa.Column('vat_amount', sa.Float(), nullable=True),
        sa.Column('vat_code', _s(16), nullable=True),
        sa.Column('description', _s(500), nullable=False),
        sa.Column('status', _s(16), nullable=False),
        sa.Column('extraction_status', _s(16), nullable=False),
        sa.Column('extraction_message', sa.Text(), nullable=False, server_default=''),
        sa.Column('confidence', sa.JSON(), nullable=True),
        sa.Column('extracted_text', sa.Text(), nullable=False, server_default=''),
        sa.Column('extracted_lines', sa.JSON(), nullable=True),
        sa.Column('checked_by', _s(32), nullable=True),
        sa.Column('checked_at', _when(), nullable=True),
        sa.Column('booked_at', _when(), nullable=True),
        sa.Column('synced_at', _when(), nullable=True),
        sa.Column('external_id', _s(100), nullable=True),
        sa.Column('lock_version', sa.Integer(), nullable=False),
        sa.Column('sys_created_by', _s(32), nullable=True),
        sa.Column('sys_created_at', _when(), nullable=False),
        sa.Column('sys_modified_at', _when(), nullable=False),
        sa.ForeignKeyConstraint(['checked_by'], ['user_account.id']),
        *_keys(),
    )
    _indexes('trustee_receipt', 'status')
    op.create_table(
        'trustee_position', *_scope(),
        sa.Column('receipt_id', _s(32), nullable=False),
        sa.Column('booking_date', sa.Date(), nullable=False),
        sa.Column('debit_account', _s(16), nullable=False),
        sa.Column('credit_account', _s(16), nullable=False),
        sa.Column('amount', sa.Float(), nullable=False),
        sa.Column('vat_code', _s(16), nullable=True),
        sa.Column('vat_amount', sa.Float(), nullable=False),
        sa.Column('text', _s(500), nullable=False),
        sa.Column('status', _s(16), nullable=False),
        sa.Column('source', _s(16), nullable=False),
        sa.Column('reason', sa.Text(), nullable=False, server_default=''),
        sa.Column('lock_version', sa.Integer(), nullable=False),
        sa.Column('sys_created_by', _s(32), nullable=True),
        sa.Column('sys_created_at', _when(), nullable=False),
        sa.Column('sys_modified_at', _when(), nullable=False),
        sa.ForeignKeyConstraint(['receipt_id'], ['trustee_receipt.id']),
        *_keys(),
    )
    _indexes('trustee_position', 'receipt_id', 'status')
    op.create_table(
        'trustee_account', *_scope(),
        sa.Column('number', _s(16), nullable=False),
        sa.Column('name', _s(200), nullable=False),
        sa.Column('kind', _s(16), nullable=False),
        sa.Column('sys_created_by', _s(32), nullable=True),
        sa.Column('sys_created_at', _when(), nullable=False),
        sa.Column('sys_modified_at', _when(), nullable=False),
        *_keys(),
        sa.UniqueConstraint('feature_instance_id', 'number', name='uq_trustee_account_number'),
    )
    _indexes('trustee_account')
    op.create_table(
        'trustee_vat_code', *_scope(),
        sa.Column('code', _s(16), nullable=False),
        sa.Column('rate', sa.Float(), nullable=False),
        sa.Column('label', _s(200), nullable=False),
        sa.Column('account', _s(16), nullable=True),
        sa.Column('sys_created_by', _s(32), nullable=True),
        sa.Column('sys_created_at', _when(), nullable=False),
        *_keys(),
        sa.UniqueConstraint('feature_instance_id', 'code', name='uq_trustee_vat_code'),
    )
    _indexes('trustee_vat_code')


def downgrade() -> None:
    for table in ('trustee_vat_code', 'trustee_account', 'trustee_position', 'trustee_receipt'):
        op.drop_table(table)
