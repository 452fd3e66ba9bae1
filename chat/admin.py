"""Conversations in the admin: metadata to find them, content read-only and escaped."""
from django.contrib import admin

from .models import Conversation, Message


class MessageInline(admin.TabularInline):
    model = Message
    fields = ["role", "content", "memory_outcome", "created_at"]
    readonly_fields = fields
    extra = 0
    can_delete = False
    show_change_link = False

    def has_add_permission(self, request, obj=None):
        return False


@admin.register(Conversation)
class ConversationAdmin(admin.ModelAdmin):
    list_display = ["id", "user", "title", "updated_at"]
    list_filter = ["updated_at"]
    search_fields = ["user__username"]
    readonly_fields = ["user", "title", "created_at", "updated_at"]
    inlines = [MessageInline]

    def has_add_permission(self, request):
        return False
