"""Links from memory entries to the chats they came from (for agentmemory's pages).

agentmemory knows no chat: its memory page asks the callable named by
AGENTMEMORY["SOURCE_LINKS"] for a title and an address per conversation id.
Only the person's own conversations are looked up, and only for their own
page; a deleted conversation has no link (its entries stay).
"""
from __future__ import annotations

from collections.abc import Iterable

from django.urls import reverse

from .models import Conversation


def conversation_links(user_id, conversation_ids: Iterable[int]) -> dict[int, dict]:
    """Return {id: {"title", "url"}} for those of the ids that are the person's conversations."""
    ids = {int(pk) for pk in conversation_ids if pk is not None}
    if not ids:
        return {}
    rows = Conversation.objects.filter(user_id=user_id, pk__in=ids).values_list("pk", "title")
    base = reverse("chat:index")
    return {pk: {"title": title or "Untitled", "url": f"{base}?conversation={pk}"} for pk, title in rows}
