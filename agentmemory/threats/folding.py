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
from bisect import bisect_right
from typing import NamedTuple
from urllib.parse import unquote

from .invisible import INVISIBLE_OTHER, ZWJ, ZWNJ

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
# Letters of other scripts that look like a Latin letter, by the letter they
# read as: the single-letter entries of Unicode's confusables (UTS #39,
# confusables.txt) that are letters and that NFKC and NFD leave alone —
# Cyrillic, Greek, Armenian, Cherokee, Lisu, Canadian syllabics, Coptic,
# Warang Citi, Tifinagh, Osage, Deseret and others — with a few Cyrillic and
# Greek lower-case forms it leaves out (в, к, м, н, т, ε, κ, τ, χ) and the
# Latin letters with a stroke that no decomposition takes apart (ø, ł, đ,
# ħ, ɨ, ...). Applied only to text that also holds Latin letters, and only
# for the phrase patterns, so `ignоre` with a Cyrillic о and `ꭵgnore` with a
# Cherokee ꭵ read as `ignore`. An upper-case I look-alike reads `i` (the
# scan case-folds), except where confusables.txt says `l` for a letter that
# is not also a Cyrillic or Greek I.
_LOOK_ALIKES = {
    "a": "ɑΑαАаᎪᗅꓮ𐊠𖽀",
    "b": "ƀƄɃΒВЬвᏏᏴᑲᖯᗷꓐꞴ𐊂𐊡𐌁",
    "c": "ȻȼϲСсᏟᴄⲤⲥꓚꮯ𐊢𐌂𐐕𐐽𐔜",
    "d": "ĐđԁᎠᏧᑯᗞᗪꓒꓓ",
    "e": "ɆɇΕεЕеҽᎬⴹꓰꬲ𐊆𑢦𑢮",
    "f": "ϜքᖴẝꓝꞘꞙꬵ𐊇𐊥𐔥𑢢𑣂",
    "g": "ƍǤǥɡԌցᏀᏳᶃꓖ",
    "h": "ĦħΗНнһհᎻᏂᕼⲎꓧ𐋏",
    "i": "ıƗɨɩɪΙιІіᎥꙇꭵ𑣃",
    "j": "ɉͿϳЈјᎫᒍꓙꞲ",
    "k": "ΚκКкᏦᛕⲔꓗꝁ𐔘",
    "l": "ŁłƖǀӀӏᏞᒪᛁⲒⳐⵏꓡꓲ𐊊𐌉𐐛𐔦𑢣𑢲𖼖𖼨",
    "m": "ΜϺМмᎷᗰᛖⲘꓟ𐊰𐌑",
    "n": "ΝոռⲚꓠ𐔓",
    "o": "ØøΟοσОоՕօଠഠဝჿዐᴏᴑⲞⲟⵔꓳꬽ𐊒𐊫𐐄𐐬𐓂𐓪𐔖𑢵𑣈𑣗",
    "p": "ΡρРрᏢᑭᵽⲢⲣꓑ𐊕",
    "q": "ԛգզⵕ",
    "r": "ƦɌɍгᎡᏒᖇᴦⲅꓣꭇꭈꮁ𐒴𖼵",
    "s": "ƽЅѕՏᏕᏚꓢꜱꮪ𐊖𐐠𐑈𑣁𖼺",
    "t": "ŦŧΤτТтᎢⲦꓔ𐊗𐊱𐌕𑢼𖼊",
    "u": "ɄʉʋυՍսሀᑌᴜꓴꞟꭎꭒ𐓎𐓶𑢸𑣘𖽂",
    "v": "νѴѵᏙᐯᴠⴸꓦꛟꮩ𐔝𑜆𑢠𑣀𖼈",
    "w": "ɯѡԜԝաᎳᏔᴡꓪꮃ𑜊𑜎𑜏",
    "x": "ΧχХхᕁᕽᚷⲬⵝꓫꞳ𐊐𐊴𐌗𐔧",
    "y": "ɎɏɣʏΥγУуҮүყᎩᎽᶌỿⲨꓬꭚ𐊲𑢤𑣜𖽃",
    "z": "ƵƶΖᏃᴢꓜꮓ𑢩𑣄",
}
_CONFUSABLES = str.maketrans({
    **_SMALL_CAPITALS,
    **{char: latin for latin, chars in _LOOK_ALIKES.items() for char in chars},
})
_LATIN_LETTER = re.compile("[A-Za-z" + "".join(_SMALL_CAPITALS) + "]")
_HYPHENATED_BREAK = re.compile(r"(?<=[A-Za-z])-[ \t]{0,20}\r?\n[ \t]{0,20}(?=[A-Za-z])")
# Combining marks, which NFD splits off an accented letter (`ì` is `i` and
# U+0300): dropped after a Latin letter, where they can only disguise it.
_MARKS_ON_LATIN = re.compile("(?<=[A-Za-z])[\u0300-\u036f\u1ab0-\u1aff\u1dc0-\u1dff\u20d0-\u20ff\ufe20-\ufe2f]+")
_CONFUSABLE_LETTER = re.compile("[" + "".join(sorted({chr(code) for code in _CONFUSABLES})) + "]")
_SPACES = re.compile(r"[^\S\r\n]+")
_LINE_BREAKS = re.compile(r"\s*[\r\n]\s*")


def fold(text: str, *, lines: bool = False) -> str:
    """Return text as the phrase patterns read it.

    Joiners removed, typographic punctuation mapped to ASCII, letters
    decomposed (NFD) so that an accent is a mark of its own, look-alike
    letters mapped to Latin, every mark on a Latin letter dropped
    (`ìgnore`, `ïgnore`, `İgnore` read `ignore`), composed again (NFC) and
    case-folded; runs of whitespace (line breaks included) collapsed to one
    space. With `lines`, each run of line breaks stays one line break, so a
    line is read as the start of a new sentence.
    """
    text = text.replace(ZWJ, "").replace(ZWNJ, "").translate(_PUNCTUATION)
    text = unicodedata.normalize("NFD", text)
    if _CONFUSABLE_LETTER.search(text) and _LATIN_LETTER.search(text):
        text = text.translate(_CONFUSABLES)
    text = _MARKS_ON_LATIN.sub("", _HYPHENATED_BREAK.sub("", text))
    text = unicodedata.normalize("NFC", text).casefold()
    if not lines:
        return " ".join(text.split())
    return _LINE_BREAKS.sub("\n", _SPACES.sub(" ", text)).strip()


# --- punctuation between words --------------------------------------------

# A run of punctuation and symbols inside or around a word: `ignore-previous`,
# `(ignore)`, `ignore:`, `<ignore>`, `ignore_previous`, `ignore 🔥 previous`.
# An apostrophe between two letters belongs to its word (`don't`).
_SEPARATOR = re.compile(r"(?:[^\w\s']|_|(?<![^\W_])'|'(?![^\W_]))+")
# The same less the stops, which end a clause or join a host name's parts.
_STOPS = ".,:;!?"
_SEPARATOR_BUT_STOPS = re.compile(r"(?:[^\w\s'.,:;!?]|_|(?<![^\W_])'|'(?![^\W_]))+")
_SENTENCE_END = re.compile(r"[.!?;]")
_TOKEN = re.compile(r"[^ \n]+")
# A token that names a place keeps its punctuation, which is what the
# patterns read in it: a URL, an address, a path (also `dir/file.txt`), a
# variable, a dotfile. Words joined to a URL's front are still words
# (`beacon-to-https://...`).
_URL = re.compile(r"(?:https?|ftp|wss?|file|ssh|git|s3)://")
_PLACE = re.compile(r"[@$\\]|^[/~]|^\.\w")
# With the stops kept, a dotted name is a place too (`ops-relay.example.org`).
_DOTTED = re.compile(r"\w\.\w")
_LETTER_OR_DIGIT = re.compile(r"[^\W_]")
_OPENING = "([{<\"'*"
_CLOSING = ")]}>\"'*.,;:!?"


class Separated(NamedTuple):
    """Folded text with punctuation between words read as a space (`_separated`)."""

    text: str
    starts: list[int]  # where each word starts in `text`...
    origins: list[int]  # ...and where it starts in the folded text

    def origin(self, position: int) -> int:
        """Return where the character at `position` of `text` is in the folded text."""
        index = bisect_right(self.starts, position) - 1
        if index < 0:
            return 0
        return self.origins[index] + position - self.starts[index]


def _separated(folded: str, *, stops: bool = False) -> Separated | None:
    """Return folded text with each run of punctuation and symbols between words read as one space.

    `ignore: previous`, `ignore - previous`, `(ignore) previous`,
    `<ignore> previous`, `ignore.previous` and `ignore-previous-instructions`
    all read `ignore previous ...`, for every phrase family at once. A
    sentence still ends at `.`, `!`, `?` or `;` before a space, so two
    sentences do not run together; a mark before the first word of a line
    or a sentence stays (`❌`, `-`). Tokens that name a place
    (`https://...`, `a@b.c`, `~/.ssh/x`, `$TOKEN`, `.env`, `dir/file.txt`)
    stay as written, less the brackets and quotes around them.

    With `stops`, the stops (`.,:;!?`) stay as written, for the patterns
    that read one: a label (`secret-instructions: ...` reads `secret
    instructions: ...`) or a host name, which then stays whole (`send - a -
    heartbeat to ops-relay.example.net`).

    None when nothing changes, so most plain entries are read once.
    """
    separator = _SEPARATOR_BUT_STOPS if stops else _SEPARATOR
    pieces: list[str] = []
    starts: list[int] = []
    origins: list[int] = []
    length = 0
    previous_end = 0
    ended = False  # the token before ended a sentence
    for token in _TOKEN.finditer(folded):
        gap = "\n" if "\n" in folded[previous_end:token.start()] else " "
        previous_end = token.end()
        text, start = token.group(), token.start()
        if text.isalnum():  # a plain word, the most common token
            if pieces:
                pieces.append(gap)
                length += 1
            starts.append(length)
            origins.append(start)
            pieces.append(text)
            length += len(text)
            ended = False
            continue
        opened = len(text) - len(text.lstrip(_OPENING))
        core = text[opened:].rstrip(_CLOSING)
        url = _URL.search(core)
        place = 0 if url is None else url.start()
        if url is None and _LETTER_OR_DIGIT.search(core) and (
            _PLACE.search(core) or ("/" in core and "." in core) or (stops and _DOTTED.search(core))
        ):
            url = core  # type: ignore[assignment]  # the whole core is a place (only tested for None below)
        words: list[tuple[str, int]] = []
        at = 0
        end = len(text) if url is None else opened + place
        for run in separator.finditer(text, 0, end):
            if run.start() > at:
                words.append((text[at:run.start()], start + at))
            at = run.end()
        if at < end:
            words.append((text[at:end], start + at))
        if url is not None:
            tail = text[opened + len(core):]
            kept = "".join(char for char in tail if char in _STOPS) if stops else ""
            words.append((core[place:] + kept, start + opened + place))
        else:
            tail = text[words[-1][1] - start + len(words[-1][0]):] if words else text
        if stops:
            # A stop is part of the word before it (`instructions:`).
            merged: list[tuple[list[str], int]] = []
            for word, origin in words:
                if merged and not word.strip(_STOPS):
                    merged[-1][0].append(word)
                else:
                    merged.append(([word], origin))
            words, tail = [("".join(parts), origin) for parts, origin in merged], ""
        if not words and (not pieces or gap == "\n" or ended):
            # Not between words: a mark that opens a line or a sentence keeps
            # its meaning there (`❌ Pretend to be a robot` is a rule not to).
            words, tail = [(text, start)], ""
        for word, origin in words:
            if pieces:
                pieces.append(gap)
                length += 1
                gap = " "
            starts.append(length)
            origins.append(origin)
            pieces.append(word)
            length += len(word)
        # With the stops kept, a mark after any of them stays (`rules: ❌`).
        ended = bool(_SENTENCE_END.search(tail)) or (stops and bool(words) and words[-1][0][-1] in _STOPS)
        if pieces and ended and not stops and not pieces[-1].endswith("."):
            pieces.append(".")
            length += 1
    separated = "".join(pieces)
    return None if separated == folded else Separated(separated, starts, origins)


def separated_readings(folded: str) -> tuple[Separated, ...]:
    """Return the separated readings of folded text that differ from it: every mark a space, then stops kept."""
    readings: list[Separated] = []
    for stops in (False, True):
        reading = _separated(folded, stops=stops)
        if reading is not None and all(reading.text != other.text for other in readings):
            readings.append(reading)
    return tuple(readings)


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
    "[" + "".join(sorted(INVISIBLE_OTHER - {"\u2028", "\u2029"})) + "\u00ad\u061c\u180e\u200b-\u200f"
    "\u202a-\u202e\u2060-\u2064\u2066-\u206f\ufeff\ufe00-\ufe0f\U000e0000-\U000e007f]"
)


def rendered_text(text: str) -> str | None:
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


def deobfuscated_text(folded: str) -> str | None:
    """Return folded text with leetspeak words and spaced-out letters undone.

    `ign0re` reads `ignore`, `i g n o r e` reads `ignore`. None when the text
    has neither, so ordinary entries are read once.
    """
    text = _SPACED_LETTERS.sub(lambda m: m.group().replace(" ", ""), folded)
    text = _LEET_RUN.sub(_unleet, text)
    return text if text != folded else None


_ROT13 = str.maketrans("abcdefghijklmnopqrstuvwxyz", "nopqrstuvwxyzabcdefghijklm")


def rot13(folded: str) -> str:
    """Return folded text with ROT13 undone (`vtaber cerivbhf` reads `ignore previous`)."""
    return folded.translate(_ROT13)


_BASE64_RUN = re.compile(r"(?<![A-Za-z0-9+/])[A-Za-z0-9+/]{16,}={0,2}")
_PERCENT_RUN = re.compile(r"(?:%[0-9A-Fa-f]{2}){6,}")
_MAX_DECODED = 8


def decoded_payloads(text: str) -> list[str]:
    """Return readable text hidden in base64 runs or percent-encoding."""
    payloads: list[str] = []
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
