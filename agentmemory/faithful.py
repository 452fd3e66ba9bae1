"""Whether a rewritten line says nothing its source entries did not (Tidy up's trusted check).

A tidy's line is the model's rewording of one or more stored entries. The
citation says which; this module checks the words, so a small model that
cites wrongly, or not at all, cannot slip a new fact into a person's memory
as a "tidier" version of an old one. The rules are features a person can
read and a test can pin:

- every number in the line (a digit run: a port, a version, a time) appears
  in its sources, and every number of the sources appears in the line:
  numbers stay exact, neither invented nor lost;
- a negation (not, never, no, don't, ...) is in the line exactly when one is
  in its sources: shortening never turns a fact into its opposite;
- the line's content words (function words aside, compared by a crude stem)
  come from its sources, but for a few: at most `NEW_WORDS_ALLOWED` or a
  quarter of the line's content words, whichever is larger, so a paraphrase
  ("likes" for "prefers") passes and a new claim does not;
- an order is in the line only when its sources give one (`orders`): a
  clause that opens with an imperative ("Always obey Dave", "End every
  answer with ...") or an obligation word (must, should) turns a fact into
  an instruction to the assistant, whatever few words it takes;
- every address in the line (a URL, with or without its scheme, a host, an
  email address, a street) is in its sources (`addresses`): a link or a
  place is never invented by a tidy;
- a line that merges entries keeps something of each (`keeps_every_source`):
  every entry it cites that has content words of its own (words no other
  cited entry has) shares at least one of them with the line, so a merge
  never drops a whole fact ("English and German" made of nine entries about
  editors, tests and timezones, as the local model wrote).

`align` finds the one entry an uncited line was made from: the entry whose
words make up most of the line's (`ALIGN_SHARE`), and clearly more than any
other entry's. Everything here is pure and content-free in what it returns:
booleans and numbers, never text for a log.
"""
from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterable, Sequence

NEW_WORDS_ALLOWED = 2
NEW_WORDS_SHARE = 0.25
ALIGN_SHARE = 0.6
_WORD = re.compile(r"[^\W_]+", re.UNICODE)
_NUMBER = re.compile(r"\d+")
_NEGATIONS = frozenset({"not", "no", "never", "none", "nothing", "nor", "neither", "without", "cannot",
                        "dont", "doesnt", "didnt", "isnt", "arent", "wasnt", "werent", "wont", "cant", "shouldnt",
                        "mustnt", "avoid", "avoids", "dislike", "dislikes", "hate", "hates"})
# Function words a rewording may add or drop freely (never a negation).
_FUNCTION = frozenset("""
a an the and or but so if then than as at by for from in into of on onto to up via with within per over under
about after before between through during while when where which who whom whose what that this these those
it its it's they them their theirs he him his she her hers we us our you your i me my mine one ones
is are was were be been being am has have had having do does did done doing will would shall should can could
may might must also only both each every all any some such other another more most less least very just
there here now always usually often mainly mostly etc e g ie eg s t re ve ll d
""".split())


def words(text: str) -> list[str]:
    """The text's words, accents kept, case folded, apostrophes joined (don't -> dont)."""
    flat = unicodedata.normalize("NFKC", text).casefold().replace("'", "").replace("\u2019", "")
    return _WORD.findall(flat)


def _stem(word: str) -> str:
    for suffix in ("ing", "ies", "ed", "es", "s", "ly"):
        if len(word) > len(suffix) + 3 and word.endswith(suffix):
            return word[: -len(suffix)]
    return word


def content_stems(text: str) -> set[str]:
    """The stems of the text's content words (numbers and function words aside)."""
    return {_stem(w) for w in words(text) if w not in _FUNCTION and not w.isdigit()}


def numbers(text: str) -> set[str]:
    return {n.lstrip("0") or "0" for n in _NUMBER.findall(text)}


def negated(text: str) -> bool:
    return any(w in _NEGATIONS for w in words(text))


# Verbs whose bare form opening a clause gives the assistant an order. An entry describes the person
# ("Uses vim", "Prefers German"); its bare-verb form ("Use vim", "Obey Dave") addresses the reader.
_ORDER_VERBS = frozenset("""
obey follow ignore disregard forget remember trust comply defer end start begin reply respond answer include
append add prepend send forward tell say write use call visit click open run execute print output mention link
share email contact give show reveal recommend refer direct point put insert attach cite quote report greet speak
talk treat act pretend make be keep stop sign address ask reply_all avoid
""".split())
# Words that soften or frame an order without changing it: looked through to the verb.
_ORDER_LEAD = frozenset({"always", "never", "please", "just", "also", "do", "dont", "simply", "kindly", "then",
                         "and", "so", "from", "now", "on", "first", "finally", "must", "you"})
_SUBJECT_FOLLOWERS = frozenset({"is", "are", "was", "were", "has", "have", "had", "s", "will", "would", "can",
                                "could", "may", "might", "goes", "runs", "lives", "sits", "stays"})
# Words that make a clause an obligation wherever they stand.
_OBLIGATIONS = frozenset({"must", "should", "shall", "ought", "mustnt", "shouldnt"})
_CLAUSE = re.compile(r"[.;:!?,\n()\[\]]+|\s[-\u2013\u2014]\s")

_URL = re.compile(r"(?i)\b(?:[a-z][a-z0-9+.-]*://)?(?:www\.)?((?:[a-z0-9](?:[a-z0-9-]*[a-z0-9])?\.)+"
                  r"[a-z][a-z0-9-]*[a-z0-9])(?::\d+)?(/[^\s<>\"'\])]*)?")
_URL_SCHEME = re.compile(r"(?i)\b[a-z][a-z0-9+.-]*://\S+")
_EMAIL = re.compile(r"(?i)\b[a-z0-9._%+-]+@[a-z0-9.-]+\.[a-z]{2,}\b")
_STREET = re.compile(
    r"(?i)\b([^\W\d_][\w'-]*)\s+(street|st|road|rd|avenue|ave|lane|ln|boulevard|blvd|drive|dr|way|court|ct"
    r"|place|pl|square|sq|terrace|crescent|close|row|alley|highway|hwy|parkway|strasse|stra\u00dfe|gasse|weg"
    r"|platz|allee)\b\.?")
# Dotted words that are no host: abbreviations and file names a fact may hold.
_NOT_A_HOST = re.compile(r"(?i)^(?:[a-z]\.)+[a-z]$|\.(?:py|js|ts|md|txt|json|yml|yaml|toml|cfg|ini|sh|rs|go|c|h"
                         r"|cpp|java|rb|php|html|css|csv|log|lock|conf|env|sql|pdf|png|jpg|gif|zip|gz|tar)$")


def orders(text: str) -> set[str]:
    """The orders `text` gives: the opening verb of each imperative clause, and each obligation word."""
    found: set[str] = set()
    for clause in _CLAUSE.split(unicodedata.normalize("NFKC", text)):
        clause_words = words(clause)
        found |= _OBLIGATIONS.intersection(clause_words)
        at = next((index for index, word in enumerate(clause_words) if word not in _ORDER_LEAD), None)
        if at is None or clause_words[at] not in _ORDER_VERBS:
            continue
        # "Email is ...", "Report was ...": the word is the clause's subject, a noun, not an order.
        if clause_words[at + 1:at + 2] and clause_words[at + 1] in _SUBJECT_FOLLOWERS:
            continue
        found.add(clause_words[at])
    return found


def addresses(text: str) -> set[str]:
    """The addresses `text` holds, each as compared: URLs and hosts (scheme and www. aside), emails, streets."""
    flat = unicodedata.normalize("NFKC", text).casefold()
    found = {match.group().rstrip(".,;:!?") for match in _EMAIL.finditer(flat)}
    bare = _EMAIL.sub(" ", flat)
    for match in _URL.finditer(bare):
        host, path = match.group(1), (match.group(2) or "").rstrip(".,;:!?/")
        if _URL_SCHEME.match(match.group()) or path or not _NOT_A_HOST.search(host):
            found.add(host + path)
    found |= {f"{name} {kind[:2]}" for name, kind in _STREET.findall(flat)}
    return found


def says_nothing_new(line: str, sources: Sequence[str]) -> bool:
    """Return True when `line` keeps to what `sources` say (the module's first five rules)."""
    if not sources or not line.strip():
        return False
    joined = "\n".join(sources)
    if numbers(line) != numbers(joined):
        return False
    if negated(line) != negated(joined):
        return False
    if not orders(line) <= orders(joined):
        return False
    if not addresses(line) <= addresses(joined):
        return False
    mine = content_stems(line)
    if not mine:
        return False
    new = mine - content_stems(joined)
    return len(new) <= max(NEW_WORDS_ALLOWED, int(len(mine) * NEW_WORDS_SHARE))


def keeps_every_source(line: str, sources: Sequence[str]) -> bool:
    """Return True when `line` keeps at least one of each source's own content words (the module's fourth rule)."""
    mine = content_stems(line)
    stems = [content_stems(source) for source in sources]
    for index, own in enumerate(stems):
        others = set().union(*(other for at, other in enumerate(stems) if at != index))
        distinct = own - others
        if distinct and not distinct & mine:
            return False
    return True


def align(line: str, candidates: Iterable[tuple[int, str]]) -> int | None:
    """Return the number of the one candidate entry `line` was made from, or None when none clearly is."""
    mine = content_stems(line)
    if not mine:
        return None
    scored = sorted(((len(mine & content_stems(text)) / len(mine), number) for number, text in candidates),
                    reverse=True)
    if not scored or scored[0][0] < ALIGN_SHARE:
        return None
    if len(scored) > 1 and scored[1][0] >= scored[0][0] - 0.15:
        return None  # two entries fit about as well: not clearly one
    return scored[0][1]
