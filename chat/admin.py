"""Conversations in the admin: metadata for every reviewer, text only with the content permission.

A transcript says as much about a person as their memory (more: it holds
everything they typed), so message text and conversation titles (a title is
the start of the first message) sit behind the same permission as memory
content, `agentmemory.view_memory_content`. Staff without it see whose
conversations exist, when they changed and how many messages they hold, and
each message's role, memory outcome and time; the text and the title are not
selected from the database, not listed, not searchable and not filterable
(a `title__contains` filter would let them probe it). Staff with it also see
the text, escaped, and may search titles and messages. Nothing here adds or
changes a conversation.
"""
from django.contrib import admin
from django.db.models import Count

from agentmemory.admin import can_view_content, log_deletions_by_id

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
class ConversationAdmin(admin.ModelAdmin):
    list_filter = ["updated_at"]
    list_select_related = ["user"]
    search_help_text = "Search by username (staff who may read conversations also search titles and messages)."
    inlines = [MessageInline]

    def get_queryset(self, request):
        queryset = super().get_queryset(request).annotate(message_count=Count("messages"))
        if not can_view_content(request):
            queryset = queryset.defer("title")
        return queryset

    def get_list_display(self, request):
        if can_view_content(request):
            return ["id", "user", "title", "message_count", "updated_at"]
        return ["id", "user", "message_count", "created_at", "updated_at"]

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

    @admin.display(description="messages", ordering="message_count")
    def message_count(self, obj):
        return obj.message_count

    def has_add_permission(self, request):
        return False

    def has_change_permission(self, request, obj=None):
        return False
