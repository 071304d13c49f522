"""The template "Receipt e-mail → extract → approval → booking" run for real: made from its template, its
mail step on an IMAP connection (pymap), published and started; a mail with a receipt PDF resumes it, the
scripted model reads the receipt and proposes the account, a person approves in the Inbox, the receipt is
booked in the Trustee instance."""

from __future__ import annotations

import time
from email.message import EmailMessage

import pytest

from backend.engine import queue as run_queue
from backend.engine.mailbox import poll_mailboxes
from tests.integration.trustee_support import SBB, TrusteeWorld, extraction, make_world
from tests.mail_servers import imap_server

pytestmark = pytest.mark.parametrize("db_url", ["sqlite"], indirect=True)
TEMPLATE = "receipt-email-booking"


@pytest.fixture
def world(api) -> TrusteeWorld:
    return make_world()


def receipt_mail() -> EmailMessage:
    message = EmailMessage()
    message["From"] = "billing@sbb.ch"
    message["To"] = "demouser@example.com"
    message["Subject"] = "Beleg: your ticket"
    message.set_content("Your receipt is attached.")
    message.add_attachment(SBB, maintype="application", subtype="pdf", filename="sbb-ticket.pdf")
    return message


def get_run(api, run_id: str) -> dict:
    run_queue.wait_for_rest(run_id, 30)
    answer = api.client.get(f"{api.base()}/runs/{run_id}", headers=api.auth)
    assert answer.status_code == 200, answer.text
    return answer.json()


def until_not_waiting_for_mail(api, run_id: str) -> dict:
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        poll_mailboxes()
        run = get_run(api, run_id)
        if run["pauseReason"] != "email":
            return run
    pytest.fail(f"run {run_id} still waits for its mail")


def test_a_receipt_mail_is_read_approved_and_booked(api, world, ai_server):
    with imap_server() as imap:
        connection = api.client.post("/api/connections", json={"type": "imap", "label": "Inbox",
                                                               "settings": imap.settings()}, headers=api.auth)
        assert connection.status_code == 201, connection.text
        created = api.client.post(f"{api.base()}/workflows", json={"name": "Receipts", "templateId": TEMPLATE},
                                  headers=api.auth)
        assert created.status_code == 201, created.text
        workflow = created.json()
        assert workflow["testInput"] == {"subjectContains": "Beleg", "trusteeInstanceId": ""}
        graph = workflow["graph"]
        next(n for n in graph["nodes"] if n["id"] == "mail")["parameters"]["connectionId"] = connection.json()["id"]
        base = f"{api.base()}/workflows/{workflow['id']}"
        assert api.client.put(f"{base}/draft", json={"graph": graph}, headers=api.auth).status_code == 200
        assert api.client.post(f"{base}/publish", headers=api.auth).status_code == 200
        started = api.client.post(f"{base}/runs", headers=api.auth, json={
            "input": {"subjectContains": "Beleg", "trusteeInstanceId": world.instance_id}, "version": "published"})
        assert started.status_code == 201, started.text
        run = started.json()
        assert (run["status"], run["pauseReason"]) == ("paused", "email"), run

        ai_server.reply_json(extraction())
        ai_server.reply_json({"account": "6640", "reason": "a train ticket is travel"})
        imap.deliver(receipt_mail())
        run = until_not_waiting_for_mail(api, run["id"])
        assert (run["status"], run["pauseReason"]) == ("paused", "humanTask"), run.get("error")

    tasks = api.client.get("/api/tasks", headers=api.auth).json()
    task = next(t for t in (tasks["items"] if isinstance(tasks, dict) else tasks) if t["runId"] == run["id"])
    assert task["title"] == "Book SBB: 108.1 CHF"
    assert "sbb-ticket.pdf" in task["message"] and "6640 / 2000: 100.00 (a train ticket is travel" in task["message"]
    receipts = api.client.get(f"/api/trustee/{world.instance_id}/receipts", headers=api.auth).json()
    assert [(r["fileName"], r["status"]) for r in receipts] == [("sbb-ticket.pdf", "draft")]

    done = api.client.post(f"/api/tasks/{task['id']}/complete", json={"data": {"approved": True}}, headers=api.auth)
    assert done.status_code == 200, done.text
    run = get_run(api, run["id"])
    assert run["status"] == "completed", run
    receipts = api.client.get(f"/api/trustee/{world.instance_id}/receipts", headers=api.auth).json()
    assert [(r["fileName"], r["status"], r["checkedBy"]) for r in receipts] == [
        ("sbb-ticket.pdf", "booked", "System administrator")]
    journal = api.client.get(f"/api/trustee/{world.instance_id}/journal", headers=api.auth).json()
    assert [(p["debitAccount"], p["amount"]) for p in journal] == [("6640", 100.0), ("1170", 8.1)]
