"""What IMAP servers say, read (backend/connectors/kinds/imap_wire.py): FETCH answers with literals
split out by imaplib, a BODYSTRUCTURE as real servers send it (nested alternative, disposition
extension data, a forwarded message as one leaf), LIST answers and folder names in modified UTF-7.
pymap's own answers are covered by test_mail_access.py; these are the shapes pymap does not send."""

from __future__ import annotations

import pytest

from backend.connectors.kinds import imap_wire as wire

STRUCTURE = (b'7 (UID 42 BODYSTRUCTURE ((("text" "plain" ("charset" "utf-8") NIL NIL "quoted-printable" 120 4 NIL '
             b'NIL NIL NIL)("text" "html" ("charset" "utf-8") NIL NIL "base64" 312 4 NIL NIL NIL NIL) "alternative" '
             b'("boundary" "b1") NIL NIL NIL)("application" "pdf" ("name" "a b.pdf") NIL NIL "base64" 7800 NIL '
             b'("attachment" ("filename" "a b.pdf")) NIL NIL)("message" "rfc822" NIL NIL NIL "7bit" 500 (NIL "s" '
             b'NIL NIL NIL NIL NIL NIL NIL NIL) ("text" "plain" NIL NIL NIL "7bit" 10 1) 12 NIL NIL NIL NIL) "mixed" '
             b'("boundary" "b0") NIL NIL NIL) BODY[HEADER.FIELDS (SUBJECT)] {15}')


def test_a_fetch_answer_with_a_literal_and_an_unsolicited_update():
    found = wire.parse_fetch([(STRUCTURE, b"Subject: hi\r\n\r\n"), b")", b"8 (FLAGS (\\Seen))",
                              (b'9 (UID 43 BODY[1]<0> {5}', b"a (b)"), b' BODY[2] "q\\"x")'])
    assert set(found) == {42, 43}  # the flag update has no UID
    assert found[42]["BODY[HEADER.FIELDS (SUBJECT)]"] == b"Subject: hi\r\n\r\n"
    assert found[43] == {"UID": b"43", "BODY[1]": b"a (b)", "BODY[2]": b'q"x'}


def test_the_leaves_of_a_bodystructure_with_their_sections():
    parts = wire.body_parts(wire.parse_fetch([(STRUCTURE, b"x"), b")"])[42]["BODYSTRUCTURE"])
    assert [(p.section, p.mime_type, p.encoding) for p in parts] == [
        ("1.1", "text/plain", "quoted-printable"), ("1.2", "text/html", "base64"),
        ("2", "application/pdf", "base64"), ("3", "message/rfc822", "7bit")]
    assert parts[2].decoded_size == 7800 * 3 * 76 // (4 * 78)  # base64 lines of 76 characters
    single = wire.body_parts([b"TEXT", b"PLAIN", None, None, None, b"7BIT", b"192", b"10"])
    assert single == [wire.Part("1", "text/plain", "7bit", 192, top=True)]
    with pytest.raises(wire.WireError):
        wire.body_parts(b"nonsense")


def test_list_answers_and_folder_names():
    listed = wire.parse_list([b'(\\HasNoChildren) "/" INBOX', (b'(\\HasNoChildren) "/" {10}', b"Entw&APw-rfe"),
                              b'(\\Noselect) "." "A \\"q\\""', b'(\\HasNoChildren) NIL Flat'])
    assert listed == [([b"\\HasNoChildren"], "/", b"INBOX"), ([b"\\HasNoChildren"], "/", b"Entw&APw-rfe"),
                      ([b"\\Noselect"], ".", b'A "q"'), ([b"\\HasNoChildren"], None, b"Flat")]
    assert wire.decode_folder(b"Entw&APw-rfe") == "Entwürfe"
    assert wire.encode_folder("Entwürfe & Co") == '"Entw&APw-rfe &- Co"'
    assert wire.decode_folder(b"Entw&APw-rfe &- Co") == "Entwürfe & Co"
    assert wire.encode_folder('say "hi" \\ 日本') == '"say \\"hi\\" \\\\ &ZeVnLA-"'
    with pytest.raises(wire.WireError, match="not closed"):
        wire.parse_list([b'(\\HasNoChildren "/" INBOX'])
