# ruff: noqa: F811 - the fixtures of test_msft_oauth are imported by name, and tests take them as arguments
"""The flagship template (spec §8.2, issue 17 item 6) run for real: "E-mail attachment → AI analysis →
SharePoint upload" made from its template through the REST API, its connection pickers set to a
Microsoft 365 connection made by consent at the identity platform + Graph stand-in
(tests/msgraph_server.py), published, activated and started; a mail with a PDF attachment arriving in
the stand-in's mailbox resumes it, the scripted model (tests/ai_server.py) gets the PDF's text, and
the analysis and the PDF end up in the stand-in's SharePoint folder. An expired connection and a
SharePoint folder that does not exist fail the run, saying which, with nothing written there."""

from __future__ import annotations

import time
from typing import Any

import pytest

from backend.engine import queue as run_queue
from backend.engine.mailbox import poll_mailboxes
from tests.integration.test_msft_oauth import (  # noqa: F401 - fixtures
    _stand_in,
    admin,
    assert_no_secrets,
    graph,
)
from tests.mail_servers import minimal_pdf
from tests.msgraph_server import MsGraph

TEMPLATE = "email-attachment-analysis"
PDF_TEXT = "Invoice 42: CHF 1,234.50 due on 31 March"
PDF = minimal_pdf(PDF_TEXT)
ANALYSIS = "## Invoice 42\n\n- Amount: CHF 1,234.50\n- Due: 31 March\n- Action: pay before the due date"
SETTLE_SECONDS = 30


@pytest.fixture
def finance(graph: MsGraph) -> str:
    """A SharePoint site "Finance" whose library "Documents" has an empty folder "Invoices"; the library's id."""
    site = graph.add_site("Finance")
    library = graph.add_library(site, "Documents", "Shared Documents")
    graph.add_folder(library, "Invoices")
    return library


def files_in(graph: MsGraph, library: str) -> dict[str, bytes]:
    """Every file of the library in the stand-in, by path."""
    with graph.lock:
        return {graph._path_of(node): node.data for node in graph.nodes.values()
                if node.drive == library and not node.folder}


def from_template(api, connection_id: str, name: str = "Invoices to SharePoint") -> dict[str, Any]:
    """A workflow made from the template, every connection picker set to `connection_id`, published
    and active; the workflow as the API returns it after creation."""
    created = api.client.post(f"{api.base()}/workflows", json={"name": name, "templateId": TEMPLATE}, headers=api.auth)
    assert created.status_code == 201, created.text
    workflow = created.json()
    pickers = [n for n in workflow["graph"]["nodes"] if "connectionId" in n["parameters"]]
    assert [(n["id"], n["parameters"]["connectionId"]) for n in pickers] == \
        [("mail", ""), ("upload", ""), ("original", "")]  # empty: the user chooses, the editor asks for it
    for node in pickers:
        node["parameters"]["connectionId"] = connection_id
    saved = api.client.put(f"{api.base()}/workflows/{workflow['id']}/draft", json={"graph": workflow["graph"]},
                           headers=api.auth)
    assert saved.status_code == 200, saved.text
    published = api.client.post(f"{api.base()}/workflows/{workflow['id']}/publish", headers=api.auth)
    assert published.status_code == 200, published.text
    activated = api.client.patch(f"{api.base()}/workflows/{workflow['id']}", json={"active": True}, headers=api.auth)
    assert activated.status_code == 200 and activated.json()["active"] is True, activated.text
    return workflow


def start(api, workflow_id: str, run_input: Any) -> dict[str, Any]:
    answer = api.client.post(f"{api.base()}/workflows/{workflow_id}/runs",
                             json={"input": run_input, "version": "published"}, headers=api.auth)
    assert answer.status_code == 201, answer.text
    return answer.json()


def get_run(api, run_id: str) -> dict[str, Any]:
    run_queue.wait_for_rest(run_id, 30)  # a woken or resumed run executes on a run thread or a worker
    answer = api.client.get(f"{api.base()}/runs/{run_id}", headers=api.auth)
    assert answer.status_code == 200, answer.text
    return answer.json()


def settled(api, run_id: str) -> dict[str, Any]:
    """Poll the mailboxes (what the timers do every few seconds) until the run no longer waits."""
    deadline = time.monotonic() + SETTLE_SECONDS
    while time.monotonic() < deadline:
        poll_mailboxes()
        run = get_run(api, run_id)
        if run["status"] != "paused":
            return run
    pytest.fail(f"run {run_id} still waits after {SETTLE_SECONDS} s")


def steps(run: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {s["nodeId"]: s for s in run["steps"]}


def stamp_of(run: dict[str, Any]) -> str:
    """What the SharePoint names of the run's mail start with: its arrival, "2025-03-03 0915"."""
    return steps(run)["mail"]["output"]["receivedAt"][:16].replace("T", " ").replace(":", "")


def waiting_run(api, admin, finance, run_input: dict[str, Any] | None = None) -> tuple[str, dict[str, Any]]:
    """The template's workflow with a new Microsoft 365 connection, started: (connection id, run)."""
    connection_id = admin.connect(label="Anna's Microsoft 365")
    workflow = from_template(api, connection_id)
    assert workflow["testInput"] == {"subjectContains": "Invoice", "site": "Finance", "folder": "/Documents/Invoices"}
    run = start(api, workflow["id"], run_input or workflow["testInput"])
    assert (run["status"], run["pauseReason"]) == ("paused", "email"), run
    return connection_id, run


def invoice_mail(graph: MsGraph) -> None:
    graph.add_mail(subject="Invoice 42 from Fabrikam", body="Please find our invoice attached.",
                   attachments=[("invoice-42.pdf", "application/pdf", PDF)])


def test_a_mail_with_a_pdf_ends_as_its_analysis_and_the_pdf_in_sharepoint(graph, admin, api, ai_server, finance,
                                                                          caplog):
    _connection, run = waiting_run(api, admin, finance)
    graph.add_mail(subject="Lunch on Friday?", body="Pizza?")  # no attachment, other subject: not this one
    graph.add_mail(subject="Holiday photos", attachments=[("beach.pdf", "application/pdf", minimal_pdf("Beach"))])
    assert poll_mailboxes() == 0 and get_run(api, run["id"])["status"] == "paused"
    ai_server.reply(ANALYSIS)
    invoice_mail(graph)

    done = settled(api, run["id"])
    assert done["status"] == "completed", done
    assert [s["status"] for s in done["steps"]] == ["completed"] * 6
    # The model was asked once, about this mail, with the PDF's extracted text.
    asked = ai_server.chat_requests
    assert len(asked) == 1
    assert PDF_TEXT in asked[0].user_text and '"subject": "Invoice 42 from Fabrikam"' in asked[0].user_text
    # The analysis and the PDF are in the SharePoint folder, named after the mail's arrival and the PDF.
    stamp = stamp_of(done)
    assert files_in(graph, finance) == {f"/Invoices/{stamp} invoice-42.pdf - analysis.md": ANALYSIS.encode(),
                                        f"/Invoices/{stamp} invoice-42.pdf": PDF}
    uploaded = steps(done)["upload"]["output"]
    assert (uploaded["name"], uploaded["path"]) == (f"{stamp} invoice-42.pdf - analysis.md",
                                                    f"/Documents/Invoices/{stamp} invoice-42.pdf - analysis.md")
    assert_no_secrets(graph, str(done), records=caplog.records)


def test_an_expired_connection_fails_the_run_naming_it_and_nothing_reaches_sharepoint(graph, admin, api,
                                                                                      ai_server, finance):
    connection_id, run = waiting_run(api, admin, finance)
    graph.revoke_refresh_tokens()  # the user revoked the app at Microsoft: the sign-in cannot be renewed
    graph.expire_access_tokens()
    invoice_mail(graph)

    failed = settled(api, run["id"])
    assert failed["status"] == "failed", failed
    mail_step = steps(failed)["mail"]
    assert mail_step["status"] == "failed"
    assert mail_step["error"].startswith("Microsoft no longer accepts the sign-in of connection 'Anna's Microsoft "
                                         "365'"), mail_step["error"]
    assert mail_step["error"].endswith("reconnect it on the Connections page")
    assert "'mail'" in failed["error"]
    assert set(steps(failed)) == {"start", "mail"}  # nothing after the mail step ran
    connection = api.client.get(f"/api/connections/{connection_id}", headers=api.auth).json()
    assert connection["status"] == "expired"
    assert ai_server.chat_requests == [] and files_in(graph, finance) == {}
    # The next run fails at its mail step at once, saying what to do.
    again = start(api, from_template(api, connection_id, "Invoices again")["id"],
                  {"subjectContains": "Invoice", "site": "Finance", "folder": "/Documents/Invoices"})
    assert again["status"] == "failed"
    assert steps(again)["mail"]["error"].startswith("connection 'Anna's Microsoft 365' is expired: Microsoft no "
                                                    "longer accepts the sign-in")
    assert steps(again)["mail"]["error"].endswith("reconnect or test it on the Connections page")


def test_a_sharepoint_folder_that_does_not_exist_fails_the_upload_naming_it_with_nothing_written(
        graph, admin, api, ai_server, finance):
    _connection, run = waiting_run(api, admin, finance, {"subjectContains": "Invoice", "site": "Finance",
                                                         "folder": "/Documents/Invoices 2025"})
    ai_server.reply(ANALYSIS)
    invoice_mail(graph)

    failed = settled(api, run["id"])
    assert failed["status"] == "failed", failed
    upload = steps(failed)["upload"]
    assert upload["status"] == "failed"
    assert "'/Documents/Invoices 2025' does not exist in site 'Finance'" in upload["error"], upload["error"]
    assert "'/Documents/Invoices 2025' does not exist" in failed["error"] and "'upload'" in failed["error"]
    assert "original" not in steps(failed)  # the attachment was not uploaded either
    assert files_in(graph, finance) == {}
    assert len(ai_server.chat_requests) == 1


def test_an_attachment_without_text_is_named_to_the_model_and_the_pdf_is_still_read(graph, admin, api, ai_server,
                                                                                    finance):
    """A mail with a scanned image and the PDF: the model reads the PDF and is told the image has no text."""
    from tests.ai_server import tiny_png

    _connection, run = waiting_run(api, admin, finance)
    ai_server.reply(ANALYSIS)
    graph.add_mail(subject="Invoice 43", attachments=[("scan.png", "image/png", tiny_png()),
                                                      ("invoice-43.pdf", "application/pdf", PDF)])
    done = settled(api, run["id"])
    assert done["status"] == "completed", done
    asked = ai_server.last_chat.user_text
    assert PDF_TEXT in asked
    assert f"/mail/{run['id']}/mail/scan.png has no text (image/png" in asked
    # The analysis is named after the first attachment, which is uploaded next to it.
    stamp = stamp_of(done)
    assert sorted(files_in(graph, finance)) == [f"/Invoices/{stamp} scan.png",
                                                f"/Invoices/{stamp} scan.png - analysis.md"]
