"""Delete memory versions past their retention or past each person's kept changes.

Safe to run from cron as often as you like: it deletes in batches, only
what the settings no longer keep (AGENTMEMORY VERSIONS_KEPT,
VERSION_RETENTION_DAYS), and prints a count (never content). Each commit
already prunes its own person's versions; this reaches people who stopped
changing their memory. Exit status 0.
"""
from django.core.management.base import BaseCommand

from agentmemory.versions import prune


class Command(BaseCommand):
    help = ("Delete memory versions past AGENTMEMORY VERSION_RETENTION_DAYS or past each person's "
            "VERSIONS_KEPT changes. Safe to run from cron.")

    def handle(self, *args, **options):
        deleted = prune()
        self.stdout.write(f"Deleted {deleted} memory version{'s' if deleted != 1 else ''}.")
