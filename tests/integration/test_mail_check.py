"""email.checkEmail for real (issue 17, item 4) and email.sendMail, through the engine and the REST
API, against pymap (IMAP) and aiosmtpd (SMTP) on 127.0.0.1: a run pauses at its e-mail step, a
matching mail delivered into the mailbox resumes it once with the mail and its attachment saved
as a file; non-matching mails move the node's cursor on; a failing, expired, foreign or missing
connection fails the step with the reason (nothing half-written, no password anywhere); a mail is
sent with a file of the instance attached; the agent is offered the e-mail toolbox only with an
active mail connection."""

from __future__ import annotations

import logging
from typing import Any

import pytest
from sqlmodel import select

from backend.config import reset_settings_cache
from backend.connectors import store
from backend.db import session_scope
from backend.db.models import Connection, StoredFile, User, WorkflowRun
from backend.engine import queue as run_queue
from backend.engine.mailbox import matches, poll_mailboxes
from backend.engine.timers import run_due_work
from backend.files.service import FileScope, list_files, read_bytes, store_file
from tests.integration.test_admin_api import make_mandate
from tests.integration.test_engine import START, edge, run_graph, steps_of, transform
from tests.mail_servers import ImapServer, imap_server, mail, minimal_pdf, smtp_server

PDF = minimal_pdf("Invoice 42: CHF 1,234.50")


@pytest.fixture
def mailbox(api):
    """pymap and aiosmtpd, and the admin's active `imap` connection to them (created over REST)."""
    with imap_server() as imap, smtp_server() as smtp:
        created = api.client.post("/api/connections", json={"type": "imap", "label": "Team mailbox",
                                                            "settings": imap.settings(smtp)}, headers=api.auth)
        assert created.status_code == 201, created.text
        yield Box(imap, smtp, created.json()["id"])


class Box:
    def __init__(self, imap: ImapServer, smtp, connection_id: str):
        self.imap, self.smtp, self.connection_id = imap, smtp, connection_id


def check_graph(connection_id: str, filter: Any = None, folder: str = "Inbox",  # noqa: A002
                **extra: Any) -> dict[str, Any]:
    return {"nodes": [START,
                      {"id": "mail", "type": "email.checkEmail", "label": "Wait for the invoice",
                       "parameters": {"connectionId": connection_id, "folder": folder, "filter": filter}, **extra},
                      transform("after", "got {{ subject }} with {{ files | join(', ') }}",
                                data="{{ nodes.mail.output }}")],
            "edges": [edge("start", "mail"), edge("mail", "after")]}


def get_run(api, run_id: str) -> dict[str, Any]:
    run_queue.wait_for_rest(run_id, 30)  # a woken or resumed run executes on a run thread or a worker
    response = api.client.get(f"{api.base()}/runs/{run_id}", headers=api.auth)
    assert response.status_code == 200, response.text
    return response.json()


def stored_cursor(run_id: str) -> str:
    with session_scope() as session:
        return session.get(WorkflowRun, run_id).context["suspended"]["mail"]["output"]["cursor"]


def files_of(api, folder: str = "/mail") -> dict[str, bytes]:
    """The files under `folder` of the Graphical Editor instance, by path, with their content."""
    with session_scope() as session:
        admin = session.exec(select(User).where(User.username == "admin")).one()
        from backend.db.models import FeatureInstance

        instance = session.get(FeatureInstance, api.instance_id)
        scope = FileScope(session, admin, instance.mandate_id, instance.id)
        try:
            entries = list_files(scope, folder, recursive=True)
        except Exception:  # noqa: BLE001 - no such folder: no files
            return {}
        return {entry.path: read_bytes(scope, file_id=entry.id)[1] for entry in entries}


def test_a_matching_mail_resumes_the_run_once_with_its_attachment_as_a_file(api, mailbox):
    run = run_graph(api, check_graph(mailbox.connection_id, {"subjectContains": "invoice", "hasAttachment": True}))
    assert (run["status"], run["pauseReason"]) == ("paused", "email"), run
    waiting = steps_of(run)["mail"]
    assert waiting["status"] == "waiting" and waiting["output"]["folder"] == "Inbox"
    assert poll_mailboxes() == 0
    first_cursor = stored_cursor(run["id"])

    # Mails that do not match: no attachment, another subject. The cursor moves past them.
    mailbox.imap.deliver(mail("Invoice 41", body="The PDF follows."))
    mailbox.imap.deliver(mail("Lunch?", attachments=[("menu.pdf", "application/pdf", PDF)]))
    assert poll_mailboxes() == 0
    assert get_run(api, run["id"])["status"] == "paused"
    assert stored_cursor(run["id"]) != first_cursor

    mailbox.imap.deliver(mail("Your INVOICE 42", body="Please pay within 30 days.",
                              attachments=[("invoice-42.pdf", "application/pdf", PDF)]))
    assert run_due_work() == {"woken": 0, "reminded": 0, "expired": 0, "mails": 1}
    final = get_run(api, run["id"])
    assert final["status"] == "completed", final
    output = steps_of(final)["mail"]["output"]
    assert (output["subject"], output["from"], output["body"]) == \
        ("Your INVOICE 42", "Anna Muster <anna@example.com>", "Please pay within 30 days.")
    path = f"/mail/{run['id']}/mail/invoice-42.pdf"
    assert output["files"] == [path]
    assert output["attachments"][0]["name"] == "invoice-42.pdf" and output["attachments"][0]["path"] == path
    assert steps_of(final)["after"]["output"]["result"] == f"got Your INVOICE 42 with {path}"
    assert files_of(api) == {path: PDF}

    # Delivered once: later polls and later mails change nothing.
    mailbox.imap.deliver(mail("Invoice 43", attachments=[("invoice-43.pdf", "application/pdf", PDF)]))
    assert poll_mailboxes() == 0
    assert [s["nodeId"] for s in get_run(api, run["id"])["steps"]].count("mail") == 1
    assert files_of(api) == {path: PDF}


def test_each_waiting_node_has_its_own_cursor(api, mailbox):
    """Two runs wait on the same mailbox; one mail resumes both, each exactly once."""
    graph = check_graph(mailbox.connection_id, "report")
    first, second = run_graph(api, graph), run_graph(api, graph)
    mailbox.imap.deliver(mail("Weekly report", body="numbers"))
    assert poll_mailboxes() == 2
    for run in (first, second):
        done = get_run(api, run["id"])
        assert done["status"] == "completed" and steps_of(done)["mail"]["output"]["subject"] == "Weekly report"
    assert poll_mailboxes() == 0


def test_a_filter_may_name_the_folder_and_the_sender(api, mailbox):
    client = mailbox.imap.client()
    assert client.create("Invoices")[0] == "OK"
    client.logout()
    run = run_graph(api, check_graph(mailbox.connection_id, {"folder": "Invoices", "from": "billing@"}))
    assert steps_of(run)["mail"]["output"]["folder"] == "Invoices"
    mailbox.imap.deliver(mail("Invoice 7", sender="billing@example.com"))  # in INBOX: not watched
    mailbox.imap.deliver(mail("Invoice 8", sender="someone@example.com"), folder="Invoices")
    assert poll_mailboxes() == 0
    mailbox.imap.deliver(mail("Invoice 9", sender="Billing <billing@example.com>"), folder="Invoices")
    assert poll_mailboxes() == 1
    output = steps_of(get_run(api, run["id"]))["mail"]["output"]
    assert (output["subject"], output["folder"], output["files"]) == ("Invoice 9", "Invoices", [])


def test_a_bad_filter_or_folder_fails_the_step_at_once(api, mailbox):
    bad = run_graph(api, check_graph(mailbox.connection_id, {"subject": "x", "hasAttachment": "yes"}))
    assert bad["status"] == "failed"
    error = steps_of(bad)["mail"]["error"]
    assert "filter.subject: unknown; known: from, subjectContains, bodyContains, hasAttachment, folder" in error
    assert "filter.hasAttachment: must be true or false" in error
    missing = run_graph(api, check_graph(mailbox.connection_id, folder="Archive"))
    assert missing["status"] == "failed"
    assert steps_of(missing)["mail"]["error"].startswith("mail folder 'Archive' not found in demouser's mailbox")


def test_wrong_credentials_fail_the_waiting_step_with_the_reason_and_no_password(api, mailbox, caplog):
    caplog.set_level(logging.DEBUG)
    run = run_graph(api, check_graph(mailbox.connection_id))
    assert run["status"] == "paused"
    with session_scope() as session:  # the password was changed at the provider since
        row = session.get(Connection, mailbox.connection_id)
        row.secret = store.seal_secret({"password": "an-old-password"})
    mailbox.imap.deliver(mail("anything"))
    assert poll_mailboxes() == 0
    failed = get_run(api, run["id"])
    assert failed["status"] == "failed", failed
    step = steps_of(failed)["mail"]
    assert step["status"] == "failed" and "refused the login of demouser" in step["error"]
    assert "refused the login of demouser" in failed["error"] and "'mail'" in failed["error"]
    assert "after" not in steps_of(failed)
    listed = api.client.get(f"/api/connections/{mailbox.connection_id}", headers=api.auth).json()
    assert listed["status"] == "error" and "refused the login" in listed["lastError"]
    everything = str(failed) + caplog.text + str(listed)
    assert "an-old-password" not in everything and "demopass" not in everything
    assert files_of(api) == {}


def test_a_server_down_fails_the_step_and_on_error_route_takes_the_error_handle(api, app_config):
    with imap_server() as imap:
        created = api.client.post("/api/connections", json={"type": "imap", "label": "Soon gone",
                                                            "settings": imap.settings()}, headers=api.auth)
        connection_id = created.json()["id"]
        graph = check_graph(connection_id, onError="route")
        graph["nodes"].append(transform("handle", "mail failed: {{ error }}", data="{{ nodes.mail.output }}"))
        graph["edges"].append(edge("mail", "handle", "error"))
        run = run_graph(api, graph)
        assert run["status"] == "paused"
    assert poll_mailboxes() == 0  # pymap has stopped
    final = get_run(api, run["id"])
    assert final["status"] == "completed", final
    assert steps_of(final)["mail"]["status"] == "failed"
    assert "cannot reach the IMAP server" in steps_of(final)["handle"]["output"]["result"]
    # The connection shows it; the next run fails at once with the reason.
    again = run_graph(api, check_graph(connection_id))
    assert again["status"] == "failed"
    assert "connection 'Soon gone' is error: cannot reach the IMAP server" in steps_of(again)["mail"]["error"]
    assert "reconnect or test it on the Connections page" in steps_of(again)["mail"]["error"]


def test_an_expired_connection_fails_the_step_with_its_reason(api, mailbox):
    store.mark_expired(mailbox.connection_id, "The provider revoked the app password.")
    run = run_graph(api, check_graph(mailbox.connection_id))
    assert run["status"] == "failed"
    assert steps_of(run)["mail"]["error"] == ("connection 'Team mailbox' is expired: The provider revoked the app "
                                              "password. — reconnect or test it on the Connections page")


def test_a_connection_of_another_mandate_is_not_found(api, mailbox):
    acme = make_mandate(api, "Acme", "alice")
    graph = check_graph(mailbox.connection_id)
    created = api.client.post(f"{api.base(acme.editor_id)}/workflows", json={"name": "steal", "graph": graph},
                              headers=acme.admin)
    assert created.status_code == 201, created.text
    run = api.client.post(f"{api.base(acme.editor_id)}/workflows/{created.json()['id']}/runs", json={},
                          headers=acme.admin).json()
    assert run["status"] == "failed", run
    assert steps_of(run)["mail"]["error"] == f"connection {mailbox.connection_id} not found"


def test_the_mail_requirement_names_a_missing_or_unknown_connection(api, mailbox):
    unchosen = run_graph(api, check_graph(""))
    assert unchosen["status"] == "failed" and unchosen["steps"] == []
    assert ("it needs a mail connection for node 'mail' (Wait for the invoice) — none chosen: add a mail connection "
            "on the Connections page and choose it in the node (connectionId)") in unchosen["error"]
    unknown = run_graph(api, check_graph("no-such-connection"))
    assert unknown["status"] == "failed"
    assert "connection no-such-connection not found: choose one of yours on the Connections page" in unknown["error"]
    templates = {t["id"]: t for t in api.client.get(f"{api.base()}/templates", headers=api.auth).json()}
    need = next(n for n in templates["email-attachment-analysis"]["needs"] if n["id"] == "mail")
    assert need["available"] is False and "Connections page" in need["text"]


def test_an_attachment_over_the_file_limit_fails_the_step_naming_it_and_keeps_nothing(api, mailbox, monkeypatch):
    run = run_graph(api, check_graph(mailbox.connection_id))
    monkeypatch.setenv("POWERON_FILE_MAX_BYTES", "300")
    reset_settings_cache()
    mailbox.imap.deliver(mail("Scan", attachments=[("scan.pdf", "application/pdf", PDF)]))
    assert poll_mailboxes() == 0
    failed = get_run(api, run["id"])
    assert failed["status"] == "failed"
    assert "the attachment 'scan.pdf' is" in steps_of(failed)["mail"]["error"]
    assert "files may be at most 300 bytes (POWERON_FILE_MAX_BYTES)" in steps_of(failed)["mail"]["error"]
    with session_scope() as session:
        assert session.exec(select(StoredFile)).all() == []


def test_the_filter_rules():
    from datetime import UTC, datetime

    from backend.connectors.access import Attachment, Mail

    message = Mail("1", "INBOX", "Boss <Boss@Example.com>", ("me@example.com",), "Invoice 7", "please pay",
                   datetime.now(UTC), attachments=(Attachment("2", "a.pdf", "application/pdf", 10),))
    assert matches(message, None) and matches(message, {}) and matches(message, {"subjectContains": ""})
    assert matches(message, "PAY") and matches(message, "invoice") and not matches(message, "refund")
    assert matches(message, {"from": "boss@example", "bodyContains": "Pay", "hasAttachment": True})
    assert not matches(message, {"hasAttachment": False})
    assert matches(message, {"folder": "inbox"}) and not matches(message, {"folder": "Archive"})
    assert not matches(message, {"from": "boss@example", "subjectContains": "receipt"})
    assert not matches(message, 42)


# --- email.sendMail ---------------------------------------------------------------------------------


def put_file(api, path: str, content: bytes) -> None:
    with session_scope() as session:
        admin = session.exec(select(User).where(User.username == "admin")).one()
        from backend.db.models import FeatureInstance

        instance = session.get(FeatureInstance, api.instance_id)
        store_file(FileScope(session, admin, instance.mandate_id, instance.id), path, content, "application/pdf")


def test_send_mail_as_a_graph_node_with_a_file_attached(api, mailbox):
    put_file(api, "/reports/q3.pdf", PDF)
    node = {"id": "send", "type": "email.sendMail",
            "parameters": {"connectionId": mailbox.connection_id, "to": "anna@example.com; Bert <bert@example.com>",
                           "cc": ["carla@example.com"], "subject": "Q3 report {{ input.n }}",
                           "body": "<p>Here it is.</p>", "html": True, "attachments": ["/reports/q3.pdf"]}}
    run = run_graph(api, {"nodes": [START, node], "edges": [edge("start", "send")]}, {"n": 3})
    assert run["status"] == "completed", run
    output = steps_of(run)["send"]["output"]
    assert output["to"] == ["anna@example.com", "Bert <bert@example.com>"] and output["attachments"] == \
        ["/reports/q3.pdf"]
    assert output["status"].startswith("sent to 3 recipients")
    (received,) = mailbox.smtp.received
    assert received["Subject"] == "Q3 report 3" and received["Cc"] == "carla@example.com"
    assert received["Message-ID"] in output["status"]
    attached = [p for p in received.walk() if p.get_filename()]
    assert [(p.get_filename(), p.get_content_type(), p.get_payload(decode=True)) for p in attached] == \
        [("q3.pdf", "application/pdf", PDF)]


def test_send_mail_refuses_clearly(api, mailbox, monkeypatch):
    def call(**parameters: Any) -> Any:
        body = {"action": "email.sendMail", "parameters": {"connectionId": mailbox.connection_id,
                                                           "to": ["anna@example.com"], "subject": "Hi",
                                                           "body": "Hello", **parameters}}
        return api.client.post(f"/api/instances/{api.instance_id}/actions", json=body, headers=api.auth)

    sent = call()
    assert sent.status_code == 200 and sent.json()["ok"] is True, sent.text
    missing = call(connectionId="nope").json()
    assert missing["ok"] is False and missing["error"] == "connection nope not found"
    no_file = call(attachments=["/nowhere.pdf"]).json()
    assert no_file["ok"] is False and "/nowhere.pdf" in no_file["error"]
    put_file(api, "/big.pdf", PDF)
    monkeypatch.setenv("POWERON_FILE_MAX_BYTES", "1000")
    reset_settings_cache()
    too_big = call(attachments=["/big.pdf", "/big.pdf"]).json()
    assert too_big["ok"] is False
    assert "may be at most 1000 bytes together (POWERON_FILE_MAX_BYTES)" in too_big["error"]
    assert call(to=[]).status_code == 422
    assert len(mailbox.smtp.received) == 1


def test_the_agent_is_offered_the_email_toolbox_only_with_an_active_mail_connection(api, app_config):
    from backend.agent.config import profile
    from backend.agent.toolset import Toolset
    from backend.db.models import FeatureInstance
    from backend.rbac.access import AccessContext

    def requestable() -> dict[str, list[str]]:
        with session_scope() as session:
            admin = session.exec(select(User).where(User.username == "admin")).one()
            instance = session.exec(select(FeatureInstance).where(FeatureInstance.feature_code == "workspace")).one()
            tools = Toolset(AccessContext(session, admin), instance, profile("workspace"))
            return {box.id: [a.id for a in tools._usable.get(box.id, [])] for box in tools.requestable()}

    assert "email" not in requestable()
    with imap_server() as imap, smtp_server() as smtp:
        created = api.client.post("/api/connections", json={"type": "imap", "label": "Mine",
                                                            "settings": imap.settings(smtp)}, headers=api.auth)
        assert created.status_code == 201, created.text
        assert requestable()["email"] == ["email.sendMail"]
    store.mark_failed(created.json()["id"], "gone")
    assert "email" not in requestable()
