"""Sign-in lock-outs that stop the attacker, not the person (django-axes).

Failed sign-ins (the login page and the admin's) are counted per address and
account, and per address:

- LOGIN_FAILURE_LIMIT wrong passwords for one account from one address lock
  that address out of that account;
- LOGIN_ADDRESS_FAILURE_LIMIT wrong passwords in all from one address, for
  any accounts, lock that address out of every account;

each for LOGIN_LOCKOUT_MINUTES (`AXES_LOCKOUT_PARAMETERS` names the two
groups; this handler gives each its own limit). Nothing is counted per
account alone, so wrong passwords sent from one place never keep the person
out: they sign in from their own address while the attacker's is locked.
A successful sign-in clears only its own address-and-account count, so
signing in to one's own account does not wipe what an address piled up
against someone else's.

An address is the client address of `config/client_ip.py` (only trusted
proxies' `X-Forwarded-For`), an IPv6 one widened to its /64.
"""
from __future__ import annotations

from axes.handlers.database import AxesDatabaseHandler
from axes.helpers import get_client_parameters, get_client_username, get_failure_limit
from axes.models import AccessAttempt
from django.conf import settings
from django.db.models import Sum


class AttackerLockout(AxesDatabaseHandler):
    def get_failures(self, request, credentials: dict | None = None) -> int:
        """Return the failures that count, on the scale of the address-and-account limit.

        axes compares one number with one limit; each group's count is scaled
        so that reaching its own limit reaches that one (exactly: f * P // L
        >= P if and only if f >= L).
        """
        account_limit = get_failure_limit(request, credentials)
        username = get_client_username(request, credentials)
        groups = get_client_parameters(username, request.axes_ip_address, request.axes_user_agent, request, credentials)
        worst = 0
        for group, attempts in zip(groups, self.get_user_attempts(request, credentials), strict=True):
            failures = attempts.aggregate(total=Sum("failures_since_start"))["total"] or 0
            limit = settings.LOGIN_ADDRESS_FAILURE_LIMIT if set(group) == {"ip_address"} else account_limit
            worst = max(worst, failures * account_limit // max(limit, 1))
        return worst

    def reset_user_attempts(self, request, credentials: dict | None = None) -> int:
        """After a successful sign-in, forget this address's failures for this account only."""
        count, _ = AccessAttempt.objects.filter(
            ip_address=request.axes_ip_address, username=get_client_username(request, credentials),
        ).delete()
        return count
