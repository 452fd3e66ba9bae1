"""Conversations in the admin: metadata for every reviewer, text only with the content permission.

A transcript says as much about a person as their memory (more: it holds
everything they typed), so message text and conversation titles (a title is
the start of the first message) sit behind the same permission as memory
content, `agentmemory.view_memory_content`. Staff without it see whose
conversations exist, when they changed and how many messages they hold, and
each message's role, memory outcome and time; the text and the title are not
selected from the database, not listed, not searchable and not filterable
(a `title__contains` filter would let them probe it). Staff with it also see
the text, escaped, on a conversation's own page, and may search titles and
messages. Lists show no titles to anyone, so content appears only where its
read is recorded: opening a conversation, and each search over titles and
messages, writes a content-free event for each person whose conversation it
shows (agentmemory/admin.py, `AuditedReads`), never the search term. Nothing
here adds or changes a conversation.
"""
from django.contrib import admin
from django.db.models import Count
from django.utils.translation import gettext_lazy as _

from agentmemory.admin import AuditedReads, can_view_content, log_deletions_by_id, record_content_read
from agentmemory.models import Viewed

from . import retention
from .models import Conversation, Message


class MessageInline(admin.TabularInline):
    model = Message
    extra = 0
    can_delete = False
    show_change_link = False

    def get_fields(self, request, obj=None):
        if can_view_content(request):
            return ["role", "content", "memory_outcome", "created_at"]
        return ["role", "memory_outcome", "created_at"]

    def get_readonly_fields(self, request, obj=None):
        return self.get_fields(request, obj)

    def get_queryset(self, request):
        queryset = super().get_queryset(request)
        if not can_view_content(request):
            queryset = queryset.defer("content")
        return queryset

    def has_add_permission(self, request, obj=None):
        return False

    def has_change_permission(self, request, obj=None):
        return False


@admin.register(Conversation)
class ConversationAdmin(AuditedReads, admin.ModelAdmin):
    content_read = Viewed.CONVERSATION
    list_filter = ["updated_at"]
    list_select_related = ["user"]
    search_help_text = _("Search by username (staff who may read conversations also search titles and messages).")
    inlines = [MessageInline]

    def get_queryset(self, request):
        queryset = super().get_queryset(request).annotate(message_count=Count("messages"))
        if not can_view_content(request):
            queryset = queryset.defer("title")
        return queryset

    def get_list_display(self, request):
        # No titles in lists, even with the permission: a title is content,
        # shown only on the conversation's own (audited) page.
        return ["id", "user", "message_count", "created_at", "updated_at"]

    def changelist_view(self, request, extra_context=None):
        response = super().changelist_view(request, extra_context)
        changelist = (getattr(response, "context_data", None) or {}).get("cl")
        if changelist is not None and changelist.query and can_view_content(request):
            # A search over titles and messages: which conversations match says
            # something of their text. Recorded for each person listed.
            record_content_read(request, [c.user_id for c in changelist.result_list], Viewed.SEARCH)
        return response

    def get_search_fields(self, request):
        if can_view_content(request):
            return ["user__username", "title", "messages__content"]
        return ["user__username"]

    def get_fields(self, request, obj=None):
        if can_view_content(request):
            return ["user", "title", "created_at", "updated_at"]
        return ["user", "message_count", "created_at", "updated_at"]

    def get_readonly_fields(self, request, obj=None):
        return self.get_fields(request, obj)

    def lookup_allowed(self, lookup, value, request=None):
        field = lookup.split("__", 1)[0]
        if field == "messages" or (field == "title" and (request is None or not can_view_content(request))):
            return False
        return super().lookup_allowed(lookup, value, request)

    def log_deletions(self, request, queryset):
        return log_deletions_by_id(request, queryset)

    # Staff deletes go the way every delete of a conversation goes (chat.retention): messages, the search
    # index and the links from memory, and SQLite's index compacted.
    def delete_model(self, request, obj):
        retention.delete_conversations(Conversation.objects.filter(pk=obj.pk))

    def delete_queryset(self, request, queryset):
        retention.delete_conversations(queryset)

    @admin.display(description=_("messages"), ordering="message_count")
    def message_count(self, obj):
        return obj.message_count

    def has_add_permission(self, request):
        return False

    def has_change_permission(self, request, obj=None):
        return False
