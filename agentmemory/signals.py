"""Keep account deletion and memory commits from interleaving."""
from django.conf import settings
from django.db.models.signals import pre_delete
from django.dispatch import receiver

from . import store


@receiver(pre_delete, sender=settings.AUTH_USER_MODEL, dispatch_uid="agentmemory_lock_owner_for_deletion")
def lock_owner_for_deletion(sender, instance, using, **kwargs) -> None:
    """Take the person's memory lock before their rows are deleted (see store)."""
    store.lock_owner_for_deletion(user_id=instance.pk)
