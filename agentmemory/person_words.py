"""The person's own words, as a profile entry: "I use Neovim" becomes "Uses Neovim".

When the person states something lasting about themselves and the model
saves nothing, trusted code offers their own words as a question
(`gate.unsaved_statements`). A profile entry reads in the third person, the
way the model writes them ("Prefers short answers"), so the subject goes
and the verb agrees; "my" becomes "their". Pure and small on purpose: a
clause that does not start with the person as its subject is not rewritten
(None), and nothing is invented.
"""
from __future__ import annotations

import re

# Lead-ins before the statement itself: "By the way, I lead ..." -> "I lead ...".
_LEAD_IN = re.compile(
    r"^(?:(?:by the way|btw|also|and|oh|well|fyi|for context|for the record|just so you know|"
    r"for what it'?s worth|in general|actually|anyway|ok(?:ay)?|thanks|thank you)\b[\s,:;!.-]*)+",
    re.IGNORECASE,
)
_SUBJECT = re.compile(r"^(?:i\s*'?\s*m|i am|i\s*'?\s*ve|i have|i\s*'?\s*d|i would|i)\b\s*", re.IGNORECASE)
_ADVERBS = frozenset({"always", "usually", "mostly", "mainly", "often", "really", "also", "only", "generally",
                      "normally", "typically", "still", "never", "rarely", "sometimes", "strongly", "much"})
_MODALS = {"can": "Can", "can't": "Cannot", "cannot": "Cannot", "will": "Will", "won't": "Will not",
           "should": "Should", "must": "Must", "don't": "Does not", "dont": "Does not", "do": "Does"}
_IRREGULAR = {"have": "has", "do": "does", "go": "goes", "be": "is", "am": "is"}
# Verbs that state an opinion of the moment, a wish or a past event, not a lasting fact about the person.
_NOT_LASTING = frozenset({"think", "guess", "hope", "wonder", "mean", "see", "know", "agree", "suppose", "believe",
                          "feel", "want", "need", "try", "get", "got", "just", "was", "were", "had", "did", "said",
                          "asked", "told", "saw", "went", "came", "made", "found", "bet", "promise", "apologize",
                          "may", "might", "could", "didn't"})
_PRONOUNS = [(re.compile(r"\bmyself\b", re.IGNORECASE), "themselves"),
             (re.compile(r"\bmy\b", re.IGNORECASE), "their"),
             (re.compile(r"\bmine\b", re.IGNORECASE), "theirs"),
             (re.compile(r"\bme\b", re.IGNORECASE), "them"),
             (re.compile(r"\bi\s*'?\s*m\b", re.IGNORECASE), "they are"),
             (re.compile(r"\bi\s*'?\s*ve\b", re.IGNORECASE), "they have"),
             (re.compile(r"\bi\b", re.IGNORECASE), "they")]
MIN_CHARS = 8
MAX_CHARS = 240


def third_person(clause: str) -> str | None:
    """Return the clause as a profile entry, or None when the person is not its subject."""
    text = " ".join((clause or "").split()).strip(" ,;:-")
    if re.match(r"(?i)so\b|then\b|because\b", text):
        return None  # a consequence or a reason, read with what came before it: not a statement alone
    text = _LEAD_IN.sub("", text).strip()
    if text.lower().startswith("my "):
        body = "Their " + text[3:]
    else:
        subject = _SUBJECT.match(text)
        if subject is None:
            return None
        said = subject.group(0).strip().lower().replace(" ", "").replace("'", "")
        rest = text[subject.end():]
        if not rest:
            return None
        if said in ("im", "iam"):
            body = "Is " + rest
        elif said in ("ive", "ihave"):
            body = "Has " + rest
        elif said in ("id", "iwould"):
            body = "Would " + rest
        else:
            verb_first = _verb_first(rest)
            if verb_first is None:
                return None
            body = verb_first
    for pattern, replacement in _PRONOUNS:
        body = pattern.sub(replacement, body)
    body = body.rstrip(" ,;:-")
    if not body.endswith((".", "!", ")")):
        body += "."
    body = body[0].upper() + body[1:]
    return body if MIN_CHARS <= len(body) <= MAX_CHARS else None


def _verb_first(rest: str) -> str | None:
    """'always use tabs' -> 'Always uses tabs'; "don't like X" -> 'Does not like X'."""
    words = rest.split(" ")
    adverbs = []
    while words and words[0].lower() in _ADVERBS:
        adverbs.append(words.pop(0).lower())
    if not words:
        return None
    verb = words[0]
    lowered = verb.lower().replace("\u2019", "'")
    if lowered in _MODALS:
        head = _MODALS[lowered]
    elif re.fullmatch(r"[a-z]+", lowered) and lowered not in _NOT_LASTING and not lowered.endswith("ed"):
        head = _agree(lowered)
    else:
        return None
    phrase = " ".join([*adverbs, head.lower() if adverbs else head, *words[1:]])
    return phrase


def _agree(verb: str) -> str:
    """The third person singular of a verb: use -> uses, go -> goes, carry -> carries."""
    if verb in _IRREGULAR:
        return _IRREGULAR[verb]
    if verb.endswith(("s", "sh", "ch", "x", "z", "o")):
        return verb + "es"
    if len(verb) > 2 and verb.endswith("y") and verb[-2] not in "aeiou":
        return verb[:-1] + "ies"
    return verb + "s"
