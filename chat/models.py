"""Conversations and their messages: the chat's event log.

This is history, not memory. It may hold stale facts, temporary details and
untrusted text, so nothing here is ever injected into a prompt as memory;
only the last messages of the same conversation are sent back to the model
as context. A message records what memory did during its turn
(`memory_outcome`) and the tool calls of that turn as metadata only (names,
counts, statuses), never the tool arguments.
"""
from django.conf import settings
from django.contrib.postgres.search import SearchVectorField
from django.db import models
from django.utils.translation import gettext
from django.utils.translation import gettext_lazy as _


class Conversation(models.Model):
    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="conversations", verbose_name=_("user")
    )
    title = models.CharField(_("title"), max_length=120, blank=True)
    created_at = models.DateTimeField(_("created"), auto_now_add=True)
    updated_at = models.DateTimeField(_("updated"), auto_now=True)

    class Meta:
        verbose_name = _("conversation")
        verbose_name_plural = _("conversations")
        ordering = ["-updated_at", "-id"]
        indexes = [models.Index(fields=["user", "-updated_at"], name="chat_conversation_user_recent")]

    def __str__(self):
        # The admin's titles and breadcrumbs: the person by username, never the title.
        return gettext("Conversation %(id)s of %(username)s") % {"id": self.pk, "username": self.user.get_username()}

    @property
    def log_label(self) -> str:
        """The admin log's label: by id, so no username outlives a deleted account there."""
        return f"Conversation {self.pk} of user {self.user_id}"


class Message(models.Model):
    class Role(models.TextChoices):
        USER = "user", _("User")
        ASSISTANT = "assistant", _("Assistant")

    conversation = models.ForeignKey(Conversation, on_delete=models.CASCADE, related_name="messages",
                                     verbose_name=_("conversation"))
    role = models.CharField(_("role"), max_length=16, choices=Role.choices)
    content = models.TextField(_("content"), blank=True)
    # The memory outcome of the turn this message belongs to: committed,
    # nothing_to_commit, unavailable, disabled, discarded or rejected.
    memory_outcome = models.CharField(_("memory outcome"), max_length=24, blank=True)
    turn_id = models.CharField(_("turn id"), max_length=32, blank=True, db_index=True)
    # Tool calls of the turn as metadata only: [{"tool", "status", "operation_count"}].
    metadata = models.JSONField(_("metadata"), default=dict, blank=True)
    created_at = models.DateTimeField(_("created"), auto_now_add=True)

    class Meta:
        verbose_name = _("message")
        verbose_name_plural = _("messages")
        ordering = ["created_at", "id"]

    def __str__(self):
        return f"{self.role} message {self.pk} in conversation {self.conversation_id}"


class MessageSearch(models.Model):
    """The full-text index of one message on PostgreSQL, for `conversation_search`.

    Written only by the database: triggers on `chat_message` (migration 0002)
    insert, refresh and delete a message's row, so the index always holds
    exactly the messages that exist. `document` is `to_tsvector` of the
    message in CHAT_SEARCH_LANGUAGE (the words' stems and positions, nothing
    else); `user` is the conversation's owner, copied so that one GIN index
    over (user, document) answers a person's query without touching anyone
    else's rows. Deleting a message, a conversation or an account deletes
    its rows. On SQLite this table stays empty: the FTS5 table
    `chat_message_fts` plays its part (see chat/search.py).
    """

    message = models.OneToOneField(Message, on_delete=models.CASCADE, primary_key=True, related_name="+")
    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="+", db_index=False)
    document = SearchVectorField()

    def __str__(self):
        return f"Search index of message {self.message_id}"
