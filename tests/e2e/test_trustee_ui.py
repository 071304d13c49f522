"""The Trustee page in real Chromium (issue 22, part 1's UI): a receipt PDF and a letter dropped at
once on the inbox are extracted by the scripted model (the letter: "not a receipt", with the
model's reason); the receipt is reviewed beside its document (fields with their confidence, the
uncertain one highlighted), checked, its proposed lines accepted one by one (Book stays disabled
with the reason until they balance) and booked; the journal shows the lines, filters them,
exports them as CSV, and syncs them to the Bexio stand-in, which receives the manual entries. A
viewer of the instance reads the same receipt and journal without any control to change them.
"""

from __future__ import annotations

import re
import uuid
from pathlib import Path

import httpx
import pytest
from fpdf import FPDF
from playwright.sync_api import Page, expect

from tests.ai_server import RecordedRequest
from tests.e2e.conftest import ADMIN_PASSWORD, RunningApp
from tests.e2e.test_editor_ui import api
from tests.e2e.test_workflows_ui import open_instance, sign_in

pytestmark = pytest.mark.e2e

SHOTS = Path("/tmp/shots22")
TOTAL, VAT, NET = "107.70", "8.07", "99.63"
VIEWER_PASSWORD = "viewer-pass-22"


def receipt_pdf(lines: list[str]) -> bytes:
    """A one-page PDF with a text layer showing `lines` (fpdf2)."""
    pdf = FPDF(format=(148, 210))  # A5 in mm
    pdf.add_page()
    pdf.set_font("Helvetica", size=11)
    for line in lines:
        pdf.cell(0, 7, line, new_x="LMARGIN", new_y="NEXT")
    return bytes(pdf.output())


def scripted_model(supplier: str):
    """The model's answers by what is asked: a receipt's fields (or: no receipt) and an account."""
    def answer(request: RecordedRequest) -> dict:
        if "You read receipts" in request.system_text:
            if "Minutes of the board meeting" in request.user_text:
                return {"isReceipt": False, "readable": True,
                        "reason": "This is the minutes of a meeting, not a receipt or invoice."}
            return {"isReceipt": True, "readable": True, "reason": "", "supplier": supplier, "date": "2026-11-20",
                    "total": 107.70, "currency": "CHF", "vatAmount": 8.07, "vatRate": 8.1,
                    "description": "Printer paper and toner",
                    "lines": [{"text": "Printer paper A4", "amount": 27.70, "vatRate": 8.1},
                              {"text": "Toner cartridge", "amount": 80.00, "vatRate": 8.1}],
                    "confidence": {"supplier": 0.97, "date": 0.93, "total": 0.99, "currency": 0.99,
                                   "vatAmount": 0.55, "vatRate": 0.9, "description": 0.8}}
        if "Swiss bookkeeper" in request.system_text:
            return {"account": "6500", "reason": "Paper and toner are office supplies."}
        return {"error": "unexpected request"}

    return answer


def make_instance(running_app: RunningApp, label: str) -> tuple[dict[str, str], str]:
    """The admin's headers and a new Trustee instance `label` in the Default mandate (over REST)."""
    headers, _editor = api(running_app)
    me = httpx.get(f"{running_app.api_url}/api/me", headers=headers).json()
    mandate = next(m["id"] for m in me["mandates"] if m["name"] == "Default")
    made = httpx.post(f"{running_app.api_url}/api/mandates/{mandate}/instances", headers=headers,
                      json={"featureCode": "trustee", "label": label})
    assert made.status_code == 201, made.text
    return headers, made.json()["id"]


def open_trustee(page: Page, label: str) -> None:
    page.locator("#nav-trustee").click()
    expect(page.locator("#page-title")).to_have_text("Trustee", timeout=30_000)  # once the page's modules are in
    open_instance(page, label)


def receipt_row(page: Page, name: str):
    return page.locator(".receipt-row", has=page.locator(".receipt-name", has_text=name))


def test_a_receipt_goes_from_the_inbox_to_bexio(page: Page, running_app: RunningApp):
    tag = uuid.uuid4().hex[:6]
    label, supplier = f"Trustee {tag}", f"Papeterie Muster {tag}"
    receipt, letter = f"receipt-{tag}.pdf", f"minutes-{tag}.pdf"
    headers, instance_id = make_instance(running_app, label)
    ai = running_app.ai
    ai.clear()
    ai.responder = scripted_model(supplier)
    SHOTS.mkdir(parents=True, exist_ok=True)
    try:
        sign_in(page, "admin", ADMIN_PASSWORD)
        expect(page).to_have_url(re.compile(r"/workflows$"))
        open_trustee(page, label)
        expect(page.locator("#receipt-list-empty")).to_contain_text("No receipts yet")

        # Two files dropped at once: both are listed and extracted one after the other.
        page.locator("#trustee-upload input[type=file]").set_input_files(files=[
            {"name": receipt, "mimeType": "application/pdf", "buffer": receipt_pdf([
                supplier, "Bahnhofstrasse 1, 8001 Zurich", "Date: 20.11.2026", "Printer paper A4   CHF 27.70",
                "Toner cartridge   CHF 80.00", f"Total CHF {TOTAL}", f"incl. VAT 8.1 % CHF {VAT}"])},
            {"name": letter, "mimeType": "application/pdf", "buffer": receipt_pdf([
                "Minutes of the board meeting", "Present: A. Muster, B. Beispiel", "1. The budget was approved."])},
        ])
        expect(page.locator(".receipt-row")).to_have_count(2)
        # Wrong input: a file that cannot be a receipt is refused with the reason, nothing is listed.
        page.locator("#trustee-upload input[type=file]").set_input_files(files=[
            {"name": f"notes-{tag}.txt", "mimeType": "text/plain", "buffer": b"Buy paper."}])
        expect(page.locator("#trustee-error")).to_contain_text(f"notes-{tag}.txt: file: 'notes-{tag}.txt' is "
                                                               "neither a PDF nor an image")
        expect(page.locator(".receipt-row")).to_have_count(2)
        row = receipt_row(page, receipt)
        expect(row.locator(".receipt-extraction")).to_have_text("extracted")
        expect(row.locator(".receipt-supplier")).to_have_text(supplier)
        expect(row.locator(".receipt-total")).to_have_text(f"{TOTAL} CHF")
        expect(row.locator(".receipt-date")).to_have_text("2026-11-20")
        # Wrong input: the letter is no receipt, and the row says why.
        other = receipt_row(page, letter)
        expect(other.locator(".receipt-extraction")).to_have_text("not a receipt")
        expect(other.locator(".receipt-extraction-message")).to_contain_text("minutes of a meeting, not a receipt")
        other.locator(".receipt-open").click()
        expect(page.locator("#receipt-extraction-message")).to_contain_text("Not a receipt: This is the minutes")
        expect(page.locator("#receipt-text")).to_contain_text("Minutes of the board meeting")
        page.locator("#receipt-close").click()

        # Review beside the document: the fields as read, the uncertain VAT amount highlighted.
        row.locator(".receipt-open").click()
        expect(page.locator("#receipt-heading")).to_have_text(receipt)
        expect(page.locator("#receipt-document-pdf")).to_have_attribute("src", re.compile(r"^data:application/pdf;"))
        expect(page.locator("#receipt-text")).to_contain_text("Toner cartridge")
        expect(page.locator("#receipt-supplier")).to_have_value(supplier)
        expect(page.locator("#receipt-date")).to_have_value("2026-11-20")
        expect(page.locator("#receipt-total")).to_have_value(TOTAL)
        expect(page.locator("#receipt-vat-amount")).to_have_value(VAT)
        expect(page.locator("#receipt-vat-code")).to_contain_text("VM81")
        expect(page.locator(".confidence.low")).to_have_count(1)
        expect(page.locator(".confidence.low")).to_have_text("55 %")
        expect(page.locator("#receipt-book")).to_be_disabled()
        expect(page.locator("#book-reason")).to_have_text("Mark the receipt as checked first.")

        # Wrong input in a field: the door names it and the form it expects; nothing is saved.
        page.locator("#receipt-currency").fill("CH")
        page.locator("#receipt-save").click()
        expect(page.locator("#trustee-error")).to_contain_text("currency: must be a three-letter ISO currency code")
        page.locator("#receipt-currency").fill("CHF")

        # An edit is saved with Checked.
        page.locator("#receipt-description").fill("Printer paper and toner for the office")
        page.locator("#receipt-check").click()
        expect(page.locator(".receipt-open-status")).to_have_text("checked")
        expect(page.locator("#receipt-checked-by")).to_contain_text("Checked by")
        expect(page.locator("#receipt-description")).to_have_value("Printer paper and toner for the office")

        page.locator("#receipt-propose").click()
        lines = page.locator(".position-row")
        expect(lines).to_have_count(2)
        expense = lines.filter(has=page.locator(".position-debit", has_text="6500"))
        expect(expense.locator(".position-amount")).to_have_text(NET)
        expect(expense.locator(".position-reason")).to_contain_text("office supplies")
        vat_line = lines.filter(has=page.locator(".position-debit", has_text="1170"))
        expect(vat_line.locator(".position-amount")).to_have_text(VAT)
        page.screenshot(path=str(SHOTS / "review.png"), full_page=True)

        # A line is corrected before it is accepted: it becomes a manual line.
        expense.locator(".position-edit").click()
        page.locator("#line-text").fill(f"Office supplies {tag}")
        page.locator(".position-save").click()
        expect(page.locator("#trustee-notice")).to_contain_text("Line saved.")
        expense = lines.filter(has=page.locator(".position-text", has_text=f"Office supplies {tag}"))
        expect(expense.locator(".position-reason")).to_contain_text("changed by System administrator")

        # Line by line: with one accepted the booking does not balance, and Book says so.
        expense.locator(".position-accept").click()
        expect(expense.locator(".position-status")).to_have_text("accepted")
        expect(page.locator("#receipt-book")).to_be_disabled()
        expect(page.locator("#book-reason")).to_contain_text(f"({NET}) do not balance with the receipt's total "
                                                             f"({TOTAL})")
        vat_line.locator(".position-accept").click()
        expect(vat_line.locator(".position-status")).to_have_text("accepted")
        expect(page.locator("#booking-balance")).to_contain_text(f"Accepted {TOTAL} of {TOTAL} CHF")
        expect(page.locator("#receipt-book")).to_be_enabled()
        page.locator("#receipt-book").click()
        expect(page.locator("#trustee-notice")).to_contain_text("Booked")
        expect(page.locator(".receipt-open-status")).to_have_text("booked")
        expect(page.locator(".position-accept")).to_have_count(0)

        # The journal: both lines, a filter, the CSV.
        page.locator("#tab-journal").click()
        journal = page.locator("#journal-table .journal-row")
        expect(journal).to_have_count(2)
        expect(page.locator("#journal-total")).to_contain_text(f"2 lines · total {TOTAL}")
        page.locator("#journal-account").fill("6500")
        page.locator("#journal-apply").click()
        expect(journal).to_have_count(1)
        expect(journal.locator(".journal-text")).to_have_text(f"Office supplies {tag}")
        expect(page.locator("#journal-total")).to_contain_text(f"1 lines · total {NET}")
        with page.expect_download() as download:
            page.locator("#journal-export-csv").click()
        exported = Path(download.value.path()).read_text(encoding="utf-8-sig")
        assert f"Office supplies {tag}" in exported and supplier in exported and NET in exported
        assert "1170" not in exported
        page.locator("#journal-reset").click()
        expect(journal).to_have_count(2)

        # Sync to the Bexio stand-in through a bexio connection.
        expect(page.locator("#bexio-hint")).to_contain_text("no Bexio connection")
        page.screenshot(path=str(SHOTS / "journal-before-sync.png"), full_page=True)
        connection = make_bexio_connection(running_app, headers, tag)
        page.reload()
        page.locator("#tab-journal").click()
        expect(page.locator("#journal-connection")).to_contain_text(connection)
        page.locator("#journal-sync").click()
        expect(page.locator("#sync-result")).to_contain_text("Synced 1 · 1 receipt sent to Bexio")
        expect(page.locator("#journal-table .journal-status").first).to_have_text("synced")
        page.screenshot(path=str(SHOTS / "journal.png"), full_page=True)
        assert_bexio_received(running_app, receipt, supplier)
    finally:
        ai.clear()


def make_bexio_connection(running_app: RunningApp, headers: dict[str, str], tag: str) -> str:
    """A `bexio` connection of the admin to the stand-in (over REST, tested live by the app); its label."""
    label = f"Bexio {tag}"
    made = httpx.post(f"{running_app.api_url}/api/connections", headers=headers, timeout=60, json={
        "type": "bexio", "label": label, "settings": {"apiToken": running_app.bexio.token}})
    assert made.status_code == 201, made.text
    return label


def assert_bexio_received(running_app: RunningApp, receipt: str, supplier: str) -> None:
    """The stand-in holds the receipt as one manual entry: the expense, gross, with its VAT code (Bexio
    books the input tax from the tax id itself, so no second 1170 line is sent)."""
    bexio = running_app.bexio
    with bexio.lock:
        entries = [e for e in bexio.entries if e.get("reference_nr") == receipt]
    assert len(entries) == 1, bexio.entries
    entry = entries[0]
    assert entry["type"] == "manual_single_entry" and entry["date"] == "2026-11-20"
    lines = [(line["debit_account_id"], line["credit_account_id"], line["amount"], line.get("tax_id"))
             for line in entry["entries"]]
    assert lines == [(bexio.account_id("6500"), bexio.account_id("2000"), float(TOTAL), bexio.tax_id("VM81"))]
    assert entry["entries"][0]["description"].startswith("Office supplies"), entry  # the line's text, as edited


def test_a_viewer_reads_receipts_and_journal_without_controls(page: Page, running_app: RunningApp):
    tag = uuid.uuid4().hex[:6]
    label, supplier, name = f"Trustee view {tag}", f"Kiosk {tag}", f"kiosk-{tag}.pdf"
    headers, instance_id = make_instance(running_app, label)
    base = f"{running_app.api_url}/api/trustee/{instance_id}"
    ai = running_app.ai
    ai.clear()
    ai.responder = scripted_model(supplier)
    try:
        uploaded = httpx.post(f"{base}/receipts", headers=headers, files=[
            ("files", (name, receipt_pdf([supplier, f"Total CHF {TOTAL}"]), "application/pdf"))])
        assert uploaded.status_code == 201, uploaded.text
        receipt_id = uploaded.json()[0]["id"]
        for step in ("extract", "check", "propose"):
            done = httpx.post(f"{base}/receipts/{receipt_id}/{step}", headers=headers, timeout=60)
            assert done.status_code == 200, done.text
    finally:
        ai.clear()
    me = httpx.get(f"{running_app.api_url}/api/me", headers=headers).json()
    mandate = next(m["id"] for m in me["mandates"] if m["name"] == "Default")
    username = f"tviewer{tag}"
    created = httpx.post(f"{running_app.api_url}/api/mandates/{mandate}/users", headers=headers,
                         json={"username": username, "password": VIEWER_PASSWORD, "roles": ["viewer"]})
    assert created.status_code == 201, created.text
    granted = httpx.post(f"{running_app.api_url}/api/instances/{instance_id}/access", headers=headers,
                         json={"userId": created.json()["id"], "roles": ["trustee-viewer"]})
    assert granted.status_code == 200, granted.text

    sign_in(page, username, VIEWER_PASSWORD)
    expect(page).to_have_url(re.compile(r"/workflows$"))
    open_trustee(page, label)
    expect(page.locator("#trustee-read-only")).to_contain_text("do not let you upload or book")
    expect(page.locator("#trustee-upload")).to_have_count(0)
    row = receipt_row(page, name)
    expect(row.locator(".receipt-supplier")).to_have_text(supplier)
    expect(row.locator(".receipt-extract")).to_have_count(0)
    row.locator(".receipt-open").click()
    expect(page.locator("#receipt-supplier")).to_have_value(supplier)
    expect(page.locator("#receipt-supplier")).to_have_attribute("readonly", "")
    expect(page.locator(".position-row")).to_have_count(2)
    for control in ("#receipt-save", "#receipt-check", "#receipt-propose", "#receipt-book", ".position-accept",
                    ".position-reject", ".position-edit"):
        expect(page.locator(control)).to_have_count(0)
    page.locator("#tab-journal").click()
    expect(page.locator("#journal-empty")).to_have_text("No booked lines match.")
    expect(page.locator("#journal-export-csv")).to_be_visible()
    expect(page.locator("#journal-sync")).to_have_count(0)
    expect(page.locator("#bexio-hint")).to_have_count(0)
