"""The memory rules: a pure function from a snapshot and a batch to a snapshot.

This module keeps the boundary between what the model proposes and what may
be stored. It imports nothing from Django and touches no database, clock or
network, so every rule is checked the same way for the agent's staging, the
locked commit that replays a batch, and a person's edit on the memory page.

Errors never carry memory content in their message: a message may reach logs,
spans or API responses. Content the model needs to recover (previews of
ambiguous matches, the entries of a full document) rides in separate
attributes that only the model-facing tool result reads.
"""
from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Literal

from .threats import scan_entry

Target = Literal["user", "memory"]
Action = Literal["add", "replace", "remove"]

TARGETS: tuple[Target, ...] = ("user", "memory")
ACTIONS: tuple[Action, ...] = ("add", "replace", "remove")
LIMITS: Mapping[str, int] = {"user": 1_375, "memory": 2_200}
SEPARATOR = "\n§\n"
MIN_OPERATIONS = 1
MAX_OPERATIONS = 20
PREVIEW_CHARS = 80
OPERATION_FIELDS = frozenset({"target", "action", "match", "content"})

TITLES = {"user": "USER PROFILE", "memory": "AGENT MEMORY"}
_RESERVED_TAG = re.compile(r"<\s*/?\s*persistent_memory_data\s*>", re.IGNORECASE)
_DELIMITER_LINE = SEPARATOR.strip("\n")
_KEY_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,39}")


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
        prefix = f"Operation {position}: " if position is not None else ""
        super().__init__(prefix + message)


@dataclass(frozen=True)
class Snapshot:
    user: tuple[str, ...] = ()
    memory: tuple[str, ...] = ()

    def entries(self, target: str) -> tuple[str, ...]:
        return self.user if target == "user" else self.memory


@dataclass(frozen=True)
class Operation:
    target: Target
    action: Action
    match: str | None = None
    content: str | None = None


@dataclass(frozen=True)
class Usage:
    used: int
    limit: int

    @property
    def percent(self) -> int:
        return self.used * 100 // self.limit if self.limit else 100

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
    """Return `value` with line endings unified and outer whitespace removed."""
    return value.replace("\r\n", "\n").replace("\r", "\n").strip()


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
    if _DELIMITER_LINE in entry.split("\n"):
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
    return match


def _check_characters(text: str, *, position: int | None, target: str | None, what: str) -> None:
    for char in text:
        if char != "\n" and unicodedata.category(char) == "Cc":
            raise MemoryValidationError(
                f"{what} contains a control character (U+{ord(char):04X}); only plain text and "
                "newlines are allowed.",
                code="control_character", position=position, target=target,
            )
    if _RESERVED_TAG.search(text):
        raise MemoryValidationError(
            f"{what} contains the reserved <persistent_memory_data> tag; remove the tag.",
            code="reserved_tag", position=position, target=target,
        )


# --- parsing untrusted input -------------------------------------------------


def parse_operations(raw: object) -> list[Operation]:
    """Return the operations of a tool call or API body, checked strictly.

    `raw` is the decoded `{"operations": [...]}` object. Unknown keys at any
    level are refused, so an argument such as `user_id` can never slip in.
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
    return [_parse_operation(item, position) for position, item in enumerate(items, start=1)]


def _parse_operation(item: object, position: int) -> Operation:
    if not isinstance(item, Mapping):
        raise MemoryValidationError(
            "each operation must be an object with target and action.",
            code="invalid_operation", position=position,
        )
    unknown = set(item) - OPERATION_FIELDS
    if unknown:
        raise MemoryValidationError(
            f"unknown field(s) {_key_names(unknown)}; use only target, action, match, content.",
            code="unknown_field", position=position,
        )
    operation = Operation(
        target=item.get("target"),  # type: ignore[arg-type]
        action=item.get("action"),  # type: ignore[arg-type]
        match=item.get("match"),
        content=item.get("content"),
    )
    check_operation(operation, position)
    return operation


def _key_names(keys: set) -> str:
    # A key is model input too: name it only when it looks like a field name,
    # so free text smuggled into a key never reaches an error message.
    named = sorted(k for k in keys if isinstance(k, str) and _KEY_NAME.fullmatch(k))
    others = len(keys) - len(named)
    parts = [repr(k) for k in named] + ([f"{others} other key(s)"] if others else [])
    return ", ".join(parts)


def check_batch_size(count: int) -> None:
    if not MIN_OPERATIONS <= count <= MAX_OPERATIONS:
        raise MemoryValidationError(
            f"A batch holds {MIN_OPERATIONS} to {MAX_OPERATIONS} operations; this one has {count}.",
            code="batch_size",
        )


def check_operation(operation: Operation, position: int) -> None:
    """Raise unless the operation's target, action and fields fit together."""
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
    for name in ("match", "content"):
        value = getattr(operation, name)
        if value is not None and not isinstance(value, str):
            raise MemoryValidationError(
                f"{name} must be a string or null.", code=f"invalid_{name}", position=position,
                target=operation.target,
            )
    if operation.action == "add":
        if operation.match is not None:
            raise MemoryValidationError(
                "add takes content only; drop match, or use replace to change an entry.",
                code="add_with_match", position=position, target=operation.target,
            )
        if operation.content is None:
            raise MemoryValidationError(
                "add needs content: the complete new entry.",
                code="add_without_content", position=position, target=operation.target,
            )
    elif operation.action == "replace":
        if operation.match is None or operation.content is None:
            raise MemoryValidationError(
                "replace needs match (a unique substring of the entry) and content (the complete new entry).",
                code="replace_fields", position=position, target=operation.target,
            )
    else:
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


# --- the mutation ------------------------------------------------------------


def apply_operations(
    snapshot: Snapshot,
    operations: Sequence[Operation],
    limits: Mapping[str, int] = LIMITS,
) -> Snapshot:
    """Return the snapshot after the ordered batch, or raise and change nothing.

    Each operation sees the result of the one before it; capacity is checked
    once, after the whole batch, so a consolidation can shorten an entry and
    add a new one in a single call.
    """
    check_batch_size(len(operations))
    entries = {"user": list(snapshot.user), "memory": list(snapshot.memory)}

    for position, operation in enumerate(operations, start=1):
        check_operation(operation, position)
        target = operation.target
        target_entries = entries[target]

        if operation.action == "add":
            content = normalize_entry(operation.content, position=position, target=target)
            if content not in target_entries:
                target_entries.append(content)
            continue

        match = normalize_match(operation.match, position=position, target=target)
        index = _find_one(target_entries, match, position=position, target=target)
        if operation.action == "remove":
            del target_entries[index]
            continue

        content = normalize_entry(operation.content, position=position, target=target)
        if content != target_entries[index] and content in target_entries:
            raise MemoryValidationError(
                "the new content equals another existing entry; remove this entry instead.",
                code="replace_duplicate", position=position, target=target,
            )
        target_entries[index] = content

    updated = Snapshot(user=tuple(entries["user"]), memory=tuple(entries["memory"]))
    validate_capacity(updated, limits)
    return updated


def _find_one(entries: list[str], match: str, *, position: int, target: str) -> int:
    indexes = [index for index, entry in enumerate(entries) if match in entry]
    if not indexes:
        raise MemoryValidationError(
            f"match found no entry in '{target}'; quote a substring of the entry exactly as stored.",
            code="no_match", position=position, target=target,
        )
    if len(indexes) > 1:
        raise MemoryValidationError(
            f"match is ambiguous: it occurs in {len(indexes)} entries of '{target}'; "
            "use a longer substring that only the intended entry contains.",
            code="ambiguous_match", position=position, target=target,
            candidates=[preview(entries[index]) for index in indexes],
        )
    return indexes[0]


def validate_capacity(snapshot: Snapshot, limits: Mapping[str, int] = LIMITS) -> None:
    """Raise if a rendered document is longer than its limit."""
    for target in TARGETS:
        used = document_length(snapshot.entries(target))
        limit = limits[target]
        if used > limit:
            raise MemoryValidationError(
                f"'{target}' would hold {used:,} characters, over its limit of {limit:,}. "
                "In the same batch, shorten or remove entries (consolidate related facts) "
                "before adding.",
                code="over_capacity", target=target, entries=snapshot.entries(target),
            )


# --- rendering and usage -----------------------------------------------------


def render_document(entries: Iterable[str]) -> str:
    """Return the stored and prompted form of one document."""
    return SEPARATOR.join(entries)


def parse_document(content: str) -> tuple[str, ...]:
    """Return the entries of a stored document (the inverse of render)."""
    return tuple(content.split(SEPARATOR)) if content else ()


def document_length(entries: Iterable[str]) -> int:
    return len(render_document(entries))


def usage(snapshot: Snapshot, target: str, limits: Mapping[str, int] = LIMITS) -> Usage:
    return Usage(used=document_length(snapshot.entries(target)), limit=limits[target])


def preview(entry: str, width: int = PREVIEW_CHARS) -> str:
    """Return a one-line preview of an entry, at most `width` characters."""
    flat = " ".join(entry.split())
    return flat if len(flat) <= width else flat[: width - 1] + "…"


def summarize(operations: Sequence[Operation]) -> BatchSummary:
    targets: dict[str, int] = {}
    actions: dict[str, int] = {}
    for operation in operations:
        targets[operation.target] = targets.get(operation.target, 0) + 1
        actions[operation.action] = actions.get(operation.action, 0) + 1
    return BatchSummary(operation_count=len(operations), targets=targets, actions=actions)


def changed_targets(before: Snapshot, after: Snapshot) -> tuple[str, ...]:
    return tuple(t for t in TARGETS if before.entries(t) != after.entries(t))
