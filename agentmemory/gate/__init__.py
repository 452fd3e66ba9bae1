"""Trusted judgement of a staged change's worth: commit, ask the person, or refuse.

`rules.py` decides whether a batch is well-formed and the threat scan whether
an entry is safe to show a model. This package decides whether a well-formed,
safe change *should be durable*. The model proposes; this code decides, from
values only: the operations, the snapshot the turn started from, and the
turn's messages (their roles and text). No model call, no database, no clock,
no Django: every rule is a feature a reader can check (docs/chat.md, "What
trusted code decides").

Three verdicts per staged operation:

- refuse (at staging, the model is told): the entry contains a value that a
  message of the turn presented as a secret, whole or in part
  (`secret_in`), or it adds a fact on a turn whose message states nothing
  about the person (`NOT_STATED`: a question or a request with no
  first-person statement and no command to remember);
- ask (a reason from `REASONS`): not committed; offered to the person as a
  question under the answer ("Save this to memory?"), kept only by their
  hand; an entry that drops their "no" is shown beside their own sentence
  (`said`);
- commit ("").

The person's explicit commands ("remember ...", "forget ...", "actually, I
now ...") are never diverted: an operation whose words come from such a
message commits. Without the turn's messages (`TurnSources.unknown()`, a host
loop that did not pass them) only the entry's own features are judged.

Its rooms: `codes` (codes and the sentences people read), `features` (what
needs no language), `words` (one module per language), `reading` (what the
person's message says), `entries` (what an entry shows by itself),
`secrets` (values the turn gave as secrets), `sources` (`TurnSources`) and
`verdicts` (refuse, ask, commit, offer).
"""
from __future__ import annotations

from .codes import (
    ASK_REASONS,
    ASKED_UNSAVED,
    ASKS_FOR_CHANGE,
    ASSISTANT_NOTE,
    ATTACK_SEEN,
    CHAT_SUMMARY,
    CORRECT,
    DEPENDS,
    EXPLICIT,
    FORGET,
    NEGATED,
    NO_FACT,
    NOT_STATED,
    PASTED_COPY,
    QUESTION,
    REASONS,
    REQUEST,
    SECRET_NOTE,
    SECRET_SEEN,
    STATEMENT,
    TRANSIENT,
    TRANSIENT_TURN,
    UNASKED_EDIT,
    UNKNOWN,
    UNREAD_LANGUAGE,
    UNSAVED,
)
from .entries import entry_reason, states_nothing
from .features import (
    COPY_RUN,
    PASTED_MIN_CHARS,
    PASTED_MIN_LINES,
    carries_attack,
    from_message,
    message_text,
    pasted_blocks,
)
from .language import detect
from .reading import asks_memory, document_named, intent, may_be_unsaved, passing, passing_only, states_fact
from .secrets import MIN_FRAGMENT, notes_credential, secret_in, turn_secrets, withheld
from .sources import TurnSources
from .verdicts import MAX_UNSAVED, reason, refusal, said, split, unsaved_reason, unsaved_statements

__all__ = [
    "ASK_REASONS", "ASKED_UNSAVED", "ASKS_FOR_CHANGE", "ASSISTANT_NOTE", "ATTACK_SEEN", "CHAT_SUMMARY", "CORRECT",
    "COPY_RUN", "DEPENDS", "NEGATED", "UNREAD_LANGUAGE", "detect", "unsaved_reason",
    "EXPLICIT", "FORGET", "MAX_UNSAVED", "MIN_FRAGMENT", "NO_FACT", "NOT_STATED", "PASTED_COPY", "PASTED_MIN_CHARS",
    "PASTED_MIN_LINES", "QUESTION", "REASONS", "REQUEST", "SECRET_NOTE", "SECRET_SEEN", "STATEMENT", "TRANSIENT",
    "TRANSIENT_TURN", "TurnSources", "UNASKED_EDIT", "UNKNOWN", "UNSAVED", "asks_memory", "carries_attack",
    "document_named", "entry_reason", "from_message", "intent", "may_be_unsaved", "message_text", "notes_credential",
    "passing", "passing_only", "pasted_blocks", "reason", "refusal", "said", "secret_in", "split", "states_fact",
    "states_nothing", "turn_secrets", "unsaved_reason", "unsaved_statements", "withheld",
]
