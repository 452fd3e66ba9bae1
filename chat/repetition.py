"""Spot an answer stuck in a loop while it streams.

Small models sometimes write the same line or sentence over and over until
the output cap stops them; the person watches the loop and the model server
stays busy. The agent feeds each round's visible text here and ends the
round as incomplete as soon as it loops, closing the stream.

What counts (docs/chat.md): the text is cut into units at line ends and
after sentence ends (., ! or ? followed by a space). A unit counts once it
is complete, with its whitespace collapsed and case folded, and only when it
has at least MIN_UNIT_CHARS characters, so short code lines (`}`, `end`,
`pass`) and list markers never count. A round loops when one unit has
occurred REPEAT_LIMIT times, next to each other or not (a cycle of two or
three lines loops too).
"""
from __future__ import annotations

import re
from collections import Counter

MIN_UNIT_CHARS = 16
REPEAT_LIMIT = 12
_BOUNDARY = re.compile(r"\n|(?<=[.!?])[ \t]+")


class RepetitionGuard:
    """Count the complete units of one round's text; `feed` says when it loops."""

    def __init__(self, *, limit: int = REPEAT_LIMIT, min_chars: int = MIN_UNIT_CHARS) -> None:
        self.limit = limit
        self.min_chars = min_chars
        self._pending = ""
        self._counts: Counter[str] = Counter()

    def feed(self, text: str) -> bool:
        """Add streamed text; return True once some unit has repeated `limit` times."""
        # Look for boundaries only in what is new (and the character before it, for ". "),
        # so a long line without one costs a scan of each chunk, not of the whole line again.
        combined = self._pending + text
        start, looped = 0, False
        for boundary in _BOUNDARY.finditer(combined, max(len(self._pending) - 1, 0)):
            looped = self._count(combined[start:boundary.start()]) or looped
            start = boundary.end()
        self._pending = combined[start:]
        return looped

    def _count(self, unit: str) -> bool:
        key = " ".join(unit.split()).casefold()
        if len(key) < self.min_chars:
            return False
        self._counts[key] += 1
        return self._counts[key] >= self.limit
