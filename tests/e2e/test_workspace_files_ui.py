"""The Workspace's UDB panel (issue 8, items 4 to 6): the Files tab uploads through the browser
with a progress bar, lists, previews, renames, deletes and searches the instance's files; an
attached file goes with the next prompt as its path (the recorded model request shows it); a
chip is removed before sending; an oversize file is refused with the limit; the Sources tab is
an honest empty state; a viewer browses and previews but sees no upload, rename, delete or
attach. A search hit shows the file's text as it is, markdown and HTML included, with the
matches highlighted (issue 16).
"""

from __future__ import annotations

import re
import uuid

from playwright.sync_api import Page, expect

from backend.files import service
from backend.files.service import FileScope
from tests.ai_server import tiny_png
from tests.e2e.conftest import RunningApp
from tests.e2e.test_workspace_ui import open_workspace, sign_in_as_workspace_viewer

pytestmark = __import__("pytest").mark.e2e


def open_files(page: Page) -> None:
    page.locator("#udb-tab-files").click()
    expect(page.locator("#current-folder")).to_have_text("/")


def upload(page: Page, name: str, mime: str, data: bytes) -> None:
    page.locator("#file-upload-area input[type=file]").set_input_files(
        files=[{"name": name, "mimeType": mime, "buffer": data}])


def file_item(page: Page, name: str):
    return page.locator(".file-item", has=page.locator(".file-name", has_text=re.compile(f"^{re.escape(name)}$")))


def test_upload_preview_attach_search_rename_delete_and_send(page: Page, running_app: RunningApp):
    tag = uuid.uuid4().hex[:6]
    notes, other, image = f"notes-{tag}.txt", f"other-{tag}.txt", f"dot-{tag}.png"
    word = f"zebra{tag}"
    sent_events: list[str] = []
    page.on("websocket", lambda ws: ws.on("framesent", lambda frame: sent_events.append(str(frame))))
    open_workspace(page)
    expect(page.locator(".chat-item").first.or_(page.locator("#chat-list-empty"))).to_be_visible()

    page.locator("#udb-tab-sources").click()
    expect(page.locator("#sources-empty")).to_contain_text("No connections yet")
    open_files(page)

    upload(page, notes, "text/plain", f"Meeting notes\nThe {word} project starts in May.\n".encode())
    expect(page.locator("#files-notice")).to_contain_text(f"/{notes}")
    expect(file_item(page, notes)).to_have_count(1)
    assert any("upload_progress" in frame for frame in sent_events)  # the bar followed the browser's upload
    upload(page, other, "text/plain", b"Something else entirely.\n")
    expect(file_item(page, other)).to_have_count(1)
    upload(page, image, "image/png", tiny_png())
    expect(file_item(page, image)).to_have_count(1)

    # Oversize: refused with the limit before anything is sent.
    upload(page, f"huge-{tag}.bin", "application/octet-stream", b"\0" * (20 * 1024 * 1024 + 1))
    expect(page.locator("#files-error")).to_contain_text("at most 20 MiB (POWERON_FILE_MAX_BYTES)")
    expect(file_item(page, f"huge-{tag}.bin")).to_have_count(0)

    # Previews: the text's start, the image itself.
    file_item(page, notes).locator(".file-name").click()
    expect(page.locator("#file-preview-text")).to_contain_text(f"The {word} project")
    page.locator("#file-preview-close").click()
    expect(page.locator("#file-preview")).to_have_count(0)
    file_item(page, image).locator(".file-name").click()
    expect(page.locator("#file-preview-image")).to_have_attribute("src", re.compile(r"^data:image/png;base64,"))
    page.locator("#file-preview-close").click()
    expect(page.locator("#file-preview")).to_have_count(0)  # the dialog is gone before the search is used

    # Full-text search finds the file by a word in it.
    page.locator("#file-search-input").fill(word)
    page.locator("#file-search-input").press("Enter")
    hits = page.locator(".search-hit")
    expect(hits).to_have_count(1, timeout=15_000)
    expect(hits.locator(".hit-path")).to_have_text(f"/{notes}")
    page.locator("#file-search-clear").click()
    expect(hits).to_have_count(0)

    # Rename and delete (with its confirmation).
    renamed = f"renamed-{tag}.txt"
    file_item(page, other).locator(".file-rename").click()
    page.locator("#file-rename-input").fill(renamed)
    page.locator("#file-rename-save").click()
    expect(file_item(page, renamed)).to_have_count(1)
    expect(file_item(page, other)).to_have_count(0)

    # Attach two, remove one chip, send: the prompt names the attached file's path only.
    file_item(page, notes).locator(".file-attach").click()
    file_item(page, renamed).locator(".file-attach").click()
    chips = page.locator(".attachment-chip")
    expect(chips).to_have_count(2)
    chips.filter(has_text=renamed).locator(".attachment-remove").click()
    expect(chips).to_have_count(1)
    expect(chips).to_contain_text(f"/{notes}")

    file_item(page, renamed).locator(".file-delete").click()
    page.locator("#confirm-file-delete").click()
    expect(file_item(page, renamed)).to_have_count(0)
    expect(page.locator("#files-notice")).to_contain_text(f"Deleted /{renamed}")

    ai = running_app.ai
    ai.clear()
    ai.reply("The notes say the project starts in May.")
    page.locator("#chat-input").fill(f"Summarise the notes {tag}")
    page.locator("#chat-input").press("Enter")
    expect(page.locator(".assistant-message").last).to_have_text("The notes say the project starts in May.")
    expect(chips).to_have_count(0)
    sent = ai.last_chat.user_text
    assert f"Attached files (read them with core_readFile): /{notes}" in sent
    assert renamed not in sent
    expect(page.locator(".user-message").last).to_contain_text(f"/{notes}")


def test_a_viewer_browses_and_previews_files_but_cannot_change_them(page: Page, running_app: RunningApp):
    tag = uuid.uuid4().hex[:6]
    folder, name = f"team-{tag}", f"shared-{tag}.txt"

    def shared_file(session, admin, instance) -> None:
        service.write_text(FileScope(session, admin, instance.mandate_id, instance.id), f"/{folder}/{name}",
                           "Shared with everyone who may read.")

    sign_in_as_workspace_viewer(page, running_app, "Vicky Viewer", prepare=shared_file)
    open_files(page)
    page.locator(".folder-item", has_text=folder).click()
    expect(page.locator("#current-folder")).to_have_text(f"/{folder}")
    row = file_item(page, name)
    expect(row).to_have_count(1)
    expect(page.locator("#file-upload-area")).to_have_count(0)
    expect(row.locator(".file-rename")).to_have_count(0)
    expect(row.locator(".file-delete")).to_have_count(0)
    expect(row.locator(".file-attach")).to_have_count(0)  # attaching feeds a prompt they may not send
    row.locator(".file-name").click()
    expect(page.locator("#file-preview-text")).to_contain_text("Shared with everyone")
    page.locator("#file-preview-close").click()
    page.locator("#folder-up").click()
    expect(page.locator("#current-folder")).to_have_text("/")
    expect(page.locator(".folder-item", has_text=folder)).to_have_count(1)


def test_a_search_hit_shows_the_files_markup_as_text_and_highlights_the_matches(page: Page,
                                                                               running_app: RunningApp):
    tag = uuid.uuid4().hex[:6]
    word, name = f"edelweiss{tag}", f"release-{tag}.md"
    content = f"# Release {tag}\n**{word}** ships [the guide](https://example.org/guide) and <b>bold</b> claims."
    open_workspace(page)
    open_files(page)
    upload(page, name, "text/markdown", content.encode())
    expect(file_item(page, name)).to_have_count(1)

    page.locator("#file-search-input").fill(word)
    page.locator("#file-search-input").press("Enter")
    hit = page.locator(".search-hit", has=page.locator(".hit-path", has_text=f"/{name}"))
    expect(hit).to_have_count(1, timeout=15_000)
    snippet = hit.locator(".hit-snippet")
    # the text as the file has it: no heading, link, bold or literal markers rendered from it
    as_written = f"# Release {tag} **{word}** ships [the guide](https://example.org/guide) and <b>bold</b> claims"
    expect(snippet).to_have_text(re.compile("^" + re.escape(as_written)))
    for rendered in ("h1", "a", "b", "strong", "em", "p"):
        expect(snippet.locator(rendered)).to_have_count(0)
    # the match highlighted
    matches = snippet.locator("mark.hit-match")
    expect(matches).to_have_count(1)
    expect(matches).to_have_text(word)
    assert matches.evaluate("m => getComputedStyle(m).fontWeight") in ("700", "bold")
