"""Neutralisation of personal data: what is found, what is left alone, stable placeholders, restoring."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from backend.ai.neutralize import (
    KINDS,
    PLACEHOLDER,
    ahv_is_valid,
    iban_is_valid,
    neutralize,
    neutralize_data,
    restore,
    restore_data,
)
from backend.config import reset_settings_cache


def hide(text: str, names=(), **options):
    return neutralize(text, names, use_configured_names=False, **options)


# --- e-mail ---------------------------------------------------------------------------------


@pytest.mark.parametrize("address", [
    "anna.meier@example.ch", "first+tag@sub.domain.co.uk", "x_y-z@mail-server.org", "Ueli.Zuercher@Example.COM",
    "müller@beispiel.de",
])
def test_email_addresses_are_replaced(address):
    done = hide(f"Write to {address}, please.")
    assert done.text == "Write to [EMAIL_1], please."
    assert done.mapping == {"[EMAIL_1]": address}
    assert done.found == {"EMAIL": 1}


@pytest.mark.parametrize("text", ["no mail @ here", "user@localhost", "a@b", "price 5 @ 3 CHF", "@handle"])
def test_things_that_are_not_email_addresses_stay(text):
    assert hide(text).text == text


def test_the_sentence_period_after_an_address_stays():
    assert hide("Mail: a.b@c.ch.").text == "Mail: [EMAIL_1]."


# --- phone numbers --------------------------------------------------------------------------


@pytest.mark.parametrize("number", [
    "+41 79 123 45 67", "+41791234567", "0041 79 123 45 67", "+41 (0)44 668 18 00", "+41-79-123-45-67",
    "079 123 45 67", "0791234567", "044 668 18 00", "031/322 11 11", "079.123.45.67",
    "+49 30 1234567", "0049 30 1234567", "+1 (415) 555-2671", "+33 1 42 68 53 00", "+44 20 7946 0958",
])
def test_phone_numbers_are_replaced(number):
    done = hide(f"Call {number} today")
    assert done.text == "Call [PHONE_1] today", done.text
    assert done.mapping == {"[PHONE_1]": number}


@pytest.mark.parametrize("text", [
    "Datum 01.02.2024", "Betrag CHF 1'234.50", "Rechnung 2024-001234", "PLZ 8001 Zürich", "Version 1.2.3",
    "Order 12345678", "+12 34", "Seite 079", "2024-03-15T10:00:00", "Tel. 079 123",
])
def test_dates_amounts_and_short_numbers_stay(text):
    assert hide(text).text == text


def test_one_number_in_several_spellings_gets_one_placeholder():
    done = hide("Mobile +41 79 123 45 67, same as 079 123 45 67 or 0041791234567.")
    assert done.text == "Mobile [PHONE_1], same as [PHONE_1] or [PHONE_1]."
    assert done.mapping == {"[PHONE_1]": "+41 79 123 45 67"}


# --- IBAN -----------------------------------------------------------------------------------


@pytest.mark.parametrize("iban", [
    "CH93 0076 2011 6238 5295 7", "CH9300762011623852957", "DE89 3704 0044 0532 0130 00",
    "GB82 WEST 1234 5698 7654 32", "LI21 0881 0000 2324 013A A", "BE68 5390 0754 7034", "NL91ABNA0417164300",
    "FR14 2004 1010 0505 0001 3M02 606", "AT61 1904 3002 3457 3201",
])
def test_valid_ibans_are_replaced(iban):
    assert iban_is_valid(iban)
    done = hide(f"IBAN: {iban}.")
    assert done.text == "IBAN: [IBAN_1].", done.text
    assert done.mapping == {"[IBAN_1]": iban}


@pytest.mark.parametrize("candidate", [
    "CH93 0076 2011 6238 5295 8",  # checksum wrong
    "CH93 0076 2011 6238 5295",  # too short for CH
    "DE89 3704 0044 0532 0130 001",  # too long for DE
    "XX00 0000 0000 0000",
])
def test_invalid_ibans_stay(candidate):
    assert not iban_is_valid(candidate)
    assert hide(f"IBAN {candidate} end").text == f"IBAN {candidate} end"


def test_a_word_after_an_iban_is_not_swallowed():
    # BE IBANs are four groups of four: "Euro" could pass as a fifth group.
    done = hide("Pay to BE68 5390 0754 7034 Euro 50")
    assert done.text == "Pay to [IBAN_1] Euro 50"


def test_iban_spacing_does_not_make_a_new_placeholder():
    done = hide("CH93 0076 2011 6238 5295 7 = CH9300762011623852957")
    assert done.text == "[IBAN_1] = [IBAN_1]"


def test_a_mistyped_iban_is_not_read_as_a_phone_number():
    assert hide("CH93 0076 2011 6238 5295 8 or 079 123 45 67").text == "CH93 0076 2011 6238 5295 8 or [PHONE_1]"


# --- AHV ------------------------------------------------------------------------------------


@pytest.mark.parametrize("number", ["756.9217.0769.85", "7569217076985", "756 9217 0769 85", "756.1234.5678.97"])
def test_ahv_numbers_with_a_valid_check_digit_are_replaced(number):
    assert ahv_is_valid(number)
    done = hide(f"AHV-Nr. {number}, bitte")
    assert done.text == "AHV-Nr. [AHV_1], bitte"
    assert done.mapping == {"[AHV_1]": number}


@pytest.mark.parametrize("number", ["756.9217.0769.84", "756.1234.5678.90", "757.9217.0769.85", "756.9217.0769.8"])
def test_ahv_lookalikes_with_a_wrong_check_digit_stay(number):
    assert not ahv_is_valid(number)
    assert hide(f"Nr. {number} x").text == f"Nr. {number} x"


# --- names ----------------------------------------------------------------------------------


def test_names_of_the_call_are_replaced_whole_word_and_in_any_case():
    done = hide("Anna Meier met ANNA MEIER and Annalena; anna meier left.", names=["Anna Meier"])
    assert done.text == "[PERSON_1] met [PERSON_1] and Annalena; [PERSON_1] left."
    assert done.mapping == {"[PERSON_1]": "Anna Meier"}


def test_longer_names_win_and_line_breaks_between_parts_match():
    done = hide("Hans Muster wrote to Hans.\nLater Hans\nMuster called.", names=["Hans", "Hans Muster"])
    assert done.text == "[PERSON_1] wrote to [PERSON_2].\nLater [PERSON_1] called."
    assert done.mapping == {"[PERSON_1]": "Hans Muster", "[PERSON_2]": "Hans"}


def test_names_with_special_characters_are_matched_literally():
    done = hide("Dr. Zoë O'Brien-Müller (c.c. Zoë) signed.", names=["Zoë O'Brien-Müller", "c.c."])
    assert done.text == "Dr. [PERSON_1] ([PERSON_2] Zoë) signed."


def test_configured_names_come_from_the_setting(monkeypatch):
    monkeypatch.setenv("POWERON_NEUTRALIZE_NAMES", " Vreni Schneider , Bernhard Russi,,")
    reset_settings_cache()
    try:
        done = neutralize("Vreni Schneider and Bernhard Russi and Pirmin Zurbriggen", ["Pirmin Zurbriggen"])
        assert done.text == "[PERSON_1] and [PERSON_2] and [PERSON_3]"
        assert neutralize("Vreni Schneider", use_configured_names=False).text == "Vreni Schneider"
    finally:
        reset_settings_cache()


def test_empty_and_one_letter_names_are_ignored():
    assert hide("a b c", names=["", " ", "a"]).text == "a b c"


# --- mappings and restoring -----------------------------------------------------------------


LETTER = """Sehr geehrte Frau Anna Meier
Ihre Nachricht an support@firma.ch (Kopie an anna.meier@example.ch) ist angekommen.
Wir überweisen CHF 1'250.00 auf CH93 0076 2011 6238 5295 7 (AHV 756.9217.0769.85).
Rückfragen: +41 44 668 18 00. Freundliche Grüsse, Hans Muster"""


def test_a_letter_is_neutralised_completely_and_restored_exactly():
    done = hide(LETTER, names=["Anna Meier", "Hans Muster"])
    assert done.found == {"PERSON": 2, "EMAIL": 2, "IBAN": 1, "AHV": 1, "PHONE": 1}
    for original in ("Anna Meier", "support@firma.ch", "anna.meier@example.ch", "CH93", "756.9217", "668 18 00",
                     "Hans Muster"):
        assert original not in done.text
    assert "CHF 1'250.00" in done.text
    assert restore(done.text, done.mapping) == LETTER


def test_placeholders_are_numbered_in_order_of_appearance_per_kind():
    done = hide("c@x.ch b@x.ch c@x.ch a@x.ch")
    assert done.text == "[EMAIL_1] [EMAIL_2] [EMAIL_1] [EMAIL_3]"
    assert done.mapping == {"[EMAIL_1]": "c@x.ch", "[EMAIL_2]": "b@x.ch", "[EMAIL_3]": "a@x.ch"}


def test_an_earlier_mapping_is_continued_and_not_changed():
    first = hide("From a@x.ch to +41 79 123 45 67")
    before = dict(first.mapping)
    second = hide("Reply to b@x.ch and A@X.CH, call 079 123 45 67", mapping=first.mapping)
    assert first.mapping == before
    assert second.text == "Reply to [EMAIL_2] and [EMAIL_1], call [PHONE_1]"
    assert second.mapping == {**before, "[EMAIL_2]": "b@x.ch"}
    assert second.found == {"EMAIL": 2, "PHONE": 1}


def test_placeholders_already_in_the_text_are_not_reused():
    done = hide("Literal [EMAIL_1] and a@x.ch")
    assert done.text == "Literal [EMAIL_1] and [EMAIL_2]"
    assert restore(done.text, done.mapping) == "Literal [EMAIL_1] and a@x.ch"


def test_restore_leaves_unknown_placeholders_and_other_brackets():
    mapping = {"[PERSON_1]": "Anna"}
    assert restore("[PERSON_1], [PERSON_2], [person_1], [NAME_1]", mapping) == "Anna, [PERSON_2], [person_1], [NAME_1]"


def test_restore_does_not_substitute_twice():
    # An original that looks like a placeholder must not be expanded again.
    mapping = {"[PERSON_1]": "[EMAIL_1]", "[EMAIL_1]": "x@y.ch"}
    assert restore("[PERSON_1] / [EMAIL_1]", mapping) == "[EMAIL_1] / x@y.ch"


def test_a_model_answer_that_moves_placeholders_around_is_restored():
    done = hide("Kunde Anna Meier, anna@meier.ch", names=["Anna Meier"])
    answer = "Ich habe [PERSON_1] unter [EMAIL_1] geschrieben. [PERSON_1] antwortet bald."
    assert restore(answer, done.mapping) == ("Ich habe Anna Meier unter anna@meier.ch geschrieben. "
                                             "Anna Meier antwortet bald.")


def test_kinds_can_be_limited():
    text = "a@x.ch +41 79 123 45 67 Anna"
    assert hide(text, names=["Anna"], kinds=["EMAIL"]).text == "[EMAIL_1] +41 79 123 45 67 Anna"
    assert hide(text, names=["Anna"], kinds=["phone", "PERSON"]).text == "a@x.ch [PHONE_1] [PERSON_1]"
    with pytest.raises(ValueError, match="unknown kinds"):
        hide(text, kinds=["SSN"])


def test_an_email_wins_over_a_name_inside_it():
    done = hide("anna.meier@example.ch", names=["Meier"])
    assert done.text == "[EMAIL_1]"


def test_json_data_is_neutralised_with_one_mapping_and_restored():
    data = {"customer": {"name": "Anna Meier", "mail": "anna@x.ch"},
            "notes": ["call 079 123 45 67", "mail anna@x.ch"], "amount": 12.5, "paid": False, "id": None}
    hidden, mapping, found = neutralize_data(data, names=["Anna Meier"])
    assert hidden == {"customer": {"name": "[PERSON_1]", "mail": "[EMAIL_1]"},
                      "notes": ["call [PHONE_1]", "mail [EMAIL_1]"], "amount": 12.5, "paid": False, "id": None}
    assert found == {"PERSON": 1, "EMAIL": 2, "PHONE": 1}
    assert restore_data(hidden, mapping) == data


def test_text_without_personal_data_is_unchanged():
    done = hide("Das Meeting ist am 3. März um 14:00 in Raum 4.12.")
    assert done.text == "Das Meeting ist am 3. März um 14:00 in Raum 4.12." and done.mapping == {} and done.found == {}


# --- properties -----------------------------------------------------------------------------

_VALUES = st.sampled_from([
    "anna@x.ch", "b.c@firma.com", "+41 79 123 45 67", "044 668 18 00", "CH93 0076 2011 6238 5295 7",
    "756.9217.0769.85", "Anna Meier", "Hans",
])
_FILLER = st.text(alphabet=st.sampled_from(list("abc xyz,.;:-()\n")), max_size=12)


@settings(max_examples=150, deadline=None)
@given(st.lists(st.tuples(_FILLER, _VALUES), max_size=8), _FILLER)
def test_round_trip_and_no_leak(parts, tail):
    text = "".join(f" {filler} {value} " for filler, value in parts) + tail
    done = hide(text, names=["Anna Meier", "Hans"])
    assert restore(done.text, done.mapping) == text
    for _filler, value in parts:
        assert value not in done.text
    assert set(done.mapping) == {m.group(0) for m in PLACEHOLDER.finditer(done.text)}
    assert len(set(done.mapping.values())) == len(done.mapping)  # one placeholder per value
    assert set(done.found) <= set(KINDS)
