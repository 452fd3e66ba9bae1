"""The scan itself: which checks run on an entry, on which views of it, in which order.

The checks live beside it (invisible characters, hidden markup, phrases,
credentials) and read the text as `folding.py` prepares it; this module only
decides the order and returns the first finding. Stored entries are re-scanned
through a cache (`is_blocked`).
"""
from __future__ import annotations

import unicodedata
from functools import lru_cache
from re import Pattern

from .credentials import SECRET_SHAPES, has_secret
from .findings import HIDDEN_CONTENT, INVISIBLE_UNICODE, MAX_SCAN_CHARS, OVERSIZED, SECRET, ThreatFinding
from .folding import Separated, decoded_payloads, deobfuscated_text, fold, rendered_text, rot13, separated_readings
from .hidden import has_hidden_markup
from .invisible import has_invisible
from .phrases import LINE_PHRASES, PHRASES, match_phrases


def scan_entry(text: str) -> ThreatFinding | None:
    """Return the first finding for `text`, or None when it may be stored."""
    if len(text) > MAX_SCAN_CHARS:
        return ThreatFinding(OVERSIZED)
    # Checked on the raw text and again after NFKC, so that compatibility
    # folding can neither hide nor introduce an invisible character.
    if has_invisible(text):
        return ThreatFinding(INVISIBLE_UNICODE)
    compatible = unicodedata.normalize("NFKC", text)
    if has_invisible(compatible):
        return ThreatFinding(INVISIBLE_UNICODE)
    views = entry_views(compatible)
    for view in views:
        for pattern in SECRET_SHAPES:
            if pattern.search(view):
                return ThreatFinding(SECRET)
    if has_hidden_markup(compatible):
        return ThreatFinding(HIDDEN_CONTENT)
    category = phrase_category(compatible, views)
    if category is not None:
        return ThreatFinding(category)
    if any(has_secret(view) for view in views):
        return ThreatFinding(SECRET)
    return None


def entry_views(compatible: str) -> tuple[str, ...]:
    """Return the NFKC text as written and — when it holds markup — as a reader sees it rendered.

    `**ignore** previous` reads `ignore previous` to the model too. The
    stored text stays as written; only these views are folded.
    """
    rendered = rendered_text(compatible)
    return (compatible,) if rendered is None else (compatible, rendered)


def phrase_category(compatible: str, views: tuple[str, ...]) -> str | None:
    """Return the category of the first phrase found in any view of the NFKC text, or None."""
    for view in views:
        category = _read_phrases(view)
        if category is not None:
            return category
    # Text smuggled in base64 or percent-encoding is decoded once and read
    # with the same phrases.
    for decoded in decoded_payloads(compatible):
        folded = fold(unicodedata.normalize("NFKC", decoded))
        category = _read_folded(folded, separated_readings(folded))
        if category is not None:
            return category
    return None


def _read_phrases(view: str) -> str | None:
    """Return the category of the first phrase found in one view of the text, or None.

    Read three ways: with every line break collapsed (a phrase may be split
    across lines), line by line (a line starts a new order, whatever the line
    before it said: a negation on one line does not cover the next), and with
    leetspeak and spaced-out letters undone. Each is also read with
    punctuation between words as a space (`ignore: previous`,
    `ignore-previous-instructions`; `folding._separated`). Last, the folded
    text is read with ROT13 undone.
    """
    folded = fold(view)
    separations = separated_readings(folded)
    category = _read_folded(folded, separations)
    if category is None and ("\n" in view or "\r" in view):
        lined = fold(view, lines=True)
        category = _read_folded(lined, separated_readings(lined), LINE_PHRASES)
    if category is None:
        # Leetspeak and spaced letters on the text as written and with every
        # mark a space (`i.g.n.o.r.e`); the stops kept add nothing there.
        for text in (folded, *(reading.text for reading in separations[:1])):
            if (deobfuscated := deobfuscated_text(text)) is not None:
                category = match_phrases(deobfuscated)
                if category is not None:
                    break
    if category is None:
        category = match_phrases(rot13(folded))
    return category


def _read_folded(
    folded: str, separations: tuple[Separated, ...], phrases: tuple[tuple[str, Pattern[str], bool], ...] = PHRASES,
) -> str | None:
    """Return the category of the first phrase in folded text, as written or separated."""
    category = match_phrases(folded, phrases)
    for reading in separations:
        if category is not None:
            break
        category = match_phrases(reading.text, phrases, (folded, reading))
    return category


# Every stored entry is re-scanned on every turn that renders it, yet the scan
# is pure and the entries rarely change, so the verdict is cached per entry
# text. Bounded: at most this many stored entries (each within a document's
# limit, a few KB), least recently used out first. Patterns only change with
# a deploy, which restarts the process and so empties the cache.
BLOCKED_CACHE_SIZE = 4096


@lru_cache(maxsize=BLOCKED_CACHE_SIZE)
def is_blocked(entry: str) -> str | None:
    """Return the category a stored entry now matches, or None.

    Patterns change after entries were stored; a match keeps the entry out of
    the prompt while the person still sees it and can remove it.
    """
    finding = scan_entry(entry)
    return finding.category if finding else None
