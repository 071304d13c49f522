# ruff: noqa: F811 - the fixtures of test_msft_oauth/test_msft_sharepoint are imported by name, and tests take them
"""The `datasources` toolbox (issue 17, spec §5.2): its eight actions over an IMAP mailbox on a real server
(pymap, with aiosmtpd for sending) and over a Microsoft 365 connection (the identity platform + Graph
stand-in, tests/msgraph_server.py), run through the action registry (execute_action) as a user, as a
graph node through the engine (a REST run) and as agent tools (the Workspace agent, scripted model).

Bad input says what is wrong, naming the field: an unknown path or a forged location, a missing file,
a file over POWERON_FILE_MAX_BYTES, a name already taken, another user's connection (not found), an
expired one (its reason).
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from dataclasses import dataclass

import pytest
from sqlmodel import select

from backend.config import reset_settings_cache
from backend.db import session_scope
from backend.db.models import Connection, User
from backend.files.service import FileStore
from backend.rbac.access import AccessContext
from tests.integration.test_admin_api import add_user, make_mandate, signed_in
from tests.integration.test_agent import call, of, request_toolbox_enum, stream, tool_names, tool_results
from tests.integration.test_msft_mail import run
from tests.integration.test_msft_oauth import _stand_in, admin, graph  # noqa: F401 - fixtures
from tests.integration.test_msft_sharepoint import pdf, sites  # noqa: F401 - fixtures
from tests.integration.test_sources import workspace_id
from tests.mail_servers import ImapServer, SmtpServer, imap_server, mail, smtp_server

TAG = "wombat3"
REPORT = b"Quarterly figures: revenue up 12 percent.\n"


@dataclass
class Mailbox:
    id: str
    imap: ImapServer
    smtp: SmtpServer


@pytest.fixture
def mailbox(api) -> Iterator[Mailbox]:
    """The admin's IMAP/SMTP connection "Team mailbox"; its INBOX holds an invoice mail with report.txt."""
    with imap_server() as imap, smtp_server() as smtp:
        imap.deliver(mail(f"Invoice {TAG}", f"Hello,\nthe {TAG} report is attached.\n",
                          attachments=[("report.txt", "text/plain", REPORT)]))
        created = api.client.post("/api/connections", json={"type": "imap", "label": "Team mailbox",
                                                             "settings": imap.settings(smtp)}, headers=api.auth)
        assert created.status_code == 201, created.text
        yield Mailbox(created.json()["id"], imap, smtp)


def ok(action_id: str, params: dict, username: str = "admin") -> dict:
    result = run(action_id, params, username)
    assert result.ok, (action_id, result.error)
    return result.output


def failed(action_id: str, params: dict, username: str = "admin") -> str:
    result = run(action_id, params, username)
    assert not result.ok, (action_id, result.output)
    return result.error


def stored(path: str, instance_id: str | None = None) -> bytes:
    with session_scope() as session:
        admin_user = session.exec(select(User).where(User.username == "admin")).one()
        return FileStore.of(AccessContext(session, admin_user), instance_id or workspace_id()).read_bytes(path)[1]


def store(path: str, content: bytes) -> None:
    with session_scope() as session:
        admin_user = session.exec(select(User).where(User.username == "admin")).one()
        FileStore.of(AccessContext(session, admin_user), workspace_id()).store_file(path, content, "text/plain")


def by_name(entries: list[dict], name: str) -> dict:
    return next(e for e in entries if e["name"] == name)


# --- an IMAP mailbox ----------------------------------------------------------------------------------


def test_connections_are_listed_with_status_and_offers_but_no_secret(api, mailbox):
    listed = ok("datasources.listConnections", {})["connections"]
    assert [(c["id"], c["label"], c["type"], c["status"], c["usable"], c["offers"]) for c in listed] == \
        [(mailbox.id, "Team mailbox", "imap", "active", True, ["mail"])]
    assert mailbox.imap.password not in json.dumps(listed)
    assert ok("datasources.listConnections", {"offers": "files"})["connections"] == []


def test_a_mailbox_is_browsed_by_path_or_location_down_to_an_attachment(api, mailbox):
    top = ok("datasources.browseDataSource", {"connectionId": mailbox.id})
    assert {"INBOX", "Sent", "Trash"} <= {e["name"] for e in top["entries"]}
    assert all(e["isContainer"] and e["kind"] == "mailFolder" for e in top["entries"])
    inbox = ok("datasources.browseDataSource", {"connectionId": mailbox.id, "location": "/inbox", "limit": 2})
    assert inbox["count"] == 2  # the newest two mails (pymap's demo INBOX holds four more)
    invoice = inbox["entries"][0]
    assert (invoice["name"], invoice["kind"], invoice["isContainer"]) == (f"Invoice {TAG}", "message", True)
    assert "anna@example.com" in invoice["detail"]
    same = ok("datasources.browseContainer", {"connectionId": mailbox.id, "container": by_name(
        top["entries"], "INBOX")["location"], "limit": 1})
    assert [e["name"] for e in same["entries"]] == [f"Invoice {TAG}"]
    attachments = ok("datasources.browseContainer", {"connectionId": mailbox.id, "container": invoice["location"]})
    assert [(e["name"], e["kind"], e["isContainer"]) for e in attachments["entries"]] == \
        [("report.txt", "attachment", False)]
    not_a_container = failed("datasources.browseContainer", {"connectionId": mailbox.id,
                                                              "container": attachments["entries"][0]["location"]})
    assert not_a_container.startswith("container: names a file or an attachment, not a container")


def test_search_finds_a_mail_by_a_word_of_its_body(api, mailbox):
    everywhere = ok("datasources.searchDataSource", {"connectionId": mailbox.id, "query": TAG})
    assert [e["name"] for e in everywhere["entries"]] == [f"Invoice {TAG}"]
    in_trash = ok("datasources.searchDataSource", {"connectionId": mailbox.id, "query": TAG, "location": "/Trash"})
    assert in_trash["entries"] == []


def test_mails_and_attachments_are_read_as_text(api, mailbox):
    newest = ok("datasources.readContentObjects", {"connectionId": mailbox.id, "container": "/INBOX", "limit": 1})
    (read,) = newest["items"]
    assert (read["name"], read["kind"], read["truncated"]) == (f"Invoice {TAG}", "message", False)
    assert read["text"].startswith("From: Anna Muster <anna@example.com>")
    assert f"the {TAG} report is attached" in read["text"] and "Attachments: report.txt" in read["text"]
    attachment = ok("datasources.browseContainer", {"connectionId": mailbox.id,
                                                    "container": read["location"]})["entries"][0]
    both = ok("datasources.readContentObjects", {"connectionId": mailbox.id, "maxChars": 100,
                                                 "items": [read["location"], attachment["location"]]})
    assert [(i["kind"], i["name"]) for i in both["items"]] == [("message", f"Invoice {TAG}"),
                                                               ("attachment", "report.txt")]
    assert both["items"][1]["text"] == REPORT.decode() and both["errors"] == []
    assert both["items"][0]["truncated"] is True and len(both["items"][0]["text"]) == 100
    # The mail's attachments as a container; one bad item is reported, the others are read.
    partly = ok("datasources.readContentObjects", {"connectionId": mailbox.id,
                                                   "items": [attachment["location"], "/Nowhere"]})
    assert [i["name"] for i in partly["items"]] == ["report.txt"]
    assert partly["errors"][0].startswith("items[1]: '/Nowhere' is not in connection 'Team mailbox': no mail folder")
    neither = failed("datasources.readContentObjects", {"connectionId": mailbox.id})
    assert "give items or a container" in neither


def test_an_attachment_is_downloaded_and_extracted_into_the_file_store(api, mailbox):
    invoice = ok("datasources.browseContainer", {"connectionId": mailbox.id, "container": "/INBOX",
                                                 "limit": 1})["entries"][0]
    attachment = ok("datasources.browseContainer", {"connectionId": mailbox.id,
                                                    "container": invoice["location"]})["entries"][0]
    downloaded = ok("datasources.downloadFromDataSource", {"connectionId": mailbox.id,
                                                           "item": attachment["location"]})
    assert downloaded["file"]["path"] == "/sources/Team mailbox/INBOX/report.txt"
    assert stored(downloaded["file"]["path"]) == REPORT
    as_text = ok("datasources.downloadFromDataSource", {"connectionId": mailbox.id, "item": invoice["location"],
                                                        "folder": "/mails"})
    assert as_text["file"]["path"] == f"/mails/Invoice {TAG}.txt"
    assert stored(as_text["file"]["path"]).decode().startswith("From: Anna Muster")
    extracted = ok("datasources.extractContainerItem", {"connectionId": mailbox.id, "container": invoice["location"],
                                                        "item": "REPORT.TXT", "folder": "/invoices"})
    assert (extracted["file"]["path"], extracted["item"]["name"]) == ("/invoices/report.txt", "report.txt")
    only = ok("datasources.extractContainerItem", {"connectionId": mailbox.id, "container": invoice["location"],
                                                   "folder": "/invoices"})
    assert only["file"]["id"] == extracted["file"]["id"]  # the only attachment; the same content is not copied twice
    missing = failed("datasources.extractContainerItem", {"connectionId": mailbox.id, "container": invoice["location"],
                                                          "item": "nope.pdf"})
    assert missing == "item: the container holds no 'nope.pdf' (it holds report.txt)"
    folder = failed("datasources.downloadFromDataSource", {"connectionId": mailbox.id, "item": "/INBOX"})
    assert folder == "item: names a folder, not a file, attachment or mail"


def test_bad_places_are_refused_naming_the_field(api, mailbox):
    unknown = failed("datasources.browseDataSource", {"connectionId": mailbox.id, "location": "/Nope"})
    assert unknown.startswith("location: '/Nope' is not in connection 'Team mailbox': no mail folder 'Nope' "
                              "(folders: INBOX, Sent, Trash")
    forged = failed("datasources.browseContainer", {"connectionId": mailbox.id, "container": '["mail","x"]'})
    assert forged == "container: is not a place in this connection: open it from the list"
    deep = failed("datasources.browseContainer", {"connectionId": mailbox.id, "container": "[" * 3000})
    assert deep == "container: is not a place in this connection: open it from the list"
    top = failed("datasources.browseContainer", {"connectionId": mailbox.id, "container": "/"})
    assert top.startswith("container: names the top of the connection")
    no_connection = failed("datasources.browseDataSource", {"connectionId": " "})
    assert no_connection.startswith("connectionId: choose a connection")
    mail_as_folder = failed("datasources.uploadToExternal", {"connectionId": mailbox.id, "file": "/a.txt",
                                                             "folder": "/INBOX"})
    assert mail_as_folder.startswith("folder: is not a folder of files")
    too_long = failed("datasources.browseDataSource", {"connectionId": mailbox.id, "location": "/INBOX",
                                                       "limit": 500})
    assert "limit: at most 100 mails per call (POWERON_MAIL_MAX_MESSAGES)" in too_long


def test_an_attachment_over_the_file_limit_is_refused_naming_the_limit(api, mailbox, monkeypatch):
    invoice = ok("datasources.browseContainer", {"connectionId": mailbox.id, "container": "/INBOX",
                                                 "limit": 1})["entries"][0]
    monkeypatch.setenv("POWERON_FILE_MAX_BYTES", "20")
    reset_settings_cache()
    refused = failed("datasources.extractContainerItem", {"connectionId": mailbox.id, "container": invoice["location"],
                                                          "item": "report.txt"})
    assert refused.startswith("item: the attachment 'report.txt' is ")
    assert refused.endswith(" bytes; files may be at most 20 bytes (POWERON_FILE_MAX_BYTES)")
    with session_scope() as session:
        assert FileStore.of(AccessContext(session, session.exec(select(User).where(User.username == "admin")).one()),
                            workspace_id()).list_files("/", recursive=True) == []


def test_another_users_connection_is_not_found_and_an_expired_one_says_why(api, mailbox):
    acme = make_mandate(api, "Acme", "acme-admin")
    add_user(api, acme, "bert", ["user"])
    with imap_server() as imap:
        berts = api.client.post("/api/connections", json={"type": "imap", "label": "Bert's box",
                                                           "settings": imap.settings()}, headers=signed_in("bert"))
        assert berts.status_code == 201, berts.text
        berts_id = berts.json()["id"]
        calls = {"datasources.browseDataSource": {}, "datasources.browseContainer": {"container": "/INBOX"},
                 "datasources.searchDataSource": {"query": "x"},
                 "datasources.readContentObjects": {"container": "/INBOX"},
                 "datasources.downloadFromDataSource": {"item": "/INBOX"},
                 "datasources.extractContainerItem": {"container": "/INBOX"},
                 "datasources.uploadToExternal": {"file": "/a.txt", "folder": "/x"}}
        for connection_id in (berts_id, "0" * 32):
            for action_id, params in calls.items():
                assert failed(action_id, {"connectionId": connection_id, **params}) == \
                    f"connection {connection_id} not found", action_id
        assert [c["id"] for c in ok("datasources.listConnections", {})["connections"]] == [mailbox.id]

    with session_scope() as session:
        row = session.get(Connection, mailbox.id)
        row.status, row.last_error = "expired", "the password was changed"
    expired = failed("datasources.readContentObjects", {"connectionId": mailbox.id, "container": "/INBOX"})
    assert expired == ("connection 'Team mailbox' is expired: the password was changed — reconnect or test it on "
                       "the Connections page")
    listed = ok("datasources.listConnections", {})["connections"]
    assert [(c["status"], c["usable"], c["lastError"]) for c in listed] == \
        [("expired", False, "the password was changed")]


# --- through the engine and the agent -----------------------------------------------------------------


def test_a_workflow_reads_the_newest_mail_and_extracts_its_attachment(api, mailbox):
    nodes = [{"id": "start", "type": "trigger.manual", "parameters": {}},
             {"id": "read", "type": "datasources.readContentObjects", "label": "Newest mail",
              "parameters": {"connectionId": mailbox.id, "container": "/INBOX", "limit": 1}},
             {"id": "extract", "type": "datasources.extractContainerItem", "label": "Take the report",
              "parameters": {"connectionId": mailbox.id, "container": "{{ nodes.read.output.items[0].location }}",
                             "item": "report.txt", "folder": "/invoices/{{ run.id }}"}}]
    graph = {"nodes": nodes, "edges": [{"source": "start", "target": "read"}, {"source": "read", "target": "extract"}]}
    created = api.client.post(f"{api.base()}/workflows", json={"name": f"wf-{uuid.uuid4().hex[:6]}", "graph": graph},
                              headers=api.auth)
    assert created.status_code == 201, created.text
    answer = api.client.post(f"{api.base()}/workflows/{created.json()['id']}/runs", json={"input": {}},
                             headers=api.auth).json()
    assert answer["status"] == "completed", answer
    steps = {s["nodeId"]: s for s in answer["steps"]}
    assert steps["read"]["output"]["items"][0]["name"] == f"Invoice {TAG}"
    path = steps["extract"]["output"]["file"]["path"]
    assert path == f"/invoices/{answer['id']}/report.txt"
    assert stored(path, api.instance_id) == REPORT  # the workflow's own instance's file store
    # Without a connection chosen the run fails at once, naming the node.
    nodes[1]["parameters"]["connectionId"] = ""
    unset = api.client.post(f"{api.base()}/workflows", json={"name": f"wf-{uuid.uuid4().hex[:6]}", "graph": graph},
                            headers=api.auth).json()
    refused = api.client.post(f"{api.base()}/workflows/{unset['id']}/runs", json={"input": {}},
                              headers=api.auth).json()
    assert refused["status"] == "failed" and refused["steps"] == []
    assert ("it needs an E-mail (IMAP/SMTP) or Microsoft 365 connection for node 'read' (Newest mail) — none "
            "chosen: add an E-mail (IMAP/SMTP) or Microsoft 365 connection on the Connections page") in refused["error"]


@pytest.mark.parametrize("db_url", ["sqlite"], indirect=True)
def test_the_agent_is_given_the_toolbox_and_reads_the_inbox(api, mailbox, ai_server):
    # The request is about mail: the data sources toolbox is preselected for round 1 (issue 21).
    ai_server.reply(None, tool_calls=[call("datasources_listConnections", {}, "c2")])
    ai_server.reply(None, tool_calls=[call("datasources_readContentObjects",
                                           {"connectionId": mailbox.id, "container": "/INBOX", "limit": 1}, "c3")])
    ai_server.reply(f"Your newest mail is the invoice {TAG}.")
    events = stream(api, "What is my newest mail?")
    assert of(events, "final")[0]["text"] == f"Your newest mail is the invoice {TAG}."
    assert [f["name"] for f in of(events, "tool.finished")] == ["datasources_listConnections",
                                                                 "datasources_readContentObjects"]
    first, third, last = ai_server.chat_requests
    assert "datasources" in of(events, "toolbox.preselected")[0]["toolboxIds"]
    assert "datasources" not in (request_toolbox_enum(first) or [])
    assert {"datasources_listConnections", "datasources_readContentObjects",
            "datasources_downloadFromDataSource"} <= set(tool_names(first))
    assert mailbox.id in tool_results(third)["c2"] and mailbox.imap.password not in tool_results(third)["c2"]
    read = json.loads(tool_results(last)["c3"])
    assert f"the {TAG} report is attached" in json.dumps(read)


@pytest.mark.parametrize("db_url", ["sqlite"], indirect=True)
def test_a_user_without_a_connection_is_not_offered_the_toolbox(api, ai_server):
    ai_server.reply("I cannot read mail without a connection.")
    stream(api, "What is my newest mail?")
    offered = request_toolbox_enum(ai_server.last_chat)
    assert "ai" in offered and "datasources" not in offered


# --- Microsoft 365: Outlook and SharePoint ------------------------------------------------------------


def test_sharepoint_is_browsed_searched_and_read_by_path(graph, admin, sites):
    connection = admin.connect(label="Contoso")
    listed = ok("datasources.listConnections", {})["connections"]
    assert [(c["label"], c["offers"]) for c in listed] == [("Contoso", ["files", "mail"])]
    top = ok("datasources.browseDataSource", {"connectionId": connection})
    assert [(e["name"], e["kind"]) for e in top["entries"]] == [("Mail", "area"), ("Files", "area")]
    documents = ok("datasources.browseDataSource", {"connectionId": connection, "location": "/Files/Finance/Documents"})
    assert [(e["name"], e["isContainer"]) for e in documents["entries"]] == [("Reports", True), ("readme.txt", False)]
    reports = ok("datasources.browseContainer", {"connectionId": connection, "container": "/finance/documents/reports"})
    assert {e["name"] for e in reports["entries"]} == {"budget-2025.pdf", "minutes.docx", "logo.png"}
    found = ok("datasources.searchDataSource", {"connectionId": connection, "query": "budget",
                                                "location": "/Finance/Documents"})
    assert [e["name"] for e in found["entries"]] == ["budget-2025.pdf"]
    in_a_file = failed("datasources.searchDataSource", {"connectionId": connection, "query": "budget",
                                                        "location": "/Finance/Documents/readme.txt"})
    assert in_a_file == "location: names a file or an attachment: search within a mail folder or a folder"
    read = ok("datasources.readContentObjects", {"connectionId": connection, "items": [
        "/Finance/Documents/Reports/budget-2025.pdf", by_name(reports["entries"], "minutes.docx")["location"],
        "/Finance/Documents/Reports/logo.png"]})
    assert [i["name"] for i in read["items"]] == ["budget-2025.pdf", "minutes.docx"]
    assert "Budget 2025: total 1.2 million CHF" in read["items"][0]["text"]
    assert "the board approved the budget" in read["items"][1]["text"]
    assert read["errors"] == ["items[2] (/Finance/Documents/Reports/logo.png): 'logo.png' (image/png) holds no "
                              "text that can be read"]
    folder_texts = ok("datasources.readContentObjects", {"connectionId": connection,
                                                         "container": "/Finance/Documents/Reports"})
    assert {i["name"] for i in folder_texts["items"]} == {"budget-2025.pdf", "minutes.docx"}
    assert len(folder_texts["errors"]) == 1 and folder_texts["errors"][0].startswith("logo.png: ")
    missing = failed("datasources.browseDataSource", {"connectionId": connection,
                                                      "location": "/Files/Finance/Documents/Nope"})
    assert missing == ("location: '/Files/Finance/Documents/Nope' is not in connection 'Contoso': "
                       "/Finance/Documents holds no 'Nope' (it holds readme.txt, Reports)")
    copied = ok("datasources.downloadFromDataSource", {"connectionId": connection,
                                                       "item": "/Finance/Documents/Reports/budget-2025.pdf"})
    assert copied["file"]["path"] == "/sources/Contoso/budget-2025.pdf"
    assert stored(copied["file"]["path"]).startswith(b"%PDF")


def test_a_file_is_uploaded_to_sharepoint_and_a_taken_name_needs_overwrite(graph, admin, sites, monkeypatch):
    connection = admin.connect(label="Contoso")
    store("/out/summary.txt", b"Summary: all good")
    uploaded = ok("datasources.uploadToExternal", {"connectionId": connection, "file": "/out/summary.txt",
                                                   "folder": "/Finance/Documents/Reports"})
    assert (uploaded["item"]["name"], uploaded["item"]["kind"]) == ("summary.txt", "file")
    assert graph.file_at(sites["documents"], "Reports/summary.txt").data == b"Summary: all good"
    store("/out/summary-v2.txt", b"Summary: even better")
    taken = failed("datasources.uploadToExternal", {"connectionId": connection, "file": "/out/summary-v2.txt",
                                                    "folder": "/Finance/Documents/Reports", "name": "summary.txt"})
    assert taken == "overwrite: a file named 'summary.txt' is there already; set overwrite to replace it"
    assert graph.file_at(sites["documents"], "Reports/summary.txt").data == b"Summary: all good"
    ok("datasources.uploadToExternal", {"connectionId": connection, "file": "/out/summary-v2.txt", "overwrite": True,
                                        "folder": "/Finance/Documents/Reports", "name": "summary.txt"})
    assert graph.file_at(sites["documents"], "Reports/summary.txt").data == b"Summary: even better"
    missing = failed("datasources.uploadToExternal", {"connectionId": connection, "file": "/out/nothing.txt",
                                                      "folder": "/Finance/Documents"})
    assert missing == "file /out/nothing.txt not found"
    bad_name = failed("datasources.uploadToExternal", {"connectionId": connection, "file": "/out/summary.txt",
                                                       "folder": "/Finance/Documents", "name": "a/b.txt"})
    assert bad_name.startswith("name: 'a/b.txt' cannot be a file name")
    site = failed("datasources.uploadToExternal", {"connectionId": connection, "file": "/out/summary.txt",
                                                   "folder": "/Finance"})
    assert site.endswith("is a site: upload into a library or folder")
    monkeypatch.setenv("POWERON_FILE_MAX_BYTES", "10")
    reset_settings_cache()
    too_large = failed("datasources.uploadToExternal", {"connectionId": connection, "file": "/out/summary.txt",
                                                        "folder": "/Finance/Documents"})
    assert too_large == ("file: /out/summary.txt is 17 bytes; uploads may be at most 10 bytes "
                         "(POWERON_FILE_MAX_BYTES)")
    assert graph.file_at(sites["documents"], "summary.txt") is None


def test_an_outlook_attachment_is_extracted_and_an_expired_connection_says_why(graph, admin):
    graph.add_mail(subject="Invoice 42", body="See the attachment.",
                   attachments=[("invoice.txt", "text/plain", b"Invoice 42: CHF 1,234.50")])
    connection = admin.connect(label="Contoso")
    newest = ok("datasources.readContentObjects", {"connectionId": connection, "container": "/Inbox", "limit": 5})
    (invoice,) = newest["items"]
    assert invoice["name"] == "Invoice 42" and "See the attachment." in invoice["text"]
    extracted = ok("datasources.extractContainerItem", {"connectionId": connection, "container": invoice["location"]})
    assert extracted["file"]["path"] == "/sources/Contoso/Inbox/invoice.txt"
    assert stored(extracted["file"]["path"]) == b"Invoice 42: CHF 1,234.50"
    graph.revoke_refresh_tokens()
    graph.expire_access_tokens()
    first = failed("datasources.browseDataSource", {"connectionId": connection, "location": "/Mail/Inbox"})
    assert "reconnect it on the Connections page" in first or "expired" in first
    again = failed("datasources.browseDataSource", {"connectionId": connection, "location": "/Mail/Inbox"})
    assert again.startswith("connection 'Contoso' is expired")
    assert ok("datasources.listConnections", {})["connections"][0]["status"] == "expired"
