"""Staff review of memory in the admin: read-only, content behind a permission.

Staff who may view memory documents see whose memory exists, how full each
document is, its schema version and when it changed. The content is shown
only to staff who also hold `agentmemory.view_memory_content`; for everyone
else it is not even selected from the database, and no filter or search may
touch it (a `content__contains` filter would let them probe it). Nobody adds,
changes or deletes rows here. The one write is the "Erase this person's
memory" action: gated by `agentmemory.erase_memory`, confirmed on its own
page, done by `store.erase` as the staff actor (a MemoryEvent naming the
staff member) and recorded in the admin log under the staff member's name.
Events are metadata only and read-only; they read in plain words
(`agentmemory.words`), and their error code appears only on an event's own
page, for whoever debugs it.

Reads are audited. Each page that shows staff a person's content (a memory
document, a proposal, a conversation in chat/admin.py) and each search over
content writes an event for that person before the page is sent
(`AuditedReads`, `record_content_read`): actor staff, outcome "viewed", the
staff member's name and what kind of thing was read, never the text or the
search term. The person reads "Support staff viewed your memory" in History;
admins see the events here.

Support staff's review of what the assistant saved (`agentmemory.review`)
lives under "Write reviews": the verdicts (metadata), the review queue and
the write-quality dashboard. `agentmemory.review_memory_writes` opens the
queue and the dashboard and implies nothing else; the queue shows a change's
entries (and accepts a verdict) only to staff who also hold
`view_memory_content`, and each such view is a "viewed" event of kind
"review" ("Support staff reviewed an entry" in the person's History).
"""
from __future__ import annotations

import re
from datetime import timedelta

from django.contrib import admin, messages
from django.contrib.admin import helpers
from django.contrib.admin.models import DELETION, LogEntry
from django.contrib.contenttypes.models import ContentType
from django.core.exceptions import PermissionDenied
from django.db.models import Count, F, IntegerField, Q, Sum, Value
from django.db.models.functions import Length, Replace
from django.http import HttpResponseRedirect
from django.template.response import TemplateResponse
from django.urls import path, reverse
from django.utils import timezone
from django.utils.dateparse import parse_date
from django.utils.html import format_html, format_html_join
from django.utils.translation import gettext as _
from django.utils.translation import gettext_lazy, ngettext

from . import provenance, review, services, versions, words
from .conf import memory_settings
from .models import (
    Actor,
    MemoryDocument,
    MemoryEvent,
    MemoryProposal,
    MemoryType,
    MemoryVersion,
    Outcome,
    SourceIntent,
    Verdict,
    Viewed,
    WriteReview,
)
from .rules import SEPARATOR, parse_document
from .selectors import NEAR_FULL_PERCENT

CONTENT_PERMISSION = "agentmemory.view_memory_content"
ERASE_PERMISSION = "agentmemory.erase_memory"
REVIEW_PERMISSION = "agentmemory.review_memory_writes"
# The verdict buttons' access keys (Alt+digit in Chromium, Alt+Shift in Firefox), in the order shown.
VERDICT_KEYS = (("1", Verdict.KEEP), ("2", Verdict.NOT_WORTH), ("3", Verdict.SENSITIVE),
                ("4", Verdict.WRONG_DOCUMENT), ("5", Verdict.WRONG_CONTENT))


def can_view_content(request) -> bool:
    return request.user.has_perm(CONTENT_PERMISSION)


def record_content_read(request, user_ids, viewed: str, *, targets=None) -> None:
    """Record that the signed-in staff member saw these people's content (`Viewed` kind; content-free)."""
    services.record_staff_views(user_ids=user_ids, staff=request.user, viewed=viewed, targets=targets)


class AuditedReads:
    """A read-only change page that shows a person's content records the read.

    Only staff holding the content permission get the content; for them each
    view of the page writes the person's "viewed" event (`content_read`, the
    kind; `read_targets`, the document) before the response is rendered and
    sent. If the event cannot be written, the page fails and shows nothing.
    """

    content_read = ""

    def read_targets(self, obj) -> dict:
        return {}

    def change_view(self, request, object_id, form_url="", extra_context=None):
        response = super().change_view(request, object_id, form_url, extra_context)
        shown = getattr(response, "context_data", None) or {}
        original = shown.get("original")
        if original is not None and response.status_code == 200 and can_view_content(request):
            record_content_read(request, [original.user_id], self.content_read, targets=self.read_targets(original))
        return response


def log_deletions_by_id(request, objects):
    """Log deletions under each object's `log_label` instead of `str()`.

    Titles name the person by username; the admin log keeps an id-only label,
    so nothing of the person stays there after their account is deleted.
    """
    entries = []
    for obj in objects:
        content_type = ContentType.objects.get_for_model(obj, for_concrete_model=False)
        entries.append(LogEntry(user_id=request.user.pk, content_type_id=content_type.pk, object_id=str(obj.pk),
                                object_repr=obj.log_label[:200], action_flag=DELETION))
    return LogEntry.objects.bulk_create(entries)


def near_full_threshold(limit: int) -> int:
    """Return the fewest characters at which a document counts as near full."""
    return -(-limit * NEAR_FULL_PERCENT // 100)


class NearFullFilter(admin.SimpleListFilter):
    title = gettext_lazy("usage")
    parameter_name = "near_full"

    def lookups(self, request, model_admin):
        return [("yes", _("Near full (≥ %(percent)s%%)") % {"percent": NEAR_FULL_PERCENT}),
                ("no", _("Below %(percent)s%%") % {"percent": NEAR_FULL_PERCENT})]

    def queryset(self, request, queryset):
        limits = memory_settings().limits
        near_full = Q()
        for memory_type, limit in limits.items():
            near_full |= Q(memory_type=memory_type, characters__gte=near_full_threshold(limit))
        if self.value() == "yes":
            return queryset.filter(near_full)
        if self.value() == "no":
            return queryset.exclude(near_full)
        return queryset


class ReadOnlyAdmin(admin.ModelAdmin):
    """Staff review memory; nothing in the admin adds, changes or deletes it."""

    def has_add_permission(self, request):
        return False

    def has_change_permission(self, request, obj=None):
        return False

    def has_delete_permission(self, request, obj=None):
        return False


@admin.register(MemoryDocument)
class MemoryDocumentAdmin(AuditedReads, ReadOnlyAdmin):
    content_read = Viewed.MEMORY
    list_display = ("user", "memory_type", "characters", "usage_percent", "entry_count", "schema_version",
                    "updated_at")
    list_display_links = ("user", "memory_type")
    list_filter = (NearFullFilter, "memory_type", "schema_version")
    search_fields = ("user__username",)
    search_help_text = gettext_lazy("Search by username.")
    ordering = ("user__username", "memory_type")
    list_select_related = ("user",)
    list_per_page = 50
    actions = ["erase_people"]
    readonly_fields = ("user", "memory_type", "schema_version", "created_at", "updated_at", "characters",
                       "usage_percent", "entry_count", "entries", "entry_sources")

    def get_queryset(self, request):
        queryset = super().get_queryset(request).annotate(
            characters=Length("content"),
            # Entries = delimiters + 1, counted in the database so the
            # content itself need not be selected.
            entry_count=(
                (Length("content") - Length(Replace("content", Value(SEPARATOR), Value(""))))
                / Value(len(SEPARATOR), output_field=IntegerField())
                + Value(1, output_field=IntegerField())
            ),
        )
        if not can_view_content(request):
            queryset = queryset.defer("content")
        return queryset

    def get_fieldsets(self, request, obj=None):
        fieldsets = [
            (_("Owner"), {"fields": ("user", "memory_type")}),
            (_("Usage"), {"fields": ("characters", "usage_percent", "entry_count", "schema_version")}),
            (_("Where entries came from"), {
                "fields": ("entry_sources",),
                "description": _("Metadata: who last set each entry and when, no content.")}),
            (_("Dates"), {"fields": ("created_at", "updated_at")}),
        ]
        if can_view_content(request):
            fieldsets.append((_("Content"), {
                "fields": ("entries",), "description": _("Untrusted text written by the assistant or the person.")}))
        return fieldsets

    def lookup_allowed(self, lookup, value, request=None):
        if lookup.split("__", 1)[0] == "content":
            return False
        return super().lookup_allowed(lookup, value, request)

    def read_targets(self, obj) -> dict:
        return {obj.memory_type: 1}

    def has_erase_permission(self, request):
        return request.user.has_perm(ERASE_PERMISSION)

    def log_deletions(self, request, queryset):
        return log_deletions_by_id(request, queryset)

    # --- columns ----------------------------------------------------------

    @admin.display(description=gettext_lazy("characters"), ordering="characters")
    def characters(self, obj):
        return obj.characters

    @admin.display(description=gettext_lazy("usage"), ordering="characters")
    def usage_percent(self, obj):
        limit = memory_settings().limits.get(obj.memory_type)
        if not limit:
            return "—"
        return _("%(percent)s%% of %(limit)s") % {"percent": obj.characters * 100 // limit,
                                                   "limit": words.number(limit)}

    @admin.display(description=gettext_lazy("entries"))
    def entry_count(self, obj):
        return obj.entry_count

    @admin.display(description=gettext_lazy("sources, by entry number"))
    def entry_sources(self, obj):
        sources = obj.provenance if isinstance(obj.provenance, list) else []
        if not sources:
            return "—"
        return format_html(
            "<ol>{}</ol>",
            format_html_join("", "<li>{}</li>", ((_source_label(item),) for item in sources)),
        )

    @admin.display(description=gettext_lazy("entries"))
    def entries(self, obj):
        # Only reachable through the fieldset of staff holding the content
        # permission; every entry is escaped.
        return format_html(
            '<ol class="memory-entries">{}</ol>',
            format_html_join("", '<li style="white-space: pre-wrap">{}</li>',
                             ((entry,) for entry in parse_document(obj.content))),
        )

    # --- the audited erase ------------------------------------------------

    @admin.action(description=gettext_lazy("Erase this person's memory"), permissions=["erase"])
    def erase_people(self, request, queryset):
        user_ids = sorted(set(queryset.values_list("user_id", flat=True)))
        if request.POST.get("post") != "yes":
            people = (
                MemoryDocument.objects.filter(user_id__in=user_ids)
                .values("user_id", username=F("user__username"))
                .annotate(documents=Count("id"), characters=Sum(Length("content")))
                .order_by("username")
            )
            context = {
                **self.admin_site.each_context(request),
                "title": _("Erase these people's memory?"),
                "opts": self.model._meta,
                "people": people,
                "selected": queryset.values_list("pk", flat=True),
                "action_checkbox_name": helpers.ACTION_CHECKBOX_NAME,
                "action": "erase_people",
            }
            return TemplateResponse(request, "admin/agentmemory/erase_confirmation.html", context)
        self.log_deletions(request, MemoryDocument.objects.filter(user_id__in=user_ids).defer("content"))
        for user_id in user_ids:
            services.erase_memory(user_id=user_id, actor=Actor.STAFF, staff=request.user)
        self.message_user(
            request, ngettext("Erased the memory of %(count)s person.", "Erased the memory of %(count)s people.",
                              len(user_ids)) % {"count": len(user_ids)},
            messages.SUCCESS,
        )
        return None


@admin.register(MemoryEvent)
class MemoryEventAdmin(ReadOnlyAdmin):
    list_display = ("created_at", "user", "acted_by", "outcome_words", "changes", "reason", "user_characters",
                    "memory_characters", "retry_count", "duration_ms")
    list_filter = ("outcome", "actor", "created_at")
    search_fields = ("user__username",)
    search_help_text = gettext_lazy("Search by username.")
    date_hierarchy = "created_at"
    list_select_related = ("user",)
    fields = ("created_at", "user", "acted_by", "outcome_words", "changes", "reason", "operation_count",
              "user_characters", "memory_characters", "retry_count", "duration_ms", "error_code")
    readonly_fields = fields

    @admin.display(description=gettext_lazy("by"), ordering="actor")
    def acted_by(self, obj):
        if obj.actor == Actor.STAFF and obj.staff_username:
            return _("Staff: %(username)s") % {"username": obj.staff_username}
        return obj.get_actor_display()

    @admin.display(description=gettext_lazy("outcome"), ordering="outcome")
    def outcome_words(self, obj):
        return words.outcome_name(obj.outcome)

    @admin.display(description=gettext_lazy("changes"))
    def changes(self, obj):
        if obj.outcome == Outcome.VIEWED:
            return words.staff_view(obj.viewed, obj.targets, for_owner=False)
        return words.staff_changes(obj.outcome, obj.actions, obj.targets) or "—"

    @admin.display(description=gettext_lazy("reason"))
    def reason(self, obj):
        return words.event_reason(obj.outcome, obj.error_code) or "—"


@admin.register(MemoryProposal)
class MemoryProposalAdmin(AuditedReads, ReadOnlyAdmin):
    """Pending "ask before saving" proposals: metadata for all staff, the text only with the content permission."""

    content_read = Viewed.PROPOSAL

    list_display = ("user", "operation_count", "conversation_id", "created_at", "expires_at")
    search_fields = ("user__username",)
    search_help_text = gettext_lazy("Search by username.")
    list_select_related = ("user",)
    list_per_page = 50

    def get_queryset(self, request):
        queryset = super().get_queryset(request)
        if not can_view_content(request):
            queryset = queryset.defer("operations")
        return queryset

    def get_fields(self, request, obj=None):
        fields = ["user", "operation_count", "conversation_id", "turn_id", "created_at", "expires_at"]
        if can_view_content(request):
            fields.append("proposed_operations")
        return fields

    def get_readonly_fields(self, request, obj=None):
        return self.get_fields(request, obj)

    def lookup_allowed(self, lookup, value, request=None):
        if lookup.split("__", 1)[0] == "operations":
            return False
        return super().lookup_allowed(lookup, value, request)

    @admin.display(description=gettext_lazy("proposed operations"))
    def proposed_operations(self, obj):
        # Only in the fields of staff holding the content permission; escaped.
        return format_html(
            '<ol class="memory-entries">{}</ol>',
            format_html_join("", '<li style="white-space: pre-wrap">{} {}: {}</li>',
                             ((op.get("action"), op.get("target"), op.get("content") or op.get("entry") or "")
                              for op in obj.operations)),
        )


@admin.register(MemoryVersion)
class MemoryVersionAdmin(AuditedReads, ReadOnlyAdmin):
    """Versions kept for undo: who changed which document when, and sizes, for all staff; the text before and
    after only with the content permission (never selected without it, never searchable or filterable)."""

    content_read = Viewed.VERSION
    list_display = ("created_at", "user", "memory_type", "kind", "by", "characters_before", "characters_after",
                    "conversation_id")
    list_filter = ("memory_type", "kind", "by")
    search_fields = ("user__username",)
    search_help_text = gettext_lazy("Search by username.")
    list_select_related = ("user",)
    list_per_page = 50
    CONTENT_FIELDS = ("before", "after", "before_provenance")

    def get_queryset(self, request):
        queryset = super().get_queryset(request).annotate(
            before_length=Length("before"), after_length=Length("after"))
        if not can_view_content(request):
            queryset = queryset.defer(*self.CONTENT_FIELDS)
        return queryset

    def get_fields(self, request, obj=None):
        fields = ["user", "memory_type", "kind", "by", "conversation_id", "turn_id", "created_at",
                  "characters_before", "characters_after", "event"]
        if can_view_content(request):
            fields += ["entries_before", "entries_after"]
        return fields

    def get_readonly_fields(self, request, obj=None):
        return self.get_fields(request, obj)

    def lookup_allowed(self, lookup, value, request=None):
        if lookup.split("__", 1)[0] in self.CONTENT_FIELDS:
            return False
        return super().lookup_allowed(lookup, value, request)

    def read_targets(self, obj) -> dict:
        return {obj.memory_type: 1}

    @admin.display(description=gettext_lazy("characters before"), ordering="before_length")
    def characters_before(self, obj):
        return obj.before_length

    @admin.display(description=gettext_lazy("characters after"), ordering="after_length")
    def characters_after(self, obj):
        return obj.after_length

    @admin.display(description=gettext_lazy("entries before"))
    def entries_before(self, obj):
        return _entry_list(obj.before)

    @admin.display(description=gettext_lazy("entries after"))
    def entries_after(self, obj):
        return _entry_list(obj.after)


def can_review(request) -> bool:
    return request.user.is_active and request.user.is_staff and request.user.has_perm(REVIEW_PERMISSION)


@admin.register(WriteReview)
class WriteReviewAdmin(ReadOnlyAdmin):
    """Verdicts on what the assistant saved: metadata only; the queue and the dashboard are its pages."""

    list_display = ("created_at", "week", "model", "policy_version", "verdict", "staff_username", "notice_open")
    list_filter = ("verdict", "week", "model", "policy_version")
    list_per_page = 50
    fields = list_display
    readonly_fields = fields
    change_list_template = "admin/agentmemory/writereview/change_list.html"

    def has_view_permission(self, request, obj=None):
        return can_review(request)

    def has_module_permission(self, request):
        return can_review(request) or super().has_module_permission(request)

    def get_urls(self):
        return [
            path("queue/", self.admin_site.admin_view(self.queue_view), name="agentmemory_writereview_queue"),
            path("dashboard/", self.admin_site.admin_view(self.dashboard_view),
                 name="agentmemory_writereview_dashboard"),
            *super().get_urls(),
        ]

    def _week(self, request):
        try:
            chosen = parse_date(str(request.GET.get("week") or request.POST.get("week") or ""))
        except ValueError:  # well formed, no such day ("2026-02-30")
            chosen = None
        if chosen is not None and not 1 < chosen.year < 9999:  # the page links the weeks either side
            chosen = None
        return review.week_of(chosen or timezone.now())

    def queue_view(self, request):
        if not can_review(request):
            raise PermissionDenied
        week = self._week(request)
        queue_url = f"{reverse('admin:agentmemory_writereview_queue')}?week={week.isoformat()}"
        status = 200
        if request.method == "POST":
            if not can_view_content(request):
                raise PermissionDenied
            status, refusal = self._verdict(request)
            if status is None:
                self.message_user(request, _("Verdict recorded."), messages.SUCCESS)
                return HttpResponseRedirect(queue_url)
            # Refused: the page says why, with the status a script reads, and shows the next change.
            self.message_user(request, refusal, messages.WARNING)
        judged, drawn = review.progress(week)
        context = {
            **self.admin_site.each_context(request),
            "title": _("Review what the assistant saved"),
            "opts": self.model._meta,
            "week": week,
            "previous_week": week - timedelta(days=7),
            "next_week": week + timedelta(days=7),
            "judged": judged, "drawn": drawn,
            "can_view_content": can_view_content(request),
            "item": None,
        }
        candidate = review.next_candidate(week) if can_view_content(request) else None
        if candidate is not None:
            try:
                shown = review.item(candidate)
            except versions.ChangeGone:
                shown = None
            if shown is not None:
                # The read and the showing (what a verdict needs) are recorded before the page is
                # sent; no record, no page.
                review.record_showing(candidate=candidate, week=week, staff=request.user)
                record_content_read(request, [candidate.user_id], Viewed.REVIEW,
                                    targets={document.target: 1 for document in shown.documents})
                context["item"] = {
                    "change": shown.change.id,
                    "created_at": shown.created_at,
                    "model": candidate.model or _("unknown"),
                    "policy_version": candidate.policy_version or _("unknown"),
                    "source": _("The assistant, in a chat turn") if shown.change.conversation_id is not None
                    else _("The assistant"),
                    # The source message's role in the turn, never its words (nor the conversation).
                    "source_intent": SourceIntent(candidate.source_intent).label if candidate.source_intent
                    else _("unknown"),
                    "documents": [{
                        "name": MemoryType(document.target).label,
                        "entries": [{"kind": entry.kind, "before": entry.before, "after": entry.after}
                                    for entry in document.entries],
                    } for document in shown.documents],
                    "verdicts": [{"key": key, "value": verdict.value, "label": verdict.label}
                                 for key, verdict in VERDICT_KEYS],
                }
        return TemplateResponse(request, "admin/agentmemory/writereview/queue.html", context, status=status)

    def _verdict(self, request):
        """Record the POSTed verdict; (None, "") when recorded, else (status, the sentence saying why not)."""
        change = str(request.POST.get("change", ""))
        if not re.fullmatch(r"[0-9]{1,18}", change):
            return 400, _("That is not a change of the queue; here is the next one.")
        try:
            review.record_verdict(event_id=int(change), verdict=str(request.POST.get("verdict", "")),
                                  staff=request.user)
        except review.AlreadyJudged:
            return 409, _("That change already has a verdict (perhaps another reviewer's, a moment ago); "
                          "here is the next one.")
        except review.NotShown:
            return 403, _("That change was not shown to you in the review queue, so it takes no verdict of "
                          "yours; here is the next one.")
        except review.NotSampled:
            return 404, _("That change can no longer be judged; here is the next one.")
        except ValueError:
            return 400, _("That is not one of the verdicts; choose one of the buttons.")
        return None, ""

    def dashboard_view(self, request):
        if not can_review(request):
            raise PermissionDenied
        order = [verdict.value for _key, verdict in VERDICT_KEYS]
        rows = [{**row, "verdict_list": [row["verdicts"][value] for value in order]}
                for row in review.dashboard()["rows"]]
        context = {
            **self.admin_site.each_context(request),
            "title": _("Quality of what the assistant saves"),
            "opts": self.model._meta,
            "rows": rows,
            "verdicts": [(verdict.value, verdict.label) for _key, verdict in VERDICT_KEYS],
        }
        return TemplateResponse(request, "admin/agentmemory/writereview/dashboard.html", context)


def _entry_list(content: str):
    # Only in the fields of staff holding the content permission; every entry is escaped.
    entries = parse_document(content)
    if not entries:
        return _("— (empty)")
    return format_html('<ol class="memory-entries">{}</ol>',
                       format_html_join("", '<li style="white-space: pre-wrap">{}</li>', ((e,) for e in entries)))


def _source_label(item) -> str:
    """One entry's source for staff: the role, the time, the chat's id; never content or titles."""
    source = provenance.Source.from_json(item)
    if source is None:
        return _("unknown")
    role = {"agent": _("the assistant"), "user": _("the person"), "staff": _("support staff"),
            "system": _("the system")}
    at = source.at[:16].replace("T", " ")
    if source.conversation_id is not None:
        return _("%(who)s, %(at)s, chat %(chat)s") % {"who": role.get(source.by, source.by), "at": at,
                                                      "chat": source.conversation_id}
    return _("%(who)s, %(at)s") % {"who": role.get(source.by, source.by), "at": at}
