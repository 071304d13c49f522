"""Booking proposals (trustee.process) and the checks before a receipt is booked.

A proposal for a receipt is one expense line (the expense account against Kreditoren 2000, net of
VAT) and, when the receipt carries VAT, one input-tax line (1170/1171 against 2000). The expense
account comes first from a rule learned from earlier bookings — the last booked line of the same
supplier — and only without one from the AI model, which must choose one of the instance's expense
accounts. The checks before booking: the accepted lines add up to the receipt's total, their VAT
matches the receipt's VAT and the code's rate, and the booking date lies after the closed period.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import date
from typing import Any

from backend.ai import AiError, get_ai_client, parse_json_reply
from backend.errors import FieldError, InvalidInput
from backend.features.trustee.accounts import CREDITORS, EXPENSE, vat_in_gross, vat_of
from backend.features.trustee.models import TrusteeAccount, TrusteeReceipt, TrusteeVatCode

TOLERANCE = 0.05  # CHF: receipts round to 5 Rappen

MODEL_PROMPT = """You are a Swiss bookkeeper. Choose the expense account for a receipt from this chart of
accounts (number: name):
{accounts}
Answer with one JSON object: {{"account": "<number from the list>", "reason": "<one short sentence why>"}}."""


@dataclass(frozen=True)
class Rule:
    """An earlier booking of the same supplier: the account it went to and where that was."""

    account: str
    booking_date: date
    receipt_label: str


@dataclass(frozen=True)
class Line:
    """One proposed booking line."""

    debit_account: str
    credit_account: str
    amount: float
    vat_code: str | None
    vat_amount: float
    text: str
    source: str
    reason: str


def money(value: float) -> str:
    """CHF amounts as Swiss receipts write them: 1'234.50."""
    return f"{value:,.2f}".replace(",", "'")


def closed_until(settings: dict[str, Any] | None) -> date | None:
    """The instance's closed-until date (feature_instance.settings["closedUntil"]), if any."""
    raw = (settings or {}).get("closedUntil")
    if not raw:
        return None
    try:
        return date.fromisoformat(str(raw)[:10])
    except ValueError:
        return None


def check_period(booking_date: date, settings: dict[str, Any] | None, field_name: str = "receiptDate") -> None:
    """InvalidInput when `booking_date` lies in the closed period."""
    until = closed_until(settings)
    if until is not None and booking_date <= until:
        raise InvalidInput([FieldError(field_name, (
            f"the period up to {until.isoformat()} is closed: no booking dated {booking_date.isoformat()} "
            "can be made; date it later or reopen the period"))])


def require_fields(receipt: TrusteeReceipt) -> tuple[float, date]:
    """The receipt's total and booking date, else InvalidInput naming what is missing."""
    problems = []
    if receipt.total is None:
        problems.append(FieldError("total", "the receipt has no total: enter it (a number, CHF) first"))
    elif receipt.total <= 0:
        problems.append(FieldError("total", f"the total must be positive, not {receipt.total}"))
    if receipt.receipt_date is None:
        problems.append(FieldError("receiptDate", "the receipt has no date: enter it (YYYY-MM-DD) first"))
    if not receipt.supplier.strip():
        problems.append(FieldError("supplier", "the receipt has no supplier: enter it first"))
    if problems:
        raise InvalidInput(problems)
    return float(receipt.total), receipt.receipt_date


def ask_model(receipt: TrusteeReceipt, accounts: list[TrusteeAccount], model: str | None = None) -> tuple[str, str]:
    """(account number, reason) the AI model chooses among the expense `accounts`.

    Raises:
        InvalidInput: the model is unavailable, or chose no account of the chart.
    """
    expense = [a for a in accounts if a.kind == EXPENSE]
    listing = "\n".join(f"{a.number}: {a.name}" for a in expense)
    facts = {"supplier": receipt.supplier, "date": receipt.receipt_date.isoformat() if receipt.receipt_date else None,
             "total": receipt.total, "currency": receipt.currency, "description": receipt.description,
             "lines": receipt.extracted_lines or [], "text": (receipt.extracted_text or "")[:4000]}
    try:
        reply = get_ai_client().chat(f"<receipt>\n{json.dumps(facts, ensure_ascii=False)}\n</receipt>",
                                     model=model, system=MODEL_PROMPT.format(accounts=listing),
                                     response_format="json")
        answer = parse_json_reply(reply.text)
    except AiError as exc:
        raise InvalidInput([FieldError("account", f"no account could be proposed: {exc}")]) from None
    number = str(answer.get("account") or "").strip() if isinstance(answer, dict) else ""
    if number not in {a.number for a in expense}:
        raise InvalidInput([FieldError("account", (
            f"the AI model proposed account '{number or '(none)'}', which is no expense account of this "
            "instance's chart; choose the account by hand"))])
    reason = str(answer.get("reason") or "").strip() if isinstance(answer, dict) else ""
    return number, reason


def build_lines(receipt: TrusteeReceipt, account: str, account_name: str, source: str, reason: str,
                vat: TrusteeVatCode | None, credit: str = CREDITORS) -> tuple[list[Line], list[str]]:
    """The balanced lines of a receipt on `account`, and warnings (VAT that does not fit its code)."""
    total, _ = require_fields(receipt)
    warnings = []
    rate = vat.rate if vat is not None else 0.0
    vat_amount = round(receipt.vat_amount, 2) if receipt.vat_amount is not None else (
        vat_in_gross(total, rate) if rate else 0.0)
    if vat is not None and rate:
        expected = vat_in_gross(total, rate)
        if abs(expected - vat_amount) > TOLERANCE:
            warnings.append(f"the receipt's VAT of {money(vat_amount)} does not match {rate:g} % ({vat.code}) of "
                            f"{money(total)}, which is {money(expected)}: check the VAT amount or code")
    net = round(total - vat_amount, 2)
    label = f"{receipt.supplier}" + (f": {receipt.description}" if receipt.description else "")
    lines = [Line(account, credit, net, vat.code if vat is not None and rate else None,
                  vat_amount if rate else 0.0, label[:500], source, f"{reason} ({account} {account_name})".strip())]
    if vat_amount and vat is not None and vat.account:
        lines.append(Line(vat.account, credit, vat_amount, None, 0.0, f"Vorsteuer {rate:g} % {receipt.supplier}"[:500],
                          source, "input tax of the receipt" + (f"; warning: {warnings[0]}" if warnings else "")))
    elif vat_amount and vat is None:
        warnings.append(f"the receipt shows VAT of {money(vat_amount)} but has no VAT code: choose one")
    return lines, warnings


def check_booking(receipt: TrusteeReceipt, lines: list[Any], codes: dict[str, TrusteeVatCode],
                  settings: dict[str, Any] | None) -> None:
    """InvalidInput with the reason when the accepted `lines` cannot be booked for `receipt`."""
    total, receipt_date = require_fields(receipt)
    if not lines:
        raise InvalidInput([FieldError("lines", "no accepted booking line: propose lines and accept them first")])
    for line in lines:
        check_period(line.booking_date, settings, "bookingDate")
    booked = round(sum(line.amount for line in lines), 2)
    if abs(booked - total) > 0.005:
        difference = round(total - booked, 2)
        raise InvalidInput([FieldError("lines", (
            f"the accepted lines add up to {money(booked)} but the receipt's total is {money(total)}: "
            f"a difference of {money(difference)}; the booking would not balance"))])
    vat_accounts = {c.account for c in codes.values() if c.account}
    vat_booked = round(sum(line.amount for line in lines if line.debit_account in vat_accounts), 2)
    vat_receipt = round(receipt.vat_amount or 0.0, 2)
    if abs(vat_booked - vat_receipt) > 0.005:
        raise InvalidInput([FieldError("vatAmount", (
            f"the input-tax lines add up to {money(vat_booked)} but the receipt's VAT is {money(vat_receipt)}: "
            f"a difference of {money(round(vat_receipt - vat_booked, 2))}"))])
    for line in lines:
        code = codes.get(line.vat_code) if line.vat_code else None
        if line.vat_code and code is None:
            raise InvalidInput([FieldError("vatCode", f"unknown VAT code '{line.vat_code}' on line '{line.text}'")])
        if code is not None and code.rate:
            expected = vat_of(line.amount, code.rate)
            if abs(expected - line.vat_amount) > TOLERANCE:
                raise InvalidInput([FieldError("vatAmount", (
                    f"line '{line.text}': {code.rate:g} % ({code.code}) of {money(line.amount)} is "
                    f"{money(expected)}, not {money(line.vat_amount)}"))])
