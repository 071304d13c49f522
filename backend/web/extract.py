"""The readable text of a fetched page: main text of HTML, text types as they are, binary refused."""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass

import lxml.html
from lxml import etree

from backend.web.safe_fetch import FetchedPage, WebError

HTML_TYPES = frozenset({"text/html", "application/xhtml+xml"})
TEXT_TYPES = frozenset({
    "application/json", "application/xml", "application/javascript", "application/x-javascript",
    "application/ecmascript", "application/yaml", "application/x-yaml", "application/toml",
    "application/x-sh", "application/sql", "application/csv", "application/x-ndjson",
})
# Types that may be text or not: decided by looking at the bytes.
UNDECLARED_TYPES = frozenset({"", "application/octet-stream", "binary/octet-stream"})
_BLOCK_TAGS = ("p", "div", "br", "li", "ul", "ol", "tr", "table", "section", "article", "main", "header",
               "footer", "aside", "nav", "blockquote", "pre", "h1", "h2", "h3", "h4", "h5", "h6", "dt", "dd",
               "figcaption", "hr", "form")
_META_CHARSET = re.compile(rb"""<meta[^>]+charset\s*=\s*["']?([A-Za-z0-9_.:-]+)""", re.IGNORECASE)

# trafilatura logs every page it finds too short at WARNING: that is expected here.
logging.getLogger("trafilatura").setLevel(logging.ERROR)


@dataclass(frozen=True)
class PageText:
    """Readable text of one page.

    Attributes:
        title: The page's title, if it has one.
        text: Main text (HTML) or the whole text (text types).
        kind: "html" or "text".
    """

    title: str | None
    text: str
    kind: str


def _is_text_type(content_type: str) -> bool:
    return (content_type.startswith("text/") or content_type in TEXT_TYPES
            or content_type.endswith("+json") or content_type.endswith("+xml"))


def _looks_binary(body: bytes) -> bool:
    return b"\x00" in body[:8192]


def _looks_like_html(body: bytes) -> bool:
    start = body[:1024].lstrip().lower()
    return start.startswith((b"<!doctype html", b"<html")) or b"<body" in start or b"<head" in start


def _decode_utf8(body: bytes) -> str | None:
    try:
        return body.decode("utf-8")
    except UnicodeDecodeError as exc:
        if exc.start >= len(body) - 3:  # a character cut in half at the size limit
            try:
                return body[: exc.start].decode("utf-8")
            except UnicodeDecodeError:
                return None
        return None


def decode(body: bytes, charset: str | None, *, html: bool) -> str:
    """Bytes to text: the declared charset, else UTF-8, else a <meta charset>, else Windows-1252."""
    body = body.removeprefix(b"\xef\xbb\xbf")
    if charset:
        try:
            return body.decode(charset, errors="replace")
        except LookupError:
            pass
    text = _decode_utf8(body)
    if text is not None:
        return text
    if html:
        found = _META_CHARSET.search(body[:4096])
        if found:
            try:
                return body.decode(found.group(1).decode("ascii"), errors="replace")
            except LookupError:
                pass
    return body.decode("cp1252", errors="replace")


def _tidy(text: str) -> str:
    lines = [re.sub(r"[ \t\u00a0]+", " ", line).strip() for line in text.splitlines()]
    return re.sub(r"\n{3,}", "\n\n", "\n".join(lines)).strip()


def plain_html_text(html: str) -> tuple[str | None, str]:
    """Title and all visible text of an HTML document, one line per block (the fallback)."""
    try:
        root = lxml.html.document_fromstring(html)
    except (etree.ParserError, ValueError):
        return None, ""
    title_element = root.find(".//title")
    title = _tidy(title_element.text_content()) if title_element is not None else None
    for element in root.xpath("//script|//style|//noscript|//template|//head|//svg"):
        element.drop_tree()
    for element in root.iter(*_BLOCK_TAGS):
        element.tail = "\n" + (element.tail or "")
    return title or None, _tidy(root.text_content())


def _html_page_text(html: str, url: str) -> PageText:
    import trafilatura  # imported on first use: it takes half a second, and the registry loads this module

    extracted = trafilatura.extract(html, url=url, output_format="txt", include_comments=False,
                                    include_tables=True, deduplicate=False)
    fallback_title, fallback_text = (None, "") if extracted else plain_html_text(html)
    metadata = trafilatura.extract_metadata(html)
    title = (metadata.title if metadata is not None else None) or fallback_title
    if not extracted and title is None:
        title = plain_html_text(html)[0]
    return PageText(title=title or None, text=_tidy(extracted or fallback_text), kind="html")


def page_text(page: FetchedPage) -> PageText:
    """The readable text of `page`.

    Raises:
        WebError: the page is binary (an image, a PDF, an archive, …).
    """
    content_type = page.content_type
    if content_type in HTML_TYPES or (content_type in UNDECLARED_TYPES and _looks_like_html(page.body)):
        if _looks_binary(page.body):
            raise WebError(f"{page.url} claims to be HTML but contains binary data")
        return _html_page_text(decode(page.body, page.charset, html=True), page.url)
    if _is_text_type(content_type) or content_type in UNDECLARED_TYPES:
        if _looks_binary(page.body):
            raise WebError(f"{page.url} is binary data ({content_type or 'no content type'}), not text; "
                           "only HTML and text pages can be read")
        if content_type in UNDECLARED_TYPES:
            # Undeclared content counts as text only when it is clean UTF-8.
            text = _decode_utf8(page.body.removeprefix(b"\xef\xbb\xbf"))
            if text is None:
                raise WebError(f"{page.url} does not look like text ({content_type or 'no content type'}); "
                               "only HTML and text pages can be read")
        else:
            text = decode(page.body, page.charset, html=False)
        return PageText(title=None, text=text.strip(), kind="text")
    raise WebError(f"{page.url} is {content_type}, not a web page or text; only HTML and text pages can be read")
