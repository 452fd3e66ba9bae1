"""Delete memory proposals past their expiry ("ask before saving").

Safe to run from cron as often as you like: it deletes in batches, only
what has expired, and prints a count (never content). Exit status 0.
"""
from django.core.management.base import BaseCommand

from agentmemory.proposals import expire


class Command(BaseCommand):
    help = "Delete memory proposals past their expiry (AGENTMEMORY PROPOSAL_TTL_DAYS). Safe to run from cron."

    def handle(self, *args, **options):
        deleted = expire()
        self.stdout.write(f"Deleted {deleted} expired memory proposal{'s' if deleted != 1 else ''}.")
