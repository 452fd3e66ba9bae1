"""What an entry the model wrote shows by itself: passing, a chat summary, a note about the assistant, no fact.

Judged from the entry's words (`words`) and what the person pasted
(`features`); with the turn's sources only where a rule says so.
"""
from __future__ import annotations

from .codes import ASSISTANT_NOTE, CHAT_SUMMARY, PASTED_COPY, TRANSIENT
from .features import ONE_OFF_PATH, copies_pasted
from .sources import TurnSources
from .words import en

_NO_SOURCES = TurnSources()


def entry_reason(content: str, sources: TurnSources = _NO_SOURCES) -> str:
    """Return why an entry the model wrote should be asked about ("" = nothing doubtful)."""
    if en.SELF_NOTE.search(content):
        return ASSISTANT_NOTE
    if en.SUMMARY.search(content):
        return CHAT_SUMMARY
    if en.TRANSIENT_TIME.search(content) or en.TRANSIENT_PROGRESS.search(content):
        return TRANSIENT
    if en.ERROR.search(content) and not en.LESSON.search(content):
        return TRANSIENT
    if ONE_OFF_PATH.search(content) or en.ONE_OFF_COMMAND.search(content):
        return TRANSIENT
    if sources.pasted and copies_pasted(content, sources.pasted):
        return PASTED_COPY
    return ""


def states_nothing(content: str, sources: TurnSources | None = None) -> bool:
    """True when an entry only says to remember "this" ("Remember this for the deploy."): no fact in it.

    With `sources` of a turn that gave a secret, also any entry that starts
    by saying to remember ("Remembers app configuration.").
    """
    if en.BARE_COMMAND.match(content or ""):
        return True
    return bool(sources is not None and sources.secrets and en.REMEMBER_FIRST.match(content or ""))
