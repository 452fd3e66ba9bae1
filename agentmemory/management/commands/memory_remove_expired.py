"""Remove memory entries past the expiry date they were given, for everyone.

Safe to run from cron as often as you like (hourly suits people in every
time zone): each person's entries past their date, read in that person's
time zone, go in one locked commit with actor "expiry", a version and a
History line, undoable. Prints counts, never content. Exit status 0.
"""
from django.core.management.base import BaseCommand

from agentmemory.expiry import remove_all_expired


class Command(BaseCommand):
    help = ("Remove memory entries past their expiry date (one commit per person, actor 'expiry', undoable). "
            "Safe to run from cron.")

    def handle(self, *args, **options):
        people, entries = remove_all_expired()
        self.stdout.write(f"Removed {entries} expired entr{'ies' if entries != 1 else 'y'} "
                          f"for {people} person{'s' if people != 1 else ''}.")
