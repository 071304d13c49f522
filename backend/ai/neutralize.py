"""Neutralisation of personal data: replace it by stable placeholders and put it back later.

Found and replaced: e-mail addresses (`[EMAIL_n]`), IBANs with a valid checksum (`[IBAN_n]`),
Swiss AHV numbers 756.xxxx.xxxx.xx with a valid check digit (`[AHV_n]`), phone numbers in
international (+41 …, 0041 …) and Swiss national (079 123 45 67) form (`[PHONE_n]`), and names
from POWERON_NEUTRALIZE_NAMES plus a per-call list (`[PERSON_n]`).

The mapping is `{placeholder: original}`. The same value gets the same placeholder (phone
numbers, IBANs and AHV numbers are compared without spaces and punctuation, e-mail addresses
and names without regard to case); passing an earlier mapping continues it, so several texts
of one conversation share placeholders. :func:`restore` puts the originals back — for a value
met in several spellings (079 123 45 67 and +41 79 123 45 67), the first one.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

KINDS = ("EMAIL", "IBAN", "AHV", "PHONE", "PERSON")
PLACEHOLDER = re.compile(r"\[(EMAIL|IBAN|AHV|PHONE|PERSON)_(\d+)\]")

_EMAIL = re.compile(
    r"(?<![\w.%+-])[\w.%+-]+@(?:[A-Za-z0-9](?:[A-Za-z0-9-]*[A-Za-z0-9])?\.)+[A-Za-z]{2,24}(?![\w-])"
)
# Country code, two check digits, then groups of four (optionally spaced) and a short rest.
_IBAN = re.compile(r"(?<![\w])[A-Z]{2}\d{2}(?: ?[A-Z0-9]{4}){2,7}(?: ?[A-Z0-9]{1,3})?(?![\w])")
_AHV = re.compile(r"(?<![\w.])756[. ]?\d{4}[. ]?\d{4}[. ]?\d{2}(?![\w]|\.\d)")
# International: + or 00, country code, then digits with spaces, dashes, dots, slashes and
# area codes in brackets ("+41 (0)44 …", "+1 (415) …"); the digit count is checked afterwards.
_PHONE_INTERNATIONAL = re.compile(r"(?<![\w+])(?:\+|00)[1-9](?:[ \-./]?(?:\(\d{1,4}\)|\d)){6,18}(?![\w])")
# Swiss national: 0xx xxx xx xx, also without separators or with dashes, dots or slashes.
_PHONE_SWISS = re.compile(r"(?<![\w+.])0\d{2}[ \-./]?\d{3}[ \-./]?\d{2}[ \-./]?\d{2}(?![\w]|[.\-/]\d)")

# Lengths of IBANs per country (ISO 13616 registry), for the countries most often seen here;
# other countries only have to be 15–34 characters long.
_IBAN_LENGTHS = {
    "AD": 24, "AT": 20, "BE": 16, "BG": 22, "CH": 21, "CY": 28, "CZ": 24, "DE": 22, "DK": 18, "EE": 20,
    "ES": 24, "FI": 18, "FR": 27, "GB": 22, "GR": 27, "HR": 21, "HU": 28, "IE": 22, "IS": 26, "IT": 27,
    "LI": 21, "LT": 20, "LU": 20, "LV": 21, "MC": 27, "MT": 31, "NL": 18, "NO": 15, "PL": 28, "PT": 25,
    "RO": 24, "SE": 24, "SI": 19, "SK": 24, "SM": 27,
}


def iban_is_valid(candidate: str) -> bool:
    """True when `candidate` (spaces allowed) has a known length and a valid mod-97 checksum."""
    iban = re.sub(r"\s", "", candidate).upper()
    if not re.fullmatch(r"[A-Z]{2}\d{2}[A-Z0-9]+", iban):
        return False
    expected = _IBAN_LENGTHS.get(iban[:2])
    if (expected and len(iban) != expected) or not 15 <= len(iban) <= 34:
        return False
    rearranged = iban[4:] + iban[:4]
    digits = "".join(str(int(c, 36)) for c in rearranged)
    return int(digits) % 97 == 1


def ahv_is_valid(candidate: str) -> bool:
    """True for a 13-digit AHV number starting 756 whose EAN-13 check digit is right."""
    digits = re.sub(r"\D", "", candidate)
    if len(digits) != 13 or not digits.startswith("756"):
        return False
    total = sum(int(d) * (3 if i % 2 else 1) for i, d in enumerate(digits[:12]))
    return (10 - total % 10) % 10 == int(digits[12])


def _phone_key(value: str) -> str:
    """+41 79 …, 0041 79 …, +41 (0)79 … and 079 … all become +4179…."""
    text = value.replace("(0)", "")
    digits = re.sub(r"\D", "", text)
    if text.lstrip().startswith("+"):
        return "+" + digits
    if digits.startswith("00"):
        return "+" + digits[2:]
    if digits.startswith("0"):
        return "+41" + digits[1:]
    return digits


def _key(kind: str, value: str) -> str:
    """What makes two found values "the same value"."""
    if kind == "PHONE":
        return _phone_key(value)
    if kind in ("IBAN", "AHV"):
        return re.sub(r"[\s.]", "", value).upper()
    return re.sub(r"\s+", " ", value).casefold()


@dataclass
class Neutralized:
    """The result of :func:`neutralize`.

    Attributes:
        text: The text with placeholders.
        mapping: `{placeholder: original}` — the given mapping plus what was found now.
        found: How many values of each kind were replaced in this text (occurrences).
    """

    text: str
    mapping: dict[str, str]
    found: dict[str, int] = field(default_factory=dict)


def _iban_matches(text: str) -> Iterable[tuple[int, int, bool]]:
    """(start, end, valid) of IBAN-shaped text; invalid ones are reserved so that no other
    detector reads a mistyped IBAN as, say, a phone number."""
    for match in _IBAN.finditer(text):
        start, value = match.start(), match.group(0)
        # A trailing word of four letters or digits can be swallowed as a group: shorten
        # group by group until the checksum holds.
        while value:
            if iban_is_valid(value):
                yield start, start + len(value), True
                break
            if " " not in value.strip():
                if len(match.group(0).replace(" ", "")) >= 15:
                    yield match.start(), match.end(), False
                break
            value = value[: value.rstrip().rfind(" ")]


def _phone_matches(text: str) -> Iterable[tuple[int, int]]:
    for pattern in (_PHONE_INTERNATIONAL, _PHONE_SWISS):
        for match in pattern.finditer(text):
            digits = re.sub(r"\D", "", match.group(0).replace("(0)", ""))
            if pattern is _PHONE_INTERNATIONAL:
                digits = digits[2:] if match.group(0).startswith("00") else digits
                if not 8 <= len(digits) <= 15:
                    continue
            yield match.start(), match.end()


def _name_pattern(names: Iterable[str]) -> re.Pattern[str] | None:
    cleaned = {re.sub(r"\s+", " ", n).strip() for n in names if n and n.strip()}
    cleaned = {n for n in cleaned if len(n) >= 2}
    if not cleaned:
        return None
    # Longest first, so "Anna Meier" wins over "Anna"; any whitespace between the parts.
    parts = [r"\s+".join(re.escape(p) for p in n.split(" ")) for n in sorted(cleaned, key=len, reverse=True)]
    return re.compile(r"(?<!\w)(?:" + "|".join(parts) + r")(?!\w)", re.IGNORECASE)


_RESERVED = "RESERVED"  # spans no detector may claim, left as they are


def _spans(text: str, names: Iterable[str], kinds: set[str]) -> list[tuple[int, int, str]]:
    """Non-overlapping (start, end, kind) spans; earlier kinds win over later ones."""
    detectors: list[tuple[str, Iterable[tuple[int, int]]]] = []
    if "EMAIL" in kinds:
        detectors.append(("EMAIL", ((m.start(), m.end()) for m in _EMAIL.finditer(text))))
    if "IBAN" in kinds:
        ibans = list(_iban_matches(text))
        detectors.append(("IBAN", ((a, b) for a, b, valid in ibans if valid)))
        detectors.append((_RESERVED, ((a, b) for a, b, valid in ibans if not valid)))
    if "AHV" in kinds:
        detectors.append(("AHV", ((m.start(), m.end()) for m in _AHV.finditer(text) if ahv_is_valid(m.group(0)))))
    if "PHONE" in kinds:
        detectors.append(("PHONE", _phone_matches(text)))
    pattern = _name_pattern(names) if "PERSON" in kinds else None
    if pattern is not None:
        detectors.append(("PERSON", ((m.start(), m.end()) for m in pattern.finditer(text))))
    taken: list[tuple[int, int, str]] = []
    for kind, found in detectors:
        for start, end in found:
            if not any(start < t_end and t_start < end for t_start, t_end, _ in taken):
                taken.append((start, end, kind))
    return sorted(t for t in taken if t[2] != _RESERVED)


def configured_names() -> tuple[str, ...]:
    """The names of POWERON_NEUTRALIZE_NAMES."""
    from backend.config import get_settings

    return get_settings().neutralize_names


def neutralize(
    text: str,
    names: Iterable[str] = (),
    mapping: dict[str, str] | None = None,
    kinds: Iterable[str] | None = None,
    use_configured_names: bool = True,
) -> Neutralized:
    """Replace personal data in `text` by placeholders.

    Args:
        text: The text to neutralise.
        names: Names to replace in addition to POWERON_NEUTRALIZE_NAMES.
        mapping: An earlier mapping to continue (not changed; the result holds the union).
        kinds: Which kinds to replace (default: all of KINDS).
        use_configured_names: Also replace the names of POWERON_NEUTRALIZE_NAMES.
    """
    wanted = set(KINDS if kinds is None else (k.upper() for k in kinds))
    unknown = wanted - set(KINDS)
    if unknown:
        raise ValueError(f"unknown kinds {sorted(unknown)} (known: {', '.join(KINDS)})")
    all_names = [*(configured_names() if use_configured_names else ()), *names]
    result = dict(mapping or {})
    by_value = {}
    for placeholder, original in result.items():
        match = PLACEHOLDER.fullmatch(placeholder)
        if match:
            by_value.setdefault((match.group(1), _key(match.group(1), original)), placeholder)
    # Never hand out a placeholder that the text itself already contains.
    used = set(result) | {m.group(0) for m in PLACEHOLDER.finditer(text)}
    counters = {kind: 0 for kind in KINDS}

    def placeholder_for(kind: str, value: str) -> str:
        key = (kind, _key(kind, value))
        if key not in by_value:
            while True:
                counters[kind] += 1
                candidate = f"[{kind}_{counters[kind]}]"
                if candidate not in used:
                    break
            used.add(candidate)
            result[candidate] = value
            by_value[key] = candidate
        return by_value[key]

    pieces: list[str] = []
    found: dict[str, int] = {}
    position = 0
    for start, end, kind in _spans(text, all_names, wanted):
        pieces.append(text[position:start])
        pieces.append(placeholder_for(kind, text[start:end]))
        found[kind] = found.get(kind, 0) + 1
        position = end
    pieces.append(text[position:])
    return Neutralized("".join(pieces), result, found)


def restore(text: str, mapping: dict[str, str]) -> str:
    """Put the originals of `mapping` back in place of their placeholders (unknown ones stay)."""
    return PLACEHOLDER.sub(lambda m: mapping.get(m.group(0), m.group(0)), text)


def neutralize_data(
    data: Any,
    names: Iterable[str] = (),
    mapping: dict[str, str] | None = None,
    kinds: Iterable[str] | None = None,
) -> tuple[Any, dict[str, str], dict[str, int]]:
    """Neutralise every string inside JSON-like data (dict keys stay) with one shared mapping."""
    names = list(names)
    current = dict(mapping or {})
    totals: dict[str, int] = {}

    def walk(node: Any) -> Any:
        nonlocal current
        if isinstance(node, str):
            done = neutralize(node, names, current, kinds)
            current = done.mapping
            for kind, count in done.found.items():
                totals[kind] = totals.get(kind, 0) + count
            return done.text
        if isinstance(node, dict):
            return {k: walk(v) for k, v in node.items()}
        if isinstance(node, list | tuple):
            return [walk(v) for v in node]
        return node

    return walk(data), current, totals


def restore_data(data: Any, mapping: dict[str, str]) -> Any:
    """:func:`restore` applied to every string inside JSON-like data."""
    if isinstance(data, str):
        return restore(data, mapping)
    if isinstance(data, dict):
        return {k: restore_data(v, mapping) for k, v in data.items()}
    if isinstance(data, list | tuple):
        return [restore_data(v, mapping) for v in data]
    return data
