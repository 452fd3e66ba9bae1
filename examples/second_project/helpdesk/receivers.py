"""The helpdesk's receiver of agentmemory's signals (connected by HelpdeskConfig.ready()).

agentmemory sends `memory_committed` once the transaction that changed a
person's memory has committed (a rolled-back change sends nothing), with ids
and counts only. The helpdesk keeps an audit row per change: who, which
change, which actor, which documents, how many operations. Never what memory
says: a receiver that needs the text reads it through agentmemory's store.
"""
from __future__ import annotations

from django.dispatch import receiver

from agentmemory.signals import memory_committed

from .models import MemoryChange


@receiver(memory_committed, dispatch_uid="helpdesk_record_memory_change")
def record_memory_change(sender, *, user_id, change_id, actor, changed, operation_count, **kwargs) -> None:
    # One short insert in the committing thread (a request's or the turn's
    # worker thread); slower work would go to a queue.
    MemoryChange.objects.create(user_id=user_id, change_id=change_id, actor=str(actor),
                                documents=list(changed), operation_count=operation_count)
