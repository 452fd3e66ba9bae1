from django.db import models


class MemoryChange(models.Model):
    """One committed memory change, as agentmemory's `memory_committed` named it: ids and counts, no content.

    Plain ids, not foreign keys: the audit row outlives an erase (which
    removes agentmemory's rows) and says nothing of what was stored.
    """

    user_id = models.BigIntegerField(db_index=True)
    change_id = models.BigIntegerField()  # agentmemory's change (its MemoryEvent), as History and undo name it
    actor = models.CharField(max_length=16)  # "agent", "user", "staff", "system"
    documents = models.JSONField()  # the documents touched: "user", "memory"
    operation_count = models.PositiveIntegerField()
    recorded_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["pk"]

    def __str__(self) -> str:
        return f"change {self.change_id} of person {self.user_id} by {self.actor}"
