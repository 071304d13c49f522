"""The Trustee over REST (issue 22): receipts uploaded, read by the (scripted) model, checked, proposed,
accepted, booked, in the journal, exported as CSV and XLSX and synced to the Bexio stand-in; rules
learned from earlier bookings; bad input refused with the reason; foreign instances not found."""

from __future__ import annotations

import csv
import io
from collections.abc import Iterator

import pytest
from openpyxl import load_workbook

from backend.config import reset_settings_cache
from tests.bexio_server import BexioServer, serve
from tests.integration.trustee_support import (
    PASSWORD,
    SBB,
    TrusteeWorld,
    extraction,
    make_world,
    receipt_pdf,
    scanned_pdf,
)

pytestmark = pytest.mark.parametrize("db_url", ["sqlite"], indirect=True)


@pytest.fixture(scope="module")
def _bexio_stand_in() -> Iterator[BexioServer]:
    with serve(BexioServer()) as bexio:
        yield bexio


@pytest.fixture
def bexio(_bexio_stand_in: BexioServer, monkeypatch: pytest.MonkeyPatch) -> BexioServer:
    _bexio_stand_in.reset()
    monkeypatch.setenv("POWERON_BEXIO_URL", _bexio_stand_in.url)
    monkeypatch.setenv("POWERON_CONNECTOR_MAX_WAIT_SECONDS", "5")
    reset_settings_cache()
    return _bexio_stand_in


@pytest.fixture
def world(api) -> TrusteeWorld:
    return make_world()


def base(world: TrusteeWorld, instance_id: str | None = None) -> str:
    return f"/api/trustee/{instance_id or world.instance_id}"


def upload(api, world, *named: tuple[str, bytes, str], headers=None) -> list[dict]:
    response = api.client.post(f"{base(world)}/receipts", headers=headers or api.auth,
                               files=[("files", item) for item in named])
    assert response.status_code == 201, response.text
    return response.json()


def post(api, world, path: str, expect: int = 200, headers=None, **body) -> dict | list:
    response = api.client.post(f"{base(world)}{path}", headers=headers or api.auth, json=body or None)
    assert response.status_code == expect, response.text
    return response.json()


def booked_receipt(api, world, ai_server, pdf: bytes = SBB, name: str = "sbb.pdf", answer: dict | None = None,
                   account_reply: dict | None = None) -> tuple[dict, list[dict]]:
    """Upload → extract → check → propose → accept → book; the receipt and its lines."""
    receipt = upload(api, world, (name, pdf, "application/pdf"))[0]
    ai_server.reply_json(answer or extraction())
    post(api, world, f"/receipts/{receipt['id']}/extract")
    post(api, world, f"/receipts/{receipt['id']}/check")
    if account_reply is not None:
        ai_server.reply_json(account_reply)
    lines = post(api, world, f"/receipts/{receipt['id']}/propose")
    for line in lines:
        post(api, world, f"/positions/{line['id']}/accept")
    return post(api, world, f"/receipts/{receipt['id']}/book"), lines


def connect_bexio(api, bexio: BexioServer) -> str:
    created = api.client.post("/api/connections", headers=api.auth,
                              json={"type": "bexio", "label": "Bexio", "settings": {"apiToken": bexio.token}})
    assert created.status_code == 201, created.text
    assert bexio.token not in created.text
    return created.json()["id"]


# --- the whole way ---------------------------------------------------------------------------------------


def test_a_receipt_goes_from_upload_to_bexio(api, world, ai_server, bexio):
    receipts = upload(api, world, ("sbb.pdf", SBB, "application/pdf"))
    assert [(r["status"], r["extractionStatus"], r["fileName"]) for r in receipts] == [("draft", "pending", "sbb.pdf")]
    receipt_id = receipts[0]["id"]

    ai_server.reply_json(extraction())
    read = post(api, world, f"/receipts/{receipt_id}/extract")
    assert (read["extractionStatus"], read["supplier"], read["receiptDate"], read["total"], read["vatAmount"],
            read["vatCode"], read["currency"]) == ("done", "SBB", "2025-08-12", 108.1, 8.1, "VM81", "CHF")
    assert read["confidence"]["total"] == 0.99
    # The model read the PDF's text layer (pypdf), not the bytes.
    assert "Billett Zuerich HB - Bern" in ai_server.last_chat.user_text
    detail = api.client.get(f"{base(world)}/receipts/{receipt_id}", headers=api.auth).json()
    assert "Total CHF 108.10" in detail["text"]
    document = api.client.get(f"{base(world)}/receipts/{receipt_id}/file", headers=api.auth)
    assert document.status_code == 200 and document.content == SBB
    assert document.headers["content-type"] == "application/pdf"

    checked = post(api, world, f"/receipts/{receipt_id}/check")
    assert (checked["status"], checked["checkedBy"]) == ("checked", "System administrator")

    ai_server.reply_json({"account": "6640", "reason": "a train ticket is a travel expense"})
    lines = post(api, world, f"/receipts/{receipt_id}/propose")
    assert [(p["debitAccount"], p["creditAccount"], p["amount"], p["vatCode"], p["vatAmount"], p["source"])
            for p in lines] == [("6640", "2000", 100.0, "VM81", 8.1, "model"),
                                ("1170", "2000", 8.1, None, 0.0, "model")]
    assert "travel expense" in lines[0]["reason"]
    assert "6640" in ai_server.last_chat.system_text and "Reisespesen" in ai_server.last_chat.system_text

    for line in lines:
        assert post(api, world, f"/positions/{line['id']}/accept")["status"] == "accepted"
    booked = post(api, world, f"/receipts/{receipt_id}/book")
    assert booked["status"] == "booked" and booked["bookedAt"]

    journal = api.client.get(f"{base(world)}/journal", headers=api.auth, params={"account": "6640"}).json()
    assert [(p["debitAccount"], p["amount"], p["status"]) for p in journal] == [("6640", 100.0, "booked")]
    assert api.client.get(f"{base(world)}/journal", headers=api.auth,
                          params={"dateFrom": "2025-09-01"}).json() == []

    exported = api.client.get(f"{base(world)}/journal/export", headers=api.auth, params={"format": "csv"})
    assert exported.status_code == 200 and "attachment" in exported.headers["content-disposition"]
    rows = list(csv.reader(io.StringIO(exported.content.decode("utf-8-sig")), delimiter=";"))
    assert rows[0][:6] == ["Datum", "Beleg", "Lieferant", "Soll", "Haben", "Betrag"]
    assert rows[1][:6] == ["2025-08-12", "sbb.pdf", "SBB", "6640", "2000", "100.00"]
    assert rows[2][3:6] == ["1170", "2000", "8.10"]

    xlsx = api.client.get(f"{base(world)}/journal/export", headers=api.auth, params={"format": "xlsx"})
    assert xlsx.status_code == 200
    sheet = load_workbook(io.BytesIO(xlsx.content)).active
    assert [c.value for c in sheet[1]][:6] == ["Datum", "Beleg", "Lieferant", "Soll", "Haben", "Betrag"]
    assert (sheet["D2"].value, sheet["E2"].value, sheet["F2"].value, sheet["G2"].value) == ("6640", "2000", 100.0,
                                                                                           "VM81")
    assert sheet["A2"].value.date().isoformat() == "2025-08-12"
    assert sheet["F3"].value == 8.1 and sheet.max_row == 3

    connection_id = connect_bexio(api, bexio)
    assert api.client.get(f"{base(world)}/connections", headers=api.auth).json() == [
        {"id": connection_id, "label": "Bexio"}]
    result = post(api, world, "/sync", connectionId=connection_id)
    assert (result["synced"], result["failed"]) == (1, [])
    [entry] = bexio.entries
    assert (entry["type"], entry["date"], entry["reference_nr"]) == ("manual_compound_entry", "2025-08-12", "sbb.pdf")
    sent = [(e["debit_account_id"], e["credit_account_id"], e["amount"], e.get("tax_id")) for e in entry["entries"]]
    assert sent == [
        (bexio.account_id("6640"), bexio.account_id("2000"), 100.0, bexio.tax_id("VM81")),
        (bexio.account_id("1170"), bexio.account_id("2000"), 8.1, None)]
    # The chart was read page by page (limit/offset).
    assert len(bexio.calls("GET", "/2.0/accounts")) >= 2
    synced = api.client.get(f"{base(world)}/receipts/{receipt_id}", headers=api.auth).json()
    assert synced["receipt"]["status"] == "synced" and synced["receipt"]["externalId"] == str(entry["id"])
    assert {line["status"] for line in synced["lines"]} == {"synced"}

    again = post(api, world, "/sync", connectionId=connection_id)
    assert again["synced"] == 0 and "nothing to send" in again["message"]
    assert len(bexio.entries) == 1


def test_several_receipts_upload_at_once_newest_first(api, world):
    made = upload(api, world, ("a.pdf", receipt_pdf("A"), "application/pdf"),
                  ("b.png", b"\x89PNG\r\n\x1a\n" + b"0" * 20, "image/png"),
                  ("a.pdf", receipt_pdf("A again"), "application/pdf"))
    assert [r["fileName"] for r in made] == ["a.pdf", "b.png", "a (2).pdf"]
    listed = api.client.get(f"{base(world)}/receipts", headers=api.auth).json()
    assert [r["fileName"] for r in listed] == ["a (2).pdf", "b.png", "a.pdf"]
    assert api.client.get(f"{base(world)}/receipts", headers=api.auth, params={"status": "booked"}).json() == []


# --- rules ---------------------------------------------------------------------------------------------


def test_a_second_receipt_of_the_supplier_gets_the_earlier_account_without_the_model(api, world, ai_server):
    booked_receipt(api, world, ai_server, account_reply={"account": "6640", "reason": "travel"})
    second = upload(api, world, ("sbb-2.pdf", receipt_pdf("SBB", "Total CHF 54.05"), "application/pdf"))[0]
    ai_server.reply_json(extraction(total=54.05, vat=4.05, day="2025-08-20"))
    post(api, world, f"/receipts/{second['id']}/extract")
    calls = len(ai_server.chat_requests)
    lines = post(api, world, f"/receipts/{second['id']}/propose")
    assert len(ai_server.chat_requests) == calls  # no model call
    assert [(p["debitAccount"], p["amount"], p["source"]) for p in lines] == [("6640", 50.0, "rule"),
                                                                               ("1170", 4.05, "rule")]
    assert "earlier booking of SBB on 2025-08-12" in lines[0]["reason"] and "sbb.pdf" in lines[0]["reason"]


# --- bad input ---------------------------------------------------------------------------------------------


def test_a_document_that_is_no_receipt_is_reported_as_such(api, world, ai_server):
    letter = upload(api, world, ("letter.pdf", receipt_pdf("Dear customer, we moved."), "application/pdf"))[0]
    ai_server.reply_json({"isReceipt": False, "reason": "a change-of-address letter, no amounts"})
    read = post(api, world, f"/receipts/{letter['id']}/extract")
    assert (read["extractionStatus"], read["extractionMessage"]) == ("not_receipt",
                                                                     "a change-of-address letter, no amounts")
    assert read["total"] is None


def test_an_unreadable_scan_fails_with_the_reason_without_a_model_call(api, world, ai_server):
    scan = upload(api, world, ("scan.pdf", scanned_pdf(), "application/pdf"))[0]
    read = post(api, world, f"/receipts/{scan['id']}/extract")
    assert read["extractionStatus"] == "failed" and "no text layer" in read["extractionMessage"]
    assert ai_server.chat_requests == []
    photo = upload(api, world, ("blurred.png", b"\x89PNG\r\n\x1a\n" + b"\x00" * 40, "image/png"))[0]
    ai_server.reply_json({"isReceipt": True, "readable": False, "reason": "the photo is too blurred"})
    read = post(api, world, f"/receipts/{photo['id']}/extract")
    assert (read["extractionStatus"], read["extractionMessage"]) == ("failed",
                                                                     "the document is not legible: the photo is too "
                                                                     "blurred")
    sent = ai_server.last_chat.messages[-1]["content"]
    assert any(part.get("type") == "image_url" for part in sent)


def test_empty_and_non_receipt_files_are_refused_on_upload(api, world):
    for name, data in (("empty.pdf", b""), ("notes.txt", b"just text")):
        response = api.client.post(f"{base(world)}/receipts", headers=api.auth,
                                   files=[("files", (name, data, "text/plain"))])
        assert response.status_code == 422, response.text
        assert name in response.text
    assert api.client.post(f"{base(world)}/receipts", headers=api.auth).status_code == 422


def test_lines_that_do_not_add_up_are_not_booked(api, world, ai_server):
    receipt = upload(api, world, ("sbb.pdf", SBB, "application/pdf"))[0]
    ai_server.reply_json(extraction())
    post(api, world, f"/receipts/{receipt['id']}/extract")
    post(api, world, f"/receipts/{receipt['id']}/check")
    ai_server.reply_json({"account": "6640", "reason": "travel"})
    lines = post(api, world, f"/receipts/{receipt['id']}/propose")
    changed = api.client.patch(f"{base(world)}/positions/{lines[0]['id']}", headers=api.auth,
                               json={"amount": 90, "vatAmount": 7.3})
    assert changed.status_code == 200 and changed.json()["source"] == "manual"
    for line in lines:
        post(api, world, f"/positions/{line['id']}/accept")
    refused = api.client.post(f"{base(world)}/receipts/{receipt['id']}/book", headers=api.auth)
    assert refused.status_code == 422
    assert "98.10" in refused.text and "108.10" in refused.text and "difference of 10.00" in refused.text
    assert api.client.get(f"{base(world)}/receipts/{receipt['id']}", headers=api.auth).json()["receipt"][
        "status"] == "checked"
    bad_account = api.client.patch(f"{base(world)}/positions/{lines[0]['id']}", headers=api.auth,
                                   json={"debitAccount": "9999"})
    assert bad_account.status_code in (409, 422)


def test_a_wrong_vat_amount_is_named(api, world, ai_server):
    receipt = upload(api, world, ("sbb.pdf", SBB, "application/pdf"))[0]
    ai_server.reply_json(extraction(vat=12.0))
    post(api, world, f"/receipts/{receipt['id']}/extract")
    ai_server.reply_json({"account": "6640", "reason": "travel"})
    lines = post(api, world, f"/receipts/{receipt['id']}/propose")
    assert "does not match 8.1 % (VM81) of 108.10, which is 8.10" in lines[1]["reason"]
    post(api, world, f"/receipts/{receipt['id']}/check")
    for line in lines:
        post(api, world, f"/positions/{line['id']}/accept")
    refused = api.client.post(f"{base(world)}/receipts/{receipt['id']}/book", headers=api.auth)
    assert refused.status_code == 422 and "8.1 % (VM81) of 96.10 is 7.80, not 12.00" in refused.text


def test_a_closed_period_refuses_proposals_and_bookings(api, world, ai_server):
    receipt = upload(api, world, ("sbb.pdf", SBB, "application/pdf"))[0]
    ai_server.reply_json(extraction())
    post(api, world, f"/receipts/{receipt['id']}/extract")
    closed = api.client.put(f"{base(world)}/settings", headers=api.auth, json={"closedUntil": "2025-08-31"})
    assert closed.status_code == 200 and closed.json() == {"closedUntil": "2025-08-31"}
    refused = api.client.post(f"{base(world)}/receipts/{receipt['id']}/propose", headers=api.auth)
    assert refused.status_code == 422 and "period up to 2025-08-31 is closed" in refused.text


def test_field_errors_name_the_field(api, world):
    receipt = upload(api, world, ("a.pdf", receipt_pdf("A"), "application/pdf"))[0]
    url = f"{base(world)}/receipts/{receipt['id']}"
    for body, field in (({"total": "lots"}, "total"), ({"receiptDate": "12.08.2025"}, "receiptDate"),
                        ({"vatCode": "VAT99"}, "vatCode"), ({"currency": "Franken"}, "currency"),
                        ({"status": "booked"}, "status"), ({"total": [1]}, "total"), ({"vatCode": [1]}, "vatCode")):
        response = api.client.patch(url, headers=api.auth, json=body)
        assert response.status_code == 422, (body, response.text)
        assert field in response.text
    assert api.client.patch(url, headers=api.auth, json={"total": "1'234.50"}).json()["total"] == 1234.5
    refused = api.client.post(f"{url}/check", headers=api.auth)
    assert refused.status_code == 422 and "supplier" in refused.text


# --- access ---------------------------------------------------------------------------------------------------


def test_foreign_and_unknown_instances_and_objects_are_not_found(api, world):
    ulla = {"Authorization": f"Bearer {api.login('ulla', PASSWORD)}"}
    assert api.client.get(f"{base(world)}/receipts", headers=ulla).status_code == 200
    for instance in (world.foreign_instance_id, world.editor_id, "nope"):
        assert api.client.get(f"/api/trustee/{instance}/receipts", headers=ulla).status_code == 404
        assert api.client.post(f"/api/trustee/{instance}/receipts", headers=ulla,
                               files=[("files", ("a.pdf", receipt_pdf("A"), "application/pdf"))]).status_code == 404
    assert api.client.get(f"{base(world)}/receipts/unknown", headers=api.auth).status_code == 404
    assert api.client.post(f"{base(world)}/positions/unknown/accept", headers=api.auth).status_code == 404
    nora = api.login("nora", PASSWORD)
    assert api.client.get(f"{base(world)}/receipts", headers={"Authorization": f"Bearer {nora}"}).status_code == 404


def test_a_viewer_reads_but_neither_uploads_nor_books(api, world, ai_server):
    booked_receipt(api, world, ai_server, account_reply={"account": "6640", "reason": "travel"})
    vera = {"Authorization": f"Bearer {api.login('vera', PASSWORD)}"}
    assert len(api.client.get(f"{base(world)}/journal", headers=vera).json()) == 2
    response = api.client.post(f"{base(world)}/receipts", headers=vera,
                               files=[("files", ("a.pdf", receipt_pdf("A"), "application/pdf"))])
    assert response.status_code == 403
    assert api.client.put(f"{base(world)}/accounts", headers=vera,
                          json=[{"number": "6645", "name": "Taxi", "kind": "expense"}]).status_code == 403


def test_the_chart_of_accounts_and_vat_codes(api, world):
    accounts = api.client.get(f"{base(world)}/accounts", headers=api.auth).json()
    numbers = {a["number"]: a for a in accounts}
    assert numbers["1020"]["name"] == "Bank" and numbers["6640"]["kind"] == "expense"
    assert {"1000", "1170", "1171", "2000", "2200", "3200", "3400", "4000", "4400", "5000", "6000", "6200",
            "6500", "6510", "6570", "6600", "6700", "6800"} <= set(numbers)
    codes = {c["code"]: c["rate"] for c in api.client.get(f"{base(world)}/vat-codes", headers=api.auth).json()}
    assert (codes["VM81"], codes["VM26"], codes["VM38"], codes["FREI"]) == (8.1, 2.6, 3.8, 0.0)
    put = api.client.put(f"{base(world)}/accounts", headers=api.auth,
                         json=[{"number": "6645", "name": "Taxi", "kind": "expense"},
                               {"number": "6640", "name": "Reisespesen Inland"}])
    assert put.status_code == 200
    names = {a["number"]: a["name"] for a in put.json()}
    assert (names["6645"], names["6640"]) == ("Taxi", "Reisespesen Inland")
    bad = api.client.put(f"{base(world)}/accounts", headers=api.auth, json=[{"number": "x", "name": "Bad"}])
    assert bad.status_code == 422 and "accounts[0].number" in bad.text


# --- Bexio's refusals ----------------------------------------------------------------------------------------


def test_bexio_refusing_the_token_and_rate_limiting_are_clear(api, world, ai_server, bexio):
    booked, _ = booked_receipt(api, world, ai_server, account_reply={"account": "6640", "reason": "travel"})
    connection_id = connect_bexio(api, bexio)
    bexio.rate_limit(1, retry_after=0.2)
    result = post(api, world, "/sync", connectionId=connection_id)
    assert result["synced"] == 1  # the 429 was waited out (Retry-After)
    second, _ = booked_receipt(api, world, ai_server, pdf=receipt_pdf("SBB 2"), name="sbb-2.pdf",
                               answer=extraction(day="2025-08-13"))
    bexio.rate_limit(10, retry_after=3)
    limited = post(api, world, "/sync", connectionId=connection_id)
    assert limited["synced"] == 0 and "rate-limiting" in limited["message"]
    bexio.limited.clear()
    bexio.token = "another"
    refused = post(api, world, "/sync", connectionId=connection_id)
    assert refused["synced"] == 0
    assert "Bexio refused the API token (401)" in refused["message"] and "Connections page" in refused["message"]
    assert [f["receiptId"] for f in refused["failed"]] == [second["id"]]
    assert len(bexio.entries) == 1


def test_a_bexio_connection_with_a_wrong_token_is_not_stored(api, bexio):
    refused = api.client.post("/api/connections", headers=api.auth,
                              json={"type": "bexio", "label": "Bexio", "settings": {"apiToken": "wrong-token"}})
    assert refused.status_code in (400, 422) and "401" in refused.text
