"""What the person's message says: what it asks of memory, which clauses state something, which pass.

Read from the person's latest message alone, in the words of its language
(`language.detect`, `words`): `intent` (remember, forget, correct, a
question, a request or a statement), the statements among its clauses,
whether they tell of something lasting about the person or of something
passing, and whether the message only asks what memory holds. A message in
a language the gate does not read in full is read for what it asks of
memory only (remember, forget, a question mark); the rest is not guessed.
"""
from __future__ import annotations

from types import ModuleType

from .codes import CORRECT, EXPLICIT, FORGET, QUESTION, REQUEST, STATEMENT, UNKNOWN
from .features import FENCE, ONE_OFF_PATH
from .language import detect
from .words import LANGUAGES, en, full


def words_of(text: str) -> ModuleType | None:
    """The words of the text's language when the gate reads it in full (English, German), else None."""
    return full(detect(text))


def intent(message: str) -> str:
    """Return what the person's message asks of memory (EXPLICIT, FORGET, CORRECT, QUESTION, REQUEST, STATEMENT)."""
    text = FENCE.sub(" ", message or "").strip()
    if not text:
        return UNKNOWN
    w = words_of(text)
    if w is None:
        return _asked_of_memory(text)
    question = text.rstrip().endswith("?") or bool(w.INTERROGATIVE.match(text))
    if w.FORGET.search(text):
        return FORGET
    if w.REMEMBER.search(text) and not w.RECALL_QUESTION.search(text):
        return EXPLICIT
    if w.STRONG_CORRECTION.search(text) or (not question and w.WEAK_CORRECTION.search(text)):
        return CORRECT
    if question:
        return QUESTION
    if w.IMPERATIVE.match(text):
        return REQUEST
    return STATEMENT


def _asked_of_memory(text: str) -> str:
    """The intent of a message in a language read only for its commands: the commands, else a statement."""
    code = detect(text)
    known = [LANGUAGES[code], en] if code in LANGUAGES else [en]
    if any(w.FORGET.search(text) for w in known):
        return FORGET
    if any(w.REMEMBER.search(text) for w in known):
        return EXPLICIT
    return QUESTION if text.rstrip().endswith("?") else STATEMENT


def document_named(message: str) -> str | None:
    """Return the document the person's own words put a new entry in, or None when they do not say.

    A message that asks to remember or states something (`EXPLICIT`,
    `STATEMENT`) "about me" names the profile ("user"). Anything else:
    None, the model's target stands. A message that never speaks of the
    person does not name the notes: "Keep code examples short, one per
    answer." is the person's preference, said as an instruction. Read for
    the model's adds only (`agentmemory.tool`).
    """
    text = FENCE.sub(" ", message or "").strip()
    w = words_of(text)
    if not text or w is None or intent(text) not in (EXPLICIT, STATEMENT):
        return None
    return "user" if w.ABOUT_ME.search(text) else None


def statements(message: str, w: ModuleType | None = None) -> list[str]:
    """The message's clauses that state something (not a question, not a request), fenced code left out."""
    text = FENCE.sub(" ", message or "")
    w = w or words_of(text) or en
    clauses = (clause.strip() for clause in w.CLAUSES.split(text))
    return [c for c in clauses if c and not w.INTERROGATIVE.match(c) and not w.IMPERATIVE.match(c)]


def passing(clause: str, w: ModuleType = en) -> bool:
    """True when a clause tells of something that passes: task progress, a moment, an error just met or fixed."""
    return bool(
        w.TRANSIENT_TIME.search(clause) or w.TRANSIENT_PROGRESS.search(clause) or w.PASSING.search(clause)
        or (w.ERROR.search(clause) and not w.LESSON.search(clause))
        or ONE_OFF_PATH.search(clause) or w.ONE_OFF_COMMAND.search(clause)
    )


def asks_memory(message: str) -> bool:
    """True when the message only asks what memory holds: a question about the person, stating nothing lasting.

    Such a turn is answered from the memory in the prompt: the chat offers no
    `memory_update` for it (`MemoryTurn.answers_from_memory`).
    """
    text = FENCE.sub(" ", message or "").strip()
    w = words_of(text)
    if w is None:
        return False
    # A lead-in before a colon ("Quick check before we schedule anything: which timezone am I in?")
    # states nothing: the question after it is the message. ("We moved to Lisbon: ..." is no lead-in.)
    text = w.LEAD_IN.sub("", text)
    # The words of a recall question first: most messages have none, and this runs on every memory-on turn.
    if not text or not (w.RECALL_QUESTION.search(text) or w.ASKS_MEMORY.search(text)):
        return False
    return intent(text) == QUESTION and not states_fact(text)


def states_fact(message: str) -> bool:
    """True when a clause of the message states something lasting in the first person ("I use vim", "our API ...").

    A clause that tells of something passing ("I'm a bit slow today", "I've
    just fixed it") states nothing to remember. A message in a language the
    gate does not read in full may state anything: True.
    """
    w = words_of(message or "")
    if not (message or "").strip() or w is None:
        return True  # unknown: do not refuse on this ground
    return any(w.FIRST_PERSON.search(clause) and not passing(clause, w) for clause in statements(message, w))


def passing_only(message: str) -> bool:
    """True when the message states something and every statement tells of something passing.

    "I've finished refactoring the payment module; now I'm moving on to its
    tests." and "The coffee machine is broken until Friday, so I'm slow
    today." state nothing lasting; "We deploy on Thursdays; today's was
    late." does. False for a language the gate does not read in full.
    """
    w = words_of(message or "")
    if w is None:
        return False
    said = statements(message, w)
    return bool(said) and all(passing(clause, w) for clause in said)


def without_pleasantry(message: str) -> str:
    """The message without the pleasantry before it ("Thanks. By the way, I lead the SRE team")."""
    w = words_of(message or "") or en
    return w.PLEASANTRY.sub("", message or "")


def may_be_unsaved(message: str) -> bool:
    """Whether `unsaved_statements` could offer anything for this message: a plain statement (a pleasantry
    before it aside) or a command to remember. Read from the message alone, before the turn's other
    messages are read for secrets."""
    return intent(without_pleasantry(message)) in (STATEMENT, EXPLICIT)
