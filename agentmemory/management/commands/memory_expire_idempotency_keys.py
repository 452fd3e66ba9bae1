"""Delete idempotency records past their window (AGENTMEMORY IDEMPOTENCY_WINDOW_HOURS).

Safe to run from cron as often as you like: it deletes in batches, only
what has expired, and prints a count (never a key or content). Exit status 0.
"""
from django.core.management.base import BaseCommand

from agentmemory.idempotency import expire


class Command(BaseCommand):
    help = ("Delete idempotency records past their window (AGENTMEMORY IDEMPOTENCY_WINDOW_HOURS). "
            "Safe to run from cron.")

    def handle(self, *args, **options):
        deleted = expire()
        self.stdout.write(f"Deleted {deleted} expired idempotency record{'s' if deleted != 1 else ''}.")
