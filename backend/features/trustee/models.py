"""The Trustee's tables (migration 0020_trustee): receipts, booking lines, accounts and VAT codes.

Money is CHF (or the receipt's currency) as floats rounded to 2 places; account numbers are the
Swiss SME chart's (KMU-Kontenrahmen) strings such as "6640"; dates are calendar dates. Receipts and
lines go through state machines (backend/features/trustee/lifecycle.py) and carry `lock_version`.
"""

from __future__ import annotations

from datetime import date, datetime
from typing import Any

from sqlalchemy import JSON, Column, Text, UniqueConstraint
from sqlmodel import Field, SQLModel

from backend.db.models import new_id, utcnow


class TrusteeReceipt(SQLModel, table=True):
    """A receipt (Beleg): a file in the instance's file store and what was read from it."""

    __tablename__ = "trustee_receipt"

    id: str = Field(default_factory=new_id, primary_key=True, max_length=32)
    mandate_id: str = Field(foreign_key="mandate.id", index=True, max_length=32)
    feature_instance_id: str = Field(foreign_key="feature_instance.id", index=True, max_length=32)
    file_id: str | None = Field(default=None, max_length=32)
    file_name: str = Field(default="", max_length=255)
    supplier: str = Field(default="", max_length=200)
    receipt_date: date | None = None
    total: float | None = None
    currency: str = Field(default="CHF", max_length=3)
    vat_amount: float | None = None
    vat_code: str | None = Field(default=None, max_length=16)
    description: str = Field(default="", max_length=500)
    status: str = Field(default="draft", max_length=16, index=True)
    extraction_status: str = Field(default="pending", max_length=16)
    extraction_message: str = Field(default="", sa_column=Column(Text, nullable=False, server_default=""))
    confidence: dict[str, Any] | None = Field(default=None, sa_column=Column(JSON, nullable=True))
    extracted_text: str = Field(default="", sa_column=Column(Text, nullable=False, server_default=""))
    extracted_lines: list[Any] | None = Field(default=None, sa_column=Column(JSON, nullable=True))
    checked_by: str | None = Field(default=None, foreign_key="user_account.id", max_length=32)
    checked_at: datetime | None = None
    booked_at: datetime | None = None
    synced_at: datetime | None = None
    external_id: str | None = Field(default=None, max_length=100)
    lock_version: int = 0
    sys_created_by: str | None = Field(default=None, foreign_key="user_account.id", max_length=32)
    sys_created_at: datetime = Field(default_factory=utcnow)
    sys_modified_at: datetime = Field(default_factory=utcnow)


class TrusteePosition(SQLModel, table=True):
    """A booking line (Position): debit and credit account, amount and VAT, for one receipt."""

    __tablename__ = "trustee_position"

    id: str = Field(default_factory=new_id, primary_key=True, max_length=32)
    mandate_id: str = Field(foreign_key="mandate.id", index=True, max_length=32)
    feature_instance_id: str = Field(foreign_key="feature_instance.id", index=True, max_length=32)
    receipt_id: str = Field(foreign_key="trustee_receipt.id", index=True, max_length=32)
    booking_date: date
    debit_account: str = Field(max_length=16)
    credit_account: str = Field(max_length=16)
    amount: float
    vat_code: str | None = Field(default=None, max_length=16)
    vat_amount: float = 0.0
    text: str = Field(default="", max_length=500)
    status: str = Field(default="proposed", max_length=16, index=True)
    source: str = Field(default="model", max_length=16)
    reason: str = Field(default="", sa_column=Column(Text, nullable=False, server_default=""))
    lock_version: int = 0
    sys_created_by: str | None = Field(default=None, foreign_key="user_account.id", max_length=32)
    sys_created_at: datetime = Field(default_factory=utcnow)
    sys_modified_at: datetime = Field(default_factory=utcnow)


class TrusteeAccount(SQLModel, table=True):
    """An account of the instance's chart of accounts (seeded with the Swiss SME chart)."""

    __tablename__ = "trustee_account"
    __table_args__ = (UniqueConstraint("feature_instance_id", "number", name="uq_trustee_account_number"),)

    id: str = Field(default_factory=new_id, primary_key=True, max_length=32)
    mandate_id: str = Field(foreign_key="mandate.id", index=True, max_length=32)
    feature_instance_id: str = Field(foreign_key="feature_instance.id", index=True, max_length=32)
    number: str = Field(max_length=16)
    name: str = Field(max_length=200)
    kind: str = Field(max_length=16)
    sys_created_by: str | None = Field(default=None, foreign_key="user_account.id", max_length=32)
    sys_created_at: datetime = Field(default_factory=utcnow)
    sys_modified_at: datetime = Field(default_factory=utcnow)


class TrusteeVatCode(SQLModel, table=True):
    """A VAT code of the instance (current Swiss rates) and the account its tax is booked on."""

    __tablename__ = "trustee_vat_code"
    __table_args__ = (UniqueConstraint("feature_instance_id", "code", name="uq_trustee_vat_code"),)

    id: str = Field(default_factory=new_id, primary_key=True, max_length=32)
    mandate_id: str = Field(foreign_key="mandate.id", index=True, max_length=32)
    feature_instance_id: str = Field(foreign_key="feature_instance.id", index=True, max_length=32)
    code: str = Field(max_length=16)
    rate: float
    label: str = Field(max_length=200)
    account: str | None = Field(default=None, max_length=16)
    sys_created_by: str | None = Field(default=None, foreign_key="user_account.id", max_length=32)
    sys_created_at: datetime = Field(default_factory=utcnow)
