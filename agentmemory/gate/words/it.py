"""Italian: the words to remember and forget, negation, and the labels of secrets (no other rule yet)."""
from __future__ import annotations

import re

CODE = "it"
FUNCTION_WORDS = frozenset(
    "io mi me mio mia miei mie noi ci nostro nostra nostri tu ti te tuo tua lei lui il lo la i gli le un uno una "
    "e o ma che chi cosa è sono sei era con per in di del della dei al alla da dal su non mai nessun nessuna "
    "già molto anche sempre sì grazie questo questa quello come perché più ho hai ha abbiamo".split()
)
SECRET_LABELS = ("password", "parola d'ordine", "codice", "pin", "codice pin", "combinazione", "segreto", "token",
                 "chiave api", "domanda di sicurezza", "risposta di sicurezza", "credenziali")
NEGATION = ("non", "mai", "nessun", "nessuna", "nessuno", "senza", "né", "non più")
CONTRAST = ("invece di", "anziché", "piuttosto che", "che", "non", "mai", "senza", "né", "contro")
REMEMBER = re.compile(
    r"\b(?:ricorda|ricordati|ricordi|memorizza|annota|prendi nota|tieni a mente|non dimenticare|"
    r"d'ora in poi|da ora in poi|da adesso in poi|in futuro)\b",
    re.IGNORECASE,
)
FORGET = re.compile(r"\b(?:dimentica|dimenticati)\b|\b(?:cancella|elimina)\w*\b.{0,40}\bmemoria\b", re.IGNORECASE)
REMEMBER_LEAD = re.compile(
    r"^\W*(?:per favore,?\s+)?(?:ricorda(?:ti)?|memorizza|annota|prendi nota|tieni a mente|non dimenticare)\b"
    r"\s*[:,-]?\s*(?:che\s+)?",
    re.IGNORECASE,
)
