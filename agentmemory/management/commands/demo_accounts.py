"""Create the two demo accounts that `make run` prints, if they are missing."""
import os

from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError

DEMO_ACCOUNTS = (("alice", "alice-demo-pass"), ("bob", "bob-demo-pass"))
# Addresses a server listens on but a browser cannot open.
ANY_ADDRESS = {"0.0.0.0": "127.0.0.1", "::": "[::1]", "": "127.0.0.1"}


def server_address(environ=os.environ) -> str:
    """Return the address `make run` serves on, from the HOST and PORT it passes (127.0.0.1:8000)."""
    host = environ.get("HOST", "").strip() or "127.0.0.1"
    port = environ.get("PORT", "").strip() or "8000"
    host = ANY_ADDRESS.get(host, host)
    if ":" in host and not host.startswith("["):
        host = f"[{host}]"  # an IPv6 literal
    return f"http://{host}:{port}/"


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
        self.stdout.write(f"Open {server_address()} and sign in as one of:")
        for username, password in DEMO_ACCOUNTS:
            self.stdout.write(f"  username {username!r}  password {password!r}")
        self.stdout.write("Use a second browser profile to chat as the other person.")
        self.stdout.write("")
