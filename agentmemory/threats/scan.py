"""The scan itself: which checks run on an entry, on which views of it, in which order.

The checks live beside it (invisible characters, hidden markup, phrases,
credentials) and read the text as `folding.py` prepares it; this module only
decides the order and returns the first finding. Stored entries are re-scanned
through a cache (`is_blocked`).
"""
from __future__ import annotations

import unicodedata
from functools import lru_cache

from .credentials import _SECRET_SHAPES, _has_secret
from .findings import HIDDEN_CONTENT, INVISIBLE_UNICODE, MAX_SCAN_CHARS, OVERSIZED, SECRET, ThreatFinding
from .folding import _decoded_payloads, _deobfuscated, _fold, _rendered
from .hidden import _has_hidden_markup
from .invisible import _has_invisible
from .phrases import _LINE_PHRASES, _match_phrases


def scan_entry(text: str) -> ThreatFinding | None:
    """Return the first finding for `text`, or None when it may be stored."""
    if len(text) > MAX_SCAN_CHARS:
        return ThreatFinding(OVERSIZED)
    # Checked on the raw text and again after NFKC, so that compatibility
    # folding can neither hide nor introduce an invisible character.
    if _has_invisible(text):
        return ThreatFinding(INVISIBLE_UNICODE)
    compatible = unicodedata.normalize("NFKC", text)
    if _has_invisible(compatible):
        return ThreatFinding(INVISIBLE_UNICODE)
    # The text as written, and — when it holds markup — as a reader sees it
    # rendered: `**ignore** previous` reads `ignore previous` to the model
    # too. The stored text stays as written; only this view is folded.
    rendered = _rendered(compatible)
    views = (compatible,) if rendered is None else (compatible, rendered)
    for view in views:
        for pattern in _SECRET_SHAPES:
            if pattern.search(view):
                return ThreatFinding(SECRET)
    if _has_hidden_markup(compatible):
        return ThreatFinding(HIDDEN_CONTENT)
    category = None
    for view in views:
        category = _read_phrases(view)
        if category is not None:
            break
    if category is None:
        # Text smuggled in base64 or percent-encoding is decoded once and
        # read with the same phrases.
        for decoded in _decoded_payloads(compatible):
            category = _match_phrases(_fold(unicodedata.normalize("NFKC", decoded)))
            if category is not None:
                break
    if category is not None:
        return ThreatFinding(category)
    if any(_has_secret(view) for view in views):
        return ThreatFinding(SECRET)
    return None


def _read_phrases(view: str) -> str | None:
    """Return the category of the first phrase found in one view of the text, or None.

    Read three ways: with every line break collapsed (a phrase may be split
    across lines), line by line (a line starts a new order, whatever the line
    before it said: a negation on one line does not cover the next), and with
    leetspeak and spaced-out letters undone.
    """
    folded = _fold(view)
    category = _match_phrases(folded)
    if category is None and ("\n" in view or "\r" in view):
        category = _match_phrases(_fold(view, lines=True), _LINE_PHRASES)
    if category is None and (deobfuscated := _deobfuscated(folded)) is not None:
        category = _match_phrases(deobfuscated)
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
