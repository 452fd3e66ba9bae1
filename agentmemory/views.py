"""The memory page: a signed-in person sees, corrects, exports and erases
their own memory.

The owner is always `request.user`; no URL, query parameter or form field
names a person, and extra fields such as `user_id` are never read. Every
change is a POST with a CSRF token that goes through `services` into
`store.commit_operations` (or `store.erase`) with the person as the actor, so
it obeys the agent's rules, takes the same per-person lock and is audited.

The rollout flag (`AGENTMEMORY["ENABLED"]`) governs the agent only. With the
flag off the page and the API still show, correct, export and erase what is
stored: people must always be able to see and delete what is kept about
them, and a rollback by flag must not put stored data out of their reach.
The page says when the assistant is not using memory, and beside an entry
that the threat scan now blocks in the prompt (patterns change after entries
are stored) it says that the agent does not see it: the person still sees the
entry, escaped, and can remove it.
"""
from __future__ import annotations

import logging

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.db import DatabaseError
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.utils import timezone
from django.views.decorators.http import require_http_methods, require_POST
from rest_framework.renderers import JSONRenderer

from . import services, threats, words
from .api import MemoryWriteThrottle
from .conf import memory_settings
from .forms import AddEntryForm, CorrectEntryForm, RemoveEntryForm, first_error
from .models import Actor
from .rules import MemoryValidationError, normalize_text
from .selectors import export_payload, memory_state, recent_events
from .serializers import ExportSerializer
from .store import MemoryUnavailable

logger = logging.getLogger(__name__)

UNAVAILABLE = "Memory could not be read right now. Try again in a minute."
NOT_SAVED = "The change could not be saved because the database did not answer. Try again in a minute."


@login_required
@require_http_methods(["GET", "HEAD"])
def memory_page(request: HttpRequest) -> HttpResponse:
    return _render_page(request)


@login_required
@require_POST
def add_entry(request: HttpRequest) -> HttpResponse:
    form = AddEntryForm(request.POST)
    target = request.POST.get("target", "")
    if not form.is_valid():
        return _render_page(request, add_errors={target: first_error(form)},
                            drafts={("add", target): request.POST.get("content", "")}, status=400)
    target = form.cleaned_data["target"]
    return _change(
        request,
        lambda: services.add_entry(user_id=request.user.pk, target=target, content=form.cleaned_data["content"]),
        done="Added.",
        unchanged="That entry is already stored; nothing changed.",
        error_key=("add", target),
        draft=form.cleaned_data["content"],
    )


@login_required
@require_POST
def correct_entry(request: HttpRequest) -> HttpResponse:
    form = CorrectEntryForm(request.POST)
    key = ("entry", request.POST.get("target", ""), normalize_text(request.POST.get("entry", "")))
    if not form.is_valid():
        return _render_page(request, entry_errors={key: first_error(form)},
                            drafts={key: request.POST.get("content", "")}, status=400)
    data = form.cleaned_data
    return _change(
        request,
        lambda: services.correct_entry(
            user_id=request.user.pk, target=data["target"], entry=data["entry"], content=data["content"]
        ),
        done="Corrected.",
        unchanged="The entry already says that; nothing changed.",
        error_key=key,
        draft=data["content"],
    )


@login_required
@require_POST
def remove_entry(request: HttpRequest) -> HttpResponse:
    form = RemoveEntryForm(request.POST)
    key = ("entry", request.POST.get("target", ""), normalize_text(request.POST.get("entry", "")))
    if not form.is_valid():
        return _render_page(request, entry_errors={key: first_error(form)}, status=400)
    data = form.cleaned_data
    return _change(
        request,
        lambda: services.remove_entry(user_id=request.user.pk, target=data["target"], entry=data["entry"]),
        done="Removed.",
        unchanged="Nothing changed.",
        error_key=key,
    )


@login_required
@require_http_methods(["GET", "HEAD", "POST"])
def erase(request: HttpRequest) -> HttpResponse:
    """GET asks for confirmation; POST erases both documents."""
    if request.method != "POST":
        try:
            state = memory_state(user_id=request.user.pk)
        except MemoryUnavailable:
            state = None
        return render(request, "agentmemory/erase_confirm.html", {"state": state})
    if not _throttle_allows(request):
        return _render_page(request, page_error=_throttled_message(), status=429)
    try:
        services.erase_memory(user_id=request.user.pk, actor=Actor.USER)
    except DatabaseError:
        logger.warning("memory erase failed", extra={"user_id": request.user.pk})
        return _render_page(request, page_error=NOT_SAVED, status=503)
    messages.success(request, "Your memory was erased: both documents are now empty.")
    return redirect("agentmemory:page")


@login_required
@require_http_methods(["GET", "HEAD"])
def export(request: HttpRequest) -> HttpResponse:
    try:
        state = memory_state(user_id=request.user.pk)
    except MemoryUnavailable:
        return _render_page(request, page_error=UNAVAILABLE, status=503)
    now = timezone.now()
    # The API's serializer and renderer, so both downloads are the same document.
    body = JSONRenderer().render(
        ExportSerializer(export_payload(state, exported_at=now)).data, renderer_context={"indent": 2}
    )
    response = HttpResponse(body, content_type="application/json; charset=utf-8")
    response["Content-Disposition"] = f'attachment; filename="memory-export-{now:%Y%m%d-%H%M%S}.json"'
    response["Cache-Control"] = "no-store"
    return response


# --- helpers -----------------------------------------------------------------


def _change(request, commit, *, done: str, unchanged: str, error_key: tuple, draft: str = "") -> HttpResponse:
    if not _throttle_allows(request):
        return _render_page(request, page_error=_throttled_message(), status=429)
    try:
        result = commit()
    except MemoryValidationError as exc:
        # exc.message is written for the model ("Operation 1: ..."); the
        # person reads the plain sentence for its code. The draft is shown
        # back only to its author, escaped by the template.
        message = words.rule_message(exc.code, target=exc.target, limits=memory_settings().limits)
        errors = {error_key: message}
        drafts = {error_key: draft}
        if error_key[0] == "add":
            return _render_page(request, add_errors={error_key[1]: message}, drafts=drafts, status=400)
        return _render_page(request, entry_errors=errors, drafts=drafts, status=400)
    except (MemoryUnavailable, DatabaseError):
        logger.warning("memory page change failed", extra={"user_id": request.user.pk})
        return _render_page(request, page_error=NOT_SAVED, status=503)
    messages.success(request, done if result.changed else unchanged)
    return redirect(reverse("agentmemory:page"))


def _throttle_allows(request) -> bool:
    # The page shares the API's write budget, so a scripted session gains
    # nothing by posting forms instead of calling the API.
    return MemoryWriteThrottle().allow_request(request, None)


def _throttled_message() -> str:
    return "Too many memory changes in a short time; nothing was saved. Wait a minute and try again."


def _blocked_label(entry: str) -> str:
    category = threats.is_blocked(entry)
    if category is None:
        return ""
    return words.threat_label(category)


def _render_page(
    request,
    *,
    entry_errors: dict | None = None,
    add_errors: dict | None = None,
    drafts: dict | None = None,
    page_error: str = "",
    status: int = 200,
) -> HttpResponse:
    entry_errors = entry_errors or {}
    add_errors = add_errors or {}
    drafts = drafts or {}
    try:
        state = memory_state(user_id=request.user.pk)
    except MemoryUnavailable:
        state = None
        page_error = page_error or UNAVAILABLE
        status = 503 if status == 200 else status
    documents = []
    if state is not None:
        for document in state.documents:
            entries = []
            for index, text in enumerate(document.entries, start=1):
                key = ("entry", document.target, text)
                entries.append({
                    "number": index,
                    "text": text,
                    "error": entry_errors.pop(key, ""),
                    "draft": drafts.get(key, text),
                    "open": key in drafts,
                    "blocked": _blocked_label(text),
                })
            documents.append({
                "document": document,
                "entries": entries,
                "add_error": add_errors.pop(document.target, ""),
                "add_draft": drafts.get(("add", document.target), ""),
            })
    # An error about an entry no longer on the page (or a tampered target)
    # still needs a place to be read.
    leftover = [*entry_errors.values(), *add_errors.values()]
    if leftover and not page_error:
        page_error = leftover[0]
    context = {
        "state": state,
        "documents": documents,
        "events": recent_events(user_id=request.user.pk) if state is not None else [],
        "page_error": page_error,
    }
    return render(request, "agentmemory/memory_page.html", context, status=status)
