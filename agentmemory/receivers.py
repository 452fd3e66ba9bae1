"""Keep account deletion and memory commits from interleaving; make SQLite forget deleted bytes.

On SQLite a deleted row's bytes stay in the database file (a free page or
the free space of a page) until something overwrites them: erased memory
would still be readable from the file. Every SQLite connection is opened
with `PRAGMA secure_delete = ON`, which zeroes what a delete frees. It
applies to the whole database, chat messages included.
"""
from django.conf import settings
from django.db.backends.signals import connection_created
from django.db.models.signals import pre_delete
from django.dispatch import receiver

from . import store


@receiver(pre_delete, sender=settings.AUTH_USER_MODEL, dispatch_uid="agentmemory_lock_owner_for_deletion")
def lock_owner_for_deletion(sender, instance, using, **kwargs) -> None:
    """Take the person's memory lock before their rows are deleted (see store)."""
    store.lock_owner_for_deletion(user_id=instance.pk)


@receiver(connection_created, dispatch_uid="agentmemory_sqlite_secure_delete")
def sqlite_secure_delete(sender, connection, **kwargs) -> None:
    """Zero what deletes free on every new SQLite connection (no-op on other databases)."""
    if connection.vendor == "sqlite":
        with connection.cursor() as cursor:
            cursor.execute("PRAGMA secure_delete = ON")
