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


def third_person(clause: str, language: str = "en") -> str | None:
    """Return the clause as a profile entry, or None when the person is not its subject.

    English, and German (`language="de"`: "Ich arbeite als DBA" -> "Arbeitet als DBA."); None for others.
    """
    if language == "de":
        return _german(clause)
    if language != "en":
        return None
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
    return _entry(body, _PRONOUNS)


def _entry(body: str, pronouns) -> str | None:
    """The clause as an entry: the person's pronouns in the third person, one closing stop, a capital, a
    length the profile takes (None when too short or too long)."""
    for pattern, replacement in pronouns:
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


# German: "ich" and the verb after it ("Ich arbeite seit acht Jahren als DBA" -> "Arbeitet seit acht Jahren
# als DBA."). A clause with "mein" stays None: "sein" or "ihr" would guess the person's gender.
_DE_LEAD_IN = re.compile(
    r"^(?:(?:übrigens|nebenbei|also|und|ach ja|ok(?:ay)?|danke|zur info|fürs protokoll|eigentlich|so)\b[\s,:;!.-]*)+",
    re.IGNORECASE,
)
_DE_SUBJECT = re.compile(r"^ich\s+(?P<verb>[^\W\d_]+)\b\s*(?P<rest>.*)$", re.IGNORECASE | re.DOTALL)
_DE_IRREGULAR = {"bin": "ist", "habe": "hat", "hab": "hat", "mag": "mag", "kann": "kann", "darf": "darf",
                 "soll": "soll", "werde": "wird", "spreche": "spricht", "lese": "liest", "esse": "isst",
                 "gebe": "gibt", "nehme": "nimmt", "sehe": "sieht", "trage": "trägt", "fahre": "fährt",
                 "schlafe": "schläft", "laufe": "läuft", "halte": "hält", "lasse": "lässt", "vergesse": "vergisst"}
# An opinion of the moment, a wish, a need or a past event, not a lasting fact.
_DE_NOT_LASTING = frozenset({"glaube", "denke", "hoffe", "frage", "meine", "weiß", "will", "möchte", "brauche",
                             "versuche", "muss", "war", "hatte", "wollte", "sollte", "könnte", "würde", "wünsche",
                             "schätze", "vermute", "finde", "bekomme", "kriege", "verstehe", "sehe"})
_DE_PRONOUNS = [(re.compile(r"\bmich\b", re.IGNORECASE), "sich"), (re.compile(r"\bmir\b", re.IGNORECASE), "sich")]
_DE_POSSESSIVE = re.compile(r"\bmein(?:e[mnrs]?)?\b", re.IGNORECASE)
# "habe ... behoben", "bin ... umgezogen": a past event told in the perfect tense.
_DE_PARTICIPLE = re.compile(r"\b(?:ge[^\W\d_]{2,}(?:t|en)|[^\W\d_]+iert)\W*$", re.IGNORECASE)


# A second verb of the person after "und" / "oder" ("und nutze einen Screenreader"): German nouns are
# capitalised, so a small word ending in -e before a small word or a noun's article is a verb.
_DE_SECOND_VERB = re.compile(r"\b(und|oder|aber)\s+([a-zäöüß]{3,}e)(?=\s+[a-zäöüß])")


def _german_verb(verb: str) -> str | None:
    if verb in _DE_IRREGULAR:
        return _DE_IRREGULAR[verb]
    if verb.endswith("e") and len(verb) > 3:
        stem = verb[:-1]
        return stem + ("et" if stem.endswith(("t", "d")) else "t")
    return None


def _german(clause: str) -> str | None:
    text = " ".join((clause or "").split()).strip(" ,;:-")
    # The main clause only: what follows a comma is a clause of its own ("…, die Grundlagen kannst du dir sparen").
    text = _DE_LEAD_IN.sub("", text).strip().split(",", 1)[0]
    found = _DE_SUBJECT.match(text)
    if found is None or _DE_POSSESSIVE.search(text):
        return None
    verb, rest = found.group("verb").lower(), found.group("rest").strip()
    if not rest or verb in _DE_NOT_LASTING or re.match(r"(?i)(?:das|es|dies|dann|mal|gleich|kurz)\b", rest):
        return None  # "Ich teste das mal": about this chat's moment, not the person
    if verb in ("habe", "hab", "bin") and _DE_PARTICIPLE.search(rest):
        return None
    head = _german_verb(verb)
    if head is None:
        return None
    rest = _DE_SECOND_VERB.sub(lambda m: f"{m.group(1)} {_german_verb(m.group(2)) or m.group(2)}", rest)
    body = f"{head} {rest}"
    return _entry(body, _DE_PRONOUNS)
