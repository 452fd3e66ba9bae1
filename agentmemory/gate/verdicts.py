"""The gate's verdicts: refuse at staging, ask the person, or commit; and what to offer when nothing was saved.

Each verdict is one reason code (`codes`) from the features the other rooms
read: the person's message (`reading`, in its language), the entry
(`entries`), what the message negated (`negation`) and the turn's secrets
(`secrets`).
"""
from __future__ import annotations

import re
from collections.abc import Mapping, Sequence

from ..person_words import MAX_CHARS, MIN_CHARS, third_person
from ..rules import Operation, Snapshot, apply_operations
from ..threats import scan_entry
from .codes import (
    ASKED_UNSAVED,
    ASKS_FOR_CHANGE,
    ATTACK_SEEN,
    DEPENDS,
    EXPLICIT,
    NEGATED,
    NO_FACT,
    NOT_STATED,
    QUESTION,
    REQUEST,
    SECRET_NOTE,
    SECRET_SEEN,
    STATEMENT,
    TRANSIENT_TURN,
    UNASKED_EDIT,
    UNKNOWN,
    UNREAD_LANGUAGE,
    UNSAVED,
)
from .entries import entry_reason, states_nothing
from .features import from_message
from .negation import asserts_negated, negated_sentence, negated_terms
from .reading import intent, passing, statements, without_pleasantry, words_of
from .secrets import notes_credential, secret_in, withheld
from .sources import TurnSources
from .words import LANGUAGES, en, full


def refusal(operation: Operation, sources: TurnSources) -> str:
    """Return why trusted code refuses to stage this operation ("" = it may be staged)."""
    if operation.content and secret_in(operation.content, sources):
        return SECRET_SEEN
    if operation.content and notes_credential(operation.content, sources):
        return SECRET_NOTE
    if operation.content and states_nothing(operation.content, sources):
        return NO_FACT
    if operation.content and sources.attack:
        return ATTACK_SEEN
    if operation.action == "add" and sources.intent in (QUESTION, REQUEST) and not sources.states_fact:
        return NOT_STATED
    if operation.action == "add" and sources.intent == STATEMENT and sources.passing_only:
        return TRANSIENT_TURN
    return ""


def reason(operation: Operation, *, start: Snapshot, sources: TurnSources) -> str:
    """Return why this staged operation should be asked about ("" = commit it)."""
    existing = operation.entry is not None and operation.entry in start.entries(operation.target)
    if operation.action in ("replace", "remove") and existing and sources.intent in (QUESTION, REQUEST):
        return UNASKED_EDIT
    if (full(sources.language) is None and sources.intent not in (*ASKS_FOR_CHANGE, UNKNOWN)
            and (operation.content or existing)):
        # A language the gate cannot read: a change the person did not ask for is theirs to make.
        return (operation.content and entry_reason(operation.content, sources)) or UNREAD_LANGUAGE
    if operation.action == "remove" or not operation.content:
        return ""
    if asserts_negated(operation.content, negated_terms(sources.message, sources.language), sources.language):
        return NEGATED  # "tabs, not spaces" -> "Prefers spaces": not the person's words, even on their command
    if sources.intent in ASKS_FOR_CHANGE and from_message(operation.content, sources):
        return ""  # the person's own command: never diverted
    return entry_reason(operation.content, sources)


def said(operation: Operation, why: str, sources: TurnSources) -> str:
    """The person's own sentence an asked operation is shown beside ("" = none): for `NEGATED`, the sentence
    of their latest message whose "no" the entry drops ("I always want tabs, not spaces").

    It is memory content (stored with the proposal, never logged), and passes
    what trusted code's offers pass: a sentence the scan flags, or that holds a
    secret or a labelled value, is not shown.
    """
    if why != NEGATED or not operation.content:
        return ""
    sentence = negated_sentence(operation.content, sources.message, sources.language)
    if (not sentence or _LABELLED_VALUE.search(sentence) or scan_entry(sentence) is not None
            or withheld(sentence, sources)):
        return ""
    return sentence


def split(
    operations: Sequence[Operation],
    reasons: Sequence[str],
    *,
    start: Snapshot,
    limits: Mapping[str, int],
) -> tuple[list[Operation], list[Operation], list[str]]:
    """Split a staged batch into what commits and what is asked about; return (keep, ask, ask_reasons).

    Order is kept within each part. An operation pinned to an entry that an
    asked operation wrote is asked too (`DEPENDS`), so the committed part
    never needs the asked part. When the committed part alone does not fit
    (the asked part made room for it), everything is asked.
    """
    verdicts: list[str] = []
    written_by_asked: set[tuple[str, str]] = set()
    for operation, why in zip(operations, reasons):
        if not why and operation.entry is not None and (operation.target, operation.entry) in written_by_asked:
            why = DEPENDS
        if why and operation.content:
            written_by_asked.add((operation.target, operation.content))
        verdicts.append(why)
    keep = [op for op, why in zip(operations, verdicts) if not why]
    if keep and len(keep) < len(operations):
        try:
            apply_operations(start, keep, limits)
        except ValueError:  # the asked part made room for the rest: ask for all of it
            verdicts = [why or DEPENDS for why in verdicts]
            keep = []
    ask = [op for op, why in zip(operations, verdicts) if why]
    return keep, ask, [why for why in verdicts if why]


# At most this many of the person's statements are offered on one turn.
MAX_UNSAVED = 2


def unsaved_reason(sources: TurnSources) -> str:
    """Why `unsaved_statements` offers its entries: the person asked to remember (`ASKED_UNSAVED`), or said it."""
    return ASKED_UNSAVED if intent(without_pleasantry(sources.message or "")) == EXPLICIT else UNSAVED


def unsaved_statements(sources: TurnSources) -> list[str]:
    """What the person said or asked to remember, as profile entries, for a turn that saved nothing.

    The other side of "unsure saves become a question": when the model made
    no memory call on a turn whose message states something lasting in the
    first person ("I use Neovim as my editor") or asks to remember something
    ("From now on keep your answers short please; I prefer terse replies",
    "merk dir: ...", "retiens que ..."), their own words are offered as a
    question, never saved (`MemoryTurn.commit`, reason `unsaved_reason`).
    Only on a plain statement or a command to remember (a pleasantry before
    it aside), with no secret anywhere in the turn, no attack, nothing
    pasted, and no clause that tells of something passing. A first-person
    clause becomes the third person (`person_words.third_person`, English);
    on a command to remember, failing that, the clauses are offered in the
    person's words, the command left out. Every entry must pass the scan,
    `secrets.withheld` (the scan once, then `secret_in`) and the entry rules the model's entries pass.
    """
    message = without_pleasantry(sources.message or "")
    kind = intent(message)
    if kind not in (STATEMENT, EXPLICIT) or sources.attack or sources.secrets or sources.pasted:
        return []
    w = words_of(message)
    if w is None and kind != EXPLICIT:
        return []  # a statement in a language the gate cannot read: nothing to tell of it
    clauses = statements(message, w) if w is not None else [c.strip() for c in _SENTENCES.split(message)]
    if w is not None and any(passing(clause, w) for clause in clauses):
        return []  # "I'm on call this week, so I may answer slowly": what follows from a passing state passes too
    leads = [module.REMEMBER_LEAD for module in {en, LANGUAGES.get(sources.language, en)}]
    said = [fact for clause in clauses for fact in _facts(_without(leads, clause), sources.language)]
    person = w or en
    offered = _offer((third_person(clause, sources.language) for clause in said if person.FIRST_PERSON.search(clause)),
                     sources)
    if not offered and kind == EXPLICIT:
        offered = _offer((_own_words(clause) for clause in said), sources)
    return offered


# Where a clause goes on to a second thing the person says of themselves ("I use Neovim, I prefer tabs",
# "... and my team uses Zephyr"): each is offered as its own entry, one fact a question, never a run-on.
_NEXT_FACT = {
    "en": re.compile(r",?\s+(?:and|but|while)\s+(?=(?:i|i'm|i've|i'd|my|we|we're|we've|our)\b)"
                     r"|,\s+(?=(?:i|i'm|i've|i'd|my)\b)", re.IGNORECASE),
    "de": re.compile(r",?\s+(?:und|aber|während)\s+(?=(?:ich|mein\w*|wir|unser\w*)\b)|,\s+(?=(?:ich|mein\w*)\b)",
                     re.IGNORECASE),
}


def _facts(clause: str, language: str) -> list[str]:
    pattern = _NEXT_FACT.get(language)
    if pattern is None:
        return [clause]
    return [fact.strip() for fact in pattern.split(clause) if fact.strip()]


# Sentence ends, for a message in a language whose clauses the gate does not split.
_SENTENCES = re.compile(r"[.!?]+(?=\s|$)|[;\n]+")


def _without(leads, clause: str) -> str:
    for lead in leads:
        clause = lead.sub("", clause, count=1)
    return clause.strip()


def _own_words(clause: str) -> str | None:
    text = " ".join(clause.split()).strip(" ,;:-")
    if len(text) < MIN_CHARS or len(text) > MAX_CHARS:
        return None
    return text[0].upper() + text[1:] + ("" if text[-1] in ".!?" else ".")


# A secret labelled in any shipped language, then "is" / ":" / "=" and a value with a digit ("Mein VPN-Passwort:
# Kiefer-Nebel-2291", "mot de passe du VPN est ..."): trusted code never offers it, whatever the scans read.
_LABELLED_VALUE = re.compile(
    r"\b(?:" + "|".join(sorted({re.escape(label) for module in LANGUAGES.values() for label in module.SECRET_LABELS},
                               key=len, reverse=True))
    + r")\b(?:[ \t]+[^\s:=]+){0,6}?[ \t]*(?:\b(?:is|was|ist|war|est|es|è|é|são|era)\b|:|=)[ \t]*\S*\d",
    re.IGNORECASE,
)


def _offer(entries, sources: TurnSources) -> list[str]:
    offered: list[str] = []
    for entry in entries:
        # The scans last: most refused entries are refused by a rule that costs microseconds. Any finding of
        # the scan refuses (`withheld` is its secret family and the turn's values: the scan runs once).
        if (entry is None or entry in offered or states_nothing(entry, sources) or entry_reason(entry, sources)
                or _LABELLED_VALUE.search(entry) or scan_entry(entry) is not None or secret_in(entry, sources)):
            continue
        offered.append(entry)
        if len(offered) == MAX_UNSAVED:
            break
    return offered
