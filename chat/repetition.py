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
        parts = _BOUNDARY.split(self._pending + text)
        self._pending = parts.pop()
        return any(self._count(part) for part in parts)

    def _count(self, unit: str) -> bool:
        key = " ".join(unit.split()).casefold()
        if len(key) < self.min_chars:
            return False
        self._counts[key] += 1
        return self._counts[key] >= self.limit
