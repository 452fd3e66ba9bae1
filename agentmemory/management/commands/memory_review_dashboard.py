"""Print the write-quality figures the admin's dashboard shows, as JSON (`agentmemory.review.dashboard`).

Per week, model and memory policy version: verdict counts, save precision
with its 95 % Wilson interval, and the over-capacity, duplicate and
question rates of the assistant's batches. Counts and rates only, never
content. `--week YYYY-MM-DD` (repeatable) limits it to the weeks holding
those days.
"""
import json

from django.core.management.base import BaseCommand, CommandError
from django.utils.dateparse import parse_date

from agentmemory.review import dashboard


class Command(BaseCommand):
    help = "Print the write-quality figures (verdicts, save precision, rates) as JSON; no content."

    def add_arguments(self, parser):
        parser.add_argument("--week", action="append", default=None,
                            help="A day (YYYY-MM-DD) of a week to include; repeat for more. Default: all weeks.")

    def handle(self, *args, **options):
        weeks = None
        if options["week"]:
            weeks = [parse_date(value) for value in options["week"]]
            if any(week is None for week in weeks):
                raise CommandError("--week takes a date as YYYY-MM-DD.")
        self.stdout.write(json.dumps(dashboard(weeks=weeks), indent=2, sort_keys=True))
