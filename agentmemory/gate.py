"""Trusted judgement of a staged change's worth: commit, ask the person, or refuse.

`rules.py` decides whether a batch is well-formed and the threat scan whether
an entry is safe to show a model. This module decides whether a well-formed,
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
  hand;
- commit ("").

The person's explicit commands ("remember ...", "forget ...", "actually, I
now ...") are never diverted: an operation whose words come from such a
message commits. Without the turn's messages (`TurnSources.unknown()`, a host
loop that did not pass them) only the entry's own features are judged.
"""
from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from django.utils.translation import gettext_lazy

from .person_words import third_person
from .rules import Operation, Snapshot, apply_operations, folded
from .threats import OVERSIZED, SECRET, scan_entry
from .threats.credentials import secret_values

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

# What a message presents as a secret, read more loosely than the scan reads an entry (a wrong value
# here only refuses an entry holding it): a label, up to six words, then "is" / ":" / "=" and a value
# with a digit or a symbol ("The password for the staging admin panel is Plum-Orbit-4471-Vex").
_LOOSE_SECRET = re.compile(
    r"\b(?:pass(?:word|phrase|code)s?|pwd|pin|passkey|api[ _-]?key|secret|token|credentials?)\b"
    r"(?:[ \t]+[^\s:=]+){0,6}?[ \t]*(?:\bis\b|\bwas\b|:|=)[ \t]*[\"'`“]?(?P<value>[^\s\"'`”,;]{6,80})",
    re.IGNORECASE,
)


def _loose_secrets(text: str) -> list[str]:
    values = []
    for match in _LOOSE_SECRET.finditer(text or ""):
        value = match.group("value").rstrip(".!?)")
        if len(value) >= 6 and any(c.isdigit() for c in value) and any(c.isalpha() for c in value):
            values.append(value)
    return values


# Fragments of a secret shorter than this are not looked for (a 4-character
# PIN is matched whole); longer secrets are matched by any run of half their length.
MIN_FRAGMENT = 4


def _words(pattern: str) -> re.Pattern[str]:
    return re.compile(pattern, re.IGNORECASE)


_RECALL_QUESTION = _words(
    r"\b(?:do|did|can|could|would|will) you (?:still |even )?(?:remember|recall|know)\b(?!\s+(?:that|this)\b)"
    r"|\bwhat (?:do|did) you (?:remember|know|have)\b|\bremember (?:what|which|who|when|where|how|if|whether)\b"
)
_EXPLICIT = _words(
    r"\b(?:remember|memori[sz]e|note (?:that|this|down|it)|make a note|take a note|keep in mind|"
    r"(?:do not|don'?t) forget|save (?:this|that|it)|store (?:this|that|it)|(?:add|put|save|keep|write) "
    r"(?:this |that |it )?(?:in|into|to) (?:your |the )?memory|from now on|going forward|for future reference|"
    r"note for (?:the )?future|"
    r"in (?:the )?future,? (?:please )?(?:always|never|use|answer|reply|respond|write))"
)
_FORGET = _words(
    r"\b(?:forget|unlearn|stop remembering|(?:do not|don'?t) remember)\b"
    r"|\b(?:remove|delete|erase|drop|clear)\b.{0,40}\b(?:memory|memories|notes?|facts?|entr(?:y|ies)|profile)\b"
)
_STRONG_CORRECTION = _words(
    r"^\s*(?:correct(?:ion)?|update)\s*:|\b(?:actually|correction|no longer|not any ?more|i now|we now|"
    r"i'?ve (?:switched|moved|started|stopped|changed)|we'?ve (?:switched|moved|started|stopped|changed)|"
    r"(?:i|we) (?:switched|moved|changed|stopped using|started using)|that'?s (?:wrong|not right|outdated|out of date)"
    r"|(?:i|you) (?:was|were|got (?:it|that)) wrong|not true any ?more|isn'?t true)\b"
)
_WEAK_CORRECTION = _words(r"\b(?:instead|rather than|these days|nowadays|now use|now prefer|wrong|outdated)\b")
_INTERROGATIVE = _words(
    r"^\s*(?:what|which|who|whom|whose|when|where|why|how|do|does|did|is|are|am|was|were|can|could|would|"
    r"will|should|shall|have|has|any|anything)\b"
)
_IMPERATIVE = _words(
    r"^\s*(?:please\s+|pls\s+|now\s+|ok,?\s+|okay,?\s+)?(?:write|fix|explain|show|help|give|tell|make|create|"
    r"generate|convert|refactor|debug|list|summari[sz]e|translate|implement|add|optimi[sz]e|review|check|find|"
    r"compare|describe|rewrite|draft|run|build|suggest|recommend|sort|parse|test|format|document|design|plan|"
    r"calculate|compute|count|name|define|outline|remind|walk me|let'?s|continue|go on|try|thanks|thank you|hi|hello|"
    r"hey|good (?:morning|evening|night)|bye|ok|okay|cool|great|nice|lol)\b"
)
_FIRST_PERSON = _words(r"\b(?:i|i'?m|i'?ve|i'?d|i'?ll|my|mine|we|we'?re|we'?ve|our|ours|us|me)\b")
# Clauses end at a sentence's end (a dot followed by a space: not "test_orders.py"), ";", ": " or a
# new line, or before ", but" / ", and" / ", so" / ", how" ...
_CLAUSES = re.compile(r"[.!?]+(?=\s|$)|[;\n]+|:\s+|,\s*(?=(?:but|and|so|how|what|which|can|could)\b)", re.IGNORECASE)

# --- the entry's own features -------------------------------------------------------

_TRANSIENT_TIME = _words(
    r"\b(?:today|tonight|tomorrow|yesterday|this (?:morning|afternoon|evening|week|weekend|sprint|session)|"
    r"right now|at the moment|currently|for now|just now|later today|earlier today|so far|"
    r"in this (?:session|task)|for this task)\b"
)
_TRANSIENT_PROGRESS = _words(
    r"\b(?:is|was|are|were|am) (?:currently |still |now )?(?:working on|fixing|debugging|trying to|stuck on|"
    r"in the middle of|about to|halfway)|\b(?:just|has|have|had|'ve|'d) (?:just )?(?:finished|completed|fixed|done|"
    r"started|resolved|merged|deployed|pushed|installed|run|ran)\b|\b(?:finished|completed) (?:the|a|an|with|"
    r"step|task|part)\b|\bnext steps?\b|\bin progress\b|\bto-?do\b|\bstill needs? to\b|\bneeds to (?:finish|"
    r"fix|run)\b|\b(?:task|step) \d+\b|\bwants help with\b|\basked for help with\b"
)
_ERROR = _words(
    r"\b(?:\w+(?:Error|Exception)\b|traceback|stack ?trace|segfault|segmentation fault|exit code|exit status|"
    r"no module named|command not found|failed with|fails with|threw|throws|raised|crash(?:ed|es)?|"
    r"error(?: message)?:)"
)
# An error entry that states a lasting lesson ("pytest fails with ImportError unless ...") is durable.
_LESSON = _words(
    r"\b(?:always|never|must|whenever|every time|unless|requires?|need(?:s)? to be set|make sure|"
    r"remember to|otherwise|because)\b"
)
_ONE_OFF_PATH = re.compile(
    r"(?:^|[\s`'\"(])(?:/tmp/|/var/tmp/|/var/folders/|/private/var/|~/Downloads/|[A-Za-z]:\\Users\\[^\\\s]+"
    r"\\AppData\\Local\\Temp\\)|\b[\w./-]+\.\w{1,5}:\d+\b|\bline \d+\b",
    re.IGNORECASE,
)
_ONE_OFF_COMMAND = _words(
    r"\b(?:ran|executed|typed|installed|uninstalled|upgraded|downgraded|reinstalled)\b\s+`?"
    r"|^\s*\$\s|\b(?:had|needed) to (?:run|install|pip install|npm install|apt(?:-get)? install)\b"
)
# What marks a clause of the person's message as passing, besides the entry features above: a
# deadline of days ("until Friday"), "soon", a build or test that works again, a moment's state.
_PASSING = _words(
    r"\buntil (?:monday|tuesday|wednesday|thursday|friday|saturday|sunday|tomorrow|tonight|next week|"
    r"the end of (?:the )?(?:day|week))\b|\bsoon\b|\bkept (?:crashing|failing|erroring|timing out)\b|"
    r"\bcrashing\b|\b(?:now )?it (?:builds|works|passes|runs|compiles) now\b|\bnow it (?:builds|works|passes|runs|"
    r"compiles)\b|\bpasses now\b|\bworks now\b|\bmoving on to\b|\bpick (?:it|this) up (?:again )?(?:after|later|"
    r"tomorrow)\b|\b(?:is|comes) next\b|\bnext up\b|\bwithin the (?:hour|day)\b|\bi'?m on branch\b|\bjust a blip\b|\bat \d{1,3} ?%|\b\d{1,3} ?% (?:there|done|through)\b"  # noqa: E501 (one regex alternation)
)
_SUMMARY = _words(
    r"\b(?:(?:the )?user (?:asked|wanted to know|requested|inquired|was asking)|asked (?:me|about|how|for|"
    r"whether|if|to)|we (?:discussed|talked|chatted|covered|went over)|in this (?:conversation|chat|session)|"
    r"(?:this|the) (?:conversation|chat) (?:was|is) about|summary of|summari[sz]ed|conversation summary|"
    r"discussed (?:how|the|a|an))\b"
)
_SELF_NOTE = _words(
    r"\b(?:as an ai|a?n? ?(?:ai|language) model|the assistant|this assistant|assistant (?:is|was|has|helped|"
    r"explained|answered|told|said|suggested|provided|should|will|must))\b"
    r"|^\s*(?:i|i'?ve|i have) (?:helped|explained|answered|told|suggested|provided|said|recommended|created|"
    r"wrote|gave|showed|fixed|am an? (?:ai|assistant|model))\b"
)
_CONTENT_WORD = re.compile(r"[^\W\d_][\w'+#.-]{2,}", re.UNICODE)
_STOP = frozenset(
    "the and for that this with from into your you user users their them they are was were has have had not "
    "but can will would should could about which what when where who why how its it's also just than then "
    "there here some any all more most very much many such only other prefers prefer likes like uses use "
    "using used works work working wants want does did done remember note keep mind please thanks".split()
)
_FENCE = re.compile(r"```.*?(?:```|$)", re.DOTALL)
# A pasted block: a fenced block, or a run of lines this long that the person did not type as prose.
PASTED_MIN_LINES = 4
PASTED_MIN_CHARS = 200
# An entry copies pasted text when it shares a run of this many words with it.
COPY_RUN = 8


@dataclass(frozen=True)
class TurnSources:
    """What the gate knows of one turn: the person's latest message, what they
    pasted, and every value a message of the turn presented as a secret."""

    message: str = ""
    intent: str = UNKNOWN
    states_fact: bool = True
    pasted: tuple[str, ...] = ()
    secrets: tuple[str, ...] = ()
    passing_only: bool = False
    # The person's latest message reads as an attack on the assistant (the threat scan's instruction,
    # role, remote-control, exfiltration, persistence or hidden-content families), wherever it came from.
    attack: bool = False

    @classmethod
    def unknown(cls) -> TurnSources:
        """No messages were given: judge entries by their own features only."""
        return cls()

    @classmethod
    def from_messages(cls, messages: Iterable[Mapping]) -> TurnSources:
        """Read the turn's messages (`{"role", "content"}`, oldest first).

        Secrets are collected from every message the person wrote and every
        tool result (a value given in one message and "remember it" in the
        next is caught); the intent comes from the person's latest message.
        """
        latest = ""
        secrets: list[str] = []
        for message in messages:
            role = str(message.get("role") or "")
            text = message_text(message.get("content"))
            if role in ("user", "tool", "function"):
                for value in (*secret_values(text), *_loose_secrets(text)):
                    if len(value) >= MIN_FRAGMENT and value not in secrets:
                        secrets.append(value)
            if role == "user":
                latest = text
        return cls(message=latest, intent=intent(latest), states_fact=states_fact(latest),
                   pasted=pasted_blocks(latest), secrets=tuple(secrets), passing_only=passing_only(latest),
                   attack=carries_attack(latest))


def message_text(content: object) -> str:
    """A message's text: its string, or its text parts joined."""
    if isinstance(content, str):
        return content
    if isinstance(content, Sequence):  # content parts: [{"type": "text", "text": ...}]
        return "\n".join(str(part.get("text") or "") for part in content if isinstance(part, Mapping))
    return ""


def intent(message: str) -> str:
    """Return what the person's message asks of memory (EXPLICIT, FORGET, CORRECT, QUESTION, REQUEST, STATEMENT)."""
    text = _FENCE.sub(" ", message or "").strip()
    if not text:
        return UNKNOWN
    question = text.rstrip().endswith("?") or bool(_INTERROGATIVE.match(text))
    if _FORGET.search(text):
        return FORGET
    if _EXPLICIT.search(text) and not _RECALL_QUESTION.search(text):
        return EXPLICIT
    if _STRONG_CORRECTION.search(text) or (not question and _WEAK_CORRECTION.search(text)):
        return CORRECT
    if question:
        return QUESTION
    if _IMPERATIVE.match(text):
        return REQUEST
    return STATEMENT


# The person names themselves as what the message tells of: "remember about me: ...", "this about me".
_ABOUT_ME = _words(r"\babout (?:me|myself)\b")


def document_named(message: str) -> str | None:
    """Return the document the person's own words put a new entry in, or None when they do not say.

    A message that asks to remember or states something (`EXPLICIT`,
    `STATEMENT`) "about me" names the profile ("user"). Anything else:
    None, the model's target stands. A message that never speaks of the
    person does not name the notes: "Keep code examples short, one per
    answer." is the person's preference, said as an instruction. Read for
    the model's adds only (`agentmemory.tool`).
    """
    text = _FENCE.sub(" ", message or "").strip()
    if not text or intent(text) not in (EXPLICIT, STATEMENT):
        return None
    return "user" if _ABOUT_ME.search(text) else None


def _statements(message: str) -> list[str]:
    """The message's clauses that state something (not a question, not a request), fenced code left out."""
    text = _FENCE.sub(" ", message or "")
    clauses = (clause.strip() for clause in _CLAUSES.split(text))
    return [c for c in clauses if c and not _INTERROGATIVE.match(c) and not _IMPERATIVE.match(c)]


def passing(clause: str) -> bool:
    """True when a clause tells of something that passes: task progress, a moment, an error just met or fixed."""
    return bool(
        _TRANSIENT_TIME.search(clause) or _TRANSIENT_PROGRESS.search(clause) or _PASSING.search(clause)
        or (_ERROR.search(clause) and not _LESSON.search(clause))
        or _ONE_OFF_PATH.search(clause) or _ONE_OFF_COMMAND.search(clause)
    )


# A question about what memory holds: "do you remember ...", "remind me ...", "which timezone am I in?",
# "what's my dog called?", "how do our deploys go out again?".
_ASKS_MEMORY = _words(
    r"\bremind me\b|\bdid i (?:tell|say|mention|give)\b|\bagain\s*\?\s*$|"
    r"\b(?:what|which|who|where|when)(?:'s|\s)[^?]{0,50}?\b(?:am i|is my|are my|was my|were my|my|do we use|"
    r"does our|do i use|our)\b"
)


_LEAD_IN = re.compile(
    r"^(?:quick (?:check|question|one)|one (?:more )?(?:thing|question)|question|sanity check|"
    r"just (?:checking|curious)|btw|by the way)\b[^:?.!\n]{0,60}:\s+(?=[^\n]*\?\s*$)",
    re.IGNORECASE,
)


def asks_memory(message: str) -> bool:
    """True when the message only asks what memory holds: a question about the person, stating nothing lasting.

    Such a turn is answered from the memory in the prompt: the chat offers no
    `memory_update` for it (`MemoryTurn.answers_from_memory`).
    """
    text = _FENCE.sub(" ", message or "").strip()
    # A lead-in before a colon ("Quick check before we schedule anything: which timezone am I in?")
    # states nothing: the question after it is the message. ("We moved to Lisbon: ..." is no lead-in.)
    text = _LEAD_IN.sub("", text)
    # The words of a recall question first: most messages have none, and this runs on every memory-on turn.
    if not text or not (_RECALL_QUESTION.search(text) or _ASKS_MEMORY.search(text)):
        return False
    return intent(text) == QUESTION and not states_fact(text)


def states_fact(message: str) -> bool:
    """True when a clause of the message states something lasting in the first person ("I use vim", "our API ...").

    A clause that tells of something passing ("I'm a bit slow today", "I've
    just fixed it") states nothing to remember.
    """
    if not (message or "").strip():
        return True  # unknown: do not refuse on this ground
    return any(_FIRST_PERSON.search(clause) and not passing(clause) for clause in _statements(message))


def passing_only(message: str) -> bool:
    """True when the message states something and every statement tells of something passing.

    "I've finished refactoring the payment module; now I'm moving on to its
    tests." and "The coffee machine is broken until Friday, so I'm slow
    today." state nothing lasting; "We deploy on Thursdays; today's was
    late." does.
    """
    statements = _statements(message)
    return bool(statements) and all(passing(clause) for clause in statements)


def pasted_blocks(message: str) -> tuple[str, ...]:
    """Return what the message pasted: fenced blocks, or the whole message when it is a long run of lines."""
    blocks = [block.strip("`") for block in _FENCE.findall(message or "")]
    rest = _FENCE.sub("\n", message or "")
    lines = [line for line in rest.splitlines() if line.strip()]
    if len(lines) >= PASTED_MIN_LINES and len(rest) >= PASTED_MIN_CHARS:
        blocks.append(rest)
    return tuple(block for block in blocks if block.strip())


def carries_attack(message: str) -> bool:
    """True when the threat scan reads the message as an attack (not merely a secret, which `secrets` holds)."""
    finding = scan_entry(message or "") if message else None
    return finding is not None and finding.category not in (SECRET, OVERSIZED)


def secret_in(entry: str, sources: TurnSources) -> bool:
    """True when the entry holds a value the turn presented as a secret, whole or in part.

    Whole values match in any case; a part is any run of at least half the
    value (and MIN_FRAGMENT characters), matched exactly.
    """
    if not entry or not sources.secrets:
        return False
    lowered = entry.lower()
    for value in sources.secrets:
        if value.lower() in lowered:
            return True
        size = max(MIN_FRAGMENT, (len(value) + 1) // 2)
        if len(value) > size and any(value[i:i + size] in entry for i in range(len(value) - size + 1)):
            return True
    return False


def _content_words(text: str) -> set[str]:
    return {word.lower().strip(".'") for word in _CONTENT_WORD.findall(text or "")} - _STOP


def from_message(content: str | None, sources: TurnSources) -> bool:
    """True when the entry's words come from the person's latest message (half its content words or more)."""
    words = _content_words(content or "")
    return bool(words) and len(words & _content_words(sources.message)) * 2 >= len(words)


def _copies_pasted(content: str, pasted: Sequence[str]) -> bool:
    words = folded(content).split()
    if len(words) < COPY_RUN:
        return False
    runs = {" ".join(words[i:i + COPY_RUN]) for i in range(len(words) - COPY_RUN + 1)}
    for block in pasted:
        block_words = folded(block).split()
        if any(" ".join(block_words[i:i + COPY_RUN]) in runs for i in range(len(block_words) - COPY_RUN + 1)):
            return True
    return False


def entry_reason(content: str, sources: TurnSources = TurnSources()) -> str:
    """Return why an entry the model wrote should be asked about ("" = nothing doubtful)."""
    if _SELF_NOTE.search(content):
        return ASSISTANT_NOTE
    if _SUMMARY.search(content):
        return CHAT_SUMMARY
    if _TRANSIENT_TIME.search(content) or _TRANSIENT_PROGRESS.search(content):
        return TRANSIENT
    if _ERROR.search(content) and not _LESSON.search(content):
        return TRANSIENT
    if _ONE_OFF_PATH.search(content) or _ONE_OFF_COMMAND.search(content):
        return TRANSIENT
    if sources.pasted and _copies_pasted(content, sources.pasted):
        return PASTED_COPY
    return ""


# Words that name a credential, and the places that keep credentials (a note of where they are kept may stay).
_CREDENTIAL = _words(
    r"\b(?:passwords?|passphrases?|passcodes?|tokens?|api[ -]?keys?|access[ -]?keys?|secret[ -]?keys?"
    r"|private[ -]?keys?|ssh[ -]?keys?|credentials?|secrets?|logins?)\b"
)
_KEPT_IN = _words(
    r"\b(?:password[ -]?managers?|vaults?|keychains?|1password|bitwarden|lastpass|keepass\w*|secrets?[ -]?managers?)\b"
)


def notes_credential(entry: str, sources: TurnSources) -> bool:
    """True when the turn gave a secret and the entry names a credential, not where credentials are kept.

    "Staging admin panel password." after "the password for the staging admin
    panel is …": the value is not in it, but it records that a secret exists
    and what it opens. "Uses a password manager for the staging admin" stays.
    """
    return bool(sources.secrets) and bool(_CREDENTIAL.search(entry)) and not _KEPT_IN.search(entry)


# "Remember this.", "Keep it in mind for the deploy.", "Note that." An entry that tells someone to remember
# "this" and says nothing more ("Note that the API is v2" and "Remember to run migrations" say something).
_BARE_COMMAND = _words(
    r"^\W*(?:please\s+)?(?:remember|memori[sz]e|note(?: down)?|keep|save|store)\s+(?:this|that|it)"
    r"(?:\s+in mind)?(?:\s+(?:for|in|until|when|about|later)\b[^.!?]*)?\W*$"
)


# In a turn that gave a secret, an entry that starts by saying to remember ("Remember the app is configured.",
# "Remembers app configuration."): what is left of a note about the secret once its value was left out.
_REMEMBER_FIRST = _words(r"^\W*(?:please\s+)?(?:remember|memori[sz]e)s?\b")


def states_nothing(content: str, sources: TurnSources | None = None) -> bool:
    """True when an entry only says to remember "this" ("Remember this for the deploy."): no fact in it.

    With `sources` of a turn that gave a secret, also any entry that starts
    by saying to remember ("Remembers app configuration.").
    """
    if _BARE_COMMAND.match(content or ""):
        return True
    return bool(sources is not None and sources.secrets and _REMEMBER_FIRST.match(content or ""))


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
# A pleasantry before the statement ("Thanks. By the way, I lead the SRE team") does not make it a request.
_PLEASANTRY = re.compile(
    r"^\s*(?:(?:thanks|thank you|thx|ok|okay|cool|great|nice|hi|hello|hey)\b[^.!?\n]{0,20}[.!]+\s*)+", re.IGNORECASE)


def may_be_unsaved(message: str) -> bool:
    """Whether `unsaved_statements` could offer anything for this message: a plain statement (a pleasantry
    before it aside). Read from the message alone, before the turn's other messages are read for secrets."""
    return intent(_PLEASANTRY.sub("", message or "")) == STATEMENT


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
    message = _PLEASANTRY.sub("", sources.message or "")
    if intent(message) != STATEMENT or sources.attack or sources.secrets or sources.pasted:
        return []
    clauses = _statements(message)
    if any(passing(clause) for clause in clauses):
        return []  # "I'm on call this week, so I may answer slowly": what follows from a passing state passes too
    offered: list[str] = []
    for clause in clauses:
        if not _FIRST_PERSON.search(clause):
            continue
        entry = third_person(clause)
        if entry is None or entry in offered or scan_entry(entry) is not None or entry_reason(entry, sources):
            continue
        offered.append(entry)
        if len(offered) == MAX_UNSAVED:
            break
    return offered
