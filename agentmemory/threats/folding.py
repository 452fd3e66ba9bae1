"""Reading text the way a model would: folded, rendered, de-obfuscated, decoded.

Each function returns a view of the text for the phrase patterns to read;
none decides anything. The stored text stays as written.
"""
from __future__ import annotations

import binascii
import html
import re
import unicodedata
from base64 import b64decode
from urllib.parse import unquote

from .invisible import _INVISIBLE_OTHER, _ZWJ, _ZWNJ

# Typographic quotes and dashes read as their ASCII forms.
_PUNCTUATION = str.maketrans({
    "\u2018": "'", "\u2019": "'", "\u02bc": "'", "\u2032": "'", "\u00b4": "'", "\u0060": "'",
    "\u201c": '"', "\u201d": '"', "\u201e": '"', "\u00ab": '"', "\u00bb": '"',
    "\u2010": "-", "\u2011": "-", "\u2012": "-", "\u2013": "-", "\u2014": "-", "\u2212": "-",
})
_SMALL_CAPITALS = {
    "ᴀ": "a", "ʙ": "b", "ᴄ": "c", "ᴅ": "d", "ᴇ": "e", "ꜰ": "f", "ɢ": "g", "ʜ": "h", "ɪ": "i", "ᴊ": "j",
    "ᴋ": "k", "ʟ": "l", "ᴍ": "m", "ɴ": "n", "ᴏ": "o", "ᴘ": "p", "ꞯ": "q", "ʀ": "r", "ꜱ": "s", "ᴛ": "t",
    "ᴜ": "u", "ᴠ": "v", "ᴡ": "w", "ʏ": "y", "ᴢ": "z",
}
# Cyrillic, Greek and Armenian letters that look like Latin ones (after
# NFKC, which already folds fullwidth and mathematical letters). Applied only
# to text that also holds Latin letters, and only for the phrase patterns,
# so `ignоre` with a Cyrillic о reads as `ignore`.
_CONFUSABLES = str.maketrans({
    "а": "a", "в": "b", "е": "e", "ё": "e", "к": "k", "м": "m", "н": "h", "о": "o", "р": "p",
    "с": "c", "т": "t", "у": "y", "х": "x", "і": "i", "ї": "i", "ј": "j", "ѕ": "s", "ԁ": "d",
    "ԛ": "q", "ԝ": "w", "һ": "h", "ӏ": "l", "ɡ": "g", "ɑ": "a", "ı": "i",
    "А": "A", "В": "B", "Е": "E", "К": "K", "М": "M", "Н": "H", "О": "O", "Р": "P", "С": "C",
    "Т": "T", "Х": "X", "У": "Y", "І": "I", "Ј": "J", "Ѕ": "S",
    "α": "a", "ο": "o", "ρ": "p", "ε": "e", "ι": "i", "κ": "k", "ν": "v", "τ": "t", "υ": "u",
    "χ": "x", "ϲ": "c", "Α": "A", "Β": "B", "Ε": "E", "Ζ": "Z", "Η": "H", "Ι": "I", "Κ": "K",
    "Μ": "M", "Ν": "N", "Ο": "O", "Ρ": "P", "Τ": "T", "Υ": "Y", "Χ": "X",
    "օ": "o", "ս": "u", "հ": "h", "ց": "g", "ո": "n",
    # Latin small capitals (`ɪɢɴᴏʀᴇ`), which NFKC leaves alone.
    **_SMALL_CAPITALS,
})
_LATIN_LETTER = re.compile("[A-Za-z" + "".join(_SMALL_CAPITALS) + "]")
_HYPHENATED_BREAK = re.compile(r"(?<=[A-Za-z])-[ \t]{0,20}\r?\n[ \t]{0,20}(?=[A-Za-z])")
_MARKS_ON_LATIN = re.compile("(?<=[A-Za-z])[\u0300-\u036f]+")
_CONFUSABLE_LETTER = re.compile("[" + "".join(sorted(chr(code) for code in _CONFUSABLES if code > 0x7F)) + "]")
_SPACES = re.compile(r"[^\S\r\n]+")
_LINE_BREAKS = re.compile(r"\s*[\r\n]\s*")


def _fold(text: str, *, lines: bool = False) -> str:
    """Return text as the phrase patterns read it.

    Case-folded, joiners removed, typographic punctuation and look-alike
    letters mapped to ASCII, runs of whitespace (line breaks included)
    collapsed to one space. With `lines`, each run of line breaks stays one
    line break, so a line is read as the start of a new sentence.
    """
    text = text.replace(_ZWJ, "").replace(_ZWNJ, "").translate(_PUNCTUATION)
    text = _MARKS_ON_LATIN.sub("", _HYPHENATED_BREAK.sub("", text))
    if _CONFUSABLE_LETTER.search(text) and _LATIN_LETTER.search(text):
        text = text.translate(_CONFUSABLES)
    if not lines:
        return " ".join(text.casefold().split())
    return _LINE_BREAKS.sub("\n", _SPACES.sub(" ", text.casefold())).strip()


# --- markup, as a reader of the rendered text sees it -------------------------

# Characters without which text holds no markup worth rendering.
_MARKUP = re.compile(r"[*_~`<&\[\\]")
_ESCAPED = re.compile(r"\\([!-/:-@\[-`{-~])")
_HTML_COMMENT = re.compile(r"<!--.*?(?:-->|$)", re.DOTALL)
_TAG = re.compile(r"</?([a-z][a-z0-9-]{0,30})(?:\s[^<>]{0,500})?/?>", re.IGNORECASE)
# Inline elements render inside a line (`<b>ig</b>nore` reads `ignore`);
# every other element breaks the line.
_INLINE_ELEMENTS = frozenset(
    "a abbr acronym b bdi bdo big cite code data del dfn em font i ins kbd mark q s samp small span strike strong "
    "sub sup time tt u var wbr".split()
)
_LINK = re.compile(r"!?\[([^\[\]\n]{0,500})\](?:\([^()\n]{0,1000}\)|\[[^\[\]\n]{0,200}\])")
_CODE_TICKS = re.compile(r"`+")
# Emphasis delimiters: a run of `*` that touches a word (not a bullet or a
# `2 * 3`), `~~`, and a run of `_` at the edge of a word (not `snake_case`).
_EMPHASIS = re.compile(r"\*+(?=\S)|(?<=\S)\*+|~~+|(?<![^\W_])_+(?=\S)|(?<=\S)_+(?![^\W_])")
_INVISIBLE_OR_FORMAT = re.compile(
    "[" + "".join(sorted(_INVISIBLE_OTHER - {"\u2028", "\u2029"})) + "\u00ad\u061c\u180e\u200b-\u200f"
    "\u202a-\u202e\u2060-\u2064\u2066-\u206f\ufeff\ufe00-\ufe0f\U000e0000-\U000e007f]"
)


def _rendered(text: str) -> str | None:
    """Return `text` as it reads once its markdown and HTML are rendered, or None if it has none.

    Emphasis (`**x**`, `*x*`, `__x__`, `_x_`, `~~x~~`), code spans, links
    and images (their text), HTML comments and tags, backslash escapes and
    character references (`&#105;`, `&shy;`) are folded; invisible
    characters a reference produced are dropped. One layer only: what a
    reference decodes to is not decoded again.
    """
    if not _MARKUP.search(text):
        return None
    rendered = _ESCAPED.sub(r"\1", text)
    rendered = _HTML_COMMENT.sub("", rendered)
    rendered = _TAG.sub(lambda m: "" if m.group(1).lower() in _INLINE_ELEMENTS else "\n", rendered)
    rendered = _LINK.sub(r"\1", rendered)
    rendered = _EMPHASIS.sub("", _CODE_TICKS.sub("", rendered))
    if "&" in rendered:
        decoded = html.unescape(rendered)
        if decoded != rendered:
            decoded = unicodedata.normalize("NFKC", decoded).replace("\u2028", "\n").replace("\u2029", "\n")
            rendered = _INVISIBLE_OR_FORMAT.sub("", decoded)
    return rendered if rendered != text else None


_LEET = str.maketrans({"0": "o", "1": "i", "3": "e", "4": "a", "5": "s", "7": "t", "@": "a", "$": "s"})
_LEET_RUN = re.compile(r"[a-z0-9@$]{3,}")
_LEET_INSIDE = re.compile(r"[a-z][013457@$]+[a-z]")
_SPACED_LETTERS = re.compile(r"\b(?:[a-z] ){3,}[a-z]\b")


def _unleet(match: re.Match[str]) -> str:
    word = match.group()
    if not _LEET_INSIDE.search(word):
        return word
    return word.translate(_LEET)


def _deobfuscated(folded: str) -> str | None:
    """Return folded text with leetspeak words and spaced-out letters undone.

    `ign0re` reads `ignore`, `i g n o r e` reads `ignore`. None when the text
    has neither, so ordinary entries are read once.
    """
    text = _SPACED_LETTERS.sub(lambda m: m.group().replace(" ", ""), folded)
    text = _LEET_RUN.sub(_unleet, text)
    return text if text != folded else None


_BASE64_RUN = re.compile(r"(?<![A-Za-z0-9+/])[A-Za-z0-9+/]{16,}={0,2}")
_PERCENT_RUN = re.compile(r"(?:%[0-9A-Fa-f]{2}){6,}")
_MAX_DECODED = 8


def _decoded_payloads(text: str) -> list[str]:
    """Return readable text hidden in base64 runs or percent-encoding."""
    payloads = []
    for match in _BASE64_RUN.finditer(text):
        if len(payloads) >= _MAX_DECODED:
            break
        run = match.group()
        run += "=" * (-len(run) % 4)
        try:
            raw = b64decode(run, validate=True)
        except (binascii.Error, ValueError):
            continue
        try:
            decoded = raw.decode("utf-8")
        except UnicodeDecodeError:
            continue
        if " " in decoded and sum(c.isprintable() for c in decoded) >= 0.95 * len(decoded):
            payloads.append(decoded)
    if _PERCENT_RUN.search(text):
        payloads.append(unquote(text))
    return payloads
