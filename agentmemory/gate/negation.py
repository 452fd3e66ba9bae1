"""What the person's message said no to, and whether an entry asserts it anyway.

"I always want tabs, not spaces" negates "spaces"; "pytest, never
unittest" negates "unittest"; "kein Java", "pas de Java", "nunca unittest"
the same in the languages the gate has negation words for (`words`). An
entry that names a negated term with no negation or contrast word just
before it ("Prefers spaces", "unittest tests in our project.") says the
opposite of what the person said; one that keeps it ("Prefers tabs, not
spaces", "tabs over spaces") says what they said. `negated_sentence` finds
the person's own sentence such an entry drops the "no" of, for the question
to show beside it.
"""
from __future__ import annotations

import re
from collections.abc import Iterable
from types import ModuleType

from .words import LANGUAGES, en

_TOKEN = re.compile(r"[^\W_][\w+#'’-]*")
# Where a negation's reach ends: a clause's end, or "but" / "aber" / "mais" / "pero" / "ma" / "mas" / "maar".
_CLAUSE_END = re.compile(r"[.,;:!?()\n]|\b(?:but|aber|mais|pero|ma|mas|maar|sondern)\b", re.IGNORECASE)
# Between a negation and the term it negates: articles, pronouns, helpers and common verbs.
_BETWEEN = frozenset(
    "a an the any my our your their this that these those it to be use using used like want need have has do does "
    "i we you really even ever more longer at all so much very want wants anything something "
    "ein eine einen einem einer der die das den dem des mehr mit zu ich wir es gar "
    "de d' des du le la les l' un une plus je j' on nous y en "
    "el la los las un una unos unas del lo me usar uso "
    "il lo gli i uno di dei delle "
    "o os um uma do da dos das eu "
    "het een de van ik we wij".split()
)
# A subject right after "no" makes it an answer, not a negation: "No I use Django" negates nothing.
_SUBJECTS = frozenset("i we you he she they ich wir du er sie je nous tu il ils elle yo nosotros io noi eu nós ik wij"
                      .split())
WINDOW = 4
MAX_GAP = 3
# The longest quote of the person's sentence a question shows; a longer sentence is cut around the term.
MAX_QUOTE = 200
# Where a sentence of the message ends: what a quote never runs past.
_SENTENCE_END = re.compile(r"(?<=[.!?;…])\s+|\s*\n\s*")


def _words_for(code: str) -> list[ModuleType]:
    return [en] if code == "en" or code not in LANGUAGES else [en, LANGUAGES[code]]


def _tokens(text: str) -> list[str]:
    return [token.replace("’", "'").lower().strip("'-") for token in _TOKEN.findall(text)]


def _single(phrases: Iterable[str]) -> frozenset[str]:
    return frozenset(phrase for phrase in phrases if " " not in phrase)


def negated_terms(message: str, code: str) -> frozenset[str]:
    """The terms the message negates: the first word after a negation word that is not a helper or article."""
    negators = frozenset().union(*(_single(w.NEGATION) for w in _words_for(code)))
    terms: set[str] = set()
    for clause in _CLAUSE_END.split(message or ""):
        if clause is None:
            continue
        tokens = _tokens(clause)
        for index, token in enumerate(tokens):
            if token not in negators:
                continue
            for follower in tokens[index + 1:index + 1 + MAX_GAP + 1]:
                if follower in _SUBJECTS:
                    break
                if follower in negators or follower in _BETWEEN or len(follower) < 2:
                    continue
                terms.add(follower)
                break
    return frozenset(terms)


def asserts_negated(entry: str, terms: frozenset[str], code: str) -> bool:
    """True when the entry names a negated term with no negation or contrast word in the words before it."""
    return bool(_asserted(entry, terms, code))


def negated_sentence(entry: str, message: str, code: str) -> str:
    """The sentence of the message whose negation the entry drops, in the person's words ("" = none).

    At most MAX_QUOTE characters, whitespace folded; a longer sentence is cut
    around the term, with "…" where it was cut.
    """
    for sentence in _SENTENCE_END.split(message or ""):
        term = _asserted(entry, negated_terms(sentence, code), code)
        if term:
            return _quote(sentence, term)
    return ""


def _asserted(entry: str, terms: frozenset[str], code: str) -> str:
    if not terms:
        return ""
    tokens = _tokens(entry)
    contrast = [f" {phrase} " for w in _words_for(code) for phrase in w.CONTRAST]
    for index, token in enumerate(tokens):
        if token in terms:
            before = f" {' '.join(tokens[max(0, index - WINDOW):index])} "
            if not any(phrase in before for phrase in contrast):
                return token
    return ""


def _quote(sentence: str, term: str) -> str:
    text = " ".join(sentence.split())
    if len(text) <= MAX_QUOTE:
        return text
    found = re.search(rf"(?<!\w){re.escape(term)}(?!\w)", text.replace("’", "'"), re.IGNORECASE)
    room = MAX_QUOTE - 2  # for the "…" at each cut end
    start = max(0, min((found.start() if found else 0) - room // 2, len(text) - room))
    window = text[start:start + room]
    if start + room < len(text):
        window = window.rsplit(" ", 1)[0] + "…"
    if start:
        window = "…" + window.split(" ", 1)[-1]
    return window
