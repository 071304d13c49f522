"""REST routes of one Trustee instance: {base} = /api/trustee/{instanceId}.

Mounted automatically under /api/trustee by the feature registry. Every route translates to one
method of the Trustee's door (backend/features/trustee/interface.py), which declares and enforces
the rights; the routes carry those declarations (declared_by).
"""

from __future__ import annotations

from dataclasses import asdict
from datetime import date, datetime
from typing import Annotated, Any, Literal
from urllib.parse import quote

from fastapi import APIRouter, Body, Depends, File, Path, Query, Response, UploadFile

from backend.api.deps import CurrentUser, DbSession
from backend.api.permissions import declared_by
from backend.api.schemas import CamelModel
from backend.features.trustee.interface import TrusteeInterface, get_interface

router = APIRouter(prefix="/{instanceId}", tags=["trustee"])


class ReceiptOut(CamelModel):
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


class PositionOut(CamelModel):
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


class ReceiptDetailOut(CamelModel):
    receipt: ReceiptOut
    text: str
    lines: list[PositionOut]


class AccountOut(CamelModel):
    number: str
    name: str
    kind: str


class AccountIn(CamelModel):
    number: str
    name: str
    kind: str | None = None


class VatCodeOut(CamelModel):
    code: str
    rate: float
    label: str


class SyncIn(CamelModel):
    connection_id: str


class SyncFailure(CamelModel):
    receipt_id: str
    message: str


class SyncOut(CamelModel):
    synced: int
    failed: list[SyncFailure]
    message: str


class ConnectionOut(CamelModel):
    id: str
    label: str


class SettingsIn(CamelModel):
    closed_until: date | None = None


class SettingsOut(CamelModel):
    closed_until: date | None


def trustee(
    instance_id: Annotated[str, Path(alias="instanceId")], user: CurrentUser, session: DbSession
) -> TrusteeInterface:
    """The caller's door to the instance; 404 when they may not open it (or it is no Trustee)."""
    return get_interface(user, None, instance_id, session)


Trustee = Annotated[TrusteeInterface, Depends(trustee)]
ReceiptId = Annotated[str, Path(alias="receiptId")]
PositionId = Annotated[str, Path(alias="positionId")]
Changes = Annotated[dict[str, Any], Body(description="The fields to change (camelCase), e.g. {\"total\": 108.1}")]


def _receipt(view: Any) -> ReceiptOut:
    return ReceiptOut.model_validate(asdict(view))


def _position(view: Any) -> PositionOut:
    return PositionOut.model_validate(asdict(view))


def _attachment(name: str, mime: str, data: bytes, inline: bool = False) -> Response:
    fallback = "".join(c if c.isascii() and c.isprintable() and c not in '"\\' else "_" for c in name)
    disposition = "inline" if inline else "attachment"
    return Response(content=data, media_type=mime, headers={
        "Content-Disposition": f"{disposition}; filename=\"{fallback}\"; filename*=UTF-8''{quote(name, safe='')}",
        "X-Content-Type-Options": "nosniff",
        "Content-Security-Policy": "sandbox",
    })


# --- receipts ---------------------------------------------------------------------------------------


@router.post("/receipts", status_code=201, response_model=list[ReceiptOut],
             **declared_by(TrusteeInterface.upload_receipts))
def upload_receipts(
    iface: Trustee,
    files: Annotated[list[UploadFile] | None, File(description="One or more receipt files (PDF or image)")] = None,
) -> list[ReceiptOut]:
    """Upload receipts (multipart field `files`, repeated); each becomes a draft waiting for extraction."""
    return [_receipt(v) for v in iface.upload_receipts([(f.file.read(), f.filename or "", f.content_type)
                                                        for f in files or []])]


@router.get("/receipts", response_model=list[ReceiptOut], **declared_by(TrusteeInterface.list_receipts))
def list_receipts(
    iface: Trustee,
    status: Annotated[Literal["draft", "checked", "booked", "synced"] | None, Query()] = None,
) -> list[ReceiptOut]:
    return [_receipt(v) for v in iface.list_receipts(status)]


@router.get("/receipts/{receiptId}", response_model=ReceiptDetailOut, **declared_by(TrusteeInterface.get_receipt))
def get_receipt(receipt_id: ReceiptId, iface: Trustee) -> ReceiptDetailOut:
    detail = iface.get_receipt(receipt_id)
    return ReceiptDetailOut(receipt=_receipt(detail.receipt), text=detail.text,
                            lines=[_position(p) for p in detail.lines])


@router.get("/receipts/{receiptId}/file", response_class=Response, **declared_by(TrusteeInterface.receipt_file))
def receipt_file(receipt_id: ReceiptId, iface: Trustee) -> Response:
    """The receipt's document (sandboxed, never run in the API's origin)."""
    name, mime, data = iface.receipt_file(receipt_id)
    return _attachment(name, mime, data, inline=True)


@router.patch("/receipts/{receiptId}", response_model=ReceiptOut, **declared_by(TrusteeInterface.update_receipt))
def update_receipt(receipt_id: ReceiptId, changes: Changes, iface: Trustee) -> ReceiptOut:
    return _receipt(iface.update_receipt(receipt_id, changes))


@router.post("/receipts/{receiptId}/extract", response_model=ReceiptOut,
             **declared_by(TrusteeInterface.extract_receipt))
def extract_receipt(receipt_id: ReceiptId, iface: Trustee) -> ReceiptOut:
    """Read the receipt with the AI model; extractionStatus says how it went."""
    return _receipt(iface.extract_receipt(receipt_id))


@router.post("/receipts/{receiptId}/check", response_model=ReceiptOut, **declared_by(TrusteeInterface.check_receipt))
def check_receipt(receipt_id: ReceiptId, iface: Trustee) -> ReceiptOut:
    return _receipt(iface.check_receipt(receipt_id))


@router.post("/receipts/{receiptId}/propose", response_model=list[PositionOut],
             **declared_by(TrusteeInterface.propose))
def propose(receipt_id: ReceiptId, iface: Trustee) -> list[PositionOut]:
    """Booking proposals (they replace the receipt's open ones)."""
    return [_position(p) for p in iface.propose(receipt_id)]


@router.post("/receipts/{receiptId}/book", response_model=ReceiptOut, **declared_by(TrusteeInterface.book_receipt))
def book_receipt(receipt_id: ReceiptId, iface: Trustee) -> ReceiptOut:
    return _receipt(iface.book_receipt(receipt_id))


# --- booking lines ----------------------------------------------------------------------------------


@router.patch("/positions/{positionId}", response_model=PositionOut, **declared_by(TrusteeInterface.update_position))
def update_position(position_id: PositionId, changes: Changes, iface: Trustee) -> PositionOut:
    return _position(iface.update_position(position_id, changes))


@router.post("/positions/{positionId}/accept", response_model=PositionOut,
             **declared_by(TrusteeInterface.accept_position))
def accept_position(position_id: PositionId, iface: Trustee) -> PositionOut:
    return _position(iface.accept_position(position_id))


@router.post("/positions/{positionId}/reject", response_model=PositionOut,
             **declared_by(TrusteeInterface.reject_position))
def reject_position(position_id: PositionId, iface: Trustee) -> PositionOut:
    return _position(iface.reject_position(position_id))


# --- journal, export, sync ----------------------------------------------------------------------------

DateFrom = Annotated[date | None, Query(alias="dateFrom", description="First booking date (YYYY-MM-DD)")]
DateTo = Annotated[date | None, Query(alias="dateTo", description="Last booking date (YYYY-MM-DD)")]
AccountFilter = Annotated[str | None, Query(max_length=16, description="Lines on this account (debit or credit)")]
TextFilter = Annotated[str | None, Query(max_length=200, description="Words in the booking text")]
StatusFilter = Annotated[Literal["booked", "synced"] | None, Query()]


@router.get("/journal", response_model=list[PositionOut], **declared_by(TrusteeInterface.journal))
def journal(iface: Trustee, date_from: DateFrom = None, date_to: DateTo = None, account: AccountFilter = None,
            text: TextFilter = None, status: StatusFilter = None) -> list[PositionOut]:
    """The booked and synced lines, by booking date."""
    return [_position(p) for p in iface.journal(date_from, date_to, account, text, status)]


@router.get("/journal/export", response_class=Response, **declared_by(TrusteeInterface.export_journal))
def export_journal(iface: Trustee, format: Annotated[Literal["csv", "xlsx"], Query()] = "csv",  # noqa: A002
                   date_from: DateFrom = None, date_to: DateTo = None, account: AccountFilter = None,
                   text: TextFilter = None, status: StatusFilter = None) -> Response:
    """The filtered journal as CSV (semicolons, UTF-8) or XLSX."""
    name, mime, data = iface.export_journal(format, date_from=date_from, date_to=date_to, account=account,
                                            text=text, status=status)
    return _attachment(name, mime, data)


@router.post("/sync", response_model=SyncOut, **declared_by(TrusteeInterface.sync))
def sync(body: SyncIn, iface: Trustee) -> SyncOut:
    """Send the booked receipts to Bexio through the connection; synced ones are never sent twice."""
    result = iface.sync(body.connection_id)
    return SyncOut(synced=result.synced, message=result.message,
                   failed=[SyncFailure(receipt_id=r, message=m) for r, m in result.failed])


@router.get("/connections", response_model=list[ConnectionOut], **declared_by(TrusteeInterface.bexio_connections))
def bexio_connections(iface: Trustee) -> list[ConnectionOut]:
    """The Bexio connections the caller may sync through."""
    return [ConnectionOut(id=i, label=label) for i, label in iface.bexio_connections()]


# --- accounts, VAT codes, settings ----------------------------------------------------------------------


@router.get("/accounts", response_model=list[AccountOut], **declared_by(TrusteeInterface.accounts))
def accounts(iface: Trustee) -> list[AccountOut]:
    return [AccountOut.model_validate(asdict(a)) for a in iface.accounts()]


@router.put("/accounts", response_model=list[AccountOut], **declared_by(TrusteeInterface.put_accounts))
def put_accounts(body: list[AccountIn], iface: Trustee) -> list[AccountOut]:
    """Add accounts or rename them; the others stay."""
    return [AccountOut.model_validate(asdict(a))
            for a in iface.put_accounts([a.model_dump() for a in body])]


@router.get("/vat-codes", response_model=list[VatCodeOut], **declared_by(TrusteeInterface.vat_codes))
def vat_codes(iface: Trustee) -> list[VatCodeOut]:
    return [VatCodeOut.model_validate(asdict(c)) for c in iface.vat_codes()]


@router.get("/settings", response_model=SettingsOut, **declared_by(TrusteeInterface.closed_until))
def get_settings(iface: Trustee) -> SettingsOut:
    return SettingsOut(closed_until=iface.closed_until())


@router.put("/settings", response_model=SettingsOut, **declared_by(TrusteeInterface.set_closed_until))
def put_settings(body: SettingsIn, iface: Trustee) -> SettingsOut:
    """Close the books up to closedUntil (null reopens them)."""
    return SettingsOut(closed_until=iface.set_closed_until(body.closed_until))
