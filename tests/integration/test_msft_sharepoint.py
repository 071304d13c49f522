# ruff: noqa: F811 - the fixtures of test_msft_oauth are imported by name, and tests take them as arguments
"""SharePoint through Microsoft 365 connections (issue 17): the sharepoint.* actions through execute_action
as a user, and the connector's FileAccess (what the datasources toolbox and the Sources tab use),
against the Graph stand-in (tests/msgraph_server.py)."""

from __future__ import annotations

import io
import logging

import pytest

from backend.connectors.store import credentials_of
from backend.connectors.types import ConnectionFailed, connection_type
from backend.db import session_scope
from backend.db.models import Connection
from tests.integration.test_admin_api import add_user, make_mandate, signed_in
from tests.integration.test_msft_mail import MIB, run
from tests.integration.test_msft_oauth import (  # noqa: F401 - fixtures
    _stand_in,
    admin,
    assert_no_secrets,
    browser,
    graph,
)


def pdf(text: str) -> bytes:
    from fpdf import FPDF

    document = FPDF()
    document.add_page()
    document.set_font("helvetica", size=12)
    document.cell(text=text)
    return bytes(document.output())


def docx(text: str) -> bytes:
    import docx as python_docx

    document = python_docx.Document()
    document.add_paragraph(text)
    buffer = io.BytesIO()
    document.save(buffer)
    return buffer.getvalue()


@pytest.fixture
def sites(graph) -> dict[str, str]:
    """Two sites: Finance (libraries Documents and Archive) and Marketing (one library)."""
    finance = graph.add_site("Finance", description="Money matters")
    documents = graph.add_library(finance, "Documents", "Shared Documents")
    archive = graph.add_library(finance, "Archive", "Archive")
    marketing = graph.add_site("Marketing")
    assets = graph.add_library(marketing, "Documents", "Shared Documents")
    graph.add_file(documents, "Reports/budget-2025.pdf", pdf("Budget 2025: total 1.2 million CHF"), "application/pdf")
    graph.add_file(documents, "Reports/minutes.docx", docx("Minutes: the board approved the budget"),
                   "application/vnd.openxmlformats-officedocument.wordprocessingml.document")
    graph.add_file(documents, "Reports/logo.png", b"\x89PNG\r\n\x1a\n" + b"\0" * 64, "image/png")
    graph.add_file(documents, "readme.txt", b"Finance team space", "text/plain")
    graph.add_file(archive, "2019/old-budget.txt", b"Budget 2019", "text/plain")
    graph.add_file(assets, "Campaigns/spring.txt", b"Spring campaign plan", "text/plain")
    return {"finance": finance, "documents": documents, "archive": archive, "marketing": marketing,
            "assets": assets}


def files_of(connection_id: str):
    with session_scope() as session:
        return connection_type("msft").files(credentials_of(session.get(Connection, connection_id)))


def test_sites_libraries_and_folders_are_listed_by_name_and_path(graph, admin, sites):
    connection_id = admin.connect()
    listed = run("sharepoint.listSites", {"connectionId": connection_id})
    assert listed.ok, listed.error
    assert [s["name"] for s in listed.output["sites"]] == ["Finance", "Marketing"]
    assert listed.output["sites"][0]["id"] == f"site:{sites['finance']}"
    only = run("sharepoint.listSites", {"connectionId": connection_id, "query": "money"}).output["sites"]
    assert [s["name"] for s in only] == ["Finance"]
    libraries = run("sharepoint.listFolder", {"connectionId": connection_id, "site": "finance", "path": "/"})
    assert [(i["name"], i["kind"]) for i in libraries.output["items"]] == [("Documents", "drive"),
                                                                            ("Archive", "drive")]
    reports = run("sharepoint.listFolder", {"connectionId": connection_id, "site": "Finance",
                                            "path": "/Shared Documents/Reports"})
    assert reports.ok, reports.error
    assert [(i["name"], i["isFolder"], i["path"]) for i in reports.output["items"]] == [
        ("budget-2025.pdf", False, "/Documents/Reports/budget-2025.pdf"),
        ("logo.png", False, "/Documents/Reports/logo.png"),
        ("minutes.docx", False, "/Documents/Reports/minutes.docx")]
    assert reports.output["items"][0]["mimeType"] == "application/pdf" and reports.output["more"] is False
    top = run("sharepoint.listFolder", {"connectionId": connection_id, "site": "Finance", "path": "/Documents"})
    folder = next(i for i in top.output["items"] if i["isFolder"])
    by_id = run("sharepoint.listFolder", {"connectionId": connection_id, "folderId": folder["id"]})
    assert [i["name"] for i in by_id.output["items"]] == ["budget-2025.pdf", "logo.png", "minutes.docx"]
    # A site with one library may leave it out of the path.
    spring = run("sharepoint.listFolder", {"connectionId": connection_id, "site": "Marketing", "path": "/Campaigns"})
    assert [i["name"] for i in spring.output["items"]] == ["spring.txt"]


def test_a_path_or_site_that_does_not_exist_is_a_clear_error(graph, admin, sites):
    connection_id = admin.connect()
    cases = {
        ("Finance", "/Documents/Nope"): "'/Documents/Nope' does not exist in site 'Finance' (library 'Documents')",
        ("Finance", "/Drafts/x"): "site 'Finance' has no document library 'Drafts' (its libraries: Documents, "
                                  "Archive)",
        ("Nowhere", "/"): "no SharePoint site matches 'Nowhere'",
        ("site:contoso.sharepoint.com,0,0", "/"): "there is no SharePoint site contoso.sharepoint.com,0,0",
    }
    for (site, path), message in cases.items():
        result = run("sharepoint.listFolder", {"connectionId": connection_id, "site": site, "path": path})
        assert not result.ok and message in result.error, result.error
    result = run("sharepoint.listFolder", {"connectionId": connection_id, "site": "Finance",
                                           "path": "/Documents/readme.txt"})
    assert not result.ok and "is a file, not a folder" in result.error
    assert "name the site" in run("sharepoint.listFolder", {"connectionId": connection_id}).error


def test_find_and_read_documents_with_the_file_stores_extractors(graph, admin, sites):
    connection_id = admin.connect()
    found = run("sharepoint.findDoc", {"connectionId": connection_id, "query": "budget"})
    assert found.ok, found.error
    assert sorted(d["name"] for d in found.output["documents"]) == ["budget-2025.pdf", "old-budget.txt"]
    in_site = run("sharepoint.findDoc", {"connectionId": connection_id, "query": "budget", "site": "Finance",
                                         "path": "/Documents"})
    assert [d["name"] for d in in_site.output["documents"]] == ["budget-2025.pdf"]
    pdf_id = in_site.output["documents"][0]["id"]
    read = run("sharepoint.readDocs", {"connectionId": connection_id, "site": "Finance",
                                       "documents": [pdf_id, "/Documents/Reports/minutes.docx", "/Documents/nope.txt",
                                                     "/Documents/Reports/logo.png"], "maxChars": 100})
    assert read.ok, read.error
    texts = {d["name"]: d for d in read.output["documents"]}
    assert "Budget 2025: total 1.2 million CHF" in texts["budget-2025.pdf"]["text"]
    assert texts["budget-2025.pdf"]["mimeType"] == "application/pdf"
    assert texts["minutes.docx"]["text"].strip() == "Minutes: the board approved the budget"
    assert read.output["errors"] == [
        "/Documents/nope.txt: '/Documents/nope.txt' does not exist in site 'Finance' (library 'Documents')",
        "/Documents/Reports/logo.png: 'logo.png' (image/png) holds no text that can be read"]
    none = run("sharepoint.readDocs", {"connectionId": connection_id, "documents": ["/x.txt"]})
    assert not none.ok and "name the site" in none.error


def test_a_file_over_the_limit_is_refused_before_downloading(graph, admin, sites):
    connection_id = admin.connect()
    graph.add_file(sites["documents"], "video.mp4", b"\0" * (21 * MIB), "video/mp4")
    result = run("sharepoint.readDocs", {"connectionId": connection_id, "site": "Finance",
                                         "documents": ["/Documents/video.mp4"]})
    assert not result.ok
    assert "the file 'video.mp4' is 21 MiB; files may be at most 20 MiB (POWERON_FILE_MAX_BYTES)" in result.error
    assert graph.graph_calls("GET", "/content") == 0


def test_upload_from_the_file_store_refuses_to_replace_unless_asked(graph, admin, sites):
    connection_id = admin.connect()
    assert run("core.writeFile", {"path": "/out/summary.md", "content": "# Summary\nv1"}).ok
    uploaded = run("sharepoint.upload", {"connectionId": connection_id, "file": "/out/summary.md", "site": "Finance",
                                         "folderPath": "/Documents/Reports"})
    assert uploaded.ok, uploaded.error
    assert (uploaded.output["name"], uploaded.output["path"]) == ("summary.md", "/Documents/Reports/summary.md")
    assert graph.file_at(sites["documents"], "Reports/summary.md").data == b"# Summary\nv1"
    assert run("core.writeFile", {"path": "/out/summary.md", "content": "# Summary\nv2"}).ok
    refused = run("sharepoint.upload", {"connectionId": connection_id, "file": "/out/summary.md", "site": "Finance",
                                        "folderPath": "/Documents/Reports"})
    assert not refused.ok
    assert "a file named 'summary.md' already exists there: upload with overwrite to replace it" in refused.error
    assert graph.file_at(sites["documents"], "Reports/summary.md").data == b"# Summary\nv1"
    replaced = run("sharepoint.upload", {"connectionId": connection_id, "file": "/out/summary.md", "site": "Finance",
                                         "folderPath": "/Documents/Reports", "overwrite": True, "name": "summary.md"})
    assert replaced.ok and graph.file_at(sites["documents"], "Reports/summary.md").data == b"# Summary\nv2"
    renamed = run("sharepoint.upload", {"connectionId": connection_id, "file": "/out/summary.md",
                                        "folderId": f"drive:{sites['assets']}", "name": "Q1 summary.md"})
    assert renamed.ok and graph.file_at(sites["assets"], "Q1 summary.md") is not None
    missing = run("sharepoint.upload", {"connectionId": connection_id, "file": "/out/summary.md", "site": "Finance",
                                        "folderPath": "/Documents/Nope"})
    assert not missing.ok and "'/Documents/Nope' does not exist in site 'Finance'" in missing.error
    bad_name = run("sharepoint.upload", {"connectionId": connection_id, "file": "/out/summary.md", "site": "Finance",
                                         "folderPath": "/Documents", "name": "a:b?.md"})
    assert not bad_name.ok and "'a:b?.md' cannot be a SharePoint file name" in bad_name.error
    no_file = run("sharepoint.upload", {"connectionId": connection_id, "file": "/out/none.md", "site": "Finance"})
    assert not no_file.ok and "/out/none.md" in no_file.error


def test_the_file_access_browses_searches_and_pages(graph, admin, sites, monkeypatch):
    from tests.integration.test_msft_oauth import configure

    connection_id = admin.connect()
    for n in range(450):
        graph.add_file(sites["archive"], f"bulk/file-{n:03}.txt", b"x", "text/plain")
    access = files_of(connection_id)
    top = access.browse()
    assert [(s.name, s.kind) for s in top] == [("Finance", "site"), ("Marketing", "site")]
    libraries = access.browse(top[0].id)
    assert [lib.name for lib in libraries] == ["Documents", "Archive"]
    bulk = next(i for i in access.browse(libraries[1].id) if i.name == "bulk")
    assert len(access.browse(bulk.id)) == 450  # three pages of 200
    hits = access.search("spring")
    assert [(h.name, h.path) for h in hits] == [("spring.txt", "/Documents/Campaigns/spring.txt")]
    name, mime_type, data = access.download(hits[0].id)
    assert (name, mime_type, data) == ("spring.txt", "text/plain", b"Spring campaign plan")
    with pytest.raises(ConnectionFailed, match="is not a SharePoint id"):
        access.download("nonsense")
    configure(monkeypatch, graph, POWERON_GRAPH_MAX_PAGES="2")
    capped = files_of(connection_id)
    items, more = capped.browse_listing(bulk.id)
    assert (len(items), more) == (400, True)
    assert capped.search("spring") == []  # two libraries searched (Finance's), no more


def test_another_users_or_mandates_connection_is_not_found(graph, admin, api, sites, caplog):
    caplog.set_level(logging.DEBUG)
    acme = make_mandate(api, "Acme", "acme-admin")
    add_user(api, acme, "bert", ["user"])
    berts = browser(signed_in("bert")).connect()
    for action_id, params in (("sharepoint.listSites", {}), ("sharepoint.listFolder", {"site": "Finance"}),
                              ("sharepoint.findDoc", {"query": "budget"}),
                              ("sharepoint.readDocs", {"documents": ["file:a:b"]}),
                              ("sharepoint.upload", {"file": "/x.md", "site": "Finance"})):
        result = run(action_id, {"connectionId": berts, **params})
        assert not result.ok and result.error == f"connection {berts} not found", (action_id, result.error)
    assert graph.graph_calls("GET", "/sites") == 0
    assert_no_secrets(graph, caplog.text, records=caplog.records)
