"""The "Daily inbox digest mail" template (issue 17, item 6): made into a workflow through the templates
API, it says what it needs (a connection to read, an AI provider, a mail connection to send from); once
the mailbox is chosen and an address set, its run reads the newest mails of a real IMAP inbox (pymap),
lets the model (ScriptedAiServer) write the digest and sends it through the mailbox's SMTP server
(aiosmtpd), where it arrives with the model's text.
"""

from __future__ import annotations

import uuid
from datetime import UTC, datetime
from email.message import Message

import pytest

from backend.workflows import templates
from tests.mail_servers import imap_server, mail, smtp_server

pytestmark = pytest.mark.parametrize("db_url", ["sqlite"], indirect=True)

DIGEST = "Digest: 1. Anna Muster — budget meeting moved to Friday. 2. Carl Client — invoice 2025-114 is overdue."


def text_of(message: Message) -> str:
    for part in message.walk():
        if part.get_content_type() == "text/plain":
            return part.get_payload(decode=True).decode(part.get_content_charset() or "utf-8")
    raise AssertionError("the mail has no text part")


def test_the_digest_template_reads_the_inbox_and_mails_the_models_digest(api, ai_server):
    card = {t["id"]: t for t in api.client.get(f"{api.base()}/templates", headers=api.auth).json()}
    digest = card["daily-inbox-digest"]
    assert digest["name"] == "Daily inbox digest mail" and digest["runsAsItIs"] is False
    assert digest["connections"] == ["imap|msft", "ai", "mail"]
    needs = {n["id"]: n for n in digest["needs"]}
    assert needs["imap|msft"]["nodes"] == ["read"] and needs["imap|msft"]["available"] is False
    assert needs["ai"]["text"] == "Needs an AI provider — configured here"
    assert digest["sampleInput"] == templates.template("daily-inbox-digest").sample_input

    with imap_server() as imap, smtp_server() as smtp:
        imap.deliver(mail("Budget meeting moved", "The budget meeting moves to Friday 10:00."))
        imap.deliver(mail("Invoice 2025-114 overdue", "Please pay invoice 2025-114 this week.",
                          sender="Carl Client <carl@client.example>"))
        connection = api.client.post("/api/connections", json={"type": "imap", "label": "My inbox",
                                                                "settings": imap.settings(smtp)}, headers=api.auth)
        assert connection.status_code == 201, connection.text
        created = api.client.post(f"{api.base()}/workflows", json={"name": f"digest-{uuid.uuid4().hex[:6]}",
                                                                   "templateId": "daily-inbox-digest"},
                                  headers=api.auth)
        assert created.status_code == 201, created.text
        workflow = created.json()
        runs = f"{api.base()}/workflows/{workflow['id']}/runs"

        # As it comes, no mailbox is chosen: the run fails at once, naming the node and the fix.
        unset = api.client.post(runs, json={"input": workflow["testInput"]}, headers=api.auth).json()
        assert unset["status"] == "failed" and unset["steps"] == []
        assert ("it needs an E-mail (IMAP/SMTP) or Microsoft 365 connection for node 'read' (Read the newest "
                "mails) — none chosen") in unset["error"]
        assert smtp.received == [] and ai_server.chat_requests == []

        # The user chooses the mailbox and puts in their address, as in the editor.
        graph = workflow["graph"]
        nodes = {n["id"]: n for n in graph["nodes"]}
        nodes["read"]["parameters"]["connectionId"] = connection.json()["id"]
        nodes["send"]["parameters"]["to"] = ["anna.meier@example.com"]
        saved = api.client.put(f"{api.base()}/workflows/{workflow['id']}/draft", json={"graph": graph},
                               headers=api.auth)
        assert saved.status_code == 200, saved.text

        ai_server.reply(DIGEST)
        before = datetime.now(UTC).date().isoformat()
        run = api.client.post(runs, json={"input": workflow["testInput"]}, headers=api.auth).json()
        assert run["status"] == "completed", run
        assert [s["nodeId"] for s in run["steps"]] == ["start", "read", "digest", "send"]

        # The model was shown the newest mails of the inbox.
        shown = ai_server.last_chat.user_text
        assert "Invoice 2025-114 overdue" in shown and "Please pay invoice 2025-114 this week." in shown
        assert "Budget meeting moved" in shown

        (sent,) = smtp.received
        assert sent["To"] == "anna.meier@example.com"
        days = {before, datetime.now(UTC).date().isoformat()}  # the run may have crossed midnight
        assert sent["Subject"] in {f"Your inbox digest of {day}" for day in days}
        assert text_of(sent).strip() == DIGEST
        assert smtp.envelopes[0][1] == ["anna.meier@example.com"]
