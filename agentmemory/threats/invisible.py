"""Invisible and direction-changing characters, and where a joiner or a mark is legitimate.

Checked on the raw text and after NFKC (`scan.py`); the character sets here
are also what folding drops (`folding.py`).
"""
from __future__ import annotations

import re
import unicodedata

ZWNJ, ZWJ = "\u200c", "\u200d"
_DIRECTION_MARKS = frozenset("\u200e\u200f\u061c")  # LRM, RLM, ALM
# Format characters that are visible or required in their scripts
# (Arabic/Syriac number signs and the like).
_ALLOWED_FORMAT = frozenset("\u0600\u0601\u0602\u0603\u0604\u0605\u06dd\u070f\u08e2\U000110bd\U000110cd")
# Invisible characters that Unicode does not class as format characters.
INVISIBLE_OTHER = frozenset("\u034f\u115f\u1160\u3164\uffa0\u2028\u2029\u180e")
_EMOJI_TAG_SEQUENCE = re.compile("\U0001f3f4[\U000e0030-\U000e0039\U000e0061-\U000e007a]{1,6}\U000e007f")
_VARIATION_SELECTOR = re.compile("[\ufe00-\ufe0f\U000e0100-\U000e01ef]")


def has_invisible(text: str) -> bool:
    if text.isascii():
        return False  # ASCII holds no format or invisible characters (controls are refused by the rules)
    # Subdivision flags (England, Scotland, Wales) are built from tag
    # characters; they are the only legitimate use of those characters.
    text = _EMOJI_TAG_SEQUENCE.sub("\U0001f3f4", text)
    rtl = None
    previous_selector = False
    for index, char in enumerate(text):
        selector = bool(_VARIATION_SELECTOR.match(char))
        # One selector picks an emoji or glyph variant; a run of them can
        # smuggle hidden bytes.
        if selector and (previous_selector or index == 0):
            return True
        previous_selector = selector
        if char in INVISIBLE_OTHER:
            return True
        if unicodedata.category(char) != "Cf" or char in _ALLOWED_FORMAT:
            continue
        if char in (ZWJ, ZWNJ) and _joiner_in_context(text, index):
            continue
        if char in _DIRECTION_MARKS:
            if rtl is None:
                rtl = any(
                    unicodedata.bidirectional(c) in ("R", "AL") for c in text if c not in _DIRECTION_MARKS
                )
            if rtl:
                continue
        return True
    return False


def _joiner_in_context(text: str, index: int) -> bool:
    """Return True for a joiner inside an emoji sequence or a non-Latin word.

    ZWJ builds emoji such as a family or a rainbow flag; ZWJ and ZWNJ shape
    words in Persian and Indic scripts. Between ASCII letters they only hide
    a word from a scanner.
    """
    if index == 0 or index == len(text) - 1:
        return False
    before, after = text[index - 1], text[index + 1]
    if text[index] == ZWJ and _is_emoji_part(before) and _is_emoji_part(after):
        return True
    return _is_script_letter(before) and _is_script_letter(after)


def _is_emoji_part(char: str) -> bool:
    code = ord(char)
    return (
        0x1F000 <= code <= 0x1FAFF
        or 0x2190 <= code <= 0x2BFF
        or code in (0xFE0F, 0x00A9, 0x00AE, 0x203C, 0x2049, 0x2122, 0x2139)
    )


def _is_script_letter(char: str) -> bool:
    return ord(char) > 0x7F and unicodedata.category(char)[0] in ("L", "M")
