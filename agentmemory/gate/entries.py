"""What an entry the model wrote shows by itself: passing, a chat summary, a note about the assistant, no fact.

Judged from the entry's words in every language the gate reads in full
(a model may write an entry in English for a German message, or in German)
and what the person pasted (`features`); with the turn's sources only where
a rule says so.
"""
from __future__ import annotations

from .codes import ASSISTANT_NOTE, CHAT_SUMMARY, PASTED_COPY, TRANSIENT
from .features import ONE_OFF_PATH, copies_pasted
from .sources import TurnSources
from .words import FULL, LANGUAGES

_NO_SOURCES = TurnSources()
_ENTRY_WORDS = tuple(LANGUAGES[code] for code in LANGUAGES if code in FULL)


def entry_reason(content: str, sources: TurnSources = _NO_SOURCES) -> str:
    """Return why an entry the model wrote should be asked about ("" = nothing doubtful)."""
    for w in _ENTRY_WORDS:
        if w.SELF_NOTE.search(content):
            return ASSISTANT_NOTE
        if w.SUMMARY.search(content):
            return CHAT_SUMMARY
    for w in _ENTRY_WORDS:
        if (w.TRANSIENT_TIME.search(content) or w.TRANSIENT_PROGRESS.search(content)
                or w.ONE_OFF_COMMAND.search(content)):
            return TRANSIENT
    # An error met once passes; one with a lasting lesson in any language stays ("... unless PYTHONPATH ...").
    if any(w.ERROR.search(content) for w in _ENTRY_WORDS) and not any(w.LESSON.search(content) for w in _ENTRY_WORDS):
        return TRANSIENT
    if ONE_OFF_PATH.search(content):
        return TRANSIENT
    if sources.pasted and copies_pasted(content, sources.pasted):
        return PASTED_COPY
    return ""


def states_nothing(content: str, sources: TurnSources | None = None) -> bool:
    """True when an entry only says to remember "this" ("Remember this for the deploy."): no fact in it.

    With `sources` of a turn that gave a secret, also any entry that starts
    by saying to remember ("Remembers app configuration.").
    """
    if any(w.BARE_COMMAND.match(content or "") for w in _ENTRY_WORDS):
        return True
    return bool(sources is not None and sources.secrets
                and any(w.REMEMBER_FIRST.match(content or "") for w in _ENTRY_WORDS))
