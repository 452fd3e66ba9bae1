"""Sensitive identifiers: national identity, social security and tax numbers, passports, bank accounts.

Memory keeps none of them, like a password: an entry holding one is refused
by the scan, and a value a message gave as one is a secret of the turn that
no entry may hold, however spelled (`spellings.py`). They are found two
ways. Without a label, only in shapes distinctive enough to read alone, and
only when their checksum holds (python-stdnum, a maintained library of these
formats): an IBAN, a US SSN written with dashes (the SSA's rules: no area
000, 666 or 900-999, no group 00, no serial 0000), a German tax ID in its
printed groups, a French NIR, an Italian codice fiscale, a Spanish DNI or
NIE, a Swiss AHV number. After a label in English, German, French, Spanish,
Italian, Portuguese or Dutch ("SSN", "Steuer-ID", "numéro de sécurité
sociale", "BSN", ...), any number of at least five digits: a mistyped check
digit makes it no less personal. Card numbers are `credentials.py`'s (Luhn).
Pure: no Django, nothing logged.
"""
from __future__ import annotations

import re
from collections.abc import Callable, Iterator

from stdnum import iban
from stdnum.ch import ssn as ch_ssn
from stdnum.de import idnr
from stdnum.es import dni, nie
from stdnum.fr import nir
from stdnum.it import codicefiscale


def _us_ssn(value: str) -> bool:
    area, group, serial = value.split("-")
    return area not in ("000", "666") and not area.startswith("9") and group != "00" and serial != "0000"


# Shapes read without a label, each with the check that must hold.
_UNLABELLED: tuple[tuple[re.Pattern[str], Callable[[str], bool]], ...] = (
    (re.compile(r"(?<![\w-])[A-Z]{2}\d{2}(?: ?[A-Z0-9]{4}){2,7}(?: ?[A-Z0-9]{1,3})?(?![\w-])"), iban.is_valid),
    (re.compile(r"(?<![\w-])\d{3}-\d{2}-\d{4}(?![\w-])"), _us_ssn),
    (re.compile(r"(?<![\w -])[1-9]\d \d{3} \d{3} \d{3}(?![\w-])"), idnr.is_valid),
    (re.compile(r"(?<![\w-])[12] ?\d{2} ?\d{2} ?(?:\d{2}|2[AB]) ?\d{3} ?\d{3} ?\d{2}(?![\w-])"), nir.is_valid),
    (re.compile(r"(?<![\w-])[A-Z]{6}\d{2}[A-EHLMPRST]\d{2}[A-Z]\d{3}[A-Z](?![\w-])"), codicefiscale.is_valid),
    (re.compile(r"(?<![\w-])\d{8}-?[A-Z](?![\w-])"), dni.is_valid),
    (re.compile(r"(?<![\w-])[XYZ]-?\d{7}-?[A-Z](?![\w-])"), nie.is_valid),
    (re.compile(r"(?<![\w.-])756\.?\d{4}\.?\d{4}\.?\d{2}(?![\w.-])"), ch_ssn.is_valid),
)

# What names an identifier, in the languages the gate reads.
_LABELS = "|".join((
    # en
    r"social security (?:number|no|#)|ssn|national insurance(?: number| no)?|ni number|nino"
    r"|tax(?:payer)? (?:id(?:entification)?|identification|reference|file)(?: number| no)?|tin|itin|ein"
    r"|employer identification number|passport(?: number| no)?|driver'?s? licen[cs]e(?: number| no)?"
    r"|(?:national |personal )?id(?:entity)? (?:card )?(?:number|no)|id card|medicare(?: number)?|nhs number"
    r"|health insurance number|(?:bank |checking |savings |current )?account (?:number|no)|acct(?: no| number)?"
    r"|routing number|sort code|iban",
    # de
    r"sozialversicherungsnummer|sv-nummer|rentenversicherungsnummer|steuer-?id|steuer-?identifikationsnummer"
    r"|identifikationsnummer|steuernummer|personalausweis(?:nummer)?|ausweisnummer|reisepass(?:nummer)?"
    r"|passnummer|f[üu]hrerscheinnummer|krankenversicherungsnummer|versichertennummer|kontonummer",
    # fr
    r"num[ée]ro de s[ée]curit[ée] sociale|n° de s[ée]curit[ée] sociale|nir|num[ée]ro fiscal"
    r"|num[ée]ro d'identification fiscale|num[ée]ro de passeport|passeport|num[ée]ro de compte"
    r"|num[ée]ro de carte (?:d'identit[ée]|vitale)|carte vitale|num[ée]ro de permis",
    # es
    r"n[úu]mero de (?:la )?seguridad social|nss|dni|nie|nif|n[úu]mero de identificaci[óo]n fiscal"
    r"|n[úu]mero de pasaporte|pasaporte|n[úu]mero de cuenta|cuenta bancaria",
    # it
    r"codice fiscale|numero di previdenza|tessera sanitaria|numero di passaporto|passaporto"
    r"|numero (?:di|del) conto|conto corrente|carta d'identit[àa]",
    # pt
    r"n[úu]mero de contribuinte|n[úu]mero de identifica[çc][ãa]o fiscal|n[úu]mero da seguran[çc]a social"
    r"|niss|cpf|n[úu]mero do passaporte|passaporte|n[úu]mero da conta|cart[ãa]o de cidad[ãa]o|n[úu]mero de utente",
    # nl
    r"bsn|burgerservicenummer|sofi-?nummer|paspoort(?:nummer)?|rekeningnummer|bankrekening(?:nummer)?"
    r"|rijbewijsnummer|identiteitskaart(?:nummer)?",
))
# A label, a few words without a digit or a sentence's end, then the number (digits in groups, letters around).
_LABELLED = re.compile(
    r"(?<![\w-])(?:" + _LABELS + r")(?![\w-])[^\d\n.;!?]{0,40}?"
    r"(?<![A-Za-z0-9])(?P<value>[A-Za-z]{0,6}\d[A-Za-z0-9]*(?:(?:[-./]|[ ](?=\d))[A-Za-z0-9]+)*)",
    re.IGNORECASE,
)
# A labelled number has at least this many digits ("passport expires 2027" names no number).
MIN_LABELLED_DIGITS = 5


# Every identifier holds this many digits (a labelled one at least MIN_LABELLED_DIGITS, the shapes more):
# a text with fewer is not read further (most messages have none).
_ENOUGH_DIGITS = re.compile(r"\d(?:\D*\d){4}")


def identifier_values(text: str) -> Iterator[tuple[int, str]]:
    """(offset, value) of every sensitive identifier in `text` (NFKC text; as written)."""
    if not _ENOUGH_DIGITS.search(text):
        return
    for match in _LABELLED.finditer(text):
        value = match.group("value")
        if sum(c.isdigit() for c in value) >= MIN_LABELLED_DIGITS:
            yield match.start("value"), value
    for pattern, valid in _UNLABELLED:
        for match in pattern.finditer(text):
            if valid(match.group()):
                yield match.start(), match.group()


def has_identifier(text: str) -> bool:
    return next(identifier_values(text), None) is not None
