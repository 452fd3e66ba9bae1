"""What the person's message says: what it asks of memory, which clauses state something, which pass.

Read from the person's latest message alone, in its words (`words`):
`intent` (remember, forget, correct, a question, a request or a
statement), the statements among its clauses, whether they tell of
something lasting about the person or of something passing, and whether the
message only asks what memory holds.
"""
from __future__ import annotations

from .codes import CORRECT, EXPLICIT, FORGET, QUESTION, REQUEST, STATEMENT, UNKNOWN
from .features import FENCE, ONE_OFF_PATH
from .words import en


def intent(message: str) -> str:
    """Return what the person's message asks of memory (EXPLICIT, FORGET, CORRECT, QUESTION, REQUEST, STATEMENT)."""
    text = FENCE.sub(" ", message or "").strip()
    if not text:
        return UNKNOWN
    question = text.rstrip().endswith("?") or bool(en.INTERROGATIVE.match(text))
    if en.FORGET.search(text):
        return FORGET
    if en.REMEMBER.search(text) and not en.RECALL_QUESTION.search(text):
        return EXPLICIT
    if en.STRONG_CORRECTION.search(text) or (not question and en.WEAK_CORRECTION.search(text)):
        return CORRECT
    if question:
        return QUESTION
    if en.IMPERATIVE.match(text):
        return REQUEST
    return STATEMENT



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
    if not text or intent(text) not in (EXPLICIT, STATEMENT):
        return None
    return "user" if en.ABOUT_ME.search(text) else None


def statements(message: str) -> list[str]:
    """The message's clauses that state something (not a question, not a request), fenced code left out."""
    text = FENCE.sub(" ", message or "")
    clauses = (clause.strip() for clause in en.CLAUSES.split(text))
    return [c for c in clauses if c and not en.INTERROGATIVE.match(c) and not en.IMPERATIVE.match(c)]


def passing(clause: str) -> bool:
    """True when a clause tells of something that passes: task progress, a moment, an error just met or fixed."""
    return bool(
        en.TRANSIENT_TIME.search(clause) or en.TRANSIENT_PROGRESS.search(clause) or en.PASSING.search(clause)
        or (en.ERROR.search(clause) and not en.LESSON.search(clause))
        or ONE_OFF_PATH.search(clause) or en.ONE_OFF_COMMAND.search(clause)
    )



def asks_memory(message: str) -> bool:
    """True when the message only asks what memory holds: a question about the person, stating nothing lasting.

    Such a turn is answered from the memory in the prompt: the chat offers no
    `memory_update` for it (`MemoryTurn.answers_from_memory`).
    """
    text = FENCE.sub(" ", message or "").strip()
    # A lead-in before a colon ("Quick check before we schedule anything: which timezone am I in?")
    # states nothing: the question after it is the message. ("We moved to Lisbon: ..." is no lead-in.)
    text = en.LEAD_IN.sub("", text)
    # The words of a recall question first: most messages have none, and this runs on every memory-on turn.
    if not text or not (en.RECALL_QUESTION.search(text) or en.ASKS_MEMORY.search(text)):
        return False
    return intent(text) == QUESTION and not states_fact(text)


def states_fact(message: str) -> bool:
    """True when a clause of the message states something lasting in the first person ("I use vim", "our API ...").

    A clause that tells of something passing ("I'm a bit slow today", "I've
    just fixed it") states nothing to remember.
    """
    if not (message or "").strip():
        return True  # unknown: do not refuse on this ground
    return any(en.FIRST_PERSON.search(clause) and not passing(clause) for clause in statements(message))


def passing_only(message: str) -> bool:
    """True when the message states something and every statement tells of something passing.

    "I've finished refactoring the payment module; now I'm moving on to its
    tests." and "The coffee machine is broken until Friday, so I'm slow
    today." state nothing lasting; "We deploy on Thursdays; today's was
    late." does.
    """
    said = statements(message)
    return bool(said) and all(passing(clause) for clause in said)



def may_be_unsaved(message: str) -> bool:
    """Whether `unsaved_statements` could offer anything for this message: a plain statement (a pleasantry
    before it aside). Read from the message alone, before the turn's other messages are read for secrets."""
    return intent(en.PLEASANTRY.sub("", message or "")) == STATEMENT

