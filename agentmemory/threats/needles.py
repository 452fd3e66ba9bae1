"""Words a pattern cannot match without: a prefilter that skips patterns whose words are absent.

`required(pattern)` reads a compiled pattern's parse tree and returns a set
of literal strings at least one of which occurs in every text the pattern
matches (or None when no such set is known: a pattern that can match
without any literal text). A sequence needs all its parts, so the part
with the longest shortest literal is kept; an alternation needs one of its
branches, so its branches' sets are joined; a repeat needs its body only
when it must run at least once. Zero-width parts (`\\b`, `^`, look-arounds)
neither add nor break a literal run, since the text they stand between is
contiguous in the match.

`Prefilter(patterns)` finds, per text, which patterns could match: each
pattern's needles against the set of needles present, one `in` per distinct
needle. Case-sensitive, as the phrase patterns are (they read case-folded
text): a needle is exactly the characters the pattern demands.
"""
from __future__ import annotations

import re
from collections.abc import Iterable
from re import _constants as constants  # type: ignore[attr-defined]
from re import _parser as parser  # type: ignore[attr-defined]
from typing import Any

# Beyond this many alternatives a branch's set is more costly to look for than the pattern.
MAX_NEEDLES = 64
# Needles are looked up by their first this many characters.
GRAM = 3
ZERO_WIDTH = {constants.AT, constants.ASSERT, constants.ASSERT_NOT}


def required(pattern: re.Pattern[str]) -> frozenset[str] | None:
    """Return literals one of which every match of `pattern` contains, or None."""
    if pattern.flags & re.IGNORECASE:
        return None
    needles = _sequence(parser.parse(pattern.pattern, pattern.flags & ~re.UNICODE))
    return frozenset(needles) if needles else None


def _best(candidates: list[set[str]]) -> set[str] | None:
    usable = [found for found in candidates if found and len(found) <= MAX_NEEDLES]
    return max(usable, key=lambda found: (min(map(len, found)), -len(found)), default=None)


def _sequence(items: Iterable[tuple[Any, Any]]) -> set[str] | None:
    candidates: list[set[str]] = []
    run = ""
    for op, argument in items:
        if op is constants.LITERAL:
            run += chr(argument)
            continue
        if op in ZERO_WIDTH:
            continue
        if run:
            candidates.append({run})
            run = ""
        found = _item(op, argument)
        if found:
            candidates.append(found)
    if run:
        candidates.append({run})
    return _best(candidates)


def _item(op: Any, argument: Any) -> set[str] | None:
    if op is constants.SUBPATTERN:
        _group, added_flags, _removed_flags, body = argument
        return None if added_flags & re.IGNORECASE else _sequence(body)
    if op is constants.BRANCH:
        joined: set[str] = set()
        for branch in argument[1]:
            found = _sequence(branch)
            if not found:
                return None
            joined |= found
        return joined if len(joined) <= MAX_NEEDLES else None
    if op in (constants.MAX_REPEAT, constants.MIN_REPEAT, constants.POSSESSIVE_REPEAT):
        low, _high, body = argument
        return _sequence(body) if low >= 1 else None
    if op is constants.ATOMIC_GROUP:
        return _sequence(argument)
    return None


class Prefilter:
    """Which of some patterns may match a text, from the needles it holds.

    A text's needles are found from its three-letter slices: only the needles
    that start with one of them are looked for (shorter needles always are),
    so the cost grows with the text, not with the number of needles.
    """

    def __init__(self, patterns: Iterable[re.Pattern[str]]) -> None:
        self.unfiltered: set[int] = set()
        holders: dict[str, set[int]] = {}
        for index, pattern in enumerate(patterns):
            needles = required(pattern)
            if needles is None:
                self.unfiltered.add(index)
                continue
            for needle in needles:
                holders.setdefault(needle, set()).add(index)
        self.holders = {needle: frozenset(ids) for needle, ids in holders.items()}
        self.short = tuple(needle for needle in self.holders if len(needle) < GRAM)
        self.by_gram: dict[str, tuple[str, ...]] = {}
        for needle in self.holders:
            if len(needle) >= GRAM:
                self.by_gram[needle[:GRAM]] = (*self.by_gram.get(needle[:GRAM], ()), needle)

    def possible(self, text: str) -> list[int]:
        """Return the places, in order, of the patterns that may match `text` (no other one can)."""
        possible = set(self.unfiltered)
        grams = {text[index:index + GRAM] for index in range(len(text) - GRAM + 1)}
        for gram in grams.intersection(self.by_gram):
            for needle in self.by_gram[gram]:
                if needle in text:
                    possible |= self.holders[needle]
        for needle in self.short:
            if needle in text:
                possible |= self.holders[needle]
        return sorted(possible)
