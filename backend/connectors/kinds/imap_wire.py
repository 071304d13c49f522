"""What IMAP says on the wire, as Python values: the parenthesised lists of FETCH and LIST answers
(with their literals), BODYSTRUCTURE as a tree of parts, folder names in modified UTF-7 (RFC 3501
§5.1.3) and quoted strings. Pure functions, no connection: backend/connectors/kinds/imap.py uses
them over imaplib.

imaplib hands back an answer as a list whose items are either a line (bytes) or a pair (the line up
to a literal ``{n}``, the literal's n bytes); the rest of the line follows as the next item.
"""

from __future__ import annotations

import base64
import re
from dataclasses import dataclass
from typing import Any

_LITERAL_END = re.compile(rb"\{(\d+)\+?\}$")
_SPECIALS = b" ()\""


class WireError(ValueError):
    """An answer this parser cannot read."""


def _segments(data: list[Any]) -> list[tuple[str, bytes]]:
    """("text", bytes) and ("literal", bytes) in answer order."""
    parts: list[tuple[str, bytes]] = []
    for item in data:
        if item is None:
            continue
        if isinstance(item, tuple):
            head, literal = item[0], item[1]
            parts.append(("text", _LITERAL_END.sub(b"", head.rstrip())))
            parts.append(("literal", literal))
        else:
            parts.append(("text", item))
        # Each item of imaplib's list is a line of its own (or continues the line of a literal).
        parts.append(("text", b" "))
    return parts


class _Reader:
    """A tokenizer over the segments of one or several answers."""

    def __init__(self, data: list[Any]):
        self.segments = _segments(data)
        self.index = 0
        self.position = 0

    def _text(self) -> bytes | None:
        """The text segment being read (skipping finished ones); None at a literal or the end."""
        while self.index < len(self.segments):
            kind, value = self.segments[self.index]
            if kind == "literal":
                return None
            if self.position < len(value):
                return value
            self.index += 1
            self.position = 0
        return None

    def skip_space(self) -> None:
        while (text := self._text()) is not None and text[self.position:self.position + 1] in (b" ", b"\r", b"\n"):
            self.position += 1

    def at_end(self) -> bool:
        self.skip_space()
        return self.index >= len(self.segments)

    def value(self) -> Any:
        """The next value: a list, bytes (atom, quoted string or literal) or None (NIL)."""
        self.skip_space()
        text = self._text()
        if text is None:
            if self.index >= len(self.segments):
                raise WireError("the answer ended early")
            literal = self.segments[self.index][1]
            self.index += 1
            self.position = 0
            return literal
        head = text[self.position:self.position + 1]
        if head == b"(":
            self.position += 1
            items = []
            while True:
                self.skip_space()
                current = self._text()
                if current is not None and current[self.position:self.position + 1] == b")":
                    self.position += 1
                    return items
                if current is None and self.index >= len(self.segments):
                    raise WireError("a list was not closed")
                items.append(self.value())
        if head == b")":
            raise WireError("unexpected ')'")
        if head == b'"':
            return self._quoted(text)
        return self._atom(text)

    def _quoted(self, text: bytes) -> bytes:
        out = bytearray()
        index = self.position + 1
        while index < len(text):
            char = text[index:index + 1]
            if char == b"\\":
                out += text[index + 1:index + 2]
                index += 2
                continue
            if char == b'"':
                self.position = index + 1
                return bytes(out)
            out += char
            index += 1
        raise WireError("a quoted string was not closed")

    def _atom(self, text: bytes) -> bytes | None:
        """An atom; a section such as ``BODY[HEADER.FIELDS (FROM)]<0>`` is one atom."""
        start = index = self.position
        depth = 0
        while index < len(text):
            char = text[index:index + 1]
            if char == b"[":
                depth += 1
            elif char == b"]":
                depth -= 1
            elif depth == 0 and char in (b" ", b"(", b")", b'"'):
                break
            index += 1
        self.position = index
        atom = text[start:index]
        return None if atom.upper() == b"NIL" else atom


def parse_fetch(data: list[Any]) -> dict[int, dict[str, Any]]:
    """The items of FETCH answers by UID (answers without a UID — unsolicited flag updates — are
    left out); keys upper-cased, a partial section's origin dropped (``BODY[1]<0>`` → ``BODY[1]``)."""
    reader = _Reader([item for item in data if item is not None])
    found: dict[int, dict[str, Any]] = {}
    while not reader.at_end():
        reader.value()  # the message sequence number
        items = reader.value()
        if not isinstance(items, list):
            raise WireError("a FETCH answer without its list of items")
        values: dict[str, Any] = {}
        for key, value in zip(items[::2], items[1::2], strict=False):
            name = (key or b"").decode("ascii", "replace").upper()
            values[re.sub(r"<\d+>$", "", name)] = value
        uid = values.get("UID")
        if uid is not None:
            found[int(uid)] = values
    return found


def parse_list(data: list[Any]) -> list[tuple[list[bytes], str | None, bytes]]:
    """The (flags, delimiter, encoded name) of each LIST answer line."""
    reader = _Reader([item for item in data if item is not None])
    found = []
    while not reader.at_end():
        flags = reader.value()
        delimiter = reader.value()
        name = reader.value()
        found.append((list(flags or []), delimiter.decode("ascii", "replace") if delimiter else None, name or b""))
    return found


# --- BODYSTRUCTURE ------------------------------------------------------------------------------


@dataclass(frozen=True)
class Part:
    """One leaf of a message's MIME tree, as BODYSTRUCTURE describes it (its own headers, read
    with BODY[<section>.MIME], say the rest).

    Attributes:
        section: The part specifier for BODY[…]: "1", "2.1" …; "1" for a message of one part.
        mime_type: e.g. "application/pdf" (lower case).
        encoding: Content-Transfer-Encoding (lower case), e.g. "base64".
        size: Octets of the part as transferred (encoded).
        top: The message is not multipart (its MIME headers are the message's).
    """

    section: str
    mime_type: str
    encoding: str
    size: int
    top: bool = False

    @property
    def decoded_size(self) -> int:
        """The size of the content once decoded, about: base64 carries 3 bytes in 4 characters, in
        lines of 76 characters and a line break."""
        return self.size * 3 * 76 // (4 * 78) if self.encoding == "base64" else self.size


def _text(value: Any) -> str:
    return value.decode("utf-8", "replace") if isinstance(value, bytes) else ""


def body_parts(structure: Any) -> list[Part]:
    """The leaves of a BODYSTRUCTURE, in order. A forwarded message (message/rfc822) is one leaf:
    it is an attachment, not part of this mail's text."""
    if not isinstance(structure, list) or not structure:
        raise WireError("BODYSTRUCTURE is not a list")
    if not isinstance(structure[0], list):
        return [_leaf(structure, "1", top=True)]
    return _children(structure, "")


def _children(structure: list[Any], prefix: str) -> list[Part]:
    parts: list[Part] = []
    children = []
    for child in structure:  # the parts come first, then the subtype and the extension data
        if not isinstance(child, list):
            break
        children.append(child)
    for index, child in enumerate(children, start=1):
        section = f"{prefix}{index}"
        if child and isinstance(child[0], list):
            parts.extend(_children(child, section + "."))
        else:
            parts.append(_leaf(child, section))
    return parts


def _leaf(fields: list[Any], section: str, top: bool = False) -> Part:
    main, sub = _text(fields[0]).lower() or "text", _text(fields[1] if len(fields) > 1 else b"").lower() or "plain"
    encoding = _text(fields[5] if len(fields) > 5 else b"").lower() or "7bit"
    try:
        size = int(fields[6]) if len(fields) > 6 and fields[6] is not None else 0
    except (TypeError, ValueError):
        size = 0
    return Part(section, f"{main}/{sub}", encoding, size, top)


# --- names and strings ----------------------------------------------------------------------------


def quote(text: str) -> str:
    """`text` as an IMAP quoted string."""
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def encode_folder(name: str) -> str:
    """A folder name in IMAP's modified UTF-7 (RFC 3501 §5.1.3), quoted for a command."""
    out, pending = [], []

    def flush() -> None:
        if pending:
            raw = "".join(pending).encode("utf-16-be")
            out.append("&" + base64.b64encode(raw).decode("ascii").rstrip("=").replace("/", ",") + "-")
            pending.clear()

    for char in name:
        if 0x20 <= ord(char) <= 0x7E:
            flush()
            out.append("&-" if char == "&" else char)
        else:
            pending.append(char)
    flush()
    return quote("".join(out))


def decode_folder(raw: bytes) -> str:
    """A folder name from modified UTF-7."""
    text = raw.decode("ascii", "replace")

    def expand(match: re.Match[str]) -> str:
        inner = match.group(1)
        if not inner:
            return "&"
        padded = inner.replace(",", "/") + "=" * (-len(inner) % 4)
        try:
            return base64.b64decode(padded).decode("utf-16-be")
        except ValueError:
            return match.group(0)

    return re.sub(r"&([A-Za-z0-9+,]*)-", expand, text)
