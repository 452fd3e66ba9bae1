"""Deleting conversations so that nothing of them stays behind.

One place deletes conversations, for every path: a person's delete of one
conversation or all of them (chat/api.py), "Erase memory and chats"
(`erase_chats`, agentmemory's AGENTMEMORY["ERASE_CHATS"]), and retention
(`expire`, CHAT_RETENTION_DAYS, the `chat_expire_conversations` command).

What goes with a conversation: its messages (the foreign key), their search
index rows (PostgreSQL's `chat_messagesearch` and SQLite's FTS5 entries,
by the index's triggers), and every link to it from memory: entries,
versions and proposals keep their text but lose the link
(`chat.signals.forget_proposal_source`, on each conversation's delete).

On SQLite an FTS5 index keeps a deleted message's words in its segments
until they are merged; `compact_index` merges them all ('optimize') after
each delete commits, and the connection's `secure_delete` (agentmemory's
app config) zeroes the freed bytes, so the words are in neither the index
nor the file. PostgreSQL leaves dead tuples until VACUUM: docs/privacy.md
says what remains where and for how long.
"""
from __future__ import annotations

import logging
from datetime import datetime, timedelta

from django.conf import settings
from django.db import DatabaseError, connection, transaction
from django.utils import timezone

from .models import Conversation, Message, MessageSearch

logger = logging.getLogger(__name__)

EXPIRE_BATCH = 200


def delete_conversations(queryset) -> dict[str, int]:
    """Delete the conversations of `queryset` with their messages and index rows; return the counts.

    The index is compacted once the surrounding transaction commits.
    """
    with transaction.atomic():
        ids = list(queryset.values_list("pk", flat=True))
        if not ids:
            return {"conversations": 0, "messages": 0, "search_index_rows": 0}
        messages = Message.objects.filter(conversation_id__in=ids)
        if connection.vendor == "postgresql":
            indexed = MessageSearch.objects.filter(message__conversation_id__in=ids).count()
        else:  # FTS5 indexes every message of the table (external content)
            indexed = messages.count()
        deleted = Conversation.objects.filter(pk__in=ids).delete()[1]
        transaction.on_commit(compact_index)  # after the outermost transaction (an erase's) commits
    return {"conversations": deleted.get(Conversation._meta.label, 0),
            "messages": deleted.get(Message._meta.label, 0), "search_index_rows": indexed}


def erase_chats(user_id) -> dict[str, int]:
    """Delete every conversation of the person (agentmemory's AGENTMEMORY["ERASE_CHATS"]); return the counts."""
    return delete_conversations(Conversation.objects.filter(user_id=user_id))


def expire(*, now: datetime | None = None) -> int:
    """Delete conversations not updated for CHAT_RETENTION_DAYS, in batches; return how many (0 when off)."""
    days = settings.CHAT_RETENTION_DAYS
    if not days:
        return 0
    cutoff = (now or timezone.now()) - timedelta(days=days)
    total = 0
    while True:
        batch = Conversation.objects.filter(updated_at__lt=cutoff).order_by("pk")[:EXPIRE_BATCH]
        ids = list(batch.values_list("pk", flat=True))
        if not ids:
            return total
        total += delete_conversations(Conversation.objects.filter(pk__in=ids, updated_at__lt=cutoff))["conversations"]


def forget_links(*, user_id, conversation_id: int) -> None:
    """Drop every link to the conversation from the person's memory: entries, versions, proposals (text stays).

    The idempotency records of its turns go too: they point at its replies,
    and a retry of such a turn after the deletion runs afresh.
    """
    from agentmemory.idempotency import forget_conversations
    from agentmemory.models import MemoryProposal
    from agentmemory.store import UnknownUser, forget_conversation

    MemoryProposal.objects.filter(user_id=user_id, conversation_id=conversation_id).update(conversation_id=None)
    forget_conversations(user_id=user_id, conversation_ids=[conversation_id])
    try:
        forget_conversation(user_id=user_id, conversation_id=conversation_id)
    except UnknownUser:  # the account itself is being deleted: its memory goes with it
        pass


def forget_links_if_gone(*, user_id, conversation_id: int | None) -> bool:
    """After a turn saved or proposed a change linked to its conversation: if the conversation was deleted
    meanwhile, drop the links its delete could not see yet; return whether it was gone.

    The delete drops links under the person's lock; a commit that waited for
    that lock writes its link after the delete committed. Checked after the
    commit, the conversation is gone and the link goes too.
    """
    if conversation_id is None or Conversation.objects.filter(pk=conversation_id).exists():
        return False
    forget_links(user_id=user_id, conversation_id=conversation_id)
    return True


def compact_index() -> None:
    """Merge SQLite's FTS5 index into one segment, dropping what deleted messages left there (no-op elsewhere)."""
    if connection.vendor != "sqlite":
        return
    try:
        with connection.cursor() as cursor:
            cursor.execute("INSERT INTO chat_message_fts(chat_message_fts) VALUES ('optimize')")
    except DatabaseError as exc:  # the delete stands; the next one compacts again
        logger.warning("search index not compacted: %s", type(exc).__name__)
