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

This module holds the posts; what the page shows (both documents, proposals,
History) is rendered by `page.render_page`.
"""
from __future__ import annotations

import logging
from functools import wraps
from typing import TYPE_CHECKING, Any

from django.contrib import messages
from django.contrib.auth import logout
from django.contrib.auth.decorators import login_required
from django.db import DatabaseError
from django.http import HttpRequest, HttpResponse, HttpResponseNotAllowed, JsonResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.utils import timezone
from django.utils.formats import date_format
from django.utils.http import url_has_allowed_host_and_scheme
from django.utils.translation import gettext as _
from django.utils.translation import gettext_lazy
from django.views.decorators.http import require_http_methods
from rest_framework.renderers import JSONRenderer

from . import expiry, importing, passport, preferences, proposals, review, services, store, tidy, versions, words
from .api import ChangeAPIView, MemoryWriteThrottle, TidyThrottle
from .api.passport import ImportThrottle
from .conf import memory_settings
from .forms import (
    MAX_FIELD_CHARS,
    AddEntryForm,
    CorrectEntryForm,
    ExpiryForm,
    ImportForm,
    RemoveEntryForm,
    first_error,
)
from .models import Actor
from .notify import broadcast_memory_changed_sync
from .page import UNAVAILABLE, render_import_review, render_page
from .rules import TARGETS, MemoryValidationError, normalize_text
from .selectors import markdown_export, memory_state, person_export, receipt_payload
from .serializers import ExportSerializer
from .store import MemoryUnavailable, UnknownUser

if TYPE_CHECKING:
    from django_stubs_ext import StrOrPromise

logger = logging.getLogger(__name__)

NOT_SAVED = gettext_lazy("The change could not be saved because the database did not answer. Try again in a minute.")


# What a failed form post leaves for the page it redirects to (Post/Redirect/Get):
# the sentence, where it belongs and the person's own draft, popped on the next
# view of the page. It lives in the person's server-side session only.
FLASH_KEY = "agentmemory.page_flash"


def answers_account_gone(view):
    """A write for a person whose account was deleted meanwhile answers 410 with a plain sentence.

    The request was signed in when it began; the account went before the
    write took the person's lock (`store.UnknownUser`), so nothing was
    written. The session belongs to no account any more: it ends here.
    """
    @wraps(view)
    def wrapper(request, *args, **kwargs):
        try:
            return view(request, *args, **kwargs)
        except UnknownUser:
            logger.info("memory page write for an account that no longer exists")
            logout(request)
            if wants_json(request):
                return JsonResponse({"ok": False, "message": str(words.ACCOUNT_GONE)}, status=410)
            return render(request, "agentmemory/account_gone.html", {"message": words.ACCOUNT_GONE}, status=410)

    return wrapper


def form_post(view):
    """A form's POST target: POST only; a GET (a bookmark, a reload) goes to the page.

    Opening /memory/add/ directly used to answer 405; now it is the page.
    """
    @wraps(view)
    def wrapper(request, *args, **kwargs):
        if request.method in ("GET", "HEAD"):
            return redirect("agentmemory:page")
        if request.method != "POST":
            return HttpResponseNotAllowed(["POST"])
        return view(request, *args, **kwargs)

    return login_required(answers_account_gone(wrapper))


def wants_json(request: HttpRequest) -> bool:
    """True when the page's script posts the form and asks for JSON instead of a redirect."""
    accept = request.headers.get("Accept", "")
    return "application/json" in accept and "text/html" not in accept


@login_required
@require_http_methods(["GET", "HEAD"])
def memory_page(request: HttpRequest) -> HttpResponse:
    # The person's read: entries past their date go now, by the locked commit (actor "expiry").
    expiry.remove_expired(user_id=request.user.pk)
    flash = request.session.pop(FLASH_KEY, None) or {}
    entry_errors, add_errors, drafts, proposal_errors, change_errors = {}, {}, {}, {}, {}
    import_error = ""
    error = flash.get("error")
    if isinstance(error, dict):
        key = tuple(error.get("key") or ())
        message = str(error.get("message", ""))
        if key[:1] == ("add",) and len(key) == 2:
            add_errors[key[1]] = message
        elif key[:1] == ("entry",) and len(key) == 3:
            entry_errors[key] = message
        elif key[:1] == ("proposal",) and len(key) == 2:
            proposal_errors[key[1]] = message
            for position, text in (error.get("drafts") or {}).items():
                drafts[("proposal", key[1], str(position))] = str(text)
        elif key[:1] == ("change",) and len(key) == 2:
            change_errors[key[1]] = message
        elif key == ("import",):
            import_error = message
        if "draft" in error and key:
            drafts[key] = str(error["draft"])
    return render_page(
        request, entry_errors=entry_errors, add_errors=add_errors, drafts=drafts,
        proposal_errors=proposal_errors, change_errors=change_errors, page_error=str(flash.get("page_error", "")),
        import_error=import_error,
    )


@form_post
def add_entry(request: HttpRequest) -> HttpResponse:
    form = AddEntryForm(request.POST)
    target = request.POST.get("target", "")
    key = ("add", target)
    if not form.is_valid():
        return _failed(request, first_error(form), status=400, key=key, draft=request.POST.get("content", ""))
    target = form.cleaned_data["target"]
    return _change(
        request,
        lambda: services.add_entry(user_id=request.user.pk, target=target, content=form.cleaned_data["content"]),
        done=_("Added."),
        unchanged=_("That entry is already stored; nothing changed."),
        error_key=("add", target),
        draft=form.cleaned_data["content"],
    )


@form_post
def correct_entry(request: HttpRequest) -> HttpResponse:
    form = CorrectEntryForm(request.POST)
    key = ("entry", request.POST.get("target", ""), normalize_text(request.POST.get("entry", "")))
    if not form.is_valid():
        return _failed(request, first_error(form), status=400, key=key, draft=request.POST.get("content", ""))
    data = form.cleaned_data
    return _change(
        request,
        lambda: services.correct_entry(
            user_id=request.user.pk, target=data["target"], entry=data["entry"], content=data["content"]
        ),
        done=_("Corrected."),
        unchanged=_("The entry already says that; nothing changed."),
        error_key=key,
        draft=data["content"],
    )


@form_post
def set_expiry(request: HttpRequest) -> HttpResponse:
    """Set, change or clear one entry's expiry; the person's browser tells their time zone."""
    form = ExpiryForm(request.POST)
    key = ("entry", request.POST.get("target", ""), normalize_text(request.POST.get("entry", "")))
    if not form.is_valid():
        return _failed(request, first_error(form), status=400, key=key)
    data = form.cleaned_data
    expiry.remember_time_zone(request.user.pk, data.get("tz"))
    today = expiry.today_for(request.user.pk)
    return _change(
        request,
        lambda: services.set_expiry(user_id=request.user.pk, target=data["target"], entry=data["entry"],
                                    expires=form.expires, today=today),
        done=_("Expiry saved.") if form.expires != "never" else _("The entry now stays until you remove it."),
        unchanged=_("Nothing changed."),
        error_key=key,
    )


@form_post
def remove_entry(request: HttpRequest) -> HttpResponse:
    form = RemoveEntryForm(request.POST)
    key = ("entry", request.POST.get("target", ""), normalize_text(request.POST.get("entry", "")))
    if not form.is_valid():
        return _failed(request, first_error(form), status=400, key=key)
    data = form.cleaned_data
    return _change(
        request,
        lambda: services.remove_entry(user_id=request.user.pk, target=data["target"], entry=data["entry"]),
        done=_("Removed."),
        unchanged=_("Nothing changed."),
        error_key=key,
    )


@form_post
def memory_switch(request: HttpRequest) -> HttpResponse:
    """The person's "Use memory in chats" switch, as a form (the API has the same as JSON)."""
    value = request.POST.get("use_memory", "")
    if value not in ("0", "1"):
        return _failed(request, _("Choose whether the assistant uses memory: on or off."), status=400)
    if not _throttle_allows(request):
        return _failed(request, _throttled_message(), status=429)
    use_memory = value == "1"
    try:
        services.set_use_memory(user_id=request.user.pk, use_memory=use_memory, actor=Actor.USER)
    except (MemoryUnavailable, DatabaseError):
        logger.warning("memory switch change failed", extra={"user_id": request.user.pk})
        return _failed(request, NOT_SAVED, status=503)
    message = str(SWITCH_ON if use_memory else SWITCH_OFF)
    if wants_json(request):
        return JsonResponse({
            "ok": True, "message": message, "use_memory": use_memory,
            "agent_memory_enabled": memory_settings().enabled,
        })
    messages.success(request, message)
    target = request.POST.get("next", "")
    if target and url_has_allowed_host_and_scheme(
        target, allowed_hosts={request.get_host()}, require_https=request.is_secure()
    ):
        return redirect(target)
    return redirect("agentmemory:page")


@form_post
def save_mode(request: HttpRequest) -> HttpResponse:
    """The person's "Save changes" setting: save automatically, or ask before saving (the API's save_mode)."""
    value = request.POST.get("save_mode", "")
    if value not in preferences.SAVE_MODES:
        return _failed(request, _("Choose whether the assistant saves changes itself or asks you first."),
                       status=400)
    if not _throttle_allows(request):
        return _failed(request, _throttled_message(), status=429)
    try:
        services.set_save_mode(user_id=request.user.pk, save_mode=value, actor=Actor.USER)
    except (MemoryUnavailable, DatabaseError):
        logger.warning("save mode change failed", extra={"user_id": request.user.pk})
        return _failed(request, NOT_SAVED, status=503)
    message = str(SAVE_ASK if value == "ask" else SAVE_AUTO)
    if wants_json(request):
        return JsonResponse({"ok": True, "message": message, "save_mode": value})
    messages.success(request, message)
    return redirect("agentmemory:page")


@form_post
def review_setting(request: HttpRequest) -> HttpResponse:
    """The person's "support staff may review samples of what the assistant saved" setting."""
    value = request.POST.get("allow_review", "")
    if value not in ("0", "1"):
        return _failed(request, _("Choose whether support staff may review samples: yes or no."), status=400)
    if not _throttle_allows(request):
        return _failed(request, _throttled_message(), status=429)
    try:
        review.set_allow_review(user_id=request.user.pk, allow=value == "1")
    except (MemoryUnavailable, DatabaseError):
        logger.warning("review setting change failed", extra={"user_id": request.user.pk})
        return _failed(request, NOT_SAVED, status=503)
    message = str(REVIEW_ALLOWED if value == "1" else REVIEW_REFUSED)
    if wants_json(request):
        return JsonResponse({"ok": True, "message": message, "allow_review": value == "1"})
    messages.success(request, message)
    return redirect("agentmemory:page")


@form_post
def review_notice(request: HttpRequest, pk: int) -> HttpResponse:
    """The person's answer to "Support flagged an entry as possibly sensitive. Remove it?"."""
    answer = request.POST.get("answer", "")
    if answer not in ("remove", "keep"):
        return _failed(request, _("Choose whether to remove the flagged entry or keep it."), status=400)
    if not _throttle_allows(request):
        return _failed(request, _throttled_message(), status=429)
    try:
        answered = review.answer_notice(user_id=request.user.pk, review_id=pk, remove=answer == "remove")
    except MemoryValidationError as exc:
        return _failed(request, words.rule_message(exc.code, target=exc.target, limits=memory_settings().limits),
                       status=409)
    except (MemoryUnavailable, DatabaseError):
        logger.warning("review notice answer failed", extra={"user_id": request.user.pk})
        return _failed(request, NOT_SAVED, status=503)
    message = str((NOTICE_REMOVED if answer == "remove" else NOTICE_KEPT) if answered else NOTICE_GONE)
    if wants_json(request):
        return JsonResponse({"ok": answered, "message": message})
    messages.success(request, message)
    return redirect("agentmemory:page")


REVIEW_ALLOWED = gettext_lazy("Support staff may now review samples of what the assistant saves for you.")
REVIEW_REFUSED = gettext_lazy("Nothing the assistant saves for you will be sampled for review.")
NOTICE_REMOVED = gettext_lazy("Removed the flagged entry.")
NOTICE_KEPT = gettext_lazy("Kept the entry; the notice is closed.")
NOTICE_GONE = gettext_lazy("This notice is already closed.")


# What a person reads after a post (translatable; lazy, so pass through str() before JSON or the session).
SAVE_AUTO = gettext_lazy(
    "Changes are saved automatically: the assistant saves a memory change when its reply completes.")
SAVE_ASK = gettext_lazy("The assistant now asks before saving: each change it proposes waits for you under "
                        "“Waiting for you” and in the chat.")
PROPOSAL_SAVED = gettext_lazy("Saved to your memory.")
PROPOSAL_UNCHANGED = gettext_lazy("Saved; your memory already held this, so nothing changed.")
PROPOSAL_DISCARDED = gettext_lazy("Discarded; nothing was saved.")


@form_post
def save_proposal(request: HttpRequest, pk: int) -> HttpResponse:
    """Save one pending proposal (all or nothing), with the person's edits of added facts."""
    try:
        proposal = proposals.get(user_id=request.user.pk, proposal_id=pk)
    except proposals.ProposalGone:
        return _failed(request, words.PROPOSAL_GONE, status=404)
    except DatabaseError:
        return _failed(request, NOT_SAVED, status=503)
    key = ("proposal", pk)
    edits, drafts = {}, {}
    for operation in proposal.operations:
        field = f"content-{operation.position}"
        if operation.editable and field in request.POST:
            text = request.POST[field][:MAX_FIELD_CHARS]
            drafts[str(operation.position)] = text
            if normalize_text(text) != normalize_text(operation.content or ""):
                edits[operation.position] = text
    if not _throttle_allows(request):
        return _failed(request, _throttled_message(), status=429, key=key, drafts=drafts)
    try:
        result = _confirmed(request, lambda: services.save_proposal(user_id=request.user.pk, proposal_id=pk,
                                                                     edits=edits))
    except (store.CommitNotStored, store.CommitUnconfirmed) as exc:
        return _not_known_saved(request, exc, key=key, drafts=drafts)
    except proposals.ProposalGone:
        return _failed(request, words.PROPOSAL_GONE, status=404)
    except MemoryValidationError as exc:
        message = words.proposal_message(exc.code, target=exc.target, limits=memory_settings().limits)
        return _failed(request, message, status=400, key=key, drafts=drafts)
    except (MemoryUnavailable, DatabaseError):
        logger.warning("proposal save failed", extra={"user_id": request.user.pk})
        return _failed(request, NOT_SAVED, status=503, key=key, drafts=drafts)
    message = str(PROPOSAL_SAVED if result.changed else PROPOSAL_UNCHANGED)
    if wants_json(request):
        return JsonResponse({"ok": True, "changed": bool(result.changed), "message": message})
    messages.success(request, message)
    return redirect(reverse("agentmemory:page") + "#proposals")


@form_post
def discard_proposal(request: HttpRequest, pk: int) -> HttpResponse:
    """Drop one pending proposal; nothing of it is saved."""
    if not _throttle_allows(request):
        return _failed(request, _throttled_message(), status=429, key=("proposal", pk))
    try:
        services.discard_proposal(user_id=request.user.pk, proposal_id=pk)
    except proposals.ProposalGone:
        _forget_import_review(request, pk)
        return _failed(request, words.PROPOSAL_GONE, status=404)
    except DatabaseError:
        logger.warning("proposal discard failed", extra={"user_id": request.user.pk})
        return _failed(request, NOT_SAVED, status=503, key=("proposal", pk))
    _forget_import_review(request, pk)
    if wants_json(request):
        return JsonResponse({"ok": True, "message": str(PROPOSAL_DISCARDED)})
    messages.success(request, PROPOSAL_DISCARDED)
    return redirect(reverse("agentmemory:page") + "#proposals")


TIDY_PROPOSED = {
    "user": gettext_lazy("The assistant proposed a tidier version of your profile. Review it under "
                         "“Waiting for you”: nothing changes until you choose Save."),
    "memory": gettext_lazy("The assistant proposed a tidier version of your notes. Review it under "
                           "“Waiting for you”: nothing changes until you choose Save."),
}
TIDY_THROTTLED = gettext_lazy(
    "Too many requests to tidy up in a short time; nothing was proposed. Wait a minute and try again.")


@form_post
def tidy_up(request: HttpRequest) -> HttpResponse:
    """Tidy up: one model request proposes a consolidated version of one document (`agentmemory.tidy`).

    The proposal waits under "Waiting for you" like any other; nothing
    changes until the person saves it.
    """
    target = request.POST.get("target", "")
    if target not in TARGETS:
        return _failed(request, tidy.MESSAGES[tidy.INVALID_TARGET], status=400)
    if not _throttle_allows(request) or not TidyThrottle().allow_request(request, None):
        return _failed(request, TIDY_THROTTLED, status=429)
    try:
        proposal_id = tidy.propose(user_id=request.user.pk, target=target)
    except tidy.TidyFailed as failed:
        return _failed(request, failed.message, status=failed.status)
    except (MemoryUnavailable, DatabaseError):
        logger.warning("tidy up failed: memory unavailable", extra={"user_id": request.user.pk})
        return _failed(request, UNAVAILABLE_NOW, status=503)
    message = str(TIDY_PROPOSED[target])
    if wants_json(request):
        return JsonResponse({"ok": True, "message": message, "proposal_id": proposal_id})
    messages.success(request, message)
    return redirect(reverse("agentmemory:page") + f"#proposal-{proposal_id}")


UNAVAILABLE_NOW = gettext_lazy(
    "Memory could not be read right now, so nothing was proposed. Try again in a minute.")


SWITCH_ON = gettext_lazy("Memory is on: the assistant reads and updates your memory in chats.")
SWITCH_OFF = gettext_lazy("Memory is off: your chats neither read nor change your memory. "
                          "What is stored stays here until you remove it.")


@login_required
@require_http_methods(["GET", "HEAD", "POST"])
@answers_account_gone
def erase(request: HttpRequest) -> HttpResponse:
    """GET asks for confirmation; POST erases memory (with `include=chats`, the chats too) and shows the receipt."""
    if request.method != "POST":
        try:
            state = memory_state(user_id=request.user.pk)
        except MemoryUnavailable:
            state = None
        return render(request, "agentmemory/erase_confirm.html",
                      {"state": state, "chats_erasable": services.chats_erasable()})
    with_chats = request.POST.get("include") == "chats" and services.chats_erasable()
    if not _throttle_allows(request):
        return _failed(request, _throttled_message(), status=429)
    try:
        receipt = services.erase_memory(user_id=request.user.pk, actor=Actor.USER, with_chats=with_chats)
    except DatabaseError:
        logger.warning("memory erase failed", extra={"user_id": request.user.pk})
        return _failed(request, NOT_SAVED, status=503)
    _forget_import_review(request)
    at = timezone.localtime(receipt.at)
    messages.success(request, _("%(summary)s Receipt: erased on %(date)s at %(time)s; your History keeps it.") % {
        "summary": receipt_payload(receipt)["summary"], "date": date_format(at, _("j M Y")),
        "time": date_format(at, "H:i:s T")})
    return redirect("agentmemory:page")


@login_required
@require_http_methods(["GET", "HEAD"])
def export(request: HttpRequest) -> HttpResponse:
    now = timezone.now()
    try:
        payload = person_export(user_id=request.user.pk, exported_at=now)
    except MemoryUnavailable:
        return render_page(request, page_error=str(UNAVAILABLE), status=503)
    # The API's serializer and renderer, so both downloads are the same document.
    body = JSONRenderer().render(ExportSerializer(payload).data, renderer_context={"indent": 2})
    response = HttpResponse(body, content_type="application/json; charset=utf-8")
    response["Content-Disposition"] = f'attachment; filename="memory-export-{now:%Y%m%d-%H%M%S}.json"'
    response["Cache-Control"] = "no-store"
    return response


# --- helpers -----------------------------------------------------------------


def _change(request, commit, *, done: str, unchanged: str, error_key: tuple, draft: str = "") -> HttpResponse:
    if not _throttle_allows(request):
        return _failed(request, _throttled_message(), status=429, key=error_key, draft=draft)
    try:
        result = _confirmed(request, commit)
    except (store.CommitNotStored, store.CommitUnconfirmed) as exc:
        return _not_known_saved(request, exc, key=error_key, draft=draft)
    except MemoryValidationError as exc:
        # exc.message is written for the model ("Operation 1: ..."); the
        # person reads the plain sentence for its code. The draft is shown
        # back only to its author, escaped by the template.
        message = words.rule_message(exc.code, target=exc.target, limits=memory_settings().limits)
        return _failed(request, message, status=400, key=error_key, draft=draft)
    except (MemoryUnavailable, DatabaseError):
        logger.warning("memory page change failed", extra={"user_id": request.user.pk})
        return _failed(request, NOT_SAVED, status=503, key=error_key, draft=draft)
    message = str(done if result.changed else unchanged)
    if wants_json(request):
        return JsonResponse({"ok": True, "changed": bool(result.changed), "message": message})
    messages.success(request, message)
    return redirect(reverse("agentmemory:page"))


def _confirmed(request, commit):
    """Run `commit()`, a memory write for the signed-in person; return its result.

    When the connection failed at its COMMIT, the database is asked (bounded,
    COMMIT_CONFIRM_SECONDS): the result when the change is stored (the
    person's open pages are told then), else store.CommitNotStored or
    store.CommitUnconfirmed, which `_not_known_saved` answers.
    """
    user_id = request.user.pk
    return store.commit_confirmed(
        commit, announce=lambda result: broadcast_memory_changed_sync(user_id, result.snapshot, result.limits),
    )


def _not_known_saved(request, exc: Exception, *, key: tuple = (), draft: str | None = None,
                     drafts: dict | None = None) -> HttpResponse:
    """A write whose COMMIT's answer was lost: the database confirmed nothing was saved, or could not
    say in time. Either way the person's draft stays; the page (and History) shows what is stored."""
    unconfirmed = isinstance(exc, store.CommitUnconfirmed)
    logger.warning("memory page change %s after its connection failed",
                   "unconfirmed" if unconfirmed else "confirmed not stored", extra={"user_id": request.user.pk})
    message = str(words.COMMIT_UNCONFIRMED if unconfirmed else words.COMMIT_NOT_STORED)
    if wants_json(request):
        code = "unconfirmed" if unconfirmed else "connection_lost"
        return JsonResponse({"ok": False, "message": message, "code": code}, status=503)
    if unconfirmed:
        # The database did not answer: a sentence kept in the session for the next page could not be
        # stored either. Answer here, touching nothing stored; the memory page shows the truth later.
        return render(request, "agentmemory/not_confirmed.html", {"message": message}, status=503)
    return _failed(request, message, status=503, key=key, draft=draft, drafts=drafts)


def _failed(request, message: StrOrPromise, *, status: int, key: tuple = (), draft: str | None = None,
            drafts: dict | None = None) -> HttpResponse:
    """Answer a post that changed nothing.

    The page's script gets `{"ok": false, "message": ...}` with the status
    and shows the sentence beside the field. A plain form post is redirected
    back to the page (Post/Redirect/Get), which then shows the sentence
    beside the field with the draft kept, so reloading never posts again.
    The sentence is taken in the active language, as a str (JSON and the session store no lazy text).
    """
    message = str(message)
    if wants_json(request):
        return JsonResponse({"ok": False, "message": message}, status=status)
    flash: dict = {}
    if key:
        error: dict[str, Any] = {"key": list(key), "message": message}
        if draft is not None:
            error["draft"] = draft[:MAX_FIELD_CHARS]
        if drafts:  # a proposal's edited facts, by position
            error["drafts"] = {str(position): text[:MAX_FIELD_CHARS] for position, text in drafts.items()}
        flash["error"] = error
    else:
        flash["page_error"] = message
    request.session[FLASH_KEY] = flash
    url = reverse("agentmemory:page")
    if key[:1] == ("add",) and key[1:2] and key[1] in TARGETS:
        url += f"#add-{key[1]}"
    elif key[:1] == ("entry",) and key[1:2] and key[1] in TARGETS:
        url += f"#document-{key[1]}"
    elif key[:1] == ("proposal",) and len(key) == 2:
        url += f"#proposal-{int(key[1])}"
    elif key[:1] == ("change",) and len(key) == 2:
        url += f"#change-{int(key[1])}"
    elif key == ("import",):
        url += "#import"
    return redirect(url)


def _throttle_allows(request) -> bool:
    # The page shares the API's write budget, so a scripted session gains
    # nothing by posting forms instead of calling the API.
    return MemoryWriteThrottle().allow_request(request, None)


def _throttled_message() -> str:
    return _("Too many memory changes in a short time; nothing was saved. Wait a minute and try again.")


@form_post
def undo_change(request: HttpRequest, pk: int) -> HttpResponse:
    """Undo one change of the person's, from History (all or nothing)."""
    return _change_action(request, pk, services.undo_change, "undo")


@form_post
def restore_change(request: HttpRequest, pk: int) -> HttpResponse:
    """Bring the documents back as one change left them, from History (all or nothing)."""
    return _change_action(request, pk, services.restore_change, "restore")


def _change_action(request, pk: int, action, name: str) -> HttpResponse:
    key = ("change", pk)
    if not _throttle_allows(request):
        return _failed(request, _throttled_message(), status=429, key=key)
    try:
        result = _confirmed(request, lambda: action(user_id=request.user.pk, change_id=pk))
    except (store.CommitNotStored, store.CommitUnconfirmed) as exc:
        return _not_known_saved(request, exc, key=key)
    except versions.ChangeGone:
        return _failed(request, words.CHANGE_GONE, status=404)
    except MemoryValidationError as exc:
        message = words.undo_message(exc.code, action=name, target=exc.target, limits=memory_settings().limits)
        return _failed(request, message, status=409 if exc.code in ChangeAPIView.CONFLICT_CODES else 400, key=key)
    except (MemoryUnavailable, DatabaseError):
        logger.warning("memory %s failed", name, extra={"user_id": request.user.pk})
        return _failed(request, NOT_SAVED, status=503, key=key)
    message = str((words.UNDONE if name == "undo" else words.RESTORED) if result.changed else words.NOTHING_CHANGED)
    if wants_json(request):
        return JsonResponse({"ok": True, "changed": bool(result.changed), "message": message,
                             "change_id": result.change_id})
    messages.success(request, message)
    return redirect(reverse("agentmemory:page") + "#history")


# --- the memory passport: import and the Markdown export (`agentmemory.importing`, `agentmemory.passport`) ---

# The review screen's state between the import's post and its page (Post/Redirect/Get), in the person's
# server-side session only: the refused items (a secret's text is never kept) and a failed save's sentence.
IMPORT_KEY = importing.REVIEW_SESSION_KEY
_REVIEW_CHARS = 64_000  # the most characters of refused items the session keeps for the review


@form_post
def import_memory(request: HttpRequest) -> HttpResponse:
    """Read a pasted or uploaded import and store it as ONE proposal, then show its review."""
    form = ImportForm(request.POST, request.FILES)
    if not form.is_valid():
        return _failed(request, first_error(form), status=400, key=("import",))
    if not _throttle_allows(request):
        return _failed(request, _throttled_message(), status=429, key=("import",))
    if not ImportThrottle().allow_request(request, None):
        return _failed(request, words.IMPORT_THROTTLED, status=429, key=("import",))
    _forget_import_review(request)  # a new import's review replaces the last one's
    try:
        result = importing.propose(user_id=request.user.pk, data=form.data_bytes(passport.MAX_IMPORT_BYTES))
    except passport.ImportRefused as refusal:
        status = 413 if refusal.code == "import_too_large" else 400
        return _failed(request, words.import_refused(refusal.code), status=status, key=("import",))
    except MemoryValidationError as exc:  # `erased`: an erase ran while the import was read
        return _failed(request, words.import_save_message(exc.code), status=409 if exc.code == "erased" else 400,
                       key=("import",))
    except (MemoryUnavailable, DatabaseError):
        logger.warning("memory import failed", extra={"user_id": request.user.pk})
        return _failed(request, UNAVAILABLE_NOW, status=503, key=("import",))
    refused = [(item.content, item.code) for item in result.refused]
    if result.proposal_id is None:  # nothing stored: the review says why, there is nothing to save
        return render_import_review(request, None, refused=refused)
    kept, size = [], 0
    for content, code in refused:
        size += len(content)
        kept.append((content if size <= _REVIEW_CHARS else "", code))
    request.session[IMPORT_KEY] = {"id": result.proposal_id, "refused": kept}
    return redirect("agentmemory:import-review", pk=result.proposal_id)


@login_required
@require_http_methods(["GET", "HEAD"])
def import_review(request: HttpRequest, pk: int) -> HttpResponse:
    """An import's proposal, item by item, with the document each goes to; the refused items right after it."""
    if not ImportThrottle().allow_request(request, None):
        return render_page(request, page_error=str(words.IMPORT_THROTTLED), status=429)
    try:
        proposal = proposals.get(user_id=request.user.pk, proposal_id=pk)
    except proposals.ProposalGone:
        _forget_import_review(request, pk)
        return _failed(request, words.PROPOSAL_GONE, status=404)
    except DatabaseError:
        return render_page(request, page_error=str(UNAVAILABLE), status=503)
    if not importing.is_import(proposal):
        return redirect(reverse("agentmemory:page") + f"#proposal-{pk}")
    review = request.session.get(IMPORT_KEY) or {}
    if review.get("id") != pk:
        review = {}
    routes = {int(position): target for position, target in (review.get("routes") or {}).items()}
    error = str(review.pop("error", "") or "")
    if error:
        review.pop("routes", None)
        request.session[IMPORT_KEY] = review
    return render_import_review(request, proposal, refused=[tuple(item) for item in review.get("refused") or ()],
                                routes=routes, error=error)


@form_post
def import_save(request: HttpRequest, pk: int) -> HttpResponse:
    """Save an import's proposal (all or nothing) with each item's document, or left out."""
    try:
        proposal = proposals.get(user_id=request.user.pk, proposal_id=pk)
    except proposals.ProposalGone:
        return _failed(request, words.PROPOSAL_GONE, status=404)
    except DatabaseError:
        return _failed(request, NOT_SAVED, status=503)
    routes = {}
    for operation in proposal.operations:
        chosen = request.POST.get(f"route-{operation.position}", operation.target)
        if chosen != operation.target:
            routes[operation.position] = chosen
    back = redirect("agentmemory:import-review", pk=pk)

    def failed(message) -> HttpResponse:
        review = request.session.get(IMPORT_KEY) or {}
        if review.get("id") != pk:
            review = {"id": pk}
        review.update(error=str(message), routes={str(position): target for position, target in routes.items()})
        request.session[IMPORT_KEY] = review
        return back

    if not _throttle_allows(request):
        return failed(_throttled_message())
    try:
        _confirmed(request, lambda: services.save_proposal(user_id=request.user.pk, proposal_id=pk, routes=routes))
    except (store.CommitNotStored, store.CommitUnconfirmed) as exc:
        return _not_known_saved(request, exc)
    except proposals.ProposalGone:
        return _failed(request, words.PROPOSAL_GONE, status=404)
    except MemoryValidationError as exc:
        return failed(words.import_save_message(exc.code, target=exc.target, limits=memory_settings().limits))
    except (MemoryUnavailable, DatabaseError):
        logger.warning("memory import save failed", extra={"user_id": request.user.pk})
        return failed(NOT_SAVED)
    request.session.pop(IMPORT_KEY, None)
    messages.success(request, str(words.IMPORT_SAVED))
    return redirect("agentmemory:page")


def _forget_import_review(request: HttpRequest, pk: int | None = None) -> None:
    """Drop the import's review state from the session (of import `pk` only, when given): after an erase, a
    discard or a new import, no refused item's text outlives what it was shown for."""
    review = request.session.get(IMPORT_KEY)
    if review is not None and (pk is None or review.get("id") == pk):
        request.session.pop(IMPORT_KEY, None)


@login_required
@require_http_methods(["GET", "HEAD"])
def export_markdown(request: HttpRequest) -> HttpResponse:
    """The Markdown pair (profile.md and notes.md under their paths, in one file), as the import reads it back."""
    now = timezone.now()
    try:
        body = markdown_export(user_id=request.user.pk)
    except MemoryUnavailable:
        return render_page(request, page_error=str(UNAVAILABLE), status=503)
    response = HttpResponse(body, content_type="text/markdown; charset=utf-8")
    response["Content-Disposition"] = f'attachment; filename="memory-{now:%Y%m%d-%H%M%S}.md"'
    response["Cache-Control"] = "no-store"
    return response
