"""The door of one Trustee instance: receipts, booking lines, journal, chart of accounts, sync.

Every read and write of a Trustee's data from REST (routes.py), the UI (state/trustee.py) and the
`trustee` toolbox (backend/actions/methods/trustee.py) goes through :class:`TrusteeInterface`. Its
methods declare their permission with the items of main.py and enforce them (backend/rbac/door.py);
rows are narrowed to the instance and by the own/all rule. A foreign or invisible receipt or line
answers NotFound, like a missing one. The contract with the UI is /work/wt/TRUSTEE_CONTRACT.md.

The chart of accounts and the VAT codes are seeded on first use (accounts.py). The instance's
closed period is `feature_instance.settings["closedUntil"]` (YYYY-MM-DD).
"""

from __future__ import annotations

import csv
import io
from dataclasses import dataclass
from datetime import date, datetime
from typing import Any

from sqlalchemy.exc import IntegrityError
from sqlmodel import Session, col, select

from backend.ai import AiError
from backend.db.models import FeatureInstance, User, utcnow
from backend.errors import Conflict, FieldError, Forbidden, InvalidInput, NotFound
from backend.features.trustee import extraction, lifecycle, proposals
from backend.features.trustee.accounts import CREDITORS, KINDS, SME_CHART, SWISS_VAT_CODES
from backend.features.trustee.main import (
    ACCOUNT_DATA,
    BOOK,
    FEATURE_CODE,
    MANAGE_ACCOUNTS,
    POSITION_DATA,
    RECEIPT_DATA,
    SYNC,
    VAT_DATA,
)
from backend.features.trustee.models import TrusteeAccount, TrusteePosition, TrusteeReceipt, TrusteeVatCode
from backend.files.service import FileStore
from backend.rbac.access import AccessContext
from backend.rbac.door import Door, guarded
from backend.rbac.rights import DATA, RESOURCE

RECEIPT_FOLDER = "/receipts"
EXPORT_FOLDER = "/exports"
MAX_UPLOAD_BYTES = 20 * 1024 * 1024
XLSX = "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet"
JOURNAL_COLUMNS = ("Datum", "Beleg", "Lieferant", "Soll", "Haben", "Betrag", "MWST-Code", "MWST-Betrag", "Text",
                   "Status")
EDITABLE_RECEIPT = {"supplier": "supplier", "receiptDate": "receipt_date", "total": "total",
                    "currency": "currency", "vatAmount": "vat_amount", "vatCode": "vat_code",
                    "description": "description"}
EDITABLE_POSITION = {"debitAccount": "debit_account", "creditAccount": "credit_account", "amount": "amount",
                     "vatCode": "vat_code", "vatAmount": "vat_amount", "text": "text", "bookingDate": "booking_date"}


# --- views ------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class PositionView:
    id: str
    receipt_id: str
    booking_date: date
    debit_account: str
    credit_account: str
    amount: float
    vat_code: str | None
    vat_amount: float
    text: str
    status: str
    source: str
    reason: str


@dataclass(frozen=True)
class ReceiptView:
    id: str
    file_id: str | None
    file_name: str
    supplier: str
    receipt_date: date | None
    total: float | None
    currency: str
    vat_amount: float | None
    vat_code: str | None
    description: str
    status: str
    extraction_status: str
    extraction_message: str
    confidence: dict[str, float]
    checked_by: str
    booked_at: datetime | None
    synced_at: datetime | None
    external_id: str | None
    sys_created_at: datetime


@dataclass(frozen=True)
class ReceiptDetail:
    receipt: ReceiptView
    text: str
    lines: list[PositionView]


@dataclass(frozen=True)
class AccountView:
    number: str
    name: str
    kind: str


@dataclass(frozen=True)
class VatCodeView:
    code: str
    rate: float
    label: str


@dataclass(frozen=True)
class SyncResult:
    synced: int
    failed: list[tuple[str, str]]
    message: str


def _round(value: float | None) -> float | None:
    return None if value is None else round(float(value), 2)


def position_view(row: TrusteePosition) -> PositionView:
    return PositionView(row.id, row.receipt_id, row.booking_date, row.debit_account, row.credit_account,
                        round(row.amount, 2), row.vat_code, round(row.vat_amount or 0.0, 2), row.text, row.status,
                        row.source, row.reason)


# --- parsing changes ----------------------------------------------------------------------------------


def _key(name: str, mapping: dict[str, str]) -> str | None:
    if name in mapping:
        return mapping[name]
    return name if name in mapping.values() else None


def _parse_money(name: str, value: Any, allow_none: bool = True) -> float | None:
    if value is None or value == "":
        if allow_none:
            return None
        raise InvalidInput([FieldError(name, "must be a number (CHF, e.g. 108.10)")])
    if isinstance(value, bool):
        raise InvalidInput([FieldError(name, "must be a number (CHF, e.g. 108.10)")])
    try:
        number = float(str(value).replace("'", "")) if isinstance(value, str) else float(value)
    except (TypeError, ValueError):
        raise InvalidInput([FieldError(name, f"must be a number (CHF, e.g. 108.10), not {value!r}")]) from None
    if number != number or abs(number) > 1e12:
        raise InvalidInput([FieldError(name, "must be a finite number below 1'000'000'000'000")])
    if number < 0:
        raise InvalidInput([FieldError(name, f"must not be negative, not {number}")])
    return round(number, 2)


def _parse_date(name: str, value: Any, allow_none: bool = True) -> date | None:
    if value is None or value == "":
        if allow_none:
            return None
    if isinstance(value, date):
        return value
    try:
        return date.fromisoformat(str(value))
    except ValueError:
        raise InvalidInput([FieldError(name, f"must be a date as YYYY-MM-DD, not {value!r}")]) from None


def _parse_text(name: str, value: Any, limit: int) -> str:
    if value is None:
        return ""
    if not isinstance(value, str):
        raise InvalidInput([FieldError(name, "must be text")])
    if len(value) > limit:
        raise InvalidInput([FieldError(name, f"must be at most {limit} characters")])
    return value.strip()


# --- the door -----------------------------------------------------------------------------------------


class TrusteeInterface(Door):
    """The bookkeeping of one Trustee instance, authorised as one user."""

    def __init__(self, access: AccessContext, instance: FeatureInstance):
        self.access = access
        self.instance = instance
        self.session: Session = access.session
        self.user: User = access.user
        self._files: FileStore | None = None

    @property
    def files(self) -> FileStore:
        """The instance's file store (the door to its files)."""
        if self._files is None:
            self._files = FileStore(self.access, self.instance)
        return self._files

    # --- helpers (no permission of their own: called by guarded methods) ---

    def _receipt(self, receipt_id: Any, operation: str = "read") -> TrusteeReceipt:
        query = select(TrusteeReceipt).where(TrusteeReceipt.id == receipt_id,
                                             TrusteeReceipt.feature_instance_id == self.instance.id)
        row = self.session.exec(self.visible(query, TrusteeReceipt, RECEIPT_DATA)).first() \
            if isinstance(receipt_id, str) else None
        if row is None:
            raise NotFound(f"receipt {receipt_id} not found")
        if operation != "read" and not self.may(operation, RECEIPT_DATA, row):
            raise Forbidden(f"your roles allow {operation} only on receipts you uploaded")
        return row

    def _position(self, position_id: Any, operation: str = "read") -> TrusteePosition:
        query = select(TrusteePosition).where(TrusteePosition.id == position_id,
                                              TrusteePosition.feature_instance_id == self.instance.id)
        row = self.session.exec(self.visible(query, TrusteePosition, POSITION_DATA)).first() \
            if isinstance(position_id, str) else None
        if row is None:
            raise NotFound(f"booking line {position_id} not found")
        if operation != "read" and not self.may(operation, POSITION_DATA, row):
            raise Forbidden(f"your roles allow {operation} only on booking lines you created")
        return row

    def _lines(self, receipt_id: str) -> list[TrusteePosition]:
        query = select(TrusteePosition).where(TrusteePosition.receipt_id == receipt_id,
                                              TrusteePosition.feature_instance_id == self.instance.id)
        return list(self.session.exec(query.order_by(TrusteePosition.sys_created_at, TrusteePosition.id)).all())

    def _names(self, user_ids: set[str]) -> dict[str, str]:
        if not user_ids:
            return {}
        rows = self.session.exec(select(User).where(col(User.id).in_(list(user_ids)))).all()
        return {u.id: u.display_name or u.username for u in rows}

    def _view(self, row: TrusteeReceipt, names: dict[str, str] | None = None) -> ReceiptView:
        if names is None:
            names = self._names({row.checked_by} if row.checked_by else set())
        return ReceiptView(
            row.id, row.file_id, row.file_name, row.supplier, row.receipt_date, _round(row.total), row.currency,
            _round(row.vat_amount), row.vat_code, row.description, row.status, row.extraction_status,
            row.extraction_message, dict(row.confidence or {}), names.get(row.checked_by or "", ""), row.booked_at,
            row.synced_at, row.external_id, row.sys_created_at)

    def _ensure_chart(self) -> None:
        """Seed the Swiss SME chart and the VAT codes the first time the instance needs them."""
        scope = {"mandate_id": self.instance.mandate_id, "feature_instance_id": self.instance.id}
        has = self.session.exec(select(TrusteeAccount.id).where(
            TrusteeAccount.feature_instance_id == self.instance.id)).first()
        has_codes = self.session.exec(select(TrusteeVatCode.id).where(
            TrusteeVatCode.feature_instance_id == self.instance.id)).first()
        if has and has_codes:
            return
        try:
            with self.session.begin_nested():
                if not has:
                    self.session.add_all(TrusteeAccount(number=n, name=name, kind=kind, **scope)
                                         for n, name, kind in SME_CHART)
                if not has_codes:
                    self.session.add_all(TrusteeVatCode(code=v.code, rate=v.rate, label=v.label, account=v.account,
                                                        **scope) for v in SWISS_VAT_CODES)
                self.session.flush()
        except IntegrityError:
            pass  # seeded concurrently by another request

    def _account_rows(self) -> list[TrusteeAccount]:
        self._ensure_chart()
        return list(self.session.exec(select(TrusteeAccount).where(
            TrusteeAccount.feature_instance_id == self.instance.id).order_by(TrusteeAccount.number)).all())

    def _codes(self) -> dict[str, TrusteeVatCode]:
        self._ensure_chart()
        rows = self.session.exec(select(TrusteeVatCode).where(TrusteeVatCode.feature_instance_id == self.instance.id))
        return {r.code: r for r in rows}

    def _require_account(self, number: Any, field_name: str) -> str:
        numbers = {a.number for a in self._account_rows()}
        if not isinstance(number, str | int) or str(number) not in numbers:
            raise InvalidInput([FieldError(field_name, f"'{number}' is no account of this instance's chart "
                                                       "(GET …/accounts lists them, e.g. 6640)")])
        return str(number)

    def _require_code(self, code: Any, field_name: str) -> str | None:
        if code in (None, ""):
            return None
        codes = self._codes()
        if not isinstance(code, str) or code not in codes:
            raise InvalidInput([FieldError(field_name, f"unknown VAT code {code!r}; use one of {', '.join(codes)}")])
        return str(code)

    # --- receipts ---

    @guarded(DATA, RECEIPT_DATA, "create")
    def upload_receipt(self, data: bytes, filename: str, content_type: str | None) -> ReceiptView:
        """Store a receipt file in the instance's file store (/receipts) and create its draft receipt.

        Raises:
            InvalidInput: an empty file, or one that is neither PDF nor image.
        """
        name = (filename or "").replace("\\", "/").rsplit("/", 1)[-1].strip()
        if not name:
            raise InvalidInput([FieldError("file", "the file has no name")])
        if not data:
            raise InvalidInput([FieldError("file", f"'{name}' is empty: upload a PDF or an image of the receipt")])
        if len(data) > MAX_UPLOAD_BYTES:
            raise InvalidInput([FieldError("file", f"'{name}' is larger than 20 MiB")])
        if extraction.kind_of(data, content_type) is None:
            raise InvalidInput([FieldError("file", (
                f"'{name}' is neither a PDF nor an image (PNG, JPEG, GIF, WebP): a receipt must be one of those"))])
        stored_name = self._free_name(name)
        entry = self.files.store_file(f"{RECEIPT_FOLDER}/{stored_name}", data, content_type)
        row = TrusteeReceipt(mandate_id=self.instance.mandate_id, feature_instance_id=self.instance.id,
                             file_id=entry.id, file_name=entry.name, sys_created_by=self.user.id)
        self.session.add(row)
        self.session.flush()
        return self._view(row)

    @guarded(DATA, RECEIPT_DATA, "create")
    def upload_receipts(self, uploads: list[tuple[bytes, str, str | None]]) -> list[ReceiptView]:
        """Several uploads at once ((bytes, file name, content type) each); InvalidInput for none."""
        if not uploads:
            raise InvalidInput([FieldError("files", "send the receipts as multipart/form-data fields 'files'")])
        return [self.upload_receipt(data, name, mime) for data, name, mime in uploads]

    def _free_name(self, name: str) -> str:
        """`name`, or `name (2)` … when the receipts folder holds it already (uploads never replace)."""
        taken = {e.name for e in self.files.list_files(RECEIPT_FOLDER)} if self._folder_exists() else set()
        if name not in taken:
            return name
        stem, dot, ext = name.rpartition(".")
        stem, ext = (stem, f".{ext}") if dot else (name, "")
        number = 2
        while f"{stem} ({number}){ext}" in taken:
            number += 1
        return f"{stem} ({number}){ext}"

    def _folder_exists(self) -> bool:
        return any(f.path == RECEIPT_FOLDER for f in self.files.list_folders("/"))

    @guarded(DATA, RECEIPT_DATA, "update")
    def extract_receipt(self, receipt_id: str, model: str | None = None) -> ReceiptView:
        """Read the receipt's file through the AI gateway (trustee.extract) and fill its fields.

        Only a draft is read; the outcome is in extraction_status and extraction_message.
        """
        row = self._receipt(receipt_id, "update")
        if row.status != lifecycle.DRAFT:
            raise Conflict(f"receipt {row.id} is '{row.status}': only a draft is read again")
        if not row.file_id:
            raise InvalidInput([FieldError("fileId", "the receipt has no file")])
        _, data = self.files.read_bytes(file_id=row.file_id)
        try:
            found = extraction.extract(data, self.files.get_file(row.file_id).mime_type, model)
        except AiError as exc:
            found = extraction.Extraction(extraction.FAILED, f"the AI model could not be used: {exc}")
        self._apply_extraction(row, found)
        return self._view(row)

    def _apply_extraction(self, row: TrusteeReceipt, found: extraction.Extraction) -> None:
        row.extraction_status = found.status
        row.extraction_message = found.message
        row.confidence = found.confidence
        row.extracted_text = found.text
        row.extracted_lines = found.lines
        fields = found.fields
        if "supplier" in fields:
            row.supplier = fields["supplier"]
        if "receiptDate" in fields:
            row.receipt_date = date.fromisoformat(fields["receiptDate"])
        for name, attribute in (("total", "total"), ("vatAmount", "vat_amount"), ("currency", "currency"),
                                ("vatCode", "vat_code"), ("description", "description")):
            if name in fields:
                setattr(row, attribute, fields[name])
        row.sys_modified_at = utcnow()
        self.session.add(row)
        self.session.flush()

    @guarded(DATA, RECEIPT_DATA, "read")
    def list_receipts(self, status: str | None = None) -> list[ReceiptView]:
        """The receipts the user may read, newest first (only of `status` when given)."""
        if status is not None and status not in lifecycle.RECEIPT_STATES:
            raise InvalidInput([FieldError("status", f"must be one of {', '.join(lifecycle.RECEIPT_STATES)}")])
        query = select(TrusteeReceipt).where(TrusteeReceipt.feature_instance_id == self.instance.id)
        if status:
            query = query.where(TrusteeReceipt.status == status)
        query = query.order_by(col(TrusteeReceipt.sys_created_at).desc(), col(TrusteeReceipt.id).desc())
        rows = list(self.session.exec(self.visible(query, TrusteeReceipt, RECEIPT_DATA)).all())
        names = self._names({r.checked_by for r in rows if r.checked_by})
        return [self._view(r, names) for r in rows]

    @guarded(DATA, RECEIPT_DATA, "read")
    def get_receipt(self, receipt_id: str) -> ReceiptDetail:
        """One receipt with the text its extraction read and its booking lines."""
        row = self._receipt(receipt_id)
        return ReceiptDetail(self._view(row), row.extracted_text or "",
                             [position_view(p) for p in self._lines(row.id)])

    @guarded(DATA, RECEIPT_DATA, "read")
    def receipt_file(self, receipt_id: str) -> tuple[str, str, bytes]:
        """(name, MIME type, bytes) of the receipt's file."""
        row = self._receipt(receipt_id)
        if not row.file_id:
            raise NotFound(f"receipt {receipt_id} has no file")
        entry, data = self.files.read_bytes(file_id=row.file_id)
        return entry.name, entry.mime_type, data

    @guarded(DATA, RECEIPT_DATA, "update")
    def update_receipt(self, receipt_id: str, changes: dict[str, Any]) -> ReceiptView:
        """Correct the receipt's fields (camelCase or snake_case keys) while it is a draft or checked."""
        row = self._receipt(receipt_id, "update")
        if not isinstance(changes, dict) or not changes:
            raise InvalidInput([FieldError("body", "send the fields to change, e.g. {\"total\": 108.10}")])
        if row.status not in (lifecycle.DRAFT, lifecycle.CHECKED):
            raise Conflict(f"receipt {row.id} is '{row.status}': a booked receipt cannot be changed")
        values: dict[str, Any] = {}
        for name, value in changes.items():
            attribute = _key(name, EDITABLE_RECEIPT)
            if attribute is None:
                raise InvalidInput([FieldError(name, "cannot be changed; the fields are "
                                                     f"{', '.join(EDITABLE_RECEIPT)}")])
            values[attribute] = self._receipt_value(attribute, value)
        for attribute, value in values.items():
            setattr(row, attribute, value)
        row.sys_modified_at = utcnow()
        self.session.add(row)
        self.session.flush()
        return self._view(row)

    def _receipt_value(self, attribute: str, value: Any) -> Any:
        camel = next(k for k, v in EDITABLE_RECEIPT.items() if v == attribute)
        if attribute in ("total", "vat_amount"):
            return _parse_money(camel, value)
        if attribute == "receipt_date":
            return _parse_date(camel, value)
        if attribute == "currency":
            text = _parse_text(camel, value, 3).upper()
            if len(text) != 3 or not text.isalpha():
                raise InvalidInput([FieldError(camel, "must be a three-letter ISO currency code such as CHF")])
            return text
        if attribute == "vat_code":
            return self._require_code(value, camel)
        return _parse_text(camel, value, 200 if attribute == "supplier" else 500)

    @guarded(DATA, RECEIPT_DATA, "update")
    def check_receipt(self, receipt_id: str) -> ReceiptView:
        """A person confirms the receipt's fields: draft → checked (checked_by = the user)."""
        row = self._receipt(receipt_id, "update")
        proposals.require_fields(row)
        lifecycle.check(self.session, row, self.user.id)
        return self._view(row)

    # --- booking lines ---

    def rule_for(self, supplier: str) -> proposals.Rule | None:
        """The last booked expense line of `supplier` in this instance (the learned rule), if any."""
        if not supplier.strip():
            return None
        codes = self._codes()
        vat_accounts = {c.account for c in codes.values() if c.account}
        query = (select(TrusteePosition, TrusteeReceipt)
                 .join(TrusteeReceipt, TrusteeReceipt.id == TrusteePosition.receipt_id)
                 .where(TrusteePosition.feature_instance_id == self.instance.id,
                        col(TrusteePosition.status).in_([lifecycle.BOOKED, lifecycle.SYNCED]),
                        col(TrusteePosition.debit_account).not_in(list(vat_accounts)),
                        TrusteeReceipt.supplier.ilike(supplier.strip()))
                 .order_by(col(TrusteePosition.booking_date).desc(), col(TrusteePosition.sys_created_at).desc()))
        found = self.session.exec(query).first()
        if found is None:
            return None
        line, receipt = found
        return proposals.Rule(line.debit_account, line.booking_date, receipt.file_name or receipt.id)

    @guarded(DATA, POSITION_DATA, "create")
    def propose(self, receipt_id: str, model: str | None = None) -> list[PositionView]:
        """Booking proposals for a receipt (trustee.process); they replace its open proposals.

        The account comes from the last booking of the same supplier (source "rule"), else from the
        AI model (source "model"). Raises InvalidInput for missing fields or a closed period.
        """
        return [position_view(p) for p in self.propose_lines(receipt_id, model)[0]]

    @guarded(DATA, POSITION_DATA, "create")
    def propose_lines(self, receipt_id: str, model: str | None = None) -> tuple[list[TrusteePosition], list[str]]:
        """`propose`'s rows and its warnings (the toolbox reports them)."""
        row = self._receipt(receipt_id)
        if row.status not in (lifecycle.DRAFT, lifecycle.CHECKED):
            raise Conflict(f"receipt {row.id} is '{row.status}': it is booked already")
        _, receipt_date = proposals.require_fields(row)
        proposals.check_period(receipt_date, self.instance.settings)
        accounts = self._account_rows()
        names = {a.number: a.name for a in accounts}
        codes = self._codes()
        vat = codes.get(row.vat_code) if row.vat_code else None
        rule = self.rule_for(row.supplier)
        if rule is not None and rule.account in names:
            account, source = rule.account, "rule"
            reason = (f"learned from the earlier booking of {row.supplier} on {rule.booking_date.isoformat()} "
                      f"({rule.receipt_label})")
        else:
            account, reason = proposals.ask_model(row, accounts, model)
            source = "model"
        lines, warnings = proposals.build_lines(row, account, names[account], source, reason, vat)
        for old in self._lines(row.id):
            if old.status in (lifecycle.PROPOSED, lifecycle.ACCEPTED, lifecycle.REJECTED):
                self.session.delete(old)
        self.session.flush()
        created = []
        for line in lines:
            position = TrusteePosition(
                mandate_id=self.instance.mandate_id, feature_instance_id=self.instance.id, receipt_id=row.id,
                booking_date=receipt_date, debit_account=line.debit_account, credit_account=line.credit_account,
                amount=line.amount, vat_code=line.vat_code, vat_amount=line.vat_amount, text=line.text,
                source=line.source, reason=line.reason, sys_created_by=self.user.id)
            self.session.add(position)
            created.append(position)
        self.session.flush()
        return created, warnings

    @guarded(DATA, POSITION_DATA, "update")
    def update_position(self, position_id: str, changes: dict[str, Any]) -> PositionView:
        """Correct a proposed or accepted line (debitAccount, creditAccount, amount, vatCode, vatAmount,
        text, bookingDate); it becomes a manual line."""
        row = self._position(position_id, "update")
        if not isinstance(changes, dict) or not changes:
            raise InvalidInput([FieldError("body", "send the fields to change, e.g. {\"debitAccount\": \"6640\"}")])
        if row.status not in (lifecycle.PROPOSED, lifecycle.ACCEPTED):
            raise Conflict(f"booking line {row.id} is '{row.status}': only proposed or accepted lines can be changed")
        values: dict[str, Any] = {}
        for name, value in changes.items():
            attribute = _key(name, EDITABLE_POSITION)
            if attribute is None:
                raise InvalidInput([FieldError(name, f"cannot be changed; the fields are "
                                                     f"{', '.join(EDITABLE_POSITION)}")])
            camel = next(k for k, v in EDITABLE_POSITION.items() if v == attribute)
            if attribute in ("debit_account", "credit_account"):
                values[attribute] = self._require_account(value, camel)
            elif attribute in ("amount", "vat_amount"):
                values[attribute] = _parse_money(camel, value, allow_none=False)
            elif attribute == "vat_code":
                values[attribute] = self._require_code(value, camel)
            elif attribute == "booking_date":
                values[attribute] = _parse_date(camel, value, allow_none=False)
            else:
                values[attribute] = _parse_text(camel, value, 500)
        for attribute, value in values.items():
            setattr(row, attribute, value)
        row.source = "manual"
        row.reason = f"changed by {self.user.display_name or self.user.username}"
        row.sys_modified_at = utcnow()
        self.session.add(row)
        self.session.flush()
        return position_view(row)

    @guarded(DATA, POSITION_DATA, "update")
    def accept_position(self, position_id: str) -> PositionView:
        """proposed → accepted."""
        return position_view(lifecycle.accept(self.session, self._position(position_id, "update")))

    @guarded(DATA, POSITION_DATA, "update")
    def reject_position(self, position_id: str) -> PositionView:
        """proposed → rejected."""
        return position_view(lifecycle.reject(self.session, self._position(position_id, "update")))

    @guarded(RESOURCE, BOOK)
    @guarded(DATA, RECEIPT_DATA, "update")
    def book_receipt(self, receipt_id: str) -> ReceiptView:
        """checked → booked with its accepted lines: they must balance with the receipt's total, carry
        its VAT and lie after the closed period (InvalidInput with the reason otherwise)."""
        row = self._receipt(receipt_id, "update")
        if row.status != lifecycle.CHECKED:
            lifecycle.RECEIPT.check(row, "book")  # IllegalTransition naming the state
        accepted = [p for p in self._lines(row.id) if p.status == lifecycle.ACCEPTED]
        proposals.check_booking(row, accepted, self._codes(), self.instance.settings)
        for line in accepted:
            lifecycle.book_line(self.session, line)
        lifecycle.book(self.session, row)
        return self._view(row)

    # --- journal and export ---

    @guarded(DATA, POSITION_DATA, "read")
    def journal(self, date_from: date | None = None, date_to: date | None = None, account: str | None = None,
                text: str | None = None, status: str | None = None) -> list[PositionView]:
        """The booked (and synced) lines, by booking date, filtered."""
        return [position_view(p) for p, _ in self._journal_rows(date_from, date_to, account, text, status)]

    def _journal_rows(self, date_from: date | None, date_to: date | None, account: str | None, text: str | None,
                      status: str | None) -> list[tuple[TrusteePosition, TrusteeReceipt]]:
        if status is not None and status not in (lifecycle.BOOKED, lifecycle.SYNCED):
            raise InvalidInput([FieldError("status", "the journal holds booked or synced lines: use one of those")])
        if date_from and date_to and date_from > date_to:
            raise InvalidInput([FieldError("dateFrom", "must not be after dateTo")])
        query = (select(TrusteePosition, TrusteeReceipt)
                 .join(TrusteeReceipt, TrusteeReceipt.id == TrusteePosition.receipt_id)
                 .where(TrusteePosition.feature_instance_id == self.instance.id,
                        col(TrusteePosition.status).in_([status] if status else [lifecycle.BOOKED, lifecycle.SYNCED])))
        if date_from:
            query = query.where(TrusteePosition.booking_date >= date_from)
        if date_to:
            query = query.where(TrusteePosition.booking_date <= date_to)
        if account:
            query = query.where((TrusteePosition.debit_account == account)
                                | (TrusteePosition.credit_account == account))
        if text:
            query = query.where(col(TrusteePosition.text).ilike(f"%{text.strip()}%"))
        query = self.visible(query, TrusteePosition, POSITION_DATA)
        query = query.order_by(TrusteePosition.booking_date, TrusteePosition.sys_created_at, TrusteePosition.id)
        return [(p, r) for p, r in self.session.exec(query).all()]

    @guarded(DATA, POSITION_DATA, "read")
    def export_journal(self, fmt: str, **filters: Any) -> tuple[str, str, bytes]:
        """The filtered journal as a file: (file name, MIME type, bytes); fmt "csv" or "xlsx"."""
        if fmt not in ("csv", "xlsx"):
            raise InvalidInput([FieldError("format", "must be csv or xlsx")])
        rows = self._journal_rows(filters.get("date_from"), filters.get("date_to"), filters.get("account"),
                                  filters.get("text"), filters.get("status"))
        table = [[p.booking_date.isoformat(), r.file_name, r.supplier, p.debit_account, p.credit_account,
                  round(p.amount, 2), p.vat_code or "", round(p.vat_amount or 0.0, 2), p.text, p.status]
                 for p, r in rows]
        stamp = utcnow().strftime("%Y%m%d-%H%M%S")
        name = f"journal-{stamp}.{fmt}"
        if fmt == "csv":
            out = io.StringIO()
            writer = csv.writer(out, delimiter=";")
            writer.writerow(JOURNAL_COLUMNS)
            for line in table:
                writer.writerow([f"{v:.2f}" if isinstance(v, float) else v for v in line])
            return name, "text/csv", out.getvalue().encode("utf-8-sig")
        from openpyxl import Workbook

        book = Workbook()
        sheet = book.active
        sheet.title = "Journal"
        sheet.append(list(JOURNAL_COLUMNS))
        for line in table:
            line = list(line)
            line[0] = date.fromisoformat(line[0])
            sheet.append(line)
        for row in sheet.iter_rows(min_row=2):
            row[0].number_format = "yyyy-mm-dd"
            row[5].number_format = row[7].number_format = "#,##0.00"
        out = io.BytesIO()
        book.save(out)
        return name, XLSX, out.getvalue()

    # --- sync ---

    @guarded(RESOURCE, SYNC)
    def bexio_connections(self) -> list[tuple[str, str]]:
        """(connection id, label) of the active Bexio connections the user may use."""
        from backend.connectors import store

        return [(c.id, c.label) for c in store.usable_connections(self.session, self.user, ["bexio"],
                                                                  active_only=True)]

    @guarded(RESOURCE, SYNC)
    @guarded(DATA, RECEIPT_DATA, "update")
    def sync(self, connection_id: str) -> SyncResult:
        """Send every booked receipt to Bexio through connection `connection_id`: booked → synced.

        Synced receipts are never sent again. A receipt Bexio refuses stays booked and is listed in
        `failed` with the reason; a refused token or an exhausted rate limit stops the sync.
        """
        from backend.connectors import store
        from backend.connectors.kinds import bexio
        from backend.connectors.types import ConnectionFailed

        try:
            credentials = store.open_connection(self.session, self.user, connection_id, [bexio.TYPE_ID])
        except ConnectionFailed as exc:
            raise InvalidInput([FieldError("connectionId", str(exc))]) from None
        query = select(TrusteeReceipt).where(TrusteeReceipt.feature_instance_id == self.instance.id,
                                             TrusteeReceipt.status == lifecycle.BOOKED)
        receipts = [r for r in self.session.exec(self.visible(query, TrusteeReceipt, RECEIPT_DATA, "update")
                                                 .order_by(TrusteeReceipt.receipt_date, TrusteeReceipt.id)).all()]
        if not receipts:
            return SyncResult(0, [], "nothing to send: no booked receipt waits for the sync")
        codes = self._codes()
        synced, failed = 0, []
        with bexio.client_for(credentials) as client:
            try:
                books = client.books()
            except ConnectionFailed as exc:
                return SyncResult(0, [(r.id, str(exc)) for r in receipts], str(exc))
            for index, receipt in enumerate(receipts):
                lines = [p for p in self._lines(receipt.id) if p.status == lifecycle.BOOKED]
                try:
                    entry = bexio.manual_entry(receipt, lines, books, codes)
                    external_id = client.post_manual_entry(entry)
                except bexio.NotInBexio as exc:
                    failed.append((receipt.id, str(exc)))
                    continue
                except ConnectionFailed as exc:
                    status = getattr(exc, "status", None)
                    failed.append((receipt.id, str(exc)))
                    if status in (401, 403, 429, 503) or status is None:
                        failed += [(r.id, "not sent: the sync stopped at the error above")
                                   for r in receipts[index + 1:]]
                        break
                    continue
                for line in lines:
                    lifecycle.sync_line(self.session, line)
                lifecycle.mark_synced(self.session, receipt, external_id)
                synced += 1
        message = f"{synced} receipt{'s' if synced != 1 else ''} sent to Bexio"
        if failed:
            message += f"; {len(failed)} not sent: {failed[0][1]}"
        return SyncResult(synced, failed, message)

    # --- accounts, VAT codes, settings ---

    @guarded(DATA, ACCOUNT_DATA, "read")
    def accounts(self) -> list[AccountView]:
        """The instance's chart of accounts, by number (the Swiss SME chart until edited)."""
        return [AccountView(a.number, a.name, a.kind) for a in self._account_rows()]

    @guarded(RESOURCE, MANAGE_ACCOUNTS)
    @guarded(DATA, ACCOUNT_DATA, "update")
    def put_accounts(self, accounts: list[dict[str, Any]]) -> list[AccountView]:
        """Add or rename accounts ({number, name, kind}); accounts not named stay as they are."""
        if not isinstance(accounts, list) or not accounts:
            raise InvalidInput([FieldError("accounts", "send a list of {number, name, kind}")])
        existing = {a.number: a for a in self._account_rows()}
        for index, item in enumerate(accounts):
            where = f"accounts[{index}]"
            if not isinstance(item, dict):
                raise InvalidInput([FieldError(where, "must be an object {number, name, kind}")])
            number = str(item.get("number") or "").strip()
            if not number.isdigit() or not 3 <= len(number) <= 6:
                raise InvalidInput([FieldError(f"{where}.number", "must be an account number of 3 to 6 digits")])
            name = _parse_text(f"{where}.name", item.get("name"), 200)
            if not name:
                raise InvalidInput([FieldError(f"{where}.name", "must not be empty")])
            kind = item.get("kind") or (existing[number].kind if number in existing else None)
            if kind not in KINDS:
                raise InvalidInput([FieldError(f"{where}.kind", f"must be one of {', '.join(KINDS)}")])
            row = existing.get(number)
            if row is None:
                row = TrusteeAccount(mandate_id=self.instance.mandate_id, feature_instance_id=self.instance.id,
                                     number=number, name=name, kind=kind, sys_created_by=self.user.id)
                existing[number] = row
            else:
                if not self.may("update", ACCOUNT_DATA, row):
                    raise Forbidden(f"your roles allow changing only accounts you added, not {number}")
                row.name, row.kind, row.sys_modified_at = name, kind, utcnow()
            self.session.add(row)
        self.session.flush()
        return self.accounts()

    @guarded(DATA, VAT_DATA, "read")
    def vat_codes(self) -> list[VatCodeView]:
        """The instance's VAT codes (current Swiss rates)."""
        return [VatCodeView(c.code, c.rate, c.label) for c in self._codes().values()]

    @guarded(DATA, RECEIPT_DATA, "read")
    def closed_until(self) -> date | None:
        """The end of the closed period (feature_instance.settings["closedUntil"]), if any."""
        return proposals.closed_until(self.instance.settings)

    @guarded(RESOURCE, MANAGE_ACCOUNTS)
    def set_closed_until(self, value: date | str | None) -> date | None:
        """Close the books up to `value` (None reopens them): no booking may be dated on or before it."""
        parsed = _parse_date("closedUntil", value)
        settings = dict(self.instance.settings or {})
        if parsed is None:
            settings.pop("closedUntil", None)
        else:
            settings["closedUntil"] = parsed.isoformat()
        self.instance.settings = settings
        self.session.add(self.instance)
        self.session.flush()
        return parsed

    def may_book(self) -> bool:
        """Whether the page shows the book and sync buttons."""
        return self.may_call(TrusteeInterface.book_receipt)

    def may_sync(self) -> bool:
        """Whether the page offers the sync (and may list the Bexio connections)."""
        return self.may_call(TrusteeInterface.sync)

    def may_upload(self) -> bool:
        """Whether the page offers the upload."""
        return self.may_call(TrusteeInterface.upload_receipts)

    def may_manage_accounts(self) -> bool:
        """Whether the page offers editing the chart of accounts and the closed period."""
        return self.may_call(TrusteeInterface.put_accounts)


def open_interface(access: AccessContext, feature_instance_id: str, mandate_id: str | None = None
                   ) -> TrusteeInterface:
    """The door of Trustee instance `feature_instance_id` for `access.user`, else NotFound."""
    return TrusteeInterface(access, access.require_instance(feature_instance_id, FEATURE_CODE, mandate_id))


def get_interface(user: User, mandate_id: str | None, feature_instance_id: str,
                  session: Session) -> TrusteeInterface:
    """The feature's data access (backend/features/registry.py): the door of one instance."""
    return open_interface(AccessContext(session, user), feature_instance_id, mandate_id)


__all__ = ["CREDITORS", "AccountView", "PositionView", "ReceiptDetail", "ReceiptView", "SyncResult",
           "TrusteeInterface", "VatCodeView", "get_interface", "open_interface"]
