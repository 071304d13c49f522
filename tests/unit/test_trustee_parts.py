"""The Trustee's pure parts: VAT arithmetic, the model's answer read, the lifecycles, the booking checks and
Bexio's manual entry built from booked lines."""

from __future__ import annotations

from datetime import date
from types import SimpleNamespace

import pytest

from backend.connectors.kinds.bexio import Books, NotInBexio, manual_entry
from backend.errors import InvalidInput
from backend.features.trustee import extraction, lifecycle, proposals
from backend.features.trustee.accounts import SME_CHART, SWISS_VAT_CODES, vat_in_gross, vat_of
from backend.features.trustee.models import TrusteeReceipt, TrusteeVatCode
from backend.statemachines import IllegalTransition


def test_swiss_vat_rates_and_rounding():
    rates = {v.code: v.rate for v in SWISS_VAT_CODES}
    assert (rates["VM81"], rates["VM26"], rates["VM38"], rates["FREI"]) == (8.1, 2.6, 3.8, 0.0)
    assert vat_in_gross(108.10, 8.1) == 8.10 and vat_of(100.0, 8.1) == 8.10
    assert vat_of(33.33, 8.1) == 2.70  # 2.6997 → rounded to 5 Rappen
    assert len({n for n, _, _ in SME_CHART}) == len(SME_CHART)


def test_the_models_answer_is_read_and_checked():
    found = extraction.interpret({"supplier": " SBB ", "date": "2025-08-12T00:00", "total": "1'234,50",
                                  "currency": "chf", "vatAmount": 92.5, "vatRate": 8.1, "description": "x",
                                  "confidence": {"supplier": 2, "total": 0.9}}, "text")
    assert found.status == "done"
    assert found.fields == {"supplier": "SBB", "receiptDate": "2025-08-12", "total": 1234.5, "currency": "CHF",
                            "vatAmount": 92.5, "vatCode": "VM81", "description": "x"}
    assert found.confidence["supplier"] == 1.0 and found.confidence["total"] == 0.9
    assert extraction.interpret({"isReceipt": False, "reason": "a letter"}, "").status == "not_receipt"
    missing = extraction.interpret({"supplier": "SBB", "total": "lots"}, "")
    assert missing.status == "failed" and "no total" in missing.message
    assert extraction.extract(b"hello", "text/plain").status == "failed"
    assert extraction.extract(b"%PDF-1.4 broken", "application/pdf").message.startswith("the PDF cannot be read")


def test_receipts_and_lines_follow_their_lifecycles():
    receipt = TrusteeReceipt(mandate_id="m", feature_instance_id="i", status="draft")
    with pytest.raises(IllegalTransition, match="cannot book"):
        lifecycle.RECEIPT.check(receipt, "book")
    assert lifecycle.RECEIPT.apply(None, receipt, "check").status == "checked"
    assert lifecycle.RECEIPT.states == {"draft", "checked", "booked", "synced"}
    assert lifecycle.POSITION.states == {"proposed", "accepted", "rejected", "booked", "synced"}
    with pytest.raises(IllegalTransition):
        lifecycle.POSITION.check(SimpleNamespace(id="p", status="rejected"), "book")


def _line(amount: float, debit: str = "6640", vat_code: str | None = None, vat: float = 0.0, day=date(2025, 8, 12)):
    return SimpleNamespace(amount=amount, debit_account=debit, credit_account="2000", vat_code=vat_code,
                           vat_amount=vat, booking_date=day, text=f"line {amount}")


CODES = {c.code: TrusteeVatCode(mandate_id="m", feature_instance_id="i", code=c.code, rate=c.rate, label=c.label,
                                account=c.account) for c in SWISS_VAT_CODES}


def test_booking_checks_name_the_difference_the_vat_and_the_closed_period():
    receipt = TrusteeReceipt(mandate_id="m", feature_instance_id="i", supplier="SBB", total=108.10, vat_amount=8.10,
                             receipt_date=date(2025, 8, 12))
    good = [_line(100.0, vat_code="VM81", vat=8.10), _line(8.10, "1170")]
    proposals.check_booking(receipt, good, CODES, {})
    with pytest.raises(InvalidInput, match="difference of 8.10"):
        proposals.check_booking(receipt, good[:1], CODES, {})
    with pytest.raises(InvalidInput, match="is 8.10, not 5.00"):
        proposals.check_booking(receipt, [_line(100.0, vat_code="VM81", vat=5.0), good[1]], CODES, {})
    with pytest.raises(InvalidInput, match="period up to 2025-08-31 is closed"):
        proposals.check_booking(receipt, good, CODES, {"closedUntil": "2025-08-31"})
    with pytest.raises(InvalidInput, match="no accepted booking line"):
        proposals.check_booking(receipt, [], CODES, {})


def test_bexio_gets_one_entry_line_per_booked_line_with_its_ids():
    receipt = SimpleNamespace(id="r1", file_name="sbb.pdf")
    books = Books({"6640": 1, "2000": 2, "1170": 3}, {"VM81": 11})
    # The taxed line goes gross with its tax id; Bexio books the VAT, so the input-tax line stays out.
    entry = manual_entry(receipt, [_line(100.0, vat_code="VM81", vat=8.1), _line(8.1, "1170")], books, CODES)
    assert entry == {"type": "manual_single_entry", "date": "2025-08-12", "reference_nr": "sbb.pdf", "entries": [
        {"debit_account_id": 1, "credit_account_id": 2, "amount": 108.1, "description": "line 100.0", "tax_id": 11}]}
    two = manual_entry(receipt, [_line(50.0), _line(8.1, "1170")], books, CODES)  # no tax code: lines as they are
    assert two["type"] == "manual_group_entry" and [e["amount"] for e in two["entries"]] == [50.0, 8.1]
    with pytest.raises(NotInBexio, match="account 6570 does not exist in Bexio"):
        manual_entry(receipt, [_line(50.0, "6570")], books, CODES)
