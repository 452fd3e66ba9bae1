"""The "Memory support staff" group, and who is in it.

Support staff review samples of what the assistant saved and read a
person's memory when a person asks for help: the permissions
`agentmemory.review_memory_writes` and `agentmemory.view_memory_content`,
nothing else (erasing memory, `agentmemory.erase_memory`, stays with
whoever an admin gives it to). The command makes the group hold exactly
those two, and with `--add USERNAME ...` makes each named account staff (the
admin's door) and a member. Safe to run again: an existing group is set
right, a member stays a member. Prints names and counts, never content.
"""
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group, Permission
from django.core.management.base import BaseCommand, CommandError
from django.db import transaction

GROUP = "Memory support staff"
PERMISSIONS = ("review_memory_writes", "view_memory_content")


class Command(BaseCommand):
    help = (f"Create the '{GROUP}' group (review_memory_writes, view_memory_content); "
            "--add USERNAME ... makes those accounts staff and members.")

    def add_arguments(self, parser):
        parser.add_argument("--add", nargs="+", default=[], metavar="USERNAME",
                            help="Existing accounts to make staff and put in the group.")

    def handle(self, *args, **options):
        permissions = list(Permission.objects.filter(content_type__app_label="agentmemory",
                                                     codename__in=PERMISSIONS))
        if len(permissions) != len(PERMISSIONS):
            raise CommandError("The memory permissions do not exist yet: run migrate first.")
        users = get_user_model()
        with transaction.atomic():
            group, created = Group.objects.get_or_create(name=GROUP)
            group.permissions.set(permissions)
            for username in options["add"]:
                user = users.objects.filter(**{users.USERNAME_FIELD: username}).first()
                if user is None:
                    raise CommandError(f"There is no account named {username!r}; nothing was changed.")
                if not user.is_staff:
                    user.is_staff = True
                    user.save(update_fields=["is_staff"])
                user.groups.add(group)
        self.stdout.write(f"{'Created' if created else 'Updated'} the group '{GROUP}' "
                          f"({', '.join(PERMISSIONS)}); {group.user_set.count()} member(s).")
