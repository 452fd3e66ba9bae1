"""The test process's flush on PostgreSQL (tests/postgres_flush.py) empties every table, as TRUNCATE did."""
from __future__ import annotations

import pytest
from django.apps import apps
from django.core.management import call_command
from django.core.management.color import no_style
from django.db import connection

from agentmemory import store
from agentmemory.rules import Operation
from chat.models import Conversation, Message, MessageSearch

pytestmark = pytest.mark.django_db(transaction=True)


def test_the_flush_deletes_every_row_of_a_person_their_chats_search_index_and_memory(postgres_only, user):
    conversation = Conversation.objects.create(user=user, title="a title")
    Message.objects.create(conversation=conversation, role="user", content="a searchable sentence")
    store.commit_operations(user_id=user.pk, operations=[Operation(target="memory", action="add", content="a note")])
    assert MessageSearch.objects.count() == 1 and store.load_snapshot(user_id=user.pk).memory

    # As Django's TransactionTestCase ends a test.
    call_command("flush", verbosity=0, interactive=False, reset_sequences=False, allow_cascade=False,
                 inhibit_post_migrate=False)

    left = {model._meta.label: model.objects.count() for model in apps.get_models()
            if model._meta.managed and not model._meta.proxy and model._meta.label not in (
                "contenttypes.ContentType", "auth.Permission")}
    assert set(left.values()) == {0}, {label: count for label, count in left.items() if count}


def test_the_flush_is_deletes_and_keeps_truncate_where_asked_to_restart_or_cascade(postgres_only):
    tables = ["chat_message", "auth_user"]
    assert connection.ops.sql_flush(no_style(), tables) == [
        "SET CONSTRAINTS ALL DEFERRED;", 'DELETE FROM "chat_message";', 'DELETE FROM "auth_user";']
    assert connection.ops.sql_flush(no_style(), tables, reset_sequences=True) == [
        'TRUNCATE "chat_message", "auth_user" RESTART IDENTITY;']
    assert connection.ops.sql_flush(no_style(), tables, allow_cascade=True) == [
        'TRUNCATE "chat_message", "auth_user" CASCADE;']
