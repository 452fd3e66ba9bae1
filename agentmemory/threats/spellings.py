"""Every spelling of a secret value: the forms it is looked for in, and the views an entry is read in.

A value a message gave as a secret must not reach memory however it is
re-spelled: separators changed or dropped, another case, underscores,
reversed, hex, base64 (standard or URL-safe, padded or not, alone or inside
a longer base64 run), URL-encoded, or its digits spelled out ("four eight two
one", "vier acht zwei eins"). Both sides are brought to one canonical form
(NFKC, case folded, everything but letters and digits left out), so most
re-spellings are the same string; the encodings of a value are computed once
(`Spellings.of`, per turn), an entry's views once per entry (`entry_views`),
and a match is a substring test. Pure: no Django, nothing logged.
"""
from __future__ import annotations

import base64
import re
import unicodedata
from collections.abc import Iterable
from dataclasses import dataclass
from urllib.parse import unquote_plus

# A canonical value shorter than this is not looked for: three letters or digits turn up in ordinary text.
MIN_CANONICAL = 4
# Reversed, a short value reads as something else too often ("2021" is "1202" reversed).
MIN_REVERSED = 6
# An encoded form shorter than this is not looked for (a base64 run of a few characters is any word).
MIN_ENCODED = 6
# Parts of a value: runs of half its canonical length, and at least this many characters, found inside one
# word of the entry (across two, half of "swordfish99" is in "password field").
MIN_FRAGMENT = 5

_NOT_ALNUM = re.compile(r"[\W_]+")


def canonical(text: str) -> str:
    """Return `text` as values are compared: NFKC, case folded, only its letters and digits."""
    return _NOT_ALNUM.sub("", unicodedata.normalize("NFKC", text).casefold())


# Digits as words, in the languages the gate reads (en, de, fr, es, it, pt, nl). No word means two digits.
_DIGIT_WORDS = {
    "0": "zero zéro cero nul null",
    "1": "one eins un une uno una um uma een één",
    "2": "two zwei zwo deux dos due dois duas twee",
    "3": "three drei trois tres três tre drie",
    "4": "four vier quatre cuatro quattro quatro",
    "5": "five fünf fuenf cinq cinco cinque vijf",
    "6": "six sechs seis sei zes",
    "7": "seven sieben sept siete sette sete zeven",
    "8": "eight acht huit ocho otto oito",
    "9": "nine neun neuf nueve nove negen",
}
_DIGIT_OF = {word: digit for digit, words in _DIGIT_WORDS.items() for word in words.split()}
_DIGIT_WORD = re.compile(r"(?<!\w)(?:" + "|".join(sorted(_DIGIT_OF, key=len, reverse=True)) + r")(?!\w)",
                         re.IGNORECASE)


def spelled_digits(text: str) -> str | None:
    """Return `text` with digits written as words turned into digits, or None when it has none."""
    if not _DIGIT_WORD.search(text):
        return None
    return _DIGIT_WORD.sub(lambda match: _DIGIT_OF[match.group().lower()], text)


def entry_views(entry: str) -> tuple[str, ...]:
    """The canonical readings of an entry: as written, URL-decoded (when it has a `%`), digits from words."""
    views = [canonical(entry)]
    if "%" in entry:
        decoded = canonical(unquote_plus(entry))
        if decoded != views[0]:
            views.append(decoded)
    spelled = spelled_digits(entry)
    if spelled is not None:
        views.append(canonical(spelled))
    return tuple(view for view in views if view)


def _words_view(entry: str) -> str:
    """The entry's words, each canonical, apart (a part of a value is looked for inside one word)."""
    texts = (entry, unquote_plus(entry)) if "%" in entry else (entry,)
    return "\n".join(canonical(word) for text in texts for word in text.split())


# A run of digits, in groups ("48 21", "12-34-56", "4.8.2.1"); the groups of a phone number are one run too.
_DIGIT_RUN = re.compile(r"\d+(?:[ \t.\-/:]?\d+)*")


def entry_numbers(entry: str) -> set[str]:
    """The runs of digits of an entry, without their separators, as written and with digits from words."""
    texts = [entry]
    if "%" in entry:
        texts.append(unquote_plus(entry))
    spelled = spelled_digits(entry)
    if spelled is not None:
        texts.append(spelled)
    runs = (_DIGIT_RUN.findall(unicodedata.normalize("NFKC", text)) for text in texts)
    return {_NOT_ALNUM.sub("", run) for found in runs for run in found}


def _base64_forms(raw: bytes) -> list[str]:
    """The base64 of `raw`, whole and as it reads inside a longer base64 run.

    Inside a longer run the value starts at one of three offsets within a
    3-byte group; for each, the characters that depend on the value's bytes
    alone are the ones looked for. Standard and URL-safe base64 differ only
    in `+/` and `-_`, and padding is `=`: the canonical form drops all of them.
    """
    forms = [canonical(base64.b64encode(raw).decode("ascii"))]
    for shift in range(3):
        encoded = base64.b64encode(bytes(shift) + raw).decode("ascii").rstrip("=")
        first = -(-8 * shift // 6)  # the first character made of the value's bits only
        last = (8 * (shift + len(raw))) // 6  # characters before this one hold no bit after the value
        forms.append(canonical(encoded[first:last]))
    return forms


@dataclass(frozen=True)
class Spellings:
    """The forms of a turn's secret values, computed once: what `found_in` looks for in an entry."""

    forms: tuple[str, ...] = ()
    fragments: tuple[str, ...] = ()
    numbers: frozenset[str] = frozenset()  # values that are digits only: matched as a whole run of digits

    @classmethod
    def of(cls, values: Iterable[str]) -> Spellings:
        forms: dict[str, None] = {}  # ordered, without repeats
        fragments: dict[str, None] = {}
        numbers: dict[str, None] = {}
        for value in values:
            plain = canonical(value)
            if len(plain) < MIN_CANONICAL:
                continue
            if plain.isdigit():
                # A number is matched as a whole run of digits ("48 21", "four eight two one"), not inside a
                # longer one: a phone number's groups run together in the canonical form.
                numbers.setdefault(plain)
                if len(plain) >= MIN_REVERSED:
                    numbers.setdefault(plain[::-1])
            else:
                forms.setdefault(plain)
                if len(plain) >= MIN_REVERSED:
                    forms.setdefault(plain[::-1])
            for raw in {value.encode("utf-8"), plain.encode("utf-8")}:
                for form in (canonical(raw.hex()), *_base64_forms(raw)):
                    if len(form) >= MIN_ENCODED:
                        forms.setdefault(form)
            size = max(MIN_FRAGMENT, -(-len(plain) // 2))
            for start in range(len(plain) - size + 1) if len(plain) > size and not plain.isdigit() else ():
                fragments.setdefault(plain[start:start + size])
        return cls(tuple(forms), tuple(fragment for fragment in fragments if fragment not in forms),
                   frozenset(numbers))

    def __bool__(self) -> bool:
        return bool(self.forms or self.numbers)

    def found_in(self, entry: str) -> bool:
        """True when the entry holds one of the values, whole or in part, in any of its spellings."""
        if not entry or not (self.forms or self.numbers):
            return False
        if self.forms:
            for view in entry_views(entry):
                if any(form in view for form in self.forms):
                    return True
            if self.fragments:
                words = _words_view(entry)
                if any(part in words for part in self.fragments):
                    return True
        return bool(self.numbers) and not self.numbers.isdisjoint(entry_numbers(entry))
