"""The memory rules: a pure function from a snapshot and a batch to a snapshot.

This module keeps the boundary between what the model proposes and what may
be stored. It imports nothing from Django and touches no database, clock or
network, so every rule is checked the same way for the agent's staging, the
locked commit that replays a batch, and a person's edit on the memory page.

Errors never carry memory content in their message: a message may reach logs,
spans or API responses. Content the model needs to recover (previews of
ambiguous matches, the entries of a full document) rides in separate
attributes that only the model-facing tool result reads.

Why one module of about 600 lines: it is the one boundary between what a
model proposes and what may be stored. Parsing, each operation's check,
matching, capacity and applying a batch rely on each other's guarantees (a
matched entry is normalized the way an added one was; capacity is checked on
the batch's result, not per step), and a change to any rule should be
reviewed with the others in view. The threat scan, the other pure family, is
its own package (`agentmemory.threats`).
"""
from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Literal

from .threats import is_blocked, scan_batch, scan_entry

Target = Literal["user", "memory"]
Action = Literal["add", "replace", "remove"]

TARGETS: tuple[Target, ...] = ("user", "memory")
ACTIONS: tuple[Action, ...] = ("add", "replace", "remove")
LIMITS: Mapping[str, int] = {"user": 1_375, "memory": 2_200}
SEPARATOR = "\n§\n"
MIN_OPERATIONS = 1
MAX_OPERATIONS = 20
PREVIEW_CHARS = 80
OPERATION_FIELDS = frozenset({"target", "action", "match", "content", "expires"})
# An entry's expiry: an ISO date (the last day it holds, in the person's time zone), shown beside the
# entry in the prompt as EXPIRY_SUFFIX and counted in the document's characters. "never" clears one.
CLEAR_EXPIRY = "never"
EXPIRY_SUFFIX = " (until {date})"
MAX_EXPIRY_YEARS = 10
ISO_DATE = re.compile(r"[0-9]{4}-[0-9]{2}-[0-9]{2}")
_EXPIRY_NOTE = re.compile(r"\s*\(until [0-9]{4}-[0-9]{2}-[0-9]{2}\)\s*$")

# model-facing: stays English, never translated (the prompt's memory block; the page translates its own
# headings in `agentmemory.words.DOCUMENT_TITLES`).
TITLES = {"user": "USER PROFILE", "memory": "AGENT MEMORY"}
_RESERVED_TAG = re.compile(r"<\s*/?\s*persistent_memory_data\s*>", re.IGNORECASE)
# A line that looks like a section header of the prompt's memory block
# ("USER PROFILE [41% - 564/1375 characters]") could make the model read
# what follows as another section; checked on the NFKC, case-folded text.
_HEADER_LINE = re.compile(r"^[^\w\[]*(user[\s_-]*profile|agent[\s_-]*memory)\s*\[", re.MULTILINE)
_DELIMITER_LINE = SEPARATOR.strip("\n")
_KEY_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,39}")


# model-facing: stays English, never translated (`message` is the tool reply the model reads; the
# person reads `agentmemory.words` for its `code`).
class MemoryValidationError(ValueError):
    """A batch broke a rule; nothing in it was applied.

    `position` is the 1-based index of the offending operation (None for a
    rule about the whole batch). `code` is a stable, content-free name of the
    rule. `candidates` and `entries` may hold memory content and are meant
    only for the model that is editing its own user's memory.
    """

    def __init__(
        self,
        message: str,
        *,
        code: str,
        position: int | None = None,
        target: str | None = None,
        candidates: Sequence[str] = (),
        entries: Sequence[str] = (),
    ) -> None:
        self.message = message
        self.code = code
        self.position = position
        self.target = target
        self.candidates = tuple(candidates)
        self.entries = tuple(entries)
        # The other target, when a failed match would have found its text there.
        self.elsewhere: str | None = None
        # over_capacity: how many characters the batch is over the limit.
        self.excess: int | None = None
        prefix = f"Operation {position}: " if position is not None else ""
        super().__init__(prefix + message)


@dataclass(frozen=True)
class Snapshot:
    """Both documents' entries and, for the entries that have one, their expiry.

    `expiry` holds `(target, entry, "YYYY-MM-DD")` triples, sorted; an entry
    not named there never expires. It is stored in the entry's provenance.
    """

    user: tuple[str, ...] = ()
    memory: tuple[str, ...] = ()
    expiry: tuple[tuple[str, str, str], ...] = ()

    def entries(self, target: str) -> tuple[str, ...]:
        return self.user if target == "user" else self.memory

    def expiries(self, target: str) -> dict[str, str]:
        """Return `{entry: date}` for the entries of `target` that expire."""
        return {entry: date for kind, entry, date in self.expiry if kind == target}

    def expiry_of(self, target: str, entry: str) -> str | None:
        return self.expiries(target).get(entry)

    def expired(self, today: str) -> dict[str, tuple[str, ...]]:
        """Return, per target, the entries whose last day (ISO) is before `today` (ISO)."""
        return {target: tuple(entry for entry in self.entries(target)
                              if (date := self.expiry_of(target, entry)) is not None and date < today)
                for target in TARGETS}

    def unexpired(self, today: str) -> Snapshot:
        """Return the snapshot without the entries past their date: what a prompt may show."""
        if not self.expiry:
            return self  # the common case, on every turn's read
        gone = self.expired(today)
        if not any(gone.values()):
            return self
        return with_expiry(
            Snapshot(user=tuple(e for e in self.user if e not in gone["user"]),
                     memory=tuple(e for e in self.memory if e not in gone["memory"])),
            {target: self.expiries(target) for target in TARGETS})


def with_expiry(snapshot: Snapshot, expiries: Mapping[str, Mapping[str, str]]) -> Snapshot:
    """Return `snapshot` with the expiries of its entries taken from `{target: {entry: date}}`."""
    triples = sorted((target, entry, date) for target in TARGETS
                     for entry, date in (expiries.get(target) or {}).items()
                     if date and entry in snapshot.entries(target))
    return Snapshot(user=snapshot.user, memory=snapshot.memory, expiry=tuple(triples))


@dataclass(frozen=True)
class Operation:
    """One change. `entry` pins a replace or remove to the exact entry it
    matched when it was staged; it is set by trusted code (`apply_batch`),
    never parsed from model or API input."""

    target: Target
    action: Action
    match: str | None = None
    content: str | None = None
    entry: str | None = None
    # None: the expiry is left as it is (an add: none); "never": cleared; "YYYY-MM-DD": set.
    # A replace may carry only an expiry (no content): the entry's text stays.
    expires: str | None = None


# What each operation of a batch did, in order (see `Applied`).
ADDED, DUPLICATE, REPLACED, UNCHANGED, REMOVED = "added", "duplicate", "replaced", "unchanged", "removed"
# What a forgiving batch (the model's tool, `forgive=True`) did with a slip that has one safe meaning:
# an add that also sent match (the match is ignored), a replace on an empty document (its content is
# added), a remove on an empty document (nothing to remove: a no-op).
ADDED_MATCH_IGNORED, ADDED_INSTEAD, NOTHING_TO_REMOVE = "added_match_ignored", "added_instead", "nothing_to_remove"
# ... and a replace of an entry the same batch removed before it ("remove X, then replace X with Y"): Y is added.
ADDED_AFTER_REMOVE = "added_after_remove"
# ... and a replace whose content is one word where the entry is a sentence: the word takes the
# matched words' place inside the entry ("match": "Ansible", "content": "Terraform").
PATCHED = "patched"
# A replace or an add of an existing entry that only set, changed or cleared the entry's expiry.
EXPIRY_CHANGED = "expiry_changed"
# How an event counts a replace that carries only an expiry (`summarize`): History names it as such.
EXPIRY_ACTION = "expiry"
# Effects that leave memory as it was.
NO_CHANGE = frozenset({DUPLICATE, UNCHANGED, NOTHING_TO_REMOVE})


@dataclass(frozen=True)
class Applied:
    """The result of a batch: the new snapshot, the operations with the entry
    each replace/remove resolved to pinned, and what each operation did.
    `replaced[i]` is the entry operation i replaced or removed (None for an add)."""

    snapshot: Snapshot
    operations: tuple[Operation, ...]
    effects: tuple[str, ...]
    replaced: tuple[str | None, ...]

    @property
    def to_stage(self) -> tuple[Operation, ...]:
        """Return the operations a ledger keeps: all but the no-op removes of a forgiving batch."""
        return tuple(op for op, effect in zip(self.operations, self.effects) if effect != NOTHING_TO_REMOVE)

    @property
    def changes(self) -> bool:
        """True when the batch changes memory."""
        return any(effect not in NO_CHANGE for effect in self.effects)


# Usage levels: a meter turns amber at WARN_PERCENT; at FULL_PERCENT it turns
# red and the chat's memory-full notice appears.
WARN_PERCENT = 75
FULL_PERCENT = 90


@dataclass(frozen=True)
class Usage:
    """How full one document is; `level` colours every meter and the memory-full notice."""

    used: int
    limit: int

    @property
    def percent(self) -> int:
        return self.used * 100 // self.limit if self.limit else 100

    @property
    def level(self) -> str:
        """"ok" below WARN_PERCENT, "warn" below FULL_PERCENT, else "full" (meters and notices agree)."""
        if self.percent >= FULL_PERCENT:
            return "full"
        return "warn" if self.percent >= WARN_PERCENT else "ok"

    def __str__(self) -> str:
        return f"{self.percent}% — {self.used:,}/{self.limit:,} chars"


@dataclass(frozen=True)
class BatchSummary:
    """Content-free counts of a batch, for events, spans and the UI."""

    operation_count: int
    targets: dict[str, int] = field(default_factory=dict)
    actions: dict[str, int] = field(default_factory=dict)


# --- normalisation and entry rules -------------------------------------------


def normalize_text(value: str) -> str:
    """Return `value` in NFC, with line endings unified and outer whitespace removed.

    NFC makes one fact typed in composed or decomposed form the same entry.
    """
    return unicodedata.normalize("NFC", value.replace("\r\n", "\n").replace("\r", "\n")).strip()


def folded(text: str) -> str:
    """Return the NFKC, case-folded form used to spot disguised markers
    (fullwidth tags, header look-alikes in any case)."""
    return unicodedata.normalize("NFKC", text).casefold()


def normalize_entry(value: object, *, position: int | None = None, target: str | None = None) -> str:
    """Return the stored form of an entry, or raise if it may not be stored."""
    if not isinstance(value, str):
        raise MemoryValidationError(
            "content must be a string with the complete entry.",
            code="invalid_content", position=position, target=target,
        )
    entry = normalize_text(value)
    if not entry:
        raise MemoryValidationError(
            "content is empty after trimming whitespace; write the fact itself.",
            code="empty_entry", position=position, target=target,
        )
    _check_characters(entry, position=position, target=target, what="content")
    if any(line.strip() == _DELIMITER_LINE for line in folded(entry).split("\n")):
        raise MemoryValidationError(
            f"content may not contain the entry delimiter (a line holding only '{_DELIMITER_LINE}'); "
            "store each fact as its own entry.",
            code="delimiter_in_entry", position=position, target=target,
        )
    if (threat := scan_entry(value)) is not None:
        raise MemoryValidationError(
            threat.message, code=f"threat_{threat.category}", position=position, target=target,
        )
    return entry


def normalize_match(value: object, *, position: int | None = None, target: str | None = None) -> str:
    """Return a match string normalised like content, or raise if unusable."""
    if not isinstance(value, str) or not normalize_text(value):
        raise MemoryValidationError(
            "match must be a non-empty substring of the one entry to change.",
            code="invalid_match", position=position, target=target,
        )
    match = normalize_text(value)
    _check_characters(match, position=position, target=target, what="match")
    if not match.replace(_DELIMITER_LINE, "").strip() or any(
        line.strip() == _DELIMITER_LINE for line in match.split("\n")
    ):
        raise MemoryValidationError(
            f"'{_DELIMITER_LINE}' only separates entries in the prompt; it is not part of any entry. "
            "Set match to a few words of the one entry to change.",
            code="separator_match", position=position, target=target,
        )
    return match


def _check_characters(text: str, *, position: int | None, target: str | None, what: str) -> None:
    for char in text:
        if char != "\n" and unicodedata.category(char) == "Cc":
            raise MemoryValidationError(
                f"{what} contains a control character (U+{ord(char):04X}); only plain text and "
                "newlines are allowed.",
                code="control_character", position=position, target=target,
            )
    canonical = folded(text)
    if _RESERVED_TAG.search(canonical):
        raise MemoryValidationError(
            f"{what} contains the reserved <persistent_memory_data> tag; remove the tag.",
            code="reserved_tag", position=position, target=target,
        )
    if _HEADER_LINE.search(canonical):
        raise MemoryValidationError(
            f"{what} has a line that imitates a section header of the memory block "
            "('USER PROFILE [...]' or 'AGENT MEMORY [...]'); write the fact without it.",
            code="reserved_header", position=position, target=target,
        )


# --- parsing untrusted input -------------------------------------------------


def parse_operations(raw: object, *, blank_is_absent: bool = False, forgive: bool = False) -> list[Operation]:
    """Return the operations of a tool call or API body, checked strictly.

    `raw` is the decoded `{"operations": [...]}` object. Unknown keys at any
    level are refused, so an argument such as `user_id` can never slip in.
    `forgive` (the model's tool only) lets an add carry a match, which
    `apply_batch(forgive=True)` then ignores, and reads a remove that names
    its entry in content as naming it in match (`_forgiven_remove`).
    """
    if not isinstance(raw, Mapping):
        raise MemoryValidationError(
            'Send an object of the form {"operations": [...]}.', code="invalid_arguments",
        )
    unknown = set(raw) - {"operations"}
    if unknown:
        raise MemoryValidationError(
            f"Unknown argument(s) {_key_names(unknown)}; only 'operations' is accepted. "
            "Memory always belongs to the signed-in user.",
            code="unknown_argument",
        )
    items = raw.get("operations")
    if not isinstance(items, list):
        raise MemoryValidationError("'operations' must be a list of operations.", code="invalid_arguments")
    check_batch_size(len(items))
    return [_parse_operation(item, position, blank_is_absent, forgive) for position, item in enumerate(items, start=1)]


def _parse_operation(item: object, position: int, blank_is_absent: bool = False, forgive: bool = False) -> Operation:
    if not isinstance(item, Mapping):
        raise MemoryValidationError(
            "each operation must be an object with target and action.",
            code="invalid_operation", position=position,
        )
    unknown = set(item) - OPERATION_FIELDS
    if unknown:
        raise MemoryValidationError(
            f"unknown field(s) {_key_names(unknown)}; use only target, action, match, content, expires.",
            code="unknown_field", position=position,
        )
    operation = Operation(
        target=item.get("target"),  # type: ignore[arg-type]
        action=item.get("action"),  # type: ignore[arg-type]
        match=_absent_if_blank(item.get("match")) if blank_is_absent else item.get("match"),  # type: ignore[arg-type]
        content=_absent_if_blank(item.get("content")) if blank_is_absent else item.get("content"),  # type: ignore[arg-type]
        expires=_absent_if_blank(item.get("expires")) if blank_is_absent else item.get("expires"),  # type: ignore[arg-type]
    )
    if forgive:
        operation = _forgiven_remove(operation)
    check_operation(operation, position, forgive=forgive)
    return operation


def _forgiven_remove(operation: Operation) -> Operation:
    """A model's remove with content or an expiry: slips with one meaning (the model's tool only).

    An expiry on a remove is dropped.

    No match: the content is the match. A match and a content that name the
    same words (one holds the other, in any case): the content is dropped.
    A content that says something else stays, and the remove is refused
    (`remove_with_content`): it may have meant a replace.
    """
    if operation.action != "remove":
        return operation
    if operation.expires is not None:  # a removed entry has no date to keep: the expiry means nothing
        operation = replace(operation, expires=None)
    if not isinstance(operation.content, str):
        return operation
    if operation.match is None:
        return replace(operation, match=operation.content, content=None)
    if isinstance(operation.match, str):
        match, content = " ".join(_match_words(operation.match)), " ".join(_match_words(operation.content))
        if match and content and (match in content or content in match):
            return replace(operation, content=None)
    return operation


def _absent_if_blank(value: object) -> object:
    # Models often send every field, blank where unused ({"action": "add",
    # "match": ""}); for the model's tool a blank string counts as absent.
    # The REST API keeps its documented schema (no blank strings).
    return None if isinstance(value, str) and not value.strip() else value


def _key_names(keys: set) -> str:
    # A key is model input too: name it only when it looks like a field name,
    # so free text smuggled into a key never reaches an error message.
    named = sorted(k for k in keys if isinstance(k, str) and _KEY_NAME.fullmatch(k))
    others = len(keys) - len(named)
    parts = [repr(k) for k in named] + ([f"{others} other key(s)"] if others else [])
    return ", ".join(parts)


def check_batch_size(count: int, maximum: int | None = None) -> None:
    maximum = MAX_OPERATIONS if maximum is None else maximum
    if not MIN_OPERATIONS <= count <= maximum:
        raise MemoryValidationError(
            f"A batch holds {MIN_OPERATIONS} to {maximum} operations; this one has {count}.",
            code="batch_size",
        )


def check_operation(operation: Operation, position: int, *, forgive: bool = False) -> None:
    """Raise unless the operation's target, action and fields fit together.

    With `forgive`, an add may carry a match (it is ignored when applied).
    """
    if operation.target not in TARGETS:
        raise MemoryValidationError(
            "target must be 'user' (the profile) or 'memory' (notes).",
            code="unknown_target", position=position,
        )
    if operation.action not in ACTIONS:
        raise MemoryValidationError(
            "action must be 'add', 'replace' or 'remove'.",
            code="unknown_action", position=position, target=operation.target,
        )
    for name in ("match", "content", "expires"):
        value = getattr(operation, name)
        if value is not None and not isinstance(value, str):
            raise MemoryValidationError(
                f"{name} must be a string or null.", code=f"invalid_{name}", position=position,
                target=operation.target,
            )
    if operation.action == "add":
        if operation.match is not None and not forgive:
            raise MemoryValidationError(
                "add takes content only: send it again without match (to change an existing entry, use "
                "replace with match).",
                code="add_with_match", position=position, target=operation.target,
            )
        if operation.content is None:
            raise MemoryValidationError(
                "add needs content: the complete new entry.",
                code="add_without_content", position=position, target=operation.target,
            )
    elif operation.action == "replace":
        if operation.match is None or (operation.content is None and operation.expires is None):
            raise MemoryValidationError(
                "replace needs match (a unique substring of the entry) and content (the complete new entry) "
                "or expires (only the entry's expiry changes).",
                code="replace_fields", position=position, target=operation.target,
            )
    else:
        if operation.expires is not None:
            raise MemoryValidationError(
                "remove takes match only; drop expires.",
                code="remove_with_expiry", position=position, target=operation.target,
            )
        if operation.content is not None:
            raise MemoryValidationError(
                "remove takes match only; drop content.",
                code="remove_with_content", position=position, target=operation.target,
            )
        if operation.match is None:
            raise MemoryValidationError(
                "remove needs match: a unique substring of the entry to remove.",
                code="remove_without_match", position=position, target=operation.target,
            )


def normalize_expiry(value: str | None, *, position: int | None = None, target: str | None = None,
                     today: str | None = None) -> str | None:
    """Return an operation's expiry as stored: None (untouched), "" (cleared) or an ISO date; or raise.

    Trusted code resolves a relative phrase ("for a week", "until Sunday")
    to a date in the person's time zone before the rules see it
    (`agentmemory.expiry`). With `today` (ISO), a date before it is refused,
    and so is one more than MAX_EXPIRY_YEARS ahead.
    """
    if value is None:
        return None
    text = value.strip()
    if text.casefold() == CLEAR_EXPIRY:
        return ""
    if not ISO_DATE.fullmatch(text) or not _real_date(text):
        raise MemoryValidationError(
            "expires must be a date as YYYY-MM-DD (the last day the entry holds), a phrase such as "
            "'for a week' or 'until Friday', or 'never' to keep the entry until it is removed.",
            code="invalid_expiry", position=position, target=target,
        )
    if today is not None:
        if text < today:
            raise MemoryValidationError(
                f"expires ({text}) is before today ({today}); give a later date or none.",
                code="expiry_past", position=position, target=target,
            )
        if int(text[:4]) > int(today[:4]) + MAX_EXPIRY_YEARS:
            raise MemoryValidationError(
                f"expires is more than {MAX_EXPIRY_YEARS} years ahead; use 'never' for an entry that lasts.",
                code="expiry_too_far", position=position, target=target,
            )
    return text


def _real_date(text: str) -> bool:
    year, month, day = (int(part) for part in text.split("-"))
    if not (1 <= month <= 12 and 1 <= day <= 31 and year >= 1):
        return False
    days = [31, 29 if (year % 4 == 0 and (year % 100 != 0 or year % 400 == 0)) else 28, 31, 30, 31, 30,
            31, 31, 30, 31, 30, 31]
    return day <= days[month - 1]


# --- the mutation ------------------------------------------------------------


def apply_operations(
    snapshot: Snapshot,
    operations: Sequence[Operation],
    limits: Mapping[str, int] = LIMITS,
    *,
    max_operations: int | None = None,
    today: str | None = None,
) -> Snapshot:
    """Return the snapshot after the ordered batch, or raise and change nothing.

    Each operation sees the result of the one before it; capacity is checked
    once, after the whole batch, so a consolidation can shorten an entry and
    add a new one in a single call. `max_operations` replaces the batch-size
    cap (MAX_OPERATIONS) for batches trusted code derives from stored
    versions, never for a model's or a caller's.
    """
    return apply_batch(snapshot, operations, limits, max_operations=max_operations, today=today).snapshot


def apply_batch(
    snapshot: Snapshot,
    operations: Sequence[Operation],
    limits: Mapping[str, int] = LIMITS,
    *,
    forgive: bool = False,
    max_operations: int | None = None,
    today: str | None = None,
) -> Applied:
    """Apply the ordered batch like `apply_operations`; return what it did.

    A replace or remove resolves to one entry: a pinned operation (`entry`
    set) to exactly that entry, or a `conflict` if it is gone; otherwise a
    match equal to a whole entry selects that entry, else the match must be
    a substring of exactly one entry.

    `forgive` (the model's tool only, never a replay or a person's edit)
    accepts the slips that have one safe meaning: an add's match is ignored;
    a replace on a document that is empty at that point of the batch adds
    its content; a remove there is a no-op; a replace whose content is one
    word, on an entry of three words or more, puts that word in place of the
    matched words inside the entry (`PATCHED`); a replace whose match names
    only an entry this batch removed before it adds its content
    (`ADDED_AFTER_REMOVE`). The returned operations say what
    to stage instead (`Applied.to_stage`). When the match is found in the
    other document, the slip is ambiguous and still refused (`no_match`).

    Expiries: an operation's `expires` (`normalize_expiry`; `today` refuses
    past dates) sets or clears the expiry of the entry it writes; a replace
    without one keeps the replaced entry's; an entry's expiry goes with it.
    """
    check_batch_size(len(operations), max_operations)
    entries = {"user": list(snapshot.user), "memory": list(snapshot.memory)}
    expiries: dict[str, dict[str, str]] = {target: snapshot.expiries(target) for target in TARGETS}
    pinned: list[Operation] = []
    effects: list[str] = []
    replaced: list[str | None] = []
    written: dict[tuple[str, str], int] = {}  # (target, entry) -> the position of the operation that wrote it
    removed_here: dict[str, list[str]] = {"user": [], "memory": []}  # what this batch removed, per document

    for position, operation in enumerate(operations, start=1):
        check_operation(operation, position, forgive=forgive)
        target = operation.target
        target_entries = entries[target]

        expires = normalize_expiry(operation.expires, position=position, target=target, today=today)
        if operation.action == "add":
            content = normalize_entry(operation.content, position=position, target=target)
            ignored = operation.match is not None
            if content in target_entries:
                if expires is not None and expires != expiries[target].get(content, ""):
                    _set_expiry(expiries[target], content, expires)
                    effects.append(EXPIRY_CHANGED)
                else:
                    effects.append(DUPLICATE)
            else:
                target_entries.append(content)
                written[(target, content)] = position
                _set_expiry(expiries[target], content, expires or "")
                effects.append(ADDED_MATCH_IGNORED if ignored else ADDED)
            pinned.append(replace(operation, match=None) if ignored else operation)
            replaced.append(None)
            continue

        match = normalize_match(operation.match, position=position, target=target)
        if forgive and (bare := _EXPIRY_NOTE.sub("", match)).strip():
            match = bare  # the model copied the prompt's "(until ...)" note into its match
        other = entries["memory" if target == "user" else "user"]
        if forgive and operation.entry is None and not target_entries and not any(match in e for e in other):
            if operation.action == "remove":
                effects.append(NOTHING_TO_REMOVE)
                pinned.append(operation)
            elif operation.content is None:
                raise MemoryValidationError(
                    f"'{target}' is empty, so there is no entry whose expiry could change.",
                    code="no_match", position=position, target=target,
                )
            else:
                target_entries.append(normalize_entry(operation.content, position=position, target=target))
                written[(target, target_entries[-1])] = position
                _set_expiry(expiries[target], target_entries[-1], expires or "")
                effects.append(ADDED_INSTEAD)
                pinned.append(Operation(target=target, action="add", content=operation.content,
                                        expires=operation.expires))
            replaced.append(None)
            continue
        if (forgive and operation.entry is None and operation.action == "replace" and operation.content is not None
                and not any(match in entry for entry in target_entries)
                and any(match in entry for entry in removed_here[target])):
            # "Remove X, then replace X with Y": X is gone already; Y is what the model wants kept.
            content = normalize_entry(operation.content, position=position, target=target)
            if content in target_entries:
                effects.append(DUPLICATE)
            else:
                target_entries.append(content)
                written[(target, content)] = position
                _set_expiry(expiries[target], content, expires or "")
                effects.append(ADDED_AFTER_REMOVE)
            pinned.append(Operation(target=target, action="add", content=operation.content, expires=operation.expires))
            replaced.append(None)
            continue
        index = _find_one(target_entries, match, operation.entry, other, position=position, target=target,
                          forgive=forgive)
        old = target_entries[index]
        pinned.append(replace(operation, entry=old))
        replaced.append(old)
        old_expiry = expiries[target].pop(old, "")
        if operation.action == "remove":
            del target_entries[index]
            removed_here[target].append(old)
            effects.append(REMOVED)
            continue

        if operation.content is None:  # only the expiry changes
            _set_expiry(expiries[target], old, expires or "")
            effects.append(EXPIRY_CHANGED if (expires or "") != old_expiry else UNCHANGED)
            continue
        content = normalize_entry(operation.content, position=position, target=target)
        patched = forgive and operation.entry is None and _is_word_patch(old, match, content)
        if patched:
            content = normalize_entry(old.replace(match, content), position=position, target=target)
            pinned[-1] = replace(operation, content=content, entry=old)
        if content != old and content in target_entries:
            raise MemoryValidationError(
                "the new content equals another existing entry; remove this entry instead.",
                code="replace_duplicate", position=position, target=target,
            )
        target_entries[index] = content
        if content != old:
            written[(target, content)] = position
        new_expiry = old_expiry if expires is None else expires
        _set_expiry(expiries[target], content, new_expiry)
        effects.append(UNCHANGED if content == old and new_expiry == old_expiry
                       else EXPIRY_CHANGED if content == old
                       else PATCHED if patched else REPLACED)

    updated = with_expiry(Snapshot(user=tuple(entries["user"]), memory=tuple(entries["memory"])), expiries)
    _refuse_split_phrases(updated, written)
    validate_capacity(updated, limits)
    return Applied(snapshot=updated, operations=tuple(pinned), effects=tuple(effects), replaced=tuple(replaced))


def _set_expiry(expiries: dict[str, str], entry: str, date: str) -> None:
    if date:
        expiries[entry] = date
    else:
        expiries.pop(entry, None)


def _refuse_split_phrases(updated: Snapshot, written: Mapping[tuple[str, str], int]) -> None:
    """Refuse an instruction split across two neighbouring entries, one of which this batch wrote.

    Each entry passed the scan alone; the prompt shows them one after the
    other, so the pair is read too (`threats.scan_batch`). Pairs of entries
    stored before are not re-read: an old pair never blocks a new batch.
    """
    for target in TARGETS:
        document = updated.entries(target)
        new = {index for index, entry in enumerate(document) if (target, entry) in written}
        if new and (split := scan_batch(document, new)) is not None:
            raise MemoryValidationError(
                split.finding.message, code=f"threat_{split.finding.category}",
                position=written[(target, document[split.index])], target=target,
            )


def _is_word_patch(entry: str, match: str, content: str) -> bool:
    """True when a replace sent one word for a sentence entry and its match is in the entry's text."""
    return len(content.split()) == 1 and len(entry.split()) >= 3 and match != entry and match in entry


def _find_one(
    entries: list[str], match: str, pinned: str | None, other: list[str], *, position: int, target: str,
    forgive: bool = False,
) -> int:
    if pinned is not None:
        if pinned in entries:
            return entries.index(pinned)
        raise MemoryValidationError(
            f"the entry this operation was staged against is no longer in '{target}': the memory "
            "changed while this turn ran, so the batch was not saved.",
            code="conflict", position=position, target=target, entries=entries,
        )
    if match in entries:
        return entries.index(match)
    indexes = [index for index, entry in enumerate(entries) if match in entry]
    if not indexes and forgive and pinned is None:
        indexes = _loose_matches(entries, match)
    if not indexes:
        if not entries:
            error = MemoryValidationError(
                f"'{target}' is empty, so there is nothing to replace or remove. To store a new fact, "
                "use add with content (and no match).",
                code="no_match", position=position, target=target,
            )
        else:
            error = MemoryValidationError(
                f"match found no entry in '{target}'. Set match to a few words copied exactly from one "
                "of current_entries, or use add for a new fact.",
                code="no_match", position=position, target=target, entries=entries,
            )
        if any(match in entry for entry in other):
            error.elsewhere = "memory" if target == "user" else "user"
        raise error
    if len(indexes) > 1:
        raise MemoryValidationError(
            f"match is ambiguous: it occurs in {len(indexes)} entries of '{target}'; "
            "use a longer substring that only the intended entry contains.",
            code="ambiguous_match", position=position, target=target,
            candidates=[preview(model_view(entries[index])) for index in indexes], entries=entries,
        )
    return indexes[0]


_MATCH_WORD = re.compile(r"[^\W_]+(?:['.+#-][^\W_]+)*")
# A loose match needs this many of its own words, all found in one entry.
LOOSE_MATCH_WORDS = 2


def _match_words(text: str) -> list[str]:
    return _MATCH_WORD.findall(folded(text))


def _loose_matches(entries: Sequence[str], match: str) -> list[int]:
    """The entries a model's match names loosely (the model's tool only, `forgive`): a slip with one meaning.

    First the match in any case, spacing or punctuation ("prefers german" in
    "Prefers German."); failing that, every word of the match (two or more)
    in one entry, in any order ("Miso cat" in "Has a cat named Miso"). The
    caller takes it only when exactly one entry qualifies; several are
    ambiguous, as for an exact match.
    """
    words = _match_words(match)
    if not words:
        return []
    phrase = " ".join(words)
    found = [index for index, entry in enumerate(entries) if phrase in " ".join(_match_words(entry))]
    if found or len(words) < LOOSE_MATCH_WORDS:
        return found
    wanted = set(words)
    return [index for index, entry in enumerate(entries) if wanted <= set(_match_words(entry))]


def validate_capacity(snapshot: Snapshot, limits: Mapping[str, int] = LIMITS) -> None:
    """Raise if a rendered document is longer than its limit."""
    for target in TARGETS:
        used = rendered_length(snapshot, target)
        limit = limits[target]
        if used > limit:
            error = MemoryValidationError(
                f"'{target}' would hold {used:,} characters, over its limit of {limit:,}. "
                "In the same batch, shorten or remove entries (consolidate related facts) "
                "before adding.",
                code="over_capacity", target=target, entries=snapshot.entries(target),
            )
            error.excess = used - limit
            raise error


# --- rendering and usage -----------------------------------------------------


def render_document(entries: Iterable[str]) -> str:
    """Return the stored and prompted form of one document."""
    return SEPARATOR.join(entries)


def parse_document(content: str) -> tuple[str, ...]:
    """Return the entries of a stored document (the inverse of render)."""
    return tuple(content.split(SEPARATOR)) if content else ()


def document_length(entries: Iterable[str]) -> int:
    return len(render_document(entries))


def expiry_note(date: str | None) -> str:
    """What the prompt shows after an entry that expires ("" for one that does not)."""
    return EXPIRY_SUFFIX.format(date=date) if date else ""


def rendered_length(snapshot: Snapshot, target: str) -> int:
    """The characters a document takes in the prompt: its entries, separators and expiry notes."""
    entries = snapshot.entries(target)
    if not snapshot.expiry:
        return document_length(entries)  # the common case, measured on every turn's prompt
    expiries = snapshot.expiries(target)
    return document_length(entries) + sum(len(expiry_note(expiries.get(entry))) for entry in entries)


def usage(snapshot: Snapshot, target: str, limits: Mapping[str, int] = LIMITS) -> Usage:
    return Usage(used=rendered_length(snapshot, target), limit=limits[target])


def model_view(entry: str) -> str:
    """Return a stored entry as the model may see it, in the prompt or a tool reply.

    An entry that matches a threat pattern (patterns change after entries
    are stored) becomes a `[BLOCKED ...]` marker, so a stored injection never
    reaches the model while it stays visible to its owner, who can remove it.
    """
    category = is_blocked(entry)
    if category is not None:
        return f"[BLOCKED: {category} — the user can review this entry on their memory page]"
    return entry


def preview(entry: str, width: int = PREVIEW_CHARS) -> str:
    """Return a one-line preview of an entry, at most `width` characters."""
    flat = " ".join(entry.split())
    return flat if len(flat) <= width else flat[: width - 1] + "…"


def summarize(operations: Sequence[Operation]) -> BatchSummary:
    """Count a batch by document and by action; a replace that carries only an expiry counts as "expiry"."""
    targets: dict[str, int] = {}
    actions: dict[str, int] = {}
    for operation in operations:
        targets[operation.target] = targets.get(operation.target, 0) + 1
        action: str = operation.action
        if action == "replace" and operation.content is None and operation.expires is not None:
            action = EXPIRY_ACTION
        actions[action] = actions.get(action, 0) + 1
    return BatchSummary(operation_count=len(operations), targets=targets, actions=actions)


def changed_targets(before: Snapshot, after: Snapshot) -> tuple[str, ...]:
    return tuple(t for t in TARGETS
                 if before.entries(t) != after.entries(t) or before.expiries(t) != after.expiries(t))
