"""Sockets and API tokens end with the session.

Logout, a password change, deactivation and account deletion send
`session.ended` to the person's group on the channel layer (the group every
chat socket of theirs joins for `memory_changed`, on any worker), and each
socket stops its turn and closes with 4401. The channel layer is the fast
path; the socket also re-reads the session before every turn
(`ChatConsumer._admit`), and a turn re-reads its credential and checks
that the account is active before it commits (`chat.credentials`,
`chat.turns`), so a lost message cannot keep a closed account chatting or
writing memory.

A password change (which "sign out everywhere", config/account.py, makes
too) and a deactivation also delete the person's DRF API tokens as the
change is saved (inside its transaction, when it has one): a password
change ends every session through Django's session hash, and the tokens,
which carry no such hash, go with them. Deletion takes the tokens with the
account.
"""
from __future__ import annotations

import logging

from asgiref.sync import async_to_sync
from channels.layers import get_channel_layer
from django.conf import settings
from django.contrib.auth.signals import user_logged_out
from django.db import transaction
from django.db.models.signals import post_delete, post_save
from django.dispatch import receiver
from rest_framework.authtoken.models import Token

from agentmemory.notify import group_name

logger = logging.getLogger(__name__)


def close_sockets(user_id, reason: str) -> bool:
    """Tell every open socket of the person, on every worker, to close; return success."""
    layer = get_channel_layer()
    if layer is None:
        return False
    try:
        async_to_sync(layer.group_send)(group_name(user_id), {"type": "session.ended", "reason": reason})
    except Exception as exc:  # the sockets re-check the session before their next turn
        logger.warning("open sockets not told the session ended (%s): channel layer error %s",
                       reason, type(exc).__name__)
        return False
    return True


@receiver(user_logged_out, dispatch_uid="chat_close_sockets_on_logout")
def on_logout(sender, request, user, **kwargs) -> None:
    if user is not None and user.pk is not None:
        close_sockets(user.pk, "logout")


@receiver(post_save, sender=settings.AUTH_USER_MODEL, dispatch_uid="chat_close_sockets_on_account_change")
def on_account_saved(sender, instance, created, update_fields=None, **kwargs) -> None:
    if created:
        return
    if not instance.is_active:
        reason = "deactivated"
    elif getattr(instance, "_password", None) is not None:  # set_password() in this save
        reason = "password_changed"
    else:
        return
    user_id = instance.pk
    revoke_tokens(user_id)
    transaction.on_commit(lambda: close_sockets(user_id, reason))


def revoke_tokens(user_id) -> int:
    """Delete every API token of the person; return how many there were."""
    deleted, _ = Token.objects.filter(user_id=user_id).delete()
    return deleted


@receiver(post_delete, sender=settings.AUTH_USER_MODEL, dispatch_uid="chat_close_sockets_on_deletion")
def on_account_deleted(sender, instance, **kwargs) -> None:
    from .retention import compact_index

    user_id = instance.pk
    transaction.on_commit(lambda: close_sockets(user_id, "deleted"))
    # The cascade took the person's messages: drop their words from SQLite's search index too.
    transaction.on_commit(compact_index)


@receiver(post_delete, sender="chat.Conversation")
def forget_proposal_source(sender, instance, **kwargs) -> None:
    """A deleted conversation leaves memory entries, versions and pending proposals in place, without links to it;
    the idempotency records of its turns go with it (see `chat.retention.forget_links`)."""
    from .retention import forget_links

    forget_links(user_id=instance.user_id, conversation_id=instance.pk)
