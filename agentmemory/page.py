"""What the memory page shows: both documents entry by entry, pending proposals, History.

`render_page` reads the person's state (memory "unavailable" when the
database does not answer, never a 500), places each failed post's sentence
and draft beside the field it belongs to, and renders the one template. The
posts that change memory are in `views`.
"""
from __future__ import annotations

from django.db import DatabaseError
from django.http import HttpResponse
from django.shortcuts import render
from django.utils.formats import get_format
from django.utils.translation import gettext_lazy, ngettext

from . import importing, passport, preferences, proposals, review, store, threats, tidy, words
from .conf import memory_settings
from .rules import FULL_PERCENT, WARN_PERCENT, Snapshot
from .selectors import memory_state, page_number, recent_events, source_links
from .store import MemoryUnavailable

UNAVAILABLE = gettext_lazy("Memory could not be read right now. Try again in a minute.")


def meter_bounds(limit: int) -> dict:
    """`low`/`high` of a <meter> so the browser's own colours switch where the label's do.

    Chromium paints a value up to `low` as good and up to `high` as
    average; the percentage is rounded down, so 75 % starts at the first
    whole character at or above three quarters of the limit.
    """
    def edge(percent: int) -> str:
        first = -(-limit * percent // 100)  # the first count whose percentage reaches `percent`
        return f"{first - 0.5:g}"

    return {"low": edge(WARN_PERCENT), "high": edge(FULL_PERCENT)}


def blocked_label(entry: str) -> str:
    category = threats.is_blocked(entry)
    if category is None:
        return ""
    return words.threat_label(category)


def render_page(
    request,
    *,
    entry_errors: dict | None = None,
    add_errors: dict | None = None,
    drafts: dict | None = None,
    proposal_errors: dict | None = None,
    change_errors: dict | None = None,
    page_error: str = "",
    import_error: str = "",
    status: int = 200,
) -> HttpResponse:
    entry_errors = entry_errors or {}
    proposal_errors = dict(proposal_errors or {})
    change_errors = dict(change_errors or {})
    add_errors = add_errors or {}
    drafts = drafts or {}
    try:
        state = memory_state(user_id=request.user.pk)
    except MemoryUnavailable:
        state = None
        page_error = page_error or str(UNAVAILABLE)
        status = 503 if status == 200 else status
    documents = []
    links = source_links(user_id=request.user.pk, state=state) if state is not None else {}
    if state is not None:
        for document in state.documents:
            entries = []
            for index, (text, source) in enumerate(zip(document.entries, document.sources), start=1):
                key = ("entry", document.target, text)
                link = links.get(source.conversation_id) if source is not None else None
                entries.append({
                    "number": index,
                    "text": text,
                    "error": entry_errors.pop(key, ""),
                    "draft": drafts.get(key, text),
                    "open": key in drafts,
                    "blocked": blocked_label(text),
                    # Where it came from, in plain words; the chat's title links to it.
                    "source": words.source_text(source, link),
                    "source_url": link["url"] if link else "",
                    # A tidied line: where each entry it came from came from.
                    "origins": _origins(source, links),
                    # Its last day, if it expires ("Until Fri 11 Dec").
                    "expires": source.expires if source is not None else "",
                    "expires_label": words.expiry_text(source.expires if source is not None else ""),
                })
            documents.append({
                "document": document,
                "title": words.document_title(document.target),
                "level": document.usage.level,
                "meter": meter_bounds(document.usage.limit),
                "entries": entries,
                "add_error": add_errors.pop(document.target, ""),
                "add_draft": drafts.get(("add", document.target), ""),
                # Tidy up is offered for a document with two or more entries the assistant may see.
                "tidy": tidy.can_tidy(document.entries),
            })
    waiting = _pending_proposals(request.user.pk, proposal_errors, drafts) if state is not None else []
    # An error about an entry no longer on the page (or a tampered target)
    # still needs a place to be read.
    history = None
    changes = []
    if state is not None:
        history = recent_events(user_id=request.user.pk, page=page_number(request.GET.get("page")))
        changes = _history_changes(history, change_errors)
    leftover = [*entry_errors.values(), *add_errors.values(), *proposal_errors.values(), *change_errors.values()]
    if leftover and not page_error:
        page_error = leftover[0]
    try:
        settings = preferences.load(user_id=request.user.pk)
        use_memory, save_mode_value = settings.use_memory, settings.save_mode
    except MemoryUnavailable:
        use_memory = None  # unknown: the switch is shown without a state
        save_mode_value = None
    flagged = []
    if state is not None:
        try:
            snapshot = Snapshot(user=state.document("user").entries, memory=state.document("memory").entries)
            flagged = [{"id": notice.id, "entries": [{"document": words.document_name(target), "text": text}
                                                     for target, text in notice.entries]}
                       for notice in review.notices(user_id=request.user.pk, snapshot=snapshot)]
        except DatabaseError:
            flagged = []
    try:
        allow_review = review.allows_review(user_id=request.user.pk)
    except DatabaseError:
        allow_review = None
    context = {
        "review_notices": flagged,
        "allow_review": allow_review,
        "state": state,
        "documents": documents,
        "events": history or [],
        "history": history,
        "changes": changes,
        "page_error": page_error,
        "use_memory": use_memory,
        "save_mode": save_mode_value,
        "proposals": waiting,
        "proposal_wait": _days(memory_settings().proposal_ttl_days),
        "memory_enabled": memory_settings().enabled,
        "tidy_offered": tidy.offered() and use_memory is not False,
        # Import: the formats it recognises, and why the last import was refused.
        "import_formats": words.IMPORT_FORMATS,
        "import_error": import_error,
        "import_max_chars": passport.MAX_IMPORT_BYTES,
    }
    return render(request, "agentmemory/memory_page.html", context, status=status)


def _pending_proposals(user_id, errors: dict, drafts: dict) -> list[dict]:
    """The person's pending proposals as the page shows them, with a failed save's error and drafts.

    An error whose proposal is shown is taken out of `errors`; what is left
    belongs to a proposal no longer waiting.
    """
    try:
        pending = proposals.pending(user_id=user_id)
    except DatabaseError:
        return []
    items = []
    for proposal in pending:
        operations = []
        tidied = any(op.reason == proposals.TIDY for op in proposal.operations)
        merged = {entry for op in proposal.operations if len(op.merged_from) > 1 for entry in op.merged_from}
        for op in proposal.operations:
            key = ("proposal", proposal.id, str(op.position))
            operations.append({
                "position": op.position,
                "action": op.action,
                "label": _tidy_label(op, merged) if op.reason == proposals.TIDY
                else words.proposal_action(op.action, op.target),
                "content": op.content,
                "entry": op.entry,
                "expires_label": words.expiry_text(op.expires) if op.expires != "never"
                else words.expiry_change_text(""),
                # A Tidy up's merged line: the entries it came from, as they were.
                "merged_from": op.merged_from if len(op.merged_from) > 1 else (),
                "editable": op.editable,
                "you_said": words.you_said(op.said),
                "draft": drafts.get(key, op.content or ""),
                "open": key in drafts and drafts[key] != (op.content or ""),
            })
        items.append({
            "id": proposal.id,
            "operations": operations,
            "created_at": proposal.created_at,
            "expires_at": proposal.expires_at,
            "from_chat": proposal.conversation_id is not None,
            "imported": importing.is_import(proposal),
            "tidy": tidied,
            "error": errors.pop(proposal.id, ""),
        })
    return items


def _tidy_label(op, merged: set) -> str:
    """How one line of a Tidy up's proposal reads: a merge, a shorter wording, a folded or a dropped entry."""
    if op.action == "replace":
        return words.tidy_action("merge" if len(op.merged_from) > 1 else "reword", op.target)
    if op.action == "remove":
        return words.tidy_action("folded" if op.entry in merged else "drop", op.target)
    return words.proposal_action(op.action, op.target)


def _origins(source, links: dict) -> list[dict]:
    """Where each entry a tidied line came from came from, in plain words (a chat's title links to it)."""
    if source is None or not source.tidied:
        return []
    origins = []
    for origin in source.merged:
        link = links.get(origin.conversation_id)
        origins.append({"text": words.source_text(origin, link), "url": link["url"] if link else ""})
    return origins


def _history_changes(history, errors: dict) -> list[dict]:
    """The kept changes among this History page's events, entry by entry, as the page shows them.

    An error whose change is shown is taken out of `errors`; what is left
    belongs to a change no longer on this page.
    """
    items = []
    for event in history:
        change = event.change
        if change is None:
            continue
        documents = [{
            "name": words.document_name(document.target),
            "heading": words.document_heading(document.target),
            "entries": [{"kind": entry.kind, "before": entry.before, "after": entry.after}
                        for entry in document.entries]
            + [{"kind": "expiry", "after": entry, "label": words.expiry_change_text(now)}
               for entry, _was, now in document.expiry_changes],
        } for document in change.documents]
        items.append({
            "id": change.id,
            "created_at": change.created_at,
            "who": words.expiry_removal_text(change.created_at) if change.by == "expiry"
            else words.change_author(change.by, change.kind),
            "documents": documents,
            "error": errors.pop(change.id, ""),
        })
    return items


def _days(days: float) -> str:
    """"7 days", "1 day", "0.5 days": how long a proposal waits (the setting is a number of days)."""
    count = int(days) if days == int(days) else 2  # "0.5 days", "1.5 days": plural
    shown = f"{days:g}".replace(".", str(get_format("DECIMAL_SEPARATOR")))
    return ngettext("%(days)s day", "%(days)s days", count) % {"days": shown}


def render_import_review(request, proposal, *, refused=(), routes: dict | None = None, error: str = "",
                         status: int = 200) -> HttpResponse:
    """The review of an import: each item with its document (changeable, or left out), the refused items with
    their reasons, what does not fit with the Tidy up offer. `proposal` is None when nothing could be added."""
    routes = routes or {}
    items: list[dict] = []
    over: tuple[str, ...] = ()
    snapshot = None
    if proposal is not None:
        for op in proposal.operations:
            route = routes.get(op.position, op.target)
            items.append({"position": op.position, "content": op.content, "route": route,
                          "expires_label": words.expiry_text(op.expires)})
        try:
            over = importing.over_capacity(user_id=request.user.pk, proposal=proposal, routes=routes)
            snapshot = store.load_snapshot(user_id=request.user.pk)
        except MemoryUnavailable:
            snapshot = None
    full = []
    for target in over:
        full.append({
            "target": target,
            "message": words.rule_message("over_capacity", target=target, limits=memory_settings().limits),
            "tidy": tidy.offered() and snapshot is not None and tidy.can_tidy(snapshot.entries(target)),
        })
    context = {
        "proposal": proposal,
        "format_name": words.import_source(proposal.operations[0].imported) if proposal else "",
        "items": items,
        "routes": [("user", words.import_route("user")), ("memory", words.import_route("memory")),
                   (proposals.SKIP, words.IMPORT_SKIP)],
        "refused": [{"content": content, "reason": words.import_item_reason(code)} for content, code in refused],
        "full": full,
        "error": error,
        "nothing_new": proposal is None,
        "nothing_new_message": words.import_refused(importing.NOTHING_NEW),
    }
    return render(request, "agentmemory/import_review.html", context, status=status)
