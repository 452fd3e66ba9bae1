"""The gate's verdicts: refuse at staging, ask the person, or commit; and what to offer when nothing was saved."""
from __future__ import annotations

from collections.abc import Mapping, Sequence

from ..person_words import third_person
from ..rules import Operation, Snapshot, apply_operations
from ..threats import scan_entry
from .codes import (
    ASKS_FOR_CHANGE,
    ATTACK_SEEN,
    DEPENDS,
    NO_FACT,
    NOT_STATED,
    QUESTION,
    REQUEST,
    SECRET_NOTE,
    SECRET_SEEN,
    STATEMENT,
    TRANSIENT_TURN,
    UNASKED_EDIT,
)
from .entries import entry_reason, states_nothing
from .features import from_message
from .reading import intent, passing, statements
from .secrets import notes_credential, secret_in, withheld
from .sources import TurnSources
from .words import en


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
    if operation.action == "remove" or not operation.content:
        return ""
    if sources.intent in ASKS_FOR_CHANGE and from_message(operation.content, sources):
        return ""  # the person's own command: never diverted
    return entry_reason(operation.content, sources)


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


def unsaved_statements(sources: TurnSources) -> list[str]:
    """The person's lasting statements about themselves, as profile entries, for a turn that saved nothing.

    The other side of "unsure saves become a question": when the model made
    no memory call on a turn whose message states something lasting in the
    first person ("I use Neovim as my editor"), their own words are offered
    as a question, never saved (`MemoryTurn.commit`, reason `UNSAVED`).
    Only on a plain statement (not a question, a request or a command the
    model should have handled; a pleasantry before it aside), with no secret
    anywhere in the turn, no attack, nothing pasted, and no clause that
    tells of something passing; each entry is the clause in the third person
    (`person_words.third_person`) and must pass the scan and the entry
    rules the model's entries pass.
    """
    message = en.PLEASANTRY.sub("", sources.message or "")
    if intent(message) != STATEMENT or sources.attack or sources.secrets or sources.pasted:
        return []
    clauses = statements(message)
    if any(passing(clause) for clause in clauses):
        return []  # "I'm on call this week, so I may answer slowly": what follows from a passing state passes too
    offered: list[str] = []
    for clause in clauses:
        if not en.FIRST_PERSON.search(clause):
            continue
        entry = third_person(clause)
        if (entry is None or entry in offered or scan_entry(entry) is not None or withheld(entry, sources)
                or entry_reason(entry, sources)):
            continue
        offered.append(entry)
        if len(offered) == MAX_UNSAVED:
            break
    return offered
