"""The per-instance file store (backend.files.service), its core toolbox actions and REST routes,
on SQLite and PostgreSQL: folders and names, full-text search over uploaded text, PDF and DOCX
files, size limits, DATA rights (own / all) and RESOURCE rights for the toolbox.
"""

from __future__ import annotations

import hashlib
import io
from collections.abc import Iterator
from dataclasses import dataclass

import pytest
from alembic import command
from sqlmodel import Session, func, select

from backend.actions import ActionContext, execute_action
from backend.actions.openai_tools import execute_tool_call
from backend.auth import issue_token
from backend.config import reset_settings_cache
from backend.db import session_scope
from backend.db.engine import alembic_config
from backend.db.models import (
    AccessRule,
    FeatureAccess,
    FeatureAccessRole,
    FeatureInstance,
    FileFolder,
    Mandate,
    Role,
    StoredFile,
    StoredFileData,
    User,
)
from backend.errors import Conflict, Forbidden, InvalidInput, NotFound
from backend.files import service
from backend.files.service import FileScope, FileTooLarge, NotText
from backend.rbac.rights import DATA, RESOURCE, UI
from backend.tenancy import grant_instance_roles, grant_mandate_roles

PNG = b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR\x00\x00\x00\x01\x00\x00\x00\x01\x08\x06\x00\x00\x00\x1f\x15\xc4\x89"


def make_pdf(lines: list[str]) -> bytes:
    """A minimal valid one-page PDF showing `lines` in Helvetica (written by hand, no library)."""
    stream = "BT /F1 12 Tf 72 720 Td " + " ".join(f"({line}) Tj 0 -16 Td" for line in lines) + " ET"
    objects = [
        "<< /Type /Catalog /Pages 2 0 R >>",
        "<< /Type /Pages /Kids [3 0 R] /Count 1 >>",
        "<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents 4 0 R "
        "/Resources << /Font << /F1 5 0 R >> >> >>",
        f"<< /Length {len(stream)} >>\nstream\n{stream}\nendstream",
        "<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica /Encoding /WinAnsiEncoding >>",
    ]
    out, offsets = b"%PDF-1.4\n", []
    for number, body in enumerate(objects, 1):
        offsets.append(len(out))
        out += f"{number} 0 obj\n{body}\nendobj\n".encode("latin-1")
    xref = len(out)
    out += f"xref\n0 {len(objects) + 1}\n0000000000 65535 f \n".encode()
    out += b"".join(f"{offset:010d} 00000 n \n".encode() for offset in offsets)
    out += f"trailer\n<< /Size {len(objects) + 1} /Root 1 0 R >>\nstartxref\n{xref}\n%%EOF\n".encode()
    return out


def make_docx(paragraphs: list[str]) -> bytes:
    import docx

    document = docx.Document()
    for paragraph in paragraphs:
        document.add_paragraph(paragraph)
    buffer = io.BytesIO()
    document.save(buffer)
    return buffer.getvalue()


# --- fixtures -----------------------------------------------------------------------------------------


@dataclass
class Workspace:
    """The default mandate's Workspace instance and a way to act in it as someone."""

    mandate_id: str
    instance_id: str
    admin_id: str

    def add_user(self, username: str, mandate_roles: list[str], instance_roles: list[str]) -> str:
        with session_scope() as session:
            user = User(username=username, display_name=username.title())
            session.add(user)
            session.flush()
            grant_mandate_roles(session, user, session.get(Mandate, self.mandate_id), mandate_roles)
            grant_instance_roles(session, user, session.get(FeatureInstance, self.instance_id), instance_roles)
            return user.id

    def context(self, session: Session, user_id: str | None = None) -> ActionContext:
        return ActionContext(session, session.get(User, user_id or self.admin_id), self.mandate_id, self.instance_id)

    def scope(self, session: Session, user_id: str | None = None) -> FileScope:
        return FileScope(session, session.get(User, user_id or self.admin_id), self.mandate_id, self.instance_id)

    def token(self, user_id: str) -> str:
        with session_scope() as session:
            return issue_token(session, session.get(User, user_id)).token


@pytest.fixture
def workspace(app_config) -> Workspace:
    with session_scope() as session:
        admin = session.exec(select(User).where(User.username == "admin")).one()
        instance = session.exec(select(FeatureInstance).where(FeatureInstance.feature_code == "workspace")).one()
        return Workspace(instance.mandate_id, instance.id, admin.id)


@pytest.fixture
def files_url(api, workspace) -> str:
    return f"/api/workspace/{workspace.instance_id}/files"


@pytest.fixture
def limits(monkeypatch) -> Iterator[None]:
    """Small limits: files up to 100 bytes, 250 bytes per instance."""
    monkeypatch.setenv("POWERON_FILE_MAX_BYTES", "100")
    monkeypatch.setenv("POWERON_INSTANCE_QUOTA_BYTES", "250")
    reset_settings_cache()
    yield
    monkeypatch.undo()
    reset_settings_cache()


def counts() -> tuple[int, int, int]:
    with session_scope() as session:
        return tuple(session.exec(select(func.count()).select_from(model)).one()
                     for model in (StoredFile, StoredFileData, FileFolder))


def run(context: ActionContext, action_id: str, **params):
    return execute_action(action_id, params, context)


# --- the store ----------------------------------------------------------------------------------------


def test_folders_files_and_names(workspace):
    with session_scope() as session:
        scope = workspace.scope(session)
        entry = service.write_text(scope, "/reports/2024/summary.md", "# Summary\nAll good.")
        assert (entry.path, entry.folder_path, entry.mime_type) == ("/reports/2024/summary.md", "/reports/2024",
                                                                    "text/markdown")
        assert entry.sha256 == hashlib.sha256(b"# Summary\nAll good.").hexdigest() and entry.has_text
        assert [f.path for f in service.list_folders(scope, "/", recursive=True)] == ["/reports", "/reports/2024"]
        assert [f.path for f in service.list_files(scope, "reports", recursive=True)] == [entry.path]
        assert service.list_files(scope, "/reports") == []

        service.write_text(scope, "/reports/2024/summary.md", "Replaced")  # overwrite is the default
        assert service.read_text(scope, "/reports/2024/summary.md").text == "Replaced"
        with pytest.raises(Conflict, match="already exists"):
            service.write_text(scope, "/reports/2024/summary.md", "x", overwrite=False)
        with pytest.raises(Conflict, match="is a folder"):
            service.write_text(scope, "/reports/2024", "x")
        with pytest.raises(Conflict, match="already exists"):
            service.create_folder(scope, "/reports")
        with pytest.raises(NotFound, match="folder /missing not found"):
            service.write_text(scope, "/missing/a.txt", "x", create_folders=False)

        for bad, message in (("/a/../b.txt", "'..' is not allowed"), ("/ lead.txt", "start or end with spaces"),
                             ("/tab\there.txt", "control characters"), ("/" + "x" * 256, "at most 255")):
            with pytest.raises(InvalidInput, match="path: .*" + message):
                service.write_text(scope, bad, "x")
        with pytest.raises(InvalidInput, match="newName: 'a/b' must not contain '/'"):
            service.rename_file(scope, "/reports/2024/summary.md", "a/b")
        with pytest.raises(InvalidInput, match="only text files"):
            service.write_text(scope, "/picture.png", "not a picture")

        renamed = service.rename_file(scope, "/reports/2024/summary.md", "final.md")
        copied = service.copy_file(scope, renamed.path, "/reports")  # into an existing folder
        assert copied.path == "/reports/final.md" and copied.id != renamed.id
        with pytest.raises(Conflict, match="already exists"):
            service.copy_file(scope, renamed.path, "/reports/final.md")
        with pytest.raises(Conflict, match="already exists"):
            service.rename_file(scope, "/reports/final.md", "2024")  # the name of a folder there

        with pytest.raises(Conflict, match="not empty"):
            service.delete_folder(scope, "/reports")
        removed = service.delete_folder(scope, "/reports", recursive=True)
        assert (removed.files, removed.folders) == (2, 2)
        assert service.list_files(scope, "/", recursive=True) == [] and service.list_folders(scope) == []
        with pytest.raises(InvalidInput, match="cannot be deleted"):
            service.delete_folder(scope, "/")
    assert counts() == (0, 0, 0)


def test_size_limits_refuse_and_write_nothing(workspace, limits):
    with session_scope() as session:
        scope = workspace.scope(session)
        with pytest.raises(FileTooLarge, match=r"101 bytes; files may be at most 100 bytes \(POWERON_FILE_MAX_BYTES\)"):
            service.write_text(scope, "/new/big.txt", "x" * 101)
        service.write_text(scope, "/a.txt", "a" * 100)
        service.write_text(scope, "/b.txt", "b" * 100)
        with pytest.raises(FileTooLarge, match="quota of 250 bytes .POWERON_INSTANCE_QUOTA_BYTES"):
            service.store_file(scope, "/c/c.bin", b"c" * 60)
        service.write_text(scope, "/b.txt", "b" * 90)  # replacing counts the old size out
    assert counts() == (2, 2, 0)  # the refused writes created no folder either


def test_binary_files_are_stored_but_not_text(workspace):
    with session_scope() as session:
        scope = workspace.scope(session)
        entry = service.store_file(scope, "/img/dot.png", PNG, "image/png")
        assert (entry.mime_type, entry.has_text, entry.size_bytes) == ("image/png", False, len(PNG))
        assert service.read_bytes(scope, file_id=entry.id)[1] == PNG
        with pytest.raises(NotText, match=r"/img/dot.png has no text \(image/png, .*binary file"):
            service.read_text(scope, "/img/dot.png")
        odd = service.store_file(scope, "/blob", b"\x00\x01\x02 binary")  # no name hint: sniffed
        assert (odd.mime_type, odd.has_text) == ("application/octet-stream", False)
        broken = service.store_file(scope, "/broken.pdf", b"%PDF-1.4 not really")
        assert (broken.mime_type, broken.has_text) == ("application/pdf", False)
        with pytest.raises(NotText, match="no text could be extracted"):
            service.read_text(scope, "/broken.pdf")
        assert service.search_files(scope, "binary") == []


MARKUP_NOTE = "# Notes\n**Edelweiss** <b>x</b> [a](b) `c` a*b*c <!-- d -->\n- edelweiss again"


def test_search_snippets_are_plain_text_segments_with_the_matches_flagged(workspace, db_kind):
    """A file's own markdown or HTML is text in the snippet (PostgreSQL's headline would drop what
    looks like a tag); only the matches are flagged, by markers no file can contain."""
    with session_scope() as session:
        scope = workspace.scope(session)
        service.write_text(scope, "/notes/release.md", MARKUP_NOTE)
        service.write_text(scope, "/notes/tricky.txt", "Edelweiss \ue000 \x01 \x01\x03 and < \ue001 are just text")
        hits = {h.file.path: h for h in service.search_files(scope, "edelweiss")}
        assert set(hits) == {"/notes/release.md", "/notes/tricky.txt"}

        note = hits["/notes/release.md"]
        assert [part.text for part in note.segments if part.match] == ["Edelweiss", "edelweiss"]
        text = "".join(part.text for part in note.segments)
        assert "Notes **Edelweiss** <b>x</b> [a](b) `c` a*b*c <!-- d --> - edelweiss again" in text, text
        assert " ".join(MARKUP_NOTE.split()).endswith(text)  # the (short) note, white space collapsed
        # the snippet for agents and REST: the same text, the matches between **
        assert note.snippet == "".join(f"**{p.text}**" if p.match else p.text for p in note.segments)
        assert "****Edelweiss****" in note.snippet

        tricky = hits["/notes/tricky.txt"]
        assert [(part.text, part.match) for part in tricky.segments][:1] == [("Edelweiss", True)]
        assert "".join(part.text for part in tricky.segments) == (
            "Edelweiss \ue000 \x01 \x01\x03 and < \ue001 are just text")


def test_search_finds_words_ranks_and_follows_changes(workspace, db_kind):
    with session_scope() as session:
        scope = workspace.scope(session)
        service.write_text(scope, "/minutes/board.txt", "The board approved the Zephyr budget for 2025.\n"
                                                        "Zephyr zephyr ZEPHYR: the project continues.")
        service.write_text(scope, "/minutes/staff.txt", "Staff meeting: coffee machine broken again.")
        service.write_text(scope, "/other.md", "A note that mentions zephyr once, and the budget.")
        service.store_file(scope, "/report.pdf", make_pdf(["Quarterly report", "Revenue grew in Lucerne"]))
        service.store_file(scope, "/memo.docx", make_docx(["Internal memo", "The Matterhorn offsite is booked."]))

        hits = service.search_files(scope, "zephyr")
        assert [h.file.path for h in hits] == ["/minutes/board.txt", "/other.md"]  # more matches rank first
        assert hits[0].folder_path == "/minutes" and "**Zephyr**" in hits[0].snippet
        assert [h.file.path for h in service.search_files(scope, "ZEPHYR budget")] == [
            "/minutes/board.txt", "/other.md"]
        assert [h.file.path for h in service.search_files(scope, "zeph")] == ["/minutes/board.txt", "/other.md"]
        assert [h.file.path for h in service.search_files(scope, "zephyr coffee")] == []
        assert [h.file.path for h in service.search_files(scope, "zephyr", folder="/minutes")] == [
            "/minutes/board.txt"]
        assert [h.file.path for h in service.search_files(scope, "Lucerne")] == ["/report.pdf"]
        assert [h.file.path for h in service.search_files(scope, "matterhorn")] == ["/memo.docx"]
        assert "**Lucerne**" in service.search_files(scope, "lucerne")[0].snippet
        assert service.read_text(scope, "/report.pdf").text.startswith("Quarterly report")
        # Query syntax of either database is just text here.
        assert service.search_files(scope, 'zephyr" OR NOT (*:&|!') == service.search_files(scope, "zephyr NOT OR")
        with pytest.raises(InvalidInput, match="query: must contain at least one word"):
            service.search_files(scope, " ?! __ ")
        assert [h.file.path for h in service.search_files(scope, "__zephyr__")] == ["/minutes/board.txt", "/other.md"]

        service.write_text(scope, "/other.md", "Rewritten without the word.")
        service.rename_file(scope, "/minutes/board.txt", "board-2025.txt")
        assert [h.file.path for h in service.search_files(scope, "zephyr")] == ["/minutes/board-2025.txt"]
        service.delete_file(scope, "/minutes/board-2025.txt")
        assert service.search_files(scope, "zephyr") == []
        copied = service.copy_file(scope, "/minutes/staff.txt", "/archive/staff.txt")
        assert {h.file.id for h in service.search_files(scope, "coffee")} == {copied.id, service.find_file(
            scope, "/minutes/staff.txt").id}
        service.delete_folder(scope, "/archive", recursive=True)
        assert len(service.search_files(scope, "coffee")) == 1


def test_search_indexes_long_and_odd_text(workspace, db_kind):
    """PostgreSQL refuses tsvectors over 1 MB: the indexed part of a text is bounded so that even
    text made of nothing but distinct short tokens is stored and searchable."""
    odd = " ".join(f"w{i:x}-{i:x}q" for i in range(40_000)) + " needle"
    with session_scope() as session:
        scope = workspace.scope(session)
        service.write_text(scope, "/odd.txt", odd[:service.SEARCH_INDEX_CHARS])
        service.write_text(scope, "/long.txt", "haystack " * 60_000 + "needle")  # needle past the indexed part
        service.write_text(scope, "/early.txt", "needle " + "haystack " * 60_000)
        assert [h.file.path for h in service.search_files(scope, "needle")] == ["/early.txt"]
        assert len(service.read_text(scope, "/long.txt", max_chars=service.MAX_READ_CHARS).text) == 200_000


def test_own_and_all_rights(workspace):
    alice = workspace.add_user("alice", ["user"], ["workspace-user"])
    bob = workspace.add_user("bob", ["user"], ["workspace-user"])
    carol = workspace.add_user("carol", ["user"], [])
    with session_scope() as session:  # carol may read (and change) only her own files in this instance
        role = Role(role_label="own-files", mandate_id=workspace.mandate_id,
                    feature_instance_id=workspace.instance_id, feature_code="workspace")
        session.add(role)
        session.flush()
        session.add_all([
            AccessRule(role_id=role.id, context=UI, item="ui.feature.workspace.*", view=True),
            AccessRule(role_id=role.id, context=RESOURCE, item="resource.toolbox.*", view=True),
            AccessRule(role_id=role.id, context=DATA, item="data.feature.workspace.file", read="own",
                       create="all", update="own", delete="own"),
        ])
        access = session.exec(select(FeatureAccess).where(FeatureAccess.user_id == carol)).one()
        session.add(FeatureAccessRole(feature_access_id=access.id, role_id=role.id))

    with session_scope() as session:
        as_alice, as_bob, as_carol = (workspace.context(session, u) for u in (alice, bob, carol))
        assert run(as_alice, "core.writeFile", path="/shared/plan.txt", content="alpine plan").ok
        assert run(as_carol, "core.writeFile", path="/shared/carol.txt", content="alpine secret").ok
        # all: bob reads everything, but changes only what he created
        assert run(as_bob, "core.readFile", path="/shared/plan.txt").output["text"] == "alpine plan"
        assert {h["path"] for h in run(as_bob, "core.searchInFileContent", query="alpine").output["hits"]} == {
            "/shared/plan.txt", "/shared/carol.txt"}
        for action_id, params in (("core.writeFile", {"path": "/shared/plan.txt", "content": "mine now"}),
                                  ("core.renameFile", {"path": "/shared/plan.txt", "newName": "x.txt"}),
                                  ("core.deleteFile", {"path": "/shared/plan.txt"}),
                                  ("core.deleteFolder", {"path": "/shared", "recursive": True})):
            result = run(as_bob, action_id, **params)
            assert not result.ok and "only on" in result.error and "you created" in result.error, result
        assert run(as_bob, "core.copyFile", path="/shared/plan.txt", targetPath="/bob/plan.txt").ok
        assert run(as_bob, "core.writeFile", path="/bob/plan.txt", content="my copy").ok
        assert run(as_bob, "core.deleteFile", path="/bob/plan.txt").ok
        # own: carol sees her files only (folders are structure, visible to all who read files)
        listed = run(as_carol, "core.listFiles", folder="/shared").output["files"]
        assert [f["path"] for f in listed] == ["/shared/carol.txt"]
        assert [h["path"] for h in run(as_carol, "core.searchInFileContent", query="alpine").output["hits"]] == [
            "/shared/carol.txt"]
        hidden = run(as_carol, "core.readFile", path="/shared/plan.txt")
        assert not hidden.ok and hidden.error == "file /shared/plan.txt not found"
        with pytest.raises(NotFound):
            service.get_file(workspace.scope(session, carol), service.find_file(as_alice, "/shared/plan.txt").id)
        assert run(as_carol, "core.deleteFile", path="/shared/carol.txt").ok
        assert [f.path for f in service.list_files(as_alice, "/", recursive=True)] == ["/shared/plan.txt"]


def test_a_viewer_cannot_write(workspace):
    viewer = workspace.add_user("vera", ["viewer"], ["workspace-viewer"])
    with session_scope() as session:
        service.write_text(workspace.scope(session), "/notes.txt", "readable by viewers")
    before = counts()
    with session_scope() as session:
        as_viewer = workspace.context(session, viewer)
        # RESOURCE: viewer templates deny the toolboxes, reading actions included
        for action_id, params in (("core.writeFile", {"path": "/v.txt", "content": "x"}),
                                  ("core.deleteFile", {"path": "/notes.txt"}),
                                  ("core.readFile", {"path": "/notes.txt"})):
            result = run(as_viewer, action_id, **params)
            assert (result.ok, result.error_kind) == (False, "forbidden"), result
            assert f"your roles do not allow {action_id}" in result.error
        # DATA: the service refuses every change, and reading works
        scope = workspace.scope(session, viewer)
        for change in (lambda: service.write_text(scope, "/v.txt", "x"),
                       lambda: service.create_folder(scope, "/v"),
                       lambda: service.rename_file(scope, "/notes.txt", "n.txt"),
                       lambda: service.delete_file(scope, "/notes.txt")):
            with pytest.raises(Forbidden):
                change()
        assert service.read_text(scope, "/notes.txt").text == "readable by viewers"
    assert counts() == before


def test_the_door_declares_the_instance_features_item_and_lists_a_folder_with_flags(workspace):
    from backend.rbac.access import AccessContext
    from backend.rbac.door import permissions_of

    declared = permissions_of(service.FileStore.rename_file)
    assert [p.as_dict() for p in declared] == [
        {"kind": "DATA", "item": "data.feature.{featureCode}.file", "operation": "update"}]
    alice = workspace.add_user("alina", ["user"], ["workspace-user"])
    viewer = workspace.add_user("vito", ["viewer"], ["workspace-viewer"])
    with session_scope() as session:
        service.write_text(workspace.scope(session), "/docs/admin.txt", "the admin's")
        service.write_text(workspace.scope(session, alice), "/docs/alina.txt", "alina's")
    with session_scope() as session:
        store = service.FileStore.of(AccessContext(session, session.get(User, alice)), workspace.instance_id)
        assert store.item_of(service.FILE) == "data.feature.workspace.file"
        view = store.folder_view("/docs")
        assert view.folder == "/docs" and view.can_upload
        assert [(r.entry.name, r.can_rename, r.can_delete) for r in view.files] == [
            ("admin.txt", False, False), ("alina.txt", True, True)]
        assert store.folder_view("/gone").folder == "/"  # a folder gone meanwhile: the root
        as_viewer = service.FileStore.of(AccessContext(session, session.get(User, viewer)), workspace.instance_id)
        assert as_viewer.may_call(service.FileStore.folder_view)
        assert not as_viewer.may_call(service.FileStore.store_file)
        assert not any(r.can_rename or r.can_delete for r in as_viewer.folder_view("/docs").files)


# --- actions ------------------------------------------------------------------------------------------


def test_core_file_actions(action_context):
    ctx = action_context
    written = run(ctx, "core.writeFile", path="/drafts/letter.md", content="Dear team,\nthe Föhn is back.")
    assert written.ok, written
    assert written.output["path"] == "/drafts/letter.md" and written.output["mimeType"] == "text/markdown"
    read = run(ctx, "core.readFile", path="drafts/letter.md")
    assert read.output["text"] == "Dear team,\nthe Föhn is back." and read.output["truncated"] is False
    part = run(ctx, "core.readFile", path="/drafts/letter.md", offset=5, maxChars=4).output
    assert (part["text"], part["truncated"], part["nextOffset"], part["totalChars"]) == ("team", True, 9, 28)
    found = run(ctx, "core.searchInFileContent", query="föhn").output["hits"]
    assert [(h["path"], h["folderPath"]) for h in found] == [("/drafts/letter.md", "/drafts")]
    assert "**Föhn**" in found[0]["snippet"]
    assert run(ctx, "core.createFolder", path="/archive/2024").output["path"] == "/archive/2024"
    assert [f["path"] for f in run(ctx, "core.listFolders").output["folders"]] == ["/archive", "/drafts"]
    assert run(ctx, "core.copyFile", path="/drafts/letter.md", targetPath="/archive/2024").output["path"] == (
        "/archive/2024/letter.md")
    assert run(ctx, "core.renameFile", path="/drafts/letter.md", newName="letter-v2.md").output["name"] == (
        "letter-v2.md")
    listed = run(ctx, "core.listFiles", folder="/", recursive=True).output
    assert [f["path"] for f in listed["files"]] == ["/archive/2024/letter.md", "/drafts/letter-v2.md"]
    assert run(ctx, "core.deleteFile", path="/drafts/letter-v2.md").output == {"deleted": "/drafts/letter-v2.md"}
    refused = run(ctx, "core.deleteFolder", path="/archive")
    assert not refused.ok and "not empty (1 file and 1 folder in it)" in refused.error and "recursive" in refused.error
    assert run(ctx, "core.deleteFolder", path="/archive", recursive=True).output == {
        "deleted": "/archive", "files": 1, "folders": 2}
    assert run(ctx, "core.deleteFolder", path="/drafts").ok
    assert run(ctx, "core.listFiles", recursive=True).output["files"] == []
    # Tool calls from an agent reach the same actions (strict mode sends nulls for unset options).
    called = execute_tool_call("core_writeFile", '{"path": "/t.txt", "content": "via tool", "overwrite": null, '
                                                 '"createFolders": null}', ctx)
    assert called.ok and called.output["path"] == "/t.txt"


def test_bad_input_gives_clear_errors_and_writes_nothing(action_context, limits):
    ctx = action_context
    assert run(ctx, "core.writeFile", path="/keep.txt", content="kept").ok
    ctx.session.flush()
    before = counts_in(ctx.session)
    cases = [
        ("core.readFile", {}, "invalid parameters for core.readFile: path: Field required"),
        ("core.readFile", {"path": "/keep.txt", "maxChars": 0}, "maxChars: Input should be greater than or equal"),
        ("core.writeFile", {"path": "/x.txt", "content": "x", "colour": "red"}, "colour: Extra inputs"),
        ("core.searchInFileContent", {"query": ""}, "query: String should have at least 1 character"),
        ("core.readFile", {"path": "/nope.txt"}, "file /nope.txt not found"),
        ("core.readFile", {"path": "/keep.txt/deeper"}, "file /keep.txt/deeper not found"),
        ("core.listFiles", {"folder": "/nope"}, "folder /nope not found"),
        ("core.deleteFolder", {"path": "/nope"}, "folder /nope not found"),
        ("core.renameFile", {"path": "/nope.txt", "newName": "a.txt"}, "file /nope.txt not found"),
        ("core.copyFile", {"path": "/keep.txt", "targetPath": "/"}, "a file named 'keep.txt' already exists in /"),
        ("core.writeFile", {"path": "/keep.txt", "content": "y", "overwrite": False}, "already exists"),
        ("core.writeFile", {"path": "/big/big.txt", "content": "z" * 101}, "POWERON_FILE_MAX_BYTES"),
        ("core.writeFile", {"path": "/a/../b.txt", "content": "x"}, "path: in '/a/../b.txt': '..' is not allowed"),
        ("core.writeFile", {"path": "/", "content": "x"}, "path: names the root folder"),
        ("core.createFolder", {"path": "/keep.txt/sub"}, "/keep.txt is a file, not a folder"),
        ("core.writeFile", {"path": "/keep.txt/sub.txt", "content": "x"}, "/keep.txt is a file, not a folder"),
        ("core.readFile", {"path": "/"}, "path: names a folder (/), not a file"),
    ]
    for action_id, params, message in cases:
        result = run(ctx, action_id, **params)
        assert not result.ok and message in result.error, (action_id, params, result)
    assert counts_in(ctx.session) == before

    assert run(ctx, "core.writeFile", path="/pic.txt", content="placeholder").ok
    service.store_file(ctx, "/pic.png", PNG)
    binary = run(ctx, "core.readFile", path="/pic.png")
    assert not binary.ok and "/pic.png has no text (image/png" in binary.error and "binary file" in binary.error

    no_instance = ActionContext(ctx.session, ctx.user, ctx.mandate_id, None)
    result = run(no_instance, "core.listFiles")
    assert not result.ok and "featureInstanceId: the file store belongs to a feature instance" in result.error


def counts_in(session: Session) -> tuple[int, int, int]:
    session.flush()
    return tuple(session.exec(select(func.count()).select_from(model)).one()
                 for model in (StoredFile, StoredFileData, FileFolder))


# --- REST ---------------------------------------------------------------------------------------------


def test_upload_and_find_by_a_word_inside(api, files_url, workspace):
    pdf = make_pdf(["Annual review", "The Gotthard tunnel project is on schedule"])
    uploads = [
        ("notes.txt", b"Remember the edelweiss order for Friday.", "text/plain", "/inbox"),
        ("review.pdf", pdf, "application/pdf", "/reports/2025"),
        ("memo.docx", make_docx(["Memo", "Edelweiss supplier changed."]), "application/octet-stream", "/"),
        ("dot.png", PNG, "image/png", "/"),
    ]
    ids = {}
    for name, data, mime, folder in uploads:
        response = api.client.post(files_url, headers=api.auth, files={"file": (name, data, mime)},
                                   data={"folder": folder})
        assert response.status_code == 201, response.text
        body = response.json()
        ids[name] = body["id"]
        assert body["path"] == folder.rstrip("/") + "/" + name and body["sizeBytes"] == len(data)
    assert api.client.get(f"{files_url}/{ids['memo.docx']}", headers=api.auth).json()["mimeType"] == (
        "application/vnd.openxmlformats-officedocument.wordprocessingml.document")

    hits = api.client.get(f"{files_url}/search", params={"q": "gotthard"}, headers=api.auth).json()
    assert [(h["file"]["id"], h["folderPath"]) for h in hits] == [(ids["review.pdf"], "/reports/2025")]
    assert "**Gotthard**" in hits[0]["snippet"]
    hits = api.client.get(f"{files_url}/search", params={"q": "Edelweiss"}, headers=api.auth).json()
    assert sorted(h["file"]["path"] for h in hits) == ["/inbox/notes.txt", "/memo.docx"]
    assert api.client.get(f"{files_url}/search", headers=api.auth).json() == []

    listed = api.client.get(files_url, params={"recursive": True}, headers=api.auth).json()
    assert sorted(f["path"] for f in listed) == ["/dot.png", "/inbox/notes.txt", "/memo.docx",
                                                 "/reports/2025/review.pdf"]
    assert [f["name"] for f in api.client.get(files_url, params={"folder": "/inbox"}, headers=api.auth).json()] == [
        "notes.txt"]
    download = api.client.get(f"{files_url}/{ids['review.pdf']}/content", headers=api.auth)
    assert download.status_code == 200 and download.content == pdf
    assert download.headers["content-type"] == "application/pdf"
    assert download.headers["content-disposition"].startswith('attachment; filename="review.pdf"')

    # The agent's tool finds the uploaded file too.
    with session_scope() as session:
        found = run(workspace.context(session), "core.searchInFileContent", query="gotthard tunnel")
    assert [h["path"] for h in found.output["hits"]] == ["/reports/2025/review.pdf"]
    # … also when the user runs it over the REST API.
    actions_url = files_url.replace("/api/workspace/", "/api/instances/").rsplit("/files", 1)[0] + "/actions"
    called = api.client.post(actions_url, headers=api.auth,
                             json={"action": "core.searchInFileContent", "parameters": {"query": "edelweiss"}})
    assert called.status_code == 200 and called.json()["ok"] is True
    assert sorted(h["path"] for h in called.json()["output"]["hits"]) == ["/inbox/notes.txt", "/memo.docx"]
    invalid = api.client.post(actions_url, headers=api.auth,
                              json={"action": "core.searchInFileContent", "parameters": {"limit": "many"}})
    assert invalid.status_code == 422 and "query" in invalid.json()["error"] and "limit" in invalid.json()["error"]
    unknown = api.client.post(actions_url, headers=api.auth, json={"action": "core.nothing"})
    assert unknown.status_code == 404 and unknown.json()["error"] == "unknown action id 'core.nothing'"

    again = api.client.post(files_url, headers=api.auth, files={"file": ("notes.txt", b"v2", "text/plain")},
                            data={"folder": "/inbox"})
    assert again.status_code == 409 and "overwrite" in again.json()["detail"]
    assert api.client.delete(f"{files_url}/{ids['review.pdf']}", headers=api.auth).status_code == 204
    assert api.client.get(f"{files_url}/{ids['review.pdf']}", headers=api.auth).status_code == 404
    assert api.client.get(f"{files_url}/search", params={"q": "gotthard"}, headers=api.auth).json() == []


def test_upload_refusals(api, files_url, workspace, limits):
    before = counts()
    too_big = api.client.post(files_url, headers=api.auth, files={"file": ("big.txt", b"x" * 101, "text/plain")})
    assert too_big.status_code == 413 and "POWERON_FILE_MAX_BYTES" in too_big.json()["detail"]
    missing = api.client.post(files_url, headers=api.auth, data={"folder": "/x"})
    assert missing.status_code == 422 and missing.json()["errors"][0]["field"] == "file"
    bad_name = api.client.post(files_url, headers=api.auth, files={"file": ("..", b"x", "text/plain")})
    assert bad_name.status_code == 422 and "'..' is not allowed" in bad_name.json()["detail"]
    bad_folder = api.client.post(files_url, headers=api.auth, files={"file": ("a.txt", b"x", "text/plain")},
                                 data={"folder": "/a/../b"})
    assert bad_folder.status_code == 422 and "folder: " in bad_folder.json()["detail"]
    assert counts() == before

    viewer = workspace.add_user("vic", ["viewer"], ["workspace-viewer"])
    as_viewer = {"Authorization": f"Bearer {workspace.token(viewer)}"}
    stored = api.client.post(files_url, headers=api.auth, files={"file": ("ok.txt", b"fine", "text/plain")})
    assert stored.status_code == 201
    refused = api.client.post(files_url, headers=as_viewer, files={"file": ("v.txt", b"x", "text/plain")})
    assert refused.status_code == 403
    assert api.client.delete(f"{files_url}/{stored.json()['id']}", headers=as_viewer).status_code == 403
    assert [f["name"] for f in api.client.get(files_url, headers=as_viewer).json()] == ["ok.txt"]
    assert api.client.get(f"{files_url}/{stored.json()['id']}/content", headers=as_viewer).content == b"fine"


# --- schema -------------------------------------------------------------------------------------------


def test_the_file_store_migration_goes_down_and_up_and_matches_the_model(db_url):
    """Autogenerate finds nothing to do (the hand-made search structures are left out of it)."""
    config = alembic_config(db_url)
    command.downgrade(config, "0003_oidc")
    command.upgrade(config, "head")
    command.check(config)
