"""Delete conversations older than CHAT_RETENTION_DAYS, with their messages and search index rows.

Safe to run from cron as often as you like: it deletes in batches, only
conversations not updated within the retention, and prints a count (never
content). Entries, versions and proposals that came from them keep their
text and lose the link. With CHAT_RETENTION_DAYS=0 (the default) it deletes
nothing. Exit status 0.
"""
from django.conf import settings
from django.core.management.base import BaseCommand

from chat.retention import expire


class Command(BaseCommand):
    help = "Delete conversations not updated for CHAT_RETENTION_DAYS (0: off). Safe to run from cron."

    def handle(self, *args, **options):
        if not settings.CHAT_RETENTION_DAYS:
            self.stdout.write("CHAT_RETENTION_DAYS is 0: conversations are kept; nothing deleted.")
            return
        deleted = expire()
        self.stdout.write(f"Deleted {deleted} conversation{'s' if deleted != 1 else ''} older than "
                          f"{settings.CHAT_RETENTION_DAYS} days.")
