"""Reads for the memory page, the memory API and the export.

Every function takes the owner's id from trusted code (the view's
`request.user`) and returns plain values. Memory rows are read only through
`store.load_state`; the audit events hold no content and are read here.
"""
from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime

from django.utils.module_loading import import_string
from django.utils.translation import gettext_lazy

from . import gate, proposals, provenance, review, versions, words
from .conf import memory_settings
from .models import SCHEMA_VERSION, MemoryEvent
from .rules import FULL_PERCENT, TARGETS, TITLES, Usage, usage
from .store import load_state

logger = logging.getLogger(__name__)

EXPORT_FORMAT = "agentmemory-export"
HISTORY_LENGTH = 25
NEAR_FULL_PERCENT = FULL_PERCENT

DESCRIPTIONS = {
    "user": gettext_lazy("About you: your role, preferences, expertise and how you like answers."),
    "memory": gettext_lazy("The assistant's notes: project facts, conventions, environment details and lessons."),
}


@dataclass(frozen=True)
class DocumentState:
    target: str
    title: str
    description: str
    entries: tuple[str, ...]
    usage: Usage
    created_at: datetime | None
    updated_at: datetime | None
    # Where each entry came from (`provenance.Source` or None), aligned with `entries`.
    sources: tuple = ()

    @property
    def near_full(self) -> bool:
        return self.usage.percent >= NEAR_FULL_PERCENT


@dataclass(frozen=True)
class HistoryRow:
    """One audit event as the owner sees it: what happened, never what it said.

    Every text is plain words (`agentmemory.words`); the event's codes stay
    in the database and the API.
    """

    created_at: datetime
    actor: str
    outcome: str
    changes: str
    user_characters: int | None
    memory_characters: int | None
    reason: str
    # A kept change (`versions.Change`): what it did entry by entry, for its
    # owner's page only, which offers to undo it or restore the version it left.
    change: object = None


@dataclass(frozen=True)
class MemoryState:
    documents: tuple[DocumentState, ...]
    limits: Mapping[str, int]
    schema_version: int
    agent_enabled: bool

    def document(self, target: str) -> DocumentState:
        return next(document for document in self.documents if document.target == target)


def memory_state(*, user_id) -> MemoryState:
    """Return both documents of one person with usage and timestamps.

    Raise `store.MemoryUnavailable` when memory cannot be read.
    """
    config = memory_settings()
    stored = load_state(user_id=user_id)
    documents = tuple(
        DocumentState(
            target=target,
            title=TITLES[target],
            description=str(DESCRIPTIONS[target]),  # in the active language
            entries=stored.snapshot.entries(target),
            usage=usage(stored.snapshot, target, config.limits),
            created_at=stored.created_at[target],
            updated_at=stored.updated_at[target],
            sources=tuple(stored.sources.get(target) or (None,) * len(stored.snapshot.entries(target))),
        )
        for target in TARGETS
    )
    return MemoryState(
        documents=documents,
        limits=dict(config.limits),
        schema_version=SCHEMA_VERSION,
        agent_enabled=config.enabled,
    )


def state_payload(state: MemoryState) -> dict:
    """Return the API's representation of a person's memory."""
    return {
        "schema_version": state.schema_version,
        "agent_memory_enabled": state.agent_enabled,
        "documents": {
            document.target: {
                "title": document.title,
                "entries": list(document.entries),
                "expires": [source.expires or None if source is not None else None for source in document.sources],
                "usage": {
                    "used": document.usage.used,
                    "limit": document.usage.limit,
                    "percent": document.usage.percent,
                    "entries": len(document.entries),
                    "label": words.usage_label(document.usage),
                    "level": document.usage.level,
                },
                "created_at": document.created_at,
                "updated_at": document.updated_at,
            }
            for document in state.documents
        },
    }


# The sentence beside an operation of a "Tidy up" proposal (`agentmemory.tidy`, reason "tidy").
TIDY_WHY = gettext_lazy(
    "Part of the tidied version of this document: duplicates merged, wording shortened, stale entries dropped.")


def proposal_payload(proposal) -> dict:
    """Return one pending proposal (`proposals.Proposal`) as the API and the export show it."""
    return {
        "id": proposal.id,
        "operations": [
            {"position": op.position, "target": op.target, "action": op.action, "content": op.content,
             "entry": op.entry, "reason": op.reason, "expires": op.expires or None,
             "why": str(gate.REASONS.get(op.reason, TIDY_WHY if op.reason == "tidy" else "")),
             # The person's own sentence beside the question (`gate.said`), and the sentence they read for it.
             "said": op.said or None, "you_said": words.you_said(op.said) or None}
            for op in proposal.operations
        ],
        "conversation_id": proposal.conversation_id,
        "turn_id": proposal.turn_id,
        "created_at": proposal.created_at,
        "expires_at": proposal.expires_at,
    }


def change_payload(change) -> dict:
    """Return one change (`versions.Change`) as the API and the export show it."""
    documents = {}
    for document in change.documents:
        documents[document.target] = {
            "before": list(document.before),
            "after": list(document.after),
            "added": [entry.after for entry in document.entries if entry.kind == "added"],
            "removed": [entry.before for entry in document.entries if entry.kind == "removed"],
            "changed": [{"before": entry.before, "after": entry.after}
                        for entry in document.entries if entry.kind == "changed"],
            "expiry_changed": [{"entry": entry, "before": was or None, "after": now or None}
                               for entry, was, now in document.expiry_changes],
        }
    return {
        "id": change.id, "created_at": change.created_at, "by": change.by, "kind": change.kind,
        "conversation_id": change.conversation_id, "turn_id": change.turn_id, "documents": documents,
    }


def export_payload(state: MemoryState, *, exported_at: datetime, proposals=(), changes=(), reviews=()) -> dict:
    """Return a person's memory as a self-describing export.

    The entries can be sent back unchanged as `add` operations to
    `POST /api/memory/operations/` to restore the same documents.
    """
    return {
        "format": EXPORT_FORMAT,
        "schema_version": state.schema_version,
        "exported_at": exported_at,
        "limits": dict(state.limits),
        "documents": {
            document.target: {
                "title": document.title,
                "entries": list(document.entries),
                "characters": document.usage.used,
                "created_at": document.created_at,
                "updated_at": document.updated_at,
                "sources": provenance.to_json(document.sources),
            }
            for document in state.documents
        },
        # Pending "ask before saving" proposals (`proposals.Proposal`): memory content too.
        "proposals": [proposal_payload(proposal) for proposal in proposals],
        # Versions (`versions.Change`): memory content too.
        "changes": [change_payload(change) for change in changes],
        # Support staff's verdicts on changes the assistant saved (`review.export_rows`): no content.
        "reviews": list(reviews),
    }


def receipt_payload(receipt) -> dict:
    """Return an erase's receipt (`store.Erased`) as the API, the page and the audit show it: counts, never text."""
    return {"erased_at": receipt.at, "removed": dict(receipt.removed),
            "summary": words.erase_summary(receipt.removed)}


def person_export(*, user_id, exported_at: datetime) -> dict:
    """Return everything the person's memory holds as one export: documents, proposals, versions.

    Raise `store.MemoryUnavailable` when memory cannot be read.
    """
    return export_payload(memory_state(user_id=user_id), exported_at=exported_at,
                          proposals=proposals.pending(user_id=user_id), changes=versions.changes(user_id=user_id),
                          reviews=review.export_rows(user_id=user_id))


@dataclass(frozen=True)
class HistoryPage:
    """One page of a person's History, newest first, with where the others are."""

    rows: tuple[HistoryRow, ...]
    number: int
    page_count: int
    total: int

    @property
    def has_previous(self) -> bool:
        """True when there are newer events (a lower page number)."""
        return self.number > 1

    @property
    def has_next(self) -> bool:
        """True when there are older events (a higher page number)."""
        return self.number < self.page_count

    @property
    def previous_number(self) -> int:
        return self.number - 1

    @property
    def next_number(self) -> int:
        return self.number + 1

    def __iter__(self):
        return iter(self.rows)

    def __len__(self) -> int:
        return len(self.rows)

    def __bool__(self) -> bool:
        return bool(self.rows)


def page_number(value) -> int:
    """Read a `?page=` value: a positive integer, anything else is page 1."""
    try:
        number = int(str(value).strip())
    except (TypeError, ValueError):
        return 1
    return max(1, min(number, 1_000_000))


def recent_events(*, user_id, page: int = 1, per_page: int = HISTORY_LENGTH) -> HistoryPage:
    """Return one page of a person's audit events, newest first (metadata only).

    A page past the last one answers the last page, so an old link still
    shows History rather than an empty table.
    """
    per_page = max(1, per_page)
    events = MemoryEvent.objects.filter(user_id=user_id)
    total = events.count()
    page_count = max(1, -(-total // per_page))
    number = min(max(1, page), page_count)
    start = (number - 1) * per_page
    chosen = list(events.order_by("-created_at", "-id")[start:start + per_page])
    kept = {change.id: change for change in versions.changes(
        user_id=user_id, event_ids=[event.pk for event in chosen if event.outcome == "committed"])}
    rows = tuple(
        HistoryRow(
            created_at=event.created_at,
            actor=words.actor_name(event.actor),
            outcome=words.outcome_name(event.outcome),
            changes=words.event_changes(event.outcome, event.actions, event.targets, event.viewed),
            user_characters=event.user_characters,
            memory_characters=event.memory_characters,
            reason=words.event_reason(event.outcome, event.error_code),
            change=kept.get(event.pk),
        )
        for event in chosen
    )
    return HistoryPage(rows=rows, number=number, page_count=page_count, total=total)


def source_links(*, user_id, state: MemoryState) -> dict[int, dict]:
    """Return {conversation_id: {"title", "url"}} for the chats the person's entries came from.

    Asks the callable named by AGENTMEMORY["SOURCE_LINKS"] (the project's chat
    app), for the owner's own page only; {} without one or when it fails.
    """
    path = memory_settings().source_links
    ids = {origin.conversation_id for document in state.documents for source in document.sources
           if source is not None for origin in (source, *source.merged) if origin.conversation_id is not None}
    if not path or not ids:
        return {}
    try:
        return dict(import_string(path)(user_id, ids))
    except Exception as exc:  # links are a convenience: the page shows the entries without them
        logger.warning("memory page: source links unavailable: %s", type(exc).__name__)
        return {}


def markdown_export(*, user_id) -> str:
    """The person's two documents as the Markdown pair (`passport.markdown_bundle`), as our import reads back.

    Raise `store.MemoryUnavailable` when memory cannot be read.
    """
    from .passport import markdown_bundle

    stored = load_state(user_id=user_id)
    snapshot = stored.snapshot
    origins: dict[str, dict[str, tuple[str, str]]] = {
        target: {entry: (source.imported, source.at)
                 for entry, source in zip(snapshot.entries(target), stored.sources.get(target) or ())
                 if source is not None and source.imported}
        for target in TARGETS}
    return markdown_bundle({target: snapshot.entries(target) for target in TARGETS},
                           {target: snapshot.expiries(target) for target in TARGETS}, origins)
