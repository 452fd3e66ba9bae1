"""Which language a short chat message is in, among those the gate has words for, or "unknown".

Function-word scoring: each language module's `FUNCTION_WORDS` (and a
few distinctive letters) vote, and a few languages the gate has no words
for vote too, so that their messages come out "unknown" instead of as the
nearest shipped language. A message too short or too technical to tell
("ok", a line of code) is English, whose rules are the strictest we have;
a longer one that no list recognises is "unknown", and the gate asks
before saving anything the person did not explicitly ask for. Pure, no
model, about 10-30 microseconds a message (docs/benchmarks.md, "Gate").
"""
from __future__ import annotations

import re
from functools import lru_cache

from .words import LANGUAGES

UNKNOWN = "unknown"
# A message with no function word of any language and at most this many words is read as English.
SHORT_WORDS = 4

# Languages we ship no words for: their frequent words, so their messages are told apart.
_OTHERS: dict[str, frozenset[str]] = {
    code: frozenset(words.split()) for code, words in {
        "pl": "i w z na się nie to jest że do jak ale jestem mam moje mój moja czy tak już są być od po dla "
              "ze przez mnie mi ja my nasz nasza nasze zawsze nigdy też tylko bardzo proszę dziękuję teraz",
        "sv": "jag och att det som en ett är på med för inte har av till den om vi min mitt mina vår vårt "
              "våra du så men alltid aldrig också bara mycket tack nu kan ska vill jobbar",
        "da": "jeg og at det som en et er på med for ikke har af til den om vi min mit mine vores du så men "
              "altid aldrig også kun meget tak nu kan skal vil arbejder",
        "no": "jeg og at det som en et er på med for ikke har av til den om vi min mitt mine vår vårt du så "
              "men alltid aldri også bare veldig takk nå kan skal vil jobber",
        "tr": "ve bir bu da de ben benim bizim için ile çok değil ne var mı mi yok ama gibi daha her şey "
              "olarak sonra kadar hep asla lütfen teşekkürler şimdi çalışıyorum kullanıyorum",
        "cs": "a v na se je že to jsem mám můj moje moji není jak ale do od po pro s z jsme náš naše vždy "
              "nikdy také jen velmi prosím děkuji teď",
        "ro": "și în la cu pe că nu este sunt eu meu mea noi nostru noastră dar pentru din de mai foarte "
              "întotdeauna niciodată mulțumesc acum",
        "id": "dan yang di ke dari ini itu saya aku kami kita tidak bukan ada untuk dengan juga sudah akan "
              "selalu tidak pernah terima kasih sekarang",
    }.items()
}
# Letters that only a few languages use, and which they are.
_LETTERS: dict[str, tuple[str, ...]] = {
    "ß": ("de",), "ä": ("de", "sv"), "ö": ("de", "sv", "tr"), "ü": ("de", "tr"),
    "ñ": ("es",), "¿": ("es",), "¡": ("es",), "ã": ("pt",), "õ": ("pt",), "ç": ("fr", "pt", "tr"),
    "œ": ("fr",), "è": ("fr", "it"), "ê": ("fr", "pt"), "à": ("fr", "it", "pt"), "ì": ("it",), "ò": ("it",),
    "ą": ("pl",), "ę": ("pl",), "ł": ("pl",), "ś": ("pl",), "ź": ("pl",), "ż": ("pl",), "ń": ("pl",),
    "å": ("sv", "da", "no"), "æ": ("da", "no"), "ø": ("da", "no"), "ğ": ("tr",), "ı": ("tr",), "ş": ("tr", "ro"),
    "ř": ("cs",), "ě": ("cs",), "ů": ("cs",), "ă": ("ro",), "ț": ("ro",), "î": ("ro", "fr"),
}
_VOTERS: dict[str, frozenset[str]] = {code: module.FUNCTION_WORDS for code, module in LANGUAGES.items()} | _OTHERS
_TOKEN = re.compile(r"[^\W\d_]+(?:['’][^\W\d_]+)*")
_CODE_MARK = re.compile(r"[(){}\[\]=;<>$#]|\w_\w|\w\.\w+\(")
_CODE_SPAN = re.compile(r"```.*?(?:```|$)|`[^`\n]*`|https?://\S+", re.DOTALL)


@lru_cache(maxsize=256)
def detect(text: str) -> str:
    """Return the code of the message's language ("en", "de", "fr", "es", "it", "pt", "nl") or "unknown"."""
    prose = _CODE_SPAN.sub(" ", text or "").lower()
    tokens = _TOKEN.findall(prose)
    if not tokens:
        return "en"
    scores = dict.fromkeys(_VOTERS, 0.0)
    for token in tokens:
        token = token.replace("’", "'")
        elided = token.split("'", 1)[0] + "'" if "'" in token else ""
        for code, words in _VOTERS.items():
            if token in words or (elided and elided in words):
                scores[code] += 1
    for letter in set(prose) & _LETTERS.keys():
        for code in _LETTERS[letter]:
            scores[code] += 1 / len(_LETTERS[letter])
    best = max(scores.values())
    if best == 0:
        # Too short to tell, or code ("def f(x): return x"): English, whose rules are the strictest.
        return "en" if len(tokens) <= SHORT_WORDS or _CODE_MARK.search(prose) else UNKNOWN
    tied = [code for code, score in scores.items() if score == best]
    if len(tied) > 1:
        # A command to remember or forget is said in one language: it breaks a tie ("Recuerda que ...").
        said = [code for code in tied if code in LANGUAGES
                and (LANGUAGES[code].REMEMBER.search(prose) or LANGUAGES[code].FORGET.search(prose))]
        tied = said or tied
    # Other ties go to the language listed first (English, then German, ...): the stricter rules.
    code = tied[0]
    return code if code in LANGUAGES else UNKNOWN
