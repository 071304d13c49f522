"""The UDB Files tab's pure helpers: the prompt's attachment appendix, the size-limit message
and the PDF page count of the preview."""

from __future__ import annotations

import io

from state.workspace_files import _pdf_pages, attachment_appendix, limit_message


def test_attached_paths_are_appended_to_the_prompt_for_the_agent_to_read():
    assert attachment_appendix([]) == ""
    assert attachment_appendix(["/a.txt", "/docs/b.md"]) == (
        "\n\nAttached files (read them with core_readFile): /a.txt, /docs/b.md")


def test_the_limit_message_names_the_limit_and_its_setting():
    message = limit_message("big.bin", 20 * 1024 * 1024)
    assert message == "big.bin is too large: files may be at most 20 MiB (POWERON_FILE_MAX_BYTES)."


def test_pdf_pages_are_counted_and_a_broken_pdf_has_no_count():
    from pypdf import PdfWriter

    writer = PdfWriter()
    for _ in range(3):
        writer.add_blank_page(width=200, height=200)
    buffer = io.BytesIO()
    writer.write(buffer)
    assert _pdf_pages(buffer.getvalue()) == 3
    assert _pdf_pages(b"not a pdf") is None
