"""State of the Trustee page: the receipts inbox, the review of one receipt, the journal.

Everything goes through the Trustee door (backend/features/trustee/interface.py), which checks
every right server-side, computes the proposals, refuses what does not balance and says why;
this state only shows what it answers and hands the user's input over as typed. Extraction runs
in a background event handler (a worker thread per model call), one receipt after the other, so
the inbox shows each file's progress while the page stays usable.
"""

from __future__ import annotations

import asyncio
import base64
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import date
from typing import Any, TypedDict

import reflex as rx

from backend import auth
from backend.db import session_scope
from backend.errors import DomainError
from backend.features.trustee.interface import (
    PositionView,
    ReceiptDetail,
    ReceiptView,
    TrusteeInterface,
    get_interface,
)
from backend.files.service import get_limits, human_size
from state.auth import TRUSTEE, AuthState, NotSignedIn
from state.instance_choice import InstanceChoiceMixin
from state.page import PageMixin, user_message
from state.permissions import requires, requires_door

LOW_CONFIDENCE = 0.7  # a field read with less is highlighted for the reviewer
DOCUMENT_PREVIEW_BYTES = 8 * 1024 * 1024  # larger documents are not put into the page
ALL = "all"  # the filters' value for "any status" (Radix selects refuse "")
EDITABLE = ("draft", "checked")
# The receipt's fields in the order the review shows them: (key, label, input type).
FIELDS = (
    ("supplier", "Supplier", "text"),
    ("receipt_date", "Date", "date"),
    ("total", "Total", "number"),
    ("currency", "Currency", "text"),
    ("vat_amount", "VAT amount", "number"),
    ("vat_code", "VAT code", "vat"),
    ("description", "Description", "text"),
)
EXTRACTION_LABELS = {"pending": "not extracted yet", "done": "extracted", "failed": "extraction failed",
                     "not_receipt": "not a receipt"}


class ReceiptRow(TypedDict):
    id: str
    file_name: str
    supplier: str
    date: str
    total: str
    status: str
    extraction_status: str
    extraction_label: str
    extraction_message: str
    checked_by: str


class PositionRow(TypedDict):
    id: str
    receipt_id: str
    date: str
    debit: str
    credit: str
    amount: str
    vat_code: str
    vat_amount: str
    text: str
    status: str
    source: str
    reason: str


class Choice(TypedDict):
    value: str
    label: str


def _money(value: float | None) -> str:
    return "" if value is None else f"{value:.2f}"


def _day(value: date | None) -> str:
    return value.isoformat() if value else ""


def _camel(key: str) -> str:
    head, *rest = key.split("_")
    return head + "".join(part.title() for part in rest)


def _receipt_row(view: ReceiptView) -> ReceiptRow:
    total = _money(view.total)
    return ReceiptRow(
        id=view.id, file_name=view.file_name or "", supplier=view.supplier or "", date=_day(view.receipt_date),
        total=f"{total} {view.currency or ''}".strip() if total else "", status=view.status,
        extraction_status=view.extraction_status,
        extraction_label=EXTRACTION_LABELS.get(view.extraction_status, view.extraction_status),
        extraction_message=view.extraction_message or "", checked_by=view.checked_by or "")


def _position_row(view: PositionView) -> PositionRow:
    return PositionRow(
        id=view.id, receipt_id=view.receipt_id, date=_day(view.booking_date), debit=view.debit_account or "",
        credit=view.credit_account or "", amount=_money(view.amount), vat_code=view.vat_code or "",
        vat_amount=_money(view.vat_amount), text=view.text or "", status=view.status, source=view.source,
        reason=view.reason or "")


def _field_values(view: ReceiptView) -> dict[str, str]:
    values = {"supplier": view.supplier, "receipt_date": _day(view.receipt_date), "total": _money(view.total),
              "currency": view.currency, "vat_amount": _money(view.vat_amount), "vat_code": view.vat_code,
              "description": view.description}
    return {key: str(value or "") for key, value in values.items()}


def _confidence(view: ReceiptView) -> dict[str, str]:
    """Each field's confidence as the review shows it ("" when the extraction gave none)."""
    given = view.confidence or {}
    shown = {}
    for key, _label, _kind in FIELDS:
        value = given.get(key, given.get(_camel(key)))
        shown[key] = f"{round(float(value) * 100)} %" if isinstance(value, int | float) else ""
    return shown


def _low(view: ReceiptView) -> dict[str, bool]:
    given = view.confidence or {}
    low = {}
    for key, _label, _kind in FIELDS:
        value = given.get(key, given.get(_camel(key)))
        low[key] = isinstance(value, int | float) and float(value) < LOW_CONFIDENCE
    return low


def _document(name: str, mime: str, data: bytes) -> tuple[str, str, str]:
    """(kind, data URL, note) of a receipt's file for the review: image, pdf or none."""
    if len(data) > DOCUMENT_PREVIEW_BYTES:
        return "none", "", f"{name} is {human_size(len(data))}: too large to show here."
    source = f"data:{mime};base64,{base64.b64encode(data).decode()}"
    if mime.startswith("image/"):
        return "image", source, ""
    if mime == "application/pdf":
        return "pdf", source, ""
    return "none", "", f"No preview for {mime}."


def _parse_day(value: str, label: str) -> date | None:
    value = value.strip()
    if not value:
        return None
    try:
        return date.fromisoformat(value)
    except ValueError as exc:
        raise ValueError(f"{label}: '{value}' is not a date; expected YYYY-MM-DD.") from exc


@contextmanager
def _door(token: str, instance_id: str) -> Iterator[TrusteeInterface]:
    """The Trustee door of `instance_id` for the user of `token`, in one transaction (for worker threads)."""
    with session_scope() as session:
        user = auth.user_for_token(session, token)
        if user is None:
            raise NotSignedIn()
        yield get_interface(user, None, instance_id, session)


def _extract(token: str, instance_id: str, receipt_id: str) -> str:
    """Extract one receipt; what went wrong ("" when the extraction ran, whatever it found)."""
    try:
        with _door(token, instance_id) as door:
            door.extract_receipt(receipt_id)
    except NotSignedIn:
        return "Not signed in."
    except DomainError as exc:
        return user_message(exc)
    return ""


class TrusteeState(InstanceChoiceMixin, PageMixin, AuthState):
    """What the Trustee page shows of the Trustee instance its header names."""

    instance_id: str = ""
    instance_label: str = ""
    tab: str = "receipts"
    # what the user may do here (the door's answers; the door checks again on every call)
    can_upload: bool = False
    can_extract: bool = False
    can_edit: bool = False
    can_check: bool = False
    can_propose: bool = False
    can_decide: bool = False
    may_book: bool = False
    can_sync: bool = False
    # the inbox
    receipts: list[ReceiptRow] = []
    receipt_filter: str = ALL
    extracting: list[str] = []
    uploading: bool = False
    upload_percent: int = 0
    file_max_bytes: int = 0
    file_limit: str = ""
    # the receipt under review
    open_id: str = ""
    open_name: str = ""
    open_status: str = ""
    open_extraction_status: str = ""
    open_extraction_message: str = ""
    open_checked_by: str = ""
    open_total: str = ""
    open_currency: str = ""
    doc_kind: str = ""
    doc_src: str = ""
    doc_note: str = ""
    doc_text: str = ""
    field_values: dict[str, str] = {}
    field_original: dict[str, str] = {}
    field_confidence: dict[str, str] = {}
    field_low: dict[str, bool] = {}
    lines: list[PositionRow] = []
    line_edit_id: str = ""
    line_values: dict[str, str] = {}
    accepted_sum: str = ""
    book_reason: str = ""
    accounts: list[Choice] = []
    vat_codes: list[Choice] = []
    # the journal
    journal_rows: list[PositionRow] = []
    journal_from: str = ""
    journal_to: str = ""
    journal_account: str = ""
    journal_text: str = ""
    journal_status: str = ALL
    journal_form_key: int = 0
    journal_total: str = "0.00"
    connections: list[Choice] = []
    sync_connection_id: str = ""
    sync_done: bool = False
    sync_synced: int = 0
    sync_failures: list[str] = []
    sync_message: str = ""

    # True while a worker extracts; the page starts one whenever receipts wait and none runs
    # (an upload handler must not chain it: its request would stay open, blocking the next drop)
    extraction_running: bool = False

    # --- loading --------------------------------------------------------------------------------

    def _instance_feature_code(self) -> str:
        return TRUSTEE

    def _instance_switched(self, instance_id: str):
        """The header switched to another Trustee instance: its receipts and journal, nothing open."""
        self._leave_instance()
        self.instance_id = instance_id
        return self._reload()

    def _instance_switch_blocked(self) -> str:
        return "Wait until the extraction has finished before switching to another instance." \
            if self.extracting else ""

    def _leave_instance(self) -> None:
        self._close_receipt()
        self.extracting = []
        self.sync_done, self.sync_failures, self.sync_message, self.sync_synced = False, [], "", 0
        self.journal_from = self.journal_to = self.journal_account = self.journal_text = ""
        self.journal_status = self.receipt_filter = ALL
        self.journal_form_key += 1
        self.sync_connection_id = ""

    def _close_receipt(self) -> None:
        self.open_id = self.open_name = self.open_status = self.open_extraction_status = ""
        self.open_extraction_message = self.open_checked_by = self.open_total = self.open_currency = ""
        self.doc_kind = self.doc_src = self.doc_note = self.doc_text = ""
        self.field_values, self.field_original, self.field_confidence, self.field_low = {}, {}, {}, {}
        self.lines, self.line_edit_id, self.line_values = [], "", {}
        self.accepted_sum = self.book_reason = ""

    def _refresh(self) -> None:
        with self._user_session() as (session, user):
            self._load_navigation(session, user)
            chosen = self._current_instance(session, user, self.instance_id)
            door = get_interface(user, None, chosen.id, session) if chosen else None
            self.instance_id = door.instance.id if door else ""
            self.instance_label = door.instance.label if door else ""
            if door is None:
                self._show_nothing()
            else:
                self._load(door)
        self.loaded = True

    def _show_nothing(self) -> None:
        self._close_receipt()
        self.receipts, self.journal_rows, self.connections = [], [], []
        self.can_upload = self.can_extract = self.can_edit = self.can_check = False
        self.can_propose = self.can_decide = self.may_book = self.can_sync = False

    def _load(self, door: TrusteeInterface) -> None:
        limit = get_limits().max_file_bytes
        self.file_max_bytes, self.file_limit = limit, human_size(limit)
        self.can_upload = door.may_call(TrusteeInterface.upload_receipt)
        self.can_extract = door.may_call(TrusteeInterface.extract_receipt)
        self.can_edit = door.may_call(TrusteeInterface.update_receipt)
        self.can_check = door.may_call(TrusteeInterface.check_receipt)
        self.can_propose = door.may_call(TrusteeInterface.propose)
        self.can_decide = door.may_call(TrusteeInterface.accept_position)
        self.may_book = door.may_book()
        self.can_sync = door.may_call(TrusteeInterface.bexio_connections)
        self._load_receipts(door)
        if self.open_id:
            try:
                self._load_open(door, door.get_receipt(self.open_id))
            except DomainError:  # gone meanwhile, or no longer readable: the review closes
                self._close_receipt()
                if self.tab == "review":
                    self.tab = "receipts"
        self._load_journal(door)
        self._load_connections(door)

    def _load_receipts(self, door: TrusteeInterface) -> None:
        status = None if self.receipt_filter == ALL else self.receipt_filter
        self.receipts = [_receipt_row(r) for r in door.list_receipts(status)]

    def _load_choices(self, door: TrusteeInterface) -> None:
        """The chart of accounts and the VAT codes, for the review's inputs (none without the right to read them)."""
        try:
            self.accounts = [Choice(value=a.number, label=f"{a.number} {a.name}") for a in door.accounts()]
            self.vat_codes = [Choice(value=v.code, label=f"{v.code} · {v.label}") for v in door.vat_codes()]
        except DomainError:
            self.accounts, self.vat_codes = [], []

    def _load_open(self, door: TrusteeInterface, detail: ReceiptDetail) -> None:
        """Show `detail`; fields the user changed and did not save yet keep what they typed."""
        view = detail.receipt
        same = view.id == self.open_id
        if not same or not self.doc_src and not self.doc_note:
            name, mime, data = door.receipt_file(view.id)
            self.doc_kind, self.doc_src, self.doc_note = _document(name, mime, data)
            self._load_choices(door)
        values = _field_values(view)
        if same and self.field_original:
            for key, typed in self.field_values.items():
                if typed != self.field_original.get(key):
                    values[key] = typed
        self.open_id, self.open_name, self.open_status = view.id, view.file_name or "", view.status
        self.open_extraction_status = view.extraction_status
        self.open_extraction_message = view.extraction_message or ""
        self.open_checked_by = view.checked_by or ""
        self.open_total, self.open_currency = _money(view.total), view.currency or ""
        self.doc_text = detail.text or ""
        self.field_original, self.field_values = _field_values(view), values
        self.field_confidence, self.field_low = _confidence(view), _low(view)
        self.lines = [_position_row(p) for p in detail.lines]
        self._judge_balance(view, detail.lines)

    def _judge_balance(self, view: ReceiptView, lines: list[PositionView]) -> None:
        """What the Book button says: why it is disabled, or "" when the door may book it."""
        accepted = [p for p in lines if p.status == "accepted"]
        total = round(sum(p.amount or 0 for p in accepted), 2)
        self.accepted_sum = f"{total:.2f}"
        if view.status != "checked":
            self.book_reason = {"draft": "Mark the receipt as checked first.",
                                "booked": "Booked.", "synced": "Booked and synced."}.get(view.status, "")
        elif not accepted:
            self.book_reason = "Accept at least one proposed line first."
        elif view.total is None:
            self.book_reason = "The receipt has no total."
        elif abs(total - view.total) > 0.005:
            self.book_reason = (f"The accepted lines ({total:.2f}) do not balance with the receipt's total "
                                f"({view.total:.2f}).")
        else:
            self.book_reason = ""

    def _filters(self) -> dict[str, Any]:
        return {"date_from": _parse_day(self.journal_from, "Date from"),
                "date_to": _parse_day(self.journal_to, "Date to"),
                "account": self.journal_account.strip() or None, "text": self.journal_text.strip() or None,
                "status": None if self.journal_status == ALL else self.journal_status}

    def _load_journal(self, door: TrusteeInterface) -> None:
        try:
            filters = self._filters()
        except ValueError as exc:
            self.error = str(exc)
            return
        lines = door.journal(**filters)
        self.journal_rows = [_position_row(p) for p in lines]
        self.journal_total = f"{round(sum(p.amount or 0 for p in lines), 2):.2f}"

    def _load_connections(self, door: TrusteeInterface) -> None:
        if not self.can_sync:
            self.connections = []
            return
        self.connections = [Choice(value=cid, label=label) for cid, label in door.bexio_connections()]
        if self.sync_connection_id not in {c["value"] for c in self.connections}:
            self.sync_connection_id = self.connections[0]["value"] if self.connections else ""

    def _with_door(self, work: Callable[[TrusteeInterface], Any], success: str = "") -> tuple[bool, Any]:
        """Run `work(door)` in one transaction, then reload: (whether it succeeded, the event to return)."""
        instance_id = self.instance_id
        return self._attempt(lambda session, user: work(get_interface(user, None, instance_id, session)), success)

    @rx.event
    @requires_door(TrusteeInterface.list_receipts)
    def load(self):
        """on_load: check the sign-in, then the user's current Trustee instance, its receipts and journal."""
        previous = self.instance_id
        if not self.extracting:
            self.instance_id = ""
        event = self._reload()
        if previous and self.instance_id != previous:  # chosen in another tab or page meanwhile
            self._leave_instance()
        return event

    @rx.event
    @requires("ui")
    def set_tab(self, tab: str):
        self.tab = tab if tab in ("receipts", "review", "journal") else "receipts"
        self.error = ""

    # --- the inbox ------------------------------------------------------------------------------

    @rx.event
    @requires_door(TrusteeInterface.list_receipts)
    def filter_receipts(self, status: str):
        self.receipt_filter = status or ALL
        return self._reload()

    @rx.event
    @requires("ui")
    def upload_progress(self, progress: dict):
        """The browser's upload progress (0..1) as the bar's percent."""
        fraction = float(progress.get("progress") or 0)
        self.uploading = fraction < 1
        self.upload_percent = int(round(fraction * 100))

    @rx.event
    @requires("ui")
    def upload_rejected(self, names: list[str]):
        """Files the drop zone refused before sending (over POWERON_FILE_MAX_BYTES)."""
        limit = human_size(self.file_max_bytes)
        self.notice = ""
        self.error = " ".join(f"{n} is too large: files may be at most {limit}." for n in names) or \
            f"The file is too large: files may be at most {limit}."

    @rx.event
    @requires_door(TrusteeInterface.upload_receipt)
    async def handle_upload(self, uploads: list[rx.UploadFile]):
        """Store each dropped file as a receipt (each in its own transaction), then extract them one by one."""
        self.uploading, self.upload_percent = False, 0
        if not uploads:
            return None
        stored, problems = [], []
        for upload in uploads:
            name = (upload.name or "upload").replace("\\", "/").rsplit("/", 1)[-1]
            data = await upload.read()
            content_type = upload.headers.get("content-type") if upload.headers else None
            try:
                with self._user_session() as (session, user):
                    view = get_interface(user, None, self.instance_id, session).upload_receipt(data, name, content_type)
                stored.append(view.id)
            except NotSignedIn:
                return self._signed_out()
            except DomainError as exc:
                problems.append(f"{name}: {user_message(exc)}")
        self.error = " ".join(problems)
        self.notice = (f"Uploaded {len(stored)} file{'s' if len(stored) != 1 else ''}; extracting."
                       if stored else "")
        event = self._reload()
        if event is not None:
            return event
        if stored and self.can_extract:  # the page's extraction trigger starts the worker
            self.extracting = [*self.extracting, *[i for i in stored if i not in self.extracting]]
        return None

    @rx.event
    @requires_door(TrusteeInterface.extract_receipt)
    def extract(self, receipt_id: str):
        """Extract (again) one receipt, after those already waiting."""
        self.error = self.notice = ""
        if receipt_id and receipt_id not in self.extracting:
            self.extracting = [*self.extracting, receipt_id]
        return TrusteeState.run_extractions

    @rx.event(background=True)
    @requires_door(TrusteeInterface.extract_receipt)
    async def run_extractions(self):
        """Extract the waiting receipts one after the other; each row shows its progress."""
        async with self:
            if self.extraction_running or not self.extracting:
                return
            self.extraction_running = True
            token, instance_id = self.token, self.instance_id
        try:
            while True:
                async with self:
                    if self.instance_id != instance_id:
                        self.extracting = []
                    if not self.extracting:  # checked and ended under one lock: no receipt is left behind
                        self.extraction_running = False
                        return
                    receipt_id = self.extracting[0]
                problem = await asyncio.to_thread(_extract, token, instance_id, receipt_id)
                async with self:
                    self.extracting = [i for i in self.extracting if i != receipt_id]
                    if problem:
                        self.error = problem
                    self._reload()
        except BaseException:
            async with self:
                self.extraction_running = False
            raise

    # --- the review -----------------------------------------------------------------------------

    @rx.event
    @requires_door(TrusteeInterface.get_receipt, TrusteeInterface.receipt_file)
    def open_receipt(self, receipt_id: str):
        """Review a receipt beside its document."""
        self.error = self.notice = ""
        if receipt_id != self.open_id:
            self._close_receipt()
        try:
            with self._user_session() as (session, user):
                door = get_interface(user, None, self.instance_id, session)
                self._load_open(door, door.get_receipt(receipt_id))
        except NotSignedIn:
            return self._signed_out()
        except DomainError as exc:
            self.error = user_message(exc)
            return None
        self.tab = "review"
        return None

    @rx.event
    @requires("ui")
    def close_receipt(self):
        self._close_receipt()
        self.tab = "receipts"

    @rx.event
    @requires("ui")
    def set_field(self, key: str, value: str):
        self.field_values = {**self.field_values, key: value}

    def _changes(self) -> dict[str, str | None]:
        return {key: (value.strip() or None) for key, value in self.field_values.items()
                if value != self.field_original.get(key)}

    @rx.event
    @requires_door(TrusteeInterface.update_receipt)
    def save_fields(self):
        """Save the fields the user changed; the door names a field it refuses."""
        changes, receipt_id = self._changes(), self.open_id
        if not changes:
            self.notice, self.error = "Nothing changed.", ""
            return None
        ok, event = self._with_door(lambda door: door.update_receipt(receipt_id, changes), "Saved.")
        if ok:
            self.field_original = dict(self.field_values)
        return event

    @rx.event
    @requires_door(TrusteeInterface.update_receipt, TrusteeInterface.check_receipt)
    def check(self):
        """Save what the user changed, then mark the receipt as checked (in one transaction)."""
        changes, receipt_id = self._changes(), self.open_id

        def work(door: TrusteeInterface) -> None:
            if changes:
                door.update_receipt(receipt_id, changes)
            door.check_receipt(receipt_id)

        return self._with_door(work, "Checked.")[1]

    @rx.event
    @requires_door(TrusteeInterface.propose)
    def propose(self):
        """Ask for booking proposals (rules learned from earlier bookings, then the model)."""
        receipt_id = self.open_id
        found: list[int] = []
        ok, event = self._with_door(lambda door: found.append(len(door.propose(receipt_id))))
        if ok:
            self.notice = f"{found[0]} line{'s' if found[0] != 1 else ''} proposed: accept or reject each."
        return event

    @rx.event
    @requires_door(TrusteeInterface.accept_position)
    def accept_line(self, position_id: str):
        return self._with_door(lambda door: door.accept_position(position_id))[1]

    @rx.event
    @requires_door(TrusteeInterface.reject_position)
    def reject_line(self, position_id: str):
        return self._with_door(lambda door: door.reject_position(position_id))[1]

    @rx.event
    @requires("ui")
    def edit_line(self, position_id: str):
        line = next((p for p in self.lines if p["id"] == position_id), None)
        if line is None:
            return
        self.line_edit_id = position_id
        self.line_values = {"debit_account": line["debit"], "credit_account": line["credit"],
                            "amount": line["amount"], "vat_code": line["vat_code"],
                            "vat_amount": line["vat_amount"], "text": line["text"]}

    @rx.event
    @requires("ui")
    def set_line_value(self, key: str, value: str):
        self.line_values = {**self.line_values, key: value}

    @rx.event
    @requires("ui")
    def cancel_line(self):
        self.line_edit_id, self.line_values = "", {}

    @rx.event
    @requires_door(TrusteeInterface.update_position)
    def save_line(self):
        """Save the line being edited; the door names a value it refuses."""
        position_id, changes = self.line_edit_id, {k: v.strip() for k, v in self.line_values.items()}
        ok, event = self._with_door(lambda door: door.update_position(position_id, changes), "Line saved.")
        if ok:
            self.line_edit_id, self.line_values = "", {}
        return event

    @rx.event
    @requires_door(TrusteeInterface.book_receipt)
    def book(self):
        """Book the accepted lines; the door refuses lines that do not balance or a closed period."""
        receipt_id = self.open_id
        return self._with_door(lambda door: door.book_receipt(receipt_id), "Booked: the lines are in the journal.")[1]

    # --- the journal ----------------------------------------------------------------------------

    @rx.event
    @requires_door(TrusteeInterface.journal)
    def apply_filters(self, form_data: dict):
        """Show the journal's lines matching the filters' form."""
        self.journal_from = str(form_data.get("date_from") or "")
        self.journal_to = str(form_data.get("date_to") or "")
        self.journal_account = str(form_data.get("account") or "")
        self.journal_text = str(form_data.get("text") or "")
        self.error = self.notice = ""
        try:
            self._filters()
        except ValueError as exc:
            self.error = str(exc)
            return None
        return self._reload()

    @rx.event
    @requires_door(TrusteeInterface.journal)
    def set_journal_status(self, status: str):
        self.journal_status = status or ALL
        return self._reload()

    @rx.event
    @requires_door(TrusteeInterface.journal)
    def reset_filters(self):
        self.journal_from = self.journal_to = self.journal_account = self.journal_text = ""
        self.journal_status = ALL
        self.journal_form_key += 1  # the filter inputs start again from the emptied values
        self.error = ""
        return self._reload()

    @rx.event
    @requires_door(TrusteeInterface.export_journal)
    def export(self, fmt: str):
        """Download the filtered journal as CSV or XLSX."""
        self.error = self.notice = ""
        try:
            filters = self._filters()
            with self._user_session() as (session, user):
                name, mime, data = get_interface(user, None, self.instance_id, session).export_journal(fmt, **filters)
        except ValueError as exc:
            self.error = str(exc)
            return None
        except NotSignedIn:
            return self._signed_out()
        except DomainError as exc:
            self.error = user_message(exc)
            return None
        return rx.download(data=data, filename=name, mime_type=mime)

    @rx.event
    @requires("ui")
    def set_sync_connection(self, connection_id: str):
        self.sync_connection_id = connection_id

    @rx.event
    @requires_door(TrusteeInterface.sync)
    def sync(self):
        """Send the booked lines to Bexio through the chosen connection; show what came of it."""
        connection_id = self.sync_connection_id
        outcome: list[Any] = []
        self.sync_done = False
        ok, event = self._with_door(lambda door: outcome.append(door.sync(connection_id)))
        if ok:
            result = outcome[0]
            self.sync_done, self.sync_synced = True, result.synced
            names = {r["id"]: r["supplier"] or r["file_name"] for r in self.receipts}
            self.sync_failures = [f"{names.get(receipt_id, receipt_id)}: {message}"
                                  for receipt_id, message in result.failed]
            self.sync_message = result.message or ""
        return event
