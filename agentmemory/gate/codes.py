"""The gate's codes and the sentences people read for them.

Codes are what the model, the API and telemetry read; `REASONS` holds the
plain, translatable sentence a person reads for each code of a question.
"""
from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

from django.utils.translation import gettext_lazy

if TYPE_CHECKING:
    from django_stubs_ext import StrOrPromise

# Why an operation is asked about rather than saved: codes for the model, the
# API and telemetry; `REASONS` holds the sentence a person reads.
TRANSIENT = "transient"
CHAT_SUMMARY = "chat_summary"
PASTED_COPY = "pasted_copy"
ASSISTANT_NOTE = "assistant_note"
UNASKED_EDIT = "unasked_edit"
DEPENDS = "depends_on_question"
UNSAVED = "unsaved_statement"
# The person asked to remember it ("from now on ...", "merk dir ..."), and the model saved nothing.
ASKED_UNSAVED = "asked_unsaved"
# It asserts a term the person's message negated ("not spaces" -> "Prefers spaces").
NEGATED = "negated_term"
# The message is in a language the gate has no rules for, and did not ask to remember.
UNREAD_LANGUAGE = "unread_language"
# Refused at staging: the model is told, nothing is staged.
SECRET_SEEN = "secret_in_turn"
# A note about a credential the turn gave ("Staging admin panel password."): it points at the secret.
SECRET_NOTE = "secret_note_in_turn"
NOT_STATED = "not_stated"
# An entry that only says to remember something ("Remember this for the deploy."): it states no fact, and
# after a secret was left out it is what remains of one.
NO_FACT = "no_fact"
TRANSIENT_TURN = "transient_turn"
ATTACK_SEEN = "attack_in_turn"

# People-facing (translatable, lazy: pass through str() before JSON); the codes above are what the model reads.
REASONS: Mapping[str, StrOrPromise] = {
    TRANSIENT: gettext_lazy("It looks like it may not last (task progress, a one-off error, path or command)."),
    CHAT_SUMMARY: gettext_lazy("It looks like a summary of this chat rather than a lasting fact."),
    PASTED_COPY: gettext_lazy("It copies text you pasted rather than stating a fact about you or your work."),
    ASSISTANT_NOTE: gettext_lazy("It is a note about the assistant, not about you or your work."),
    UNASKED_EDIT: gettext_lazy(
        "It changes something your memory already holds, though your message did not ask for a change."),
    DEPENDS: gettext_lazy("It builds on another suggested change that waits for you."),
    UNSAVED: gettext_lazy("You said this about yourself, and the assistant did not save it."),
    ASKED_UNSAVED: gettext_lazy("You asked to remember this, and the assistant did not save it."),
    NEGATED: gettext_lazy(
        "It states something your message said no to (“not”, “never”, “no”), without your “no”."),
    UNREAD_LANGUAGE: gettext_lazy(
        "Your message is in a language the assistant's rules cannot read yet, and it did not ask to remember this."),
}
ASK_REASONS = tuple(REASONS)

# What the person's latest message asks of memory (`intent`).
EXPLICIT = "explicit"  # remember / note / keep in mind / from now on
FORGET = "forget"
CORRECT = "correct"
QUESTION = "question"
REQUEST = "request"  # a coding request, small talk: asks nothing of memory
STATEMENT = "statement"  # states something, possibly about the person
UNKNOWN = "unknown"  # no message given
ASKS_FOR_CHANGE = frozenset({EXPLICIT, FORGET, CORRECT})
