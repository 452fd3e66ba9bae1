"""Create the two demo accounts that `make run` prints, if they are missing."""
from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError

DEMO_ACCOUNTS = (("alice", "alice-demo-pass"), ("bob", "bob-demo-pass"))


class Command(BaseCommand):
    help = "Create two demo accounts (alice, bob) for local use and print how to sign in."

    def add_arguments(self, parser):
        parser.add_argument("--force", action="store_true", help="Allow outside DEBUG.")

    def handle(self, *args, force=False, **options):
        if not settings.DEBUG and not force:
            raise CommandError("Demo accounts are for local use: run with DEBUG=1 or pass --force.")
        user_model = get_user_model()
        for username, password in DEMO_ACCOUNTS:
            user, created = user_model._default_manager.get_or_create(username=username)
            if created:
                user.set_password(password)
                user.save(update_fields=["password"])
        self.stdout.write("")
        self.stdout.write("Open http://127.0.0.1:8000/ and sign in as one of:")
        for username, password in DEMO_ACCOUNTS:
            self.stdout.write(f"  username {username!r}  password {password!r}")
        self.stdout.write("Use a second browser profile to chat as the other person.")
        self.stdout.write("")
