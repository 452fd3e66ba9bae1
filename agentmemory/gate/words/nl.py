"""Dutch: the words to remember and forget, negation, and the labels of secrets (no other rule yet)."""
from __future__ import annotations

import re

CODE = "nl"
FUNCTION_WORDS = frozenset(
    "ik me mij mijn wij we ons onze jij je jou jouw u uw hij zij ze het de een en of maar dat die wat wie is zijn "
    "ben was waren met voor in op van aan bij naar uit niet geen nooit al ook nog heel altijd ja nee dank bedankt "
    "dit deze hoe waarom heb heeft hebben kan kun wil moet er".split()
)
SECRET_LABELS = ("wachtwoord", "code", "pincode", "pin", "combinatie", "geheim", "token", "api-sleutel",
                 "beveiligingsvraag", "beveiligingsantwoord", "inloggegevens")
NEGATION = ("niet", "nooit", "geen", "zonder", "noch", "niet meer")
CONTRAST = ("in plaats van", "liever dan", "dan", "niet", "nooit", "geen", "zonder", "noch", "tegen")
REMEMBER = re.compile(
    r"\b(?:onthoud|onthou|onthoudt|memoriseer|noteer|vergeet niet|houd? (?:in gedachten|rekening met)|"
    r"sla (?:dit|op)|vanaf nu|voortaan|in de toekomst)\b",
    re.IGNORECASE,
)
FORGET = re.compile(r"\bvergeet\b(?! niet)|\b(?:verwijder|wis)\w*\b.{0,40}\bgeheugen\b", re.IGNORECASE)
REMEMBER_LEAD = re.compile(
    r"^\W*(?:alsjeblieft,?\s+)?(?:onthoud|onthou|noteer|vergeet niet)\b\s*[:,-]?\s*(?:dat\s+)?",
    re.IGNORECASE,
)
