"""Secrets by value, however spelled, and sensitive identifiers: the pure rules (no database).

- a value the turn gave as a secret is found in an entry in each of its re-spellings (separators changed,
  underscores, reversed, hex, base64 whole or inside a longer run, URL-encoded, digits spelled out in
  English and German), and in part;
- very short values are not looked for, and no benign entry of the scan's corpus gives a value or holds
  one of the turn's secrets;
- national identity and tax numbers, IBANs and account numbers are found by label in seven languages, or
  unlabelled when their checksum holds (python-stdnum); a US SSN follows the SSA's rules;
- PINs, codes, combinations, security answers and passwords are read after their labels in seven
  languages; the scan refuses an entry holding any of them.

Assertions are booleans and counts: no secret value is printed.
"""
import base64
import json
from pathlib import Path
from urllib.parse import quote

import pytest

from agentmemory.threats import SECRET, scan_entry, secret_values
from agentmemory.threats.identifiers import identifier_values
from agentmemory.threats.labelled import labelled_values
from agentmemory.threats.spellings import Spellings, canonical, entry_views

PASSWORD = "Prune-Orage-5518"


def _hex(value: str) -> str:
    return value.encode().hex()


RESPELLINGS = {
    "separators changed": "Prune Orage / 5518",
    "underscores": "prune_orage_5518",
    "reversed": PASSWORD[::-1],
    "hex": _hex(PASSWORD).upper(),
    "base64": base64.b64encode(PASSWORD.encode()).decode(),
    "url-encoded": "".join(f"%{byte:02X}" for byte in PASSWORD.encode()),
    "digits spelled out": "Prune-Orage-five five one eight",
}


@pytest.mark.parametrize("spelling", RESPELLINGS.values(), ids=RESPELLINGS.keys())
def test_each_respelling_of_a_secret_is_found(spelling):
    assert Spellings.of([PASSWORD]).found_in(f"VPN: {spelling}")
    assert not Spellings.of(["Other-Value-7781"]).found_in(f"VPN: {spelling}")


def test_base64_urlsafe_and_unpadded_and_inside_a_longer_run_is_found():
    spellings = Spellings.of([PASSWORD])
    for prefix in (b"", b"v", b"vp", b"vpn="):  # each of the three offsets within a 3-byte group
        raw = prefix + PASSWORD.encode() + b";then more text"
        assert spellings.found_in(base64.b64encode(raw).decode()), len(prefix)
        assert spellings.found_in(base64.urlsafe_b64encode(raw).decode().rstrip("=")), len(prefix)


@pytest.mark.parametrize("words", ["four eight two one", "vier acht zwei eins", "Four-Eight-Two-One",
                                   "quatre huit deux un", "vier acht twee een"])
def test_a_pin_with_its_digits_spelled_out_is_found(words):
    assert Spellings.of(["4821"]).found_in(f"Bank PIN: {words}")


def test_a_part_of_a_long_secret_is_found_in_any_case():
    spellings = Spellings.of(["Tr0ub4dor&3xyz"])
    assert spellings.found_in("Staging DB password starts with TR0UB4DOR")
    assert not spellings.found_in("Staging DB password starts with T")


def test_a_url_encoded_and_spelled_entry_is_read_in_every_view():
    assert entry_views("a%20b") == ("a20b", "ab")
    assert entry_views("one two") == ("onetwo", "12")
    assert canonical("Ｐrune_ORAGE-5518") == "pruneorage5518"  # NFKC, case folded, letters and digits only


def test_very_short_values_are_not_looked_for():
    spellings = Spellings.of(["ab1", "x-9"])
    assert not spellings
    assert not spellings.found_in("Works on ab1 and x-9 boards")


BENIGN = json.loads((Path(__file__).parent / "data" / "threats" / "benign.json").read_text())["entries"]
BENIGN_TEXTS = [text for texts in BENIGN.values() for text in texts]


def test_no_benign_entry_gives_a_secret_value_or_holds_a_spelling_of_the_turns_secrets():
    # The benign corpus (590 entries people keep) as the person's messages: no value is read from them.
    assert sum(1 for text in BENIGN_TEXTS if secret_values(text)) == 0
    # With the secrets of this file as the turn's, no benign entry is refused.
    spellings = Spellings.of([PASSWORD, "4821", "48213579", "12-34-56", "Fluffy", "078-05-1120", "swordfish99",
                              "Tr0ub4dor&3xyz", "DE89 3704 0044 0532 0130 00"])
    assert [text for text in BENIGN_TEXTS if spellings.found_in(text)] == []
    assert len(BENIGN_TEXTS) >= 500


# --- sensitive identifiers ---------------------------------------------------------------------------


def _identifiers(text: str) -> set[str]:
    return {value for _, value in identifier_values(text)}


@pytest.mark.parametrize("text", [
    "My SSN is 078-05-1120.",
    "Social security number: 219 09 9999",
    "Meine Steuer-ID lautet 12 345 678 901",
    "mon numéro de sécurité sociale est 1 84 12 76 451 089 46",
    "mi DNI es 12345678Z",
    "Codice fiscale RSSMRA85T10A562S",
    "o meu número de contribuinte é 123456789",
    "mijn BSN is 123456782",
    "My account number is 12345678",
])
def test_a_labelled_identifier_is_sensitive_in_any_of_the_languages(text):
    assert _identifiers(text)
    assert scan_entry(text) is not None and scan_entry(text).category == SECRET


def test_an_unlabelled_us_ssn_follows_the_ssa_rules():
    assert _identifiers("Number 123-45-6789 on file") == {"123-45-6789"}
    for invalid in ("000-45-6789", "666-45-6789", "912-45-6789", "123-00-6789", "123-45-0000"):
        assert not _identifiers(f"Number {invalid} on file"), invalid


def test_an_unlabelled_iban_is_sensitive_only_when_its_checksum_holds():
    assert _identifiers("Rent goes to DE89 3704 0044 0532 0130 00")
    assert _identifiers("Rent goes to DE89370400440532013000")
    assert not _identifiers("Rent goes to DE88 3704 0044 0532 0130 00")  # one check digit off


@pytest.mark.parametrize(("valid", "invalid"), [
    ("RSSMRA85T10A562S", "RSSMRA85T10A562T"),  # codice fiscale
    ("12345678Z", "12345678A"),  # Spanish DNI
    ("1 84 12 76 451 089 46", "1 84 12 76 451 089 47"),  # French NIR
    ("756.1234.5678.97", "756.1234.5678.98"),  # Swiss AHV
])
def test_unlabelled_national_numbers_are_validated_by_their_checksums(valid, invalid):
    assert _identifiers(f"see {valid} there") and not _identifiers(f"see {invalid} there")


@pytest.mark.parametrize("text", [
    "uses Python 3.11 and Django 5.2", "Port 8080 and 5432", "My passport expires in 2027", "Version 1.2.3",
    "Ticket JIRA-12345 is the umbrella", "Call me at +1 415 555 0132",
])
def test_ordinary_numbers_are_no_identifiers(text):
    assert not _identifiers(text) and not list(labelled_values(text))


# --- labelled PINs, codes, combinations, security answers, passwords ----------------------------------


@pytest.mark.parametrize(("text", "value"), [
    ("I keep my bank PIN as 4821.", "4821"),
    ("My vault code is 48213579.", "48213579"),
    ("my locker combination is 12-34-56", "12-34-56"),
    ("the answer to my security question is Fluffy", "Fluffy"),
    ("retiens que mon mot de passe du VPN est Prune-Orage-5518", "Prune-Orage-5518"),
    ("Die PIN meiner Bankkarte ist 4821", "4821"),
    ("Der Tresorcode lautet 48213579", "48213579"),
    ("Die Antwort auf meine Sicherheitsfrage ist Bello", "Bello"),
    ("Das Passwort für das WLAN lautet Sonnenblume42", "Sonnenblume42"),
    ("le code du coffre est 4821", "4821"),
    ("el código de la puerta es 4410", "4410"),
    ("la contraseña del wifi es Gato-Azul-77", "Gato-Azul-77"),
    ("la combinazione del lucchetto è 12-34-56", "12-34-56"),
    ("la risposta alla mia domanda di sicurezza è Fuffi", "Fuffi"),
    ("a resposta à minha pergunta de segurança é Fluffy", "Fluffy"),
    ("a senha do wifi é Gato-Azul-77", "Gato-Azul-77"),
    ("de code van de kluis is 4821", "4821"),
    ("mijn pincode is 4821", "4821"),
])
def test_a_labelled_pin_code_combination_answer_or_password_is_read_in_each_language(text, value):
    assert value in {found for _, found in labelled_values(text)}
    assert value in secret_values(text)
    assert scan_entry(text) is not None and scan_entry(text).category == SECRET


@pytest.mark.parametrize("text", [
    "pin numpy to 1.26.4", "Pin the Python version at 3.11", "Status code 404 means missing",
    "The password hasher is Argon2.", "Password manager: 1Password.", "Keep code examples short",
    "Uses a password manager for the staging admin",
])
def test_words_near_a_label_that_disclose_nothing_are_no_secret(text):
    assert not list(labelled_values(text))


def test_a_secret_given_in_a_url_encoded_tool_result_is_still_read_as_given():
    # A value is read where a message gives it; what an entry re-spells is `Spellings`' part.
    assert "swordfish99" in secret_values("Home wifi password is swordfish99")
    assert Spellings.of(secret_values("Home wifi password is swordfish99")).found_in(
        "Home wifi: " + quote("swordfish99 ", safe=""))


def test_a_message_read_before_is_not_read_again_and_the_memory_of_them_is_bounded():
    from agentmemory.gate import secrets as gate_secrets

    read = gate_secrets._ReadMessages(2)
    calls = []
    real = gate_secrets.text_secrets
    gate_secrets.text_secrets = lambda text: calls.append(1) or real(text)
    try:
        for text in ("Home wifi password is swordfish99", "Home wifi password is swordfish99", "hi", "hello"):
            read.secrets(text)
        assert read.secrets("hello") == ()
    finally:
        gate_secrets.text_secrets = real
    assert len(calls) == 3  # the repeat and the last "hello" were not read again
    assert len(read._read) == 2
    assert "swordfish99" in read.secrets("Home wifi password is swordfish99")


def test_every_tool_result_shape_is_a_source_of_secrets_and_json_is_read_unescaped():
    from agentmemory.gate import turn_secrets

    found = turn_secrets([
        {"role": "tool", "content": json.dumps({"hits": [{"match": "la contraseña del wifi es Gato-Azul-77"}]})},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1",
                                      "content": [{"type": "text", "text": "Home wifi password is swordfish99"}]}]},
        {"type": "function_call_output", "call_id": "c1", "output": "My vault code is 48213579."},
        {"role": "assistant", "content": "Your door code is 55119933."},  # the assistant's words are no source
    ])
    assert found == ("Gato-Azul-77", "swordfish99", "48213579")


@pytest.mark.parametrize(("text", "value"), [
    ("Merk dir bitte mein VPN-Passwort: Kiefer-Nebel-2291", "Kiefer-Nebel-2291"),
    ("Mein Bankpasswort lautet Haus-Baum-7781", "Haus-Baum-7781"),
    ("Die Bankkarten-PIN ist 4821", "4821"),
])
def test_a_label_joined_to_another_word_is_still_a_label(text, value):
    assert value in secret_values(text)
