"""Media types and text extraction for the file store.

A file counts as text when its type is text/* or a common text-like type (JSON, XML, YAML,
source code, …); PDF text comes from pypdf, DOCX text from python-docx. Everything else is
binary: stored, but with no text and not indexed.
"""

from __future__ import annotations

import io
import logging
import mimetypes
from pathlib import PurePosixPath

log = logging.getLogger(__name__)

PDF = "application/pdf"
DOCX = "application/vnd.openxmlformats-officedocument.wordprocessingml.document"
OCTET_STREAM = "application/octet-stream"
GENERIC_TYPES = frozenset({"", OCTET_STREAM, "binary/octet-stream", "application/unknown", "application/x-unknown",
                           "application/binary"})

TEXT_LIKE_TYPES = frozenset({
    "application/json", "application/ld+json", "application/x-ndjson", "application/xml", "application/xhtml+xml",
    "application/javascript", "application/x-javascript", "application/ecmascript", "application/typescript",
    "application/yaml", "application/x-yaml", "application/toml", "application/x-toml", "application/sql",
    "application/x-sh", "application/x-shellscript", "application/x-python", "application/x-python-code",
    "application/x-httpd-php", "application/x-tex", "application/x-latex", "application/csv", "application/rtf",
    "application/x-subrip", "application/graphql", "image/svg+xml", "message/rfc822",
})

# Extensions whose type the standard library does not know (or knows only as something binary).
EXTENSION_TYPES = {
    ".txt": "text/plain", ".text": "text/plain", ".log": "text/plain", ".md": "text/markdown",
    ".markdown": "text/markdown", ".rst": "text/x-rst", ".csv": "text/csv", ".tsv": "text/tab-separated-values",
    ".json": "application/json", ".jsonl": "application/x-ndjson", ".ndjson": "application/x-ndjson",
    ".xml": "application/xml", ".yaml": "application/yaml", ".yml": "application/yaml", ".toml": "application/toml",
    ".ini": "text/plain", ".cfg": "text/plain", ".conf": "text/plain", ".env": "text/plain",
    ".properties": "text/plain", ".py": "text/x-python", ".js": "text/javascript", ".mjs": "text/javascript",
    ".ts": "text/x-typescript", ".tsx": "text/x-typescript", ".jsx": "text/javascript", ".html": "text/html",
    ".htm": "text/html", ".css": "text/css", ".sql": "application/sql", ".sh": "application/x-sh",
    ".java": "text/x-java", ".c": "text/x-c", ".h": "text/x-c", ".cpp": "text/x-c++", ".hpp": "text/x-c++",
    ".cs": "text/x-csharp", ".go": "text/x-go", ".rs": "text/x-rust", ".rb": "text/x-ruby", ".php": "text/x-php",
    ".r": "text/x-r", ".tex": "application/x-tex", ".svg": "image/svg+xml", ".vtt": "text/vtt",
    ".srt": "application/x-subrip", ".eml": "message/rfc822", ".ics": "text/calendar", ".vcf": "text/vcard",
    ".pdf": PDF, ".docx": DOCX,
}

SNIFF_BYTES = 8192


def base_type(declared: str | None) -> str:
    """`Text/Plain; charset=utf-8` → `text/plain`."""
    return (declared or "").split(";", 1)[0].strip().lower()


def is_text_type(mime_type: str) -> bool:
    """Whether the type's bytes are text as they are (not PDF, DOCX or binary)."""
    mime_type = base_type(mime_type)
    return (mime_type.startswith("text/") or mime_type in TEXT_LIKE_TYPES
            or mime_type.endswith("+json") or mime_type.endswith("+xml"))


def is_extractable(mime_type: str) -> bool:
    """Whether text can be had from files of this type (text-like, PDF or DOCX)."""
    return is_text_type(mime_type) or base_type(mime_type) in (PDF, DOCX)


def guess_type(name: str) -> str | None:
    """The type a file name suggests, if any."""
    suffix = PurePosixPath(name).suffix.lower()
    if suffix in EXTENSION_TYPES:
        return EXTENSION_TYPES[suffix]
    guessed, _ = mimetypes.guess_type(name, strict=False)
    return guessed


def looks_like_text(data: bytes) -> bool:
    """True when the start of `data` decodes as UTF-8 and has no NUL bytes."""
    head = data[:SNIFF_BYTES]
    if b"\x00" in head:
        return False
    try:
        head.decode("utf-8")
    except UnicodeDecodeError as exc:
        # A multi-byte character cut at the end of the sample is fine.
        return exc.start >= len(head) - 3
    return True


def detect_type(name: str, declared: str | None, data: bytes) -> str:
    """The media type to store: a specific declared one, else one from the name, else sniffed."""
    declared = base_type(declared)
    if declared and declared not in GENERIC_TYPES:
        return declared
    guessed = guess_type(name)
    if guessed:
        return guessed
    if data.startswith(b"%PDF-"):
        return PDF
    return "text/plain" if looks_like_text(data) else OCTET_STREAM


def decode_text(data: bytes) -> str | None:
    """Text of a text-like file: UTF-8 (with or without BOM), else Windows-1252; None if binary."""
    if b"\x00" in data:
        return None
    for encoding in ("utf-8-sig", "cp1252"):
        try:
            return data.decode(encoding)
        except UnicodeDecodeError:
            continue
    return None


def _pdf_text(data: bytes) -> str:
    from pypdf import PdfReader

    reader = PdfReader(io.BytesIO(data))
    if reader.is_encrypted:
        reader.decrypt("")  # many "protected" PDFs open with the empty password
    return "\n\n".join((page.extract_text() or "").strip() for page in reader.pages)


def _docx_text(data: bytes) -> str:
    import docx

    document = docx.Document(io.BytesIO(data))
    parts = [p.text for p in document.paragraphs]
    for table in document.tables:
        for row in table.rows:
            parts.append("\t".join(cell.text for cell in row.cells))
    return "\n".join(parts)


def extract_text(data: bytes, mime_type: str) -> str | None:
    """The searchable text of a file, or None for binary files and documents without text."""
    mime_type = base_type(mime_type)
    if is_text_type(mime_type):
        return decode_text(data)
    extractor = {PDF: _pdf_text, DOCX: _docx_text}.get(mime_type)
    if extractor is None or not data:
        return None
    try:
        text = extractor(data)
    except Exception as exc:  # noqa: BLE001 - a damaged document is stored, just not searchable
        log.info("no text from a %s file: %s: %s", mime_type, type(exc).__name__, exc)
        return None
    text = text.replace("\x00", "")
    return text if text.strip() else None
