"""Reading a receipt (trustee.extract): a PDF's text layer or an image, through the AI gateway.

A PDF with a text layer is read with pypdf and its text goes to the model; an image (PNG, JPEG,
GIF, WebP) goes to the model as an image. The model answers one JSON object (the fields, the
line items, a confidence per field, whether this is a receipt at all and whether it was legible).
The outcome is one of:

- ``done``: the fields were read (some may be missing: their confidence is 0);
- ``not_receipt``: the document is no receipt (a letter, a contract …), with the model's reason;
- ``failed``: nothing could be read (a PDF without text layer, a broken file, an illegible scan,
  a model that did not answer with JSON), with the reason.
"""

from __future__ import annotations

import io
import json
import logging
from dataclasses import dataclass, field
from datetime import date
from typing import Any

from backend.ai import get_ai_client, parse_json_reply
from backend.ai.client import image_message, image_type
from backend.features.trustee.accounts import INPUT_CODE_BY_RATE

log = logging.getLogger(__name__)

DONE, FAILED, NOT_RECEIPT, PENDING = "done", "failed", "not_receipt", "pending"
PDF = "application/pdf"
IMAGE_TYPES = ("image/png", "image/jpeg", "image/gif", "image/webp")
SUPPORTED_TYPES = (PDF, *IMAGE_TYPES)
MAX_TEXT_CHARS = 20_000
FIELDS = ("supplier", "receiptDate", "total", "currency", "vatAmount", "vatCode", "description")

SYSTEM_PROMPT = """You read receipts and invoices (Belege) for Swiss bookkeeping.
Answer with one JSON object and nothing else:
{"isReceipt": true|false, "readable": true|false, "reason": "why not a receipt or not readable, else empty",
 "supplier": "who issued it", "date": "YYYY-MM-DD", "total": gross total incl. VAT as a number,
 "currency": "CHF", "vatAmount": VAT contained in the total as a number or null,
 "vatRate": VAT rate in percent (8.1, 2.6, 3.8 or 0) or null, "description": "what was bought (short)",
 "lines": [{"text": "...", "amount": number, "vatRate": number or null}],
 "confidence": {"supplier": 0..1, "date": 0..1, "total": 0..1, "currency": 0..1, "vatAmount": 0..1,
                "vatRate": 0..1, "description": 0..1},
 "text": "the text you read from the document (for images)"}
Use null for values the document does not contain; never invent values."""


@dataclass
class Extraction:
    """What the extraction found."""

    status: str
    message: str = ""
    fields: dict[str, Any] = field(default_factory=dict)
    confidence: dict[str, float] = field(default_factory=dict)
    text: str = ""
    lines: list[dict[str, Any]] = field(default_factory=list)


def pdf_text(data: bytes) -> str:
    """The text layer of a PDF ("" when it has none); ValueError when it is no readable PDF."""
    from pypdf import PdfReader
    from pypdf.errors import PdfReadError

    try:
        reader = PdfReader(io.BytesIO(data))
        return "\n".join((page.extract_text() or "") for page in reader.pages).strip()
    except (PdfReadError, ValueError, KeyError, TypeError, OSError) as exc:
        raise ValueError(f"the PDF cannot be read ({type(exc).__name__}: {str(exc)[:120]})") from None


def kind_of(data: bytes, mime: str | None) -> str | None:
    """PDF, an image type, or None for files a receipt cannot be (by content, not by name alone)."""
    if data.startswith(b"%PDF-"):
        return PDF
    return image_type(data) or (mime if mime in IMAGE_TYPES and not data else None)


def extract(data: bytes, mime: str | None, model: str | None = None) -> Extraction:
    """Read one receipt file; never raises for a bad document (the outcome says what went wrong).

    Raises:
        AiError / AiNotConfigured: the AI gateway is not usable (the caller reports it).
    """
    kind = kind_of(data, mime)
    if kind is None:
        return Extraction(FAILED, "the file is neither a PDF nor an image (PNG, JPEG, GIF, WebP); "
                                  "a receipt must be one of those")
    if kind == PDF:
        try:
            text = pdf_text(data)
        except ValueError as exc:
            return Extraction(FAILED, str(exc))
        if not text:
            return Extraction(FAILED, "the PDF has no text layer (a scanned image): nothing could be read; "
                                      "upload the scan as an image (PNG or JPEG) or a PDF with text")
        messages: Any = f"<document type=\"pdf\">\n{text[:MAX_TEXT_CHARS]}\n</document>"
    else:
        text = ""
        messages = image_message(data, kind, "Read this receipt.")
    reply = get_ai_client().chat(messages, model=model, system=SYSTEM_PROMPT, response_format="json")
    try:
        answer = parse_json_reply(reply.text)
    except Exception as exc:  # noqa: BLE001 - AiError: the model's answer is unusable
        return Extraction(FAILED, str(exc), text=text)
    if not isinstance(answer, dict):
        return Extraction(FAILED, f"the AI model answered JSON that is not an object: {json.dumps(answer)[:200]}",
                          text=text)
    return interpret(answer, text)


def interpret(answer: dict[str, Any], text: str) -> Extraction:
    """The model's JSON answer as an Extraction (values checked; bad ones dropped with confidence 0)."""
    read_text = text or str(answer.get("text") or "")
    reason = str(answer.get("reason") or "").strip()
    if answer.get("isReceipt") is False:
        return Extraction(NOT_RECEIPT, reason or "the document is not a receipt or invoice", text=read_text)
    if answer.get("readable") is False:
        return Extraction(FAILED, "the document is not legible" + (f": {reason}" if reason else ""),
                          text=read_text)
    fields: dict[str, Any] = {}
    confidence_in = answer.get("confidence") if isinstance(answer.get("confidence"), dict) else {}
    confidence: dict[str, float] = {}

    def keep(name: str, value: Any, source: str) -> None:
        if value is None:
            confidence[name] = 0.0
            return
        fields[name] = value
        raw = confidence_in.get(source)
        confidence[name] = max(0.0, min(1.0, float(raw))) if isinstance(raw, int | float) else 0.5

    keep("supplier", _text(answer.get("supplier"), 200), "supplier")
    keep("receiptDate", _date(answer.get("date")), "date")
    keep("total", _money(answer.get("total")), "total")
    currency = _text(answer.get("currency"), 3)
    keep("currency", currency.upper() if currency and len(currency) == 3 else None, "currency")
    keep("vatAmount", _money(answer.get("vatAmount")), "vatAmount")
    rate = _money(answer.get("vatRate"))
    keep("vatCode", INPUT_CODE_BY_RATE.get(rate) if rate is not None else None, "vatRate")
    keep("description", _text(answer.get("description"), 500), "description")
    lines = []
    for line in answer.get("lines") or []:
        if isinstance(line, dict) and _money(line.get("amount")) is not None:
            lines.append({"text": _text(line.get("text"), 500) or "", "amount": _money(line.get("amount")),
                          "vatRate": _money(line.get("vatRate"))})
    if "total" not in fields:
        return Extraction(FAILED, "no total amount could be read from the document" +
                          (f" ({reason})" if reason else ""), fields, confidence, read_text, lines)
    return Extraction(DONE, reason, fields, confidence, read_text, lines)


def _text(value: Any, limit: int) -> str | None:
    if not isinstance(value, str) or not value.strip():
        return None
    return value.strip()[:limit]


def _money(value: Any) -> float | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, str):
        cleaned = value.replace("'", "").replace("CHF", "").replace(" ", "").strip()
        if cleaned.count(",") == 1 and "." not in cleaned:
            cleaned = cleaned.replace(",", ".")
        try:
            value = float(cleaned)
        except ValueError:
            return None
    if isinstance(value, int | float):
        return round(float(value), 2)
    return None


def _date(value: Any) -> str | None:
    if not isinstance(value, str):
        return None
    try:
        return date.fromisoformat(value.strip()[:10]).isoformat()
    except ValueError:
        return None
