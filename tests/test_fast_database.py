"""The test process's cheaper database work (tests/fast_database.py): the flush on PostgreSQL empties every
table, as TRUNCATE did, and commits skip only the wait for the disk."""
from __future__ import annotations

import os
import subprocess
import sys

import pytest
from django.apps import apps
from django.conf import settings
from django.core.management import call_command
from django.core.management.color import no_style
from django.db import connection

from agentmemory import store
from agentmemory.rules import Operation
from chat.models import Conversation, Message, MessageSearch
from tests.multiprocess.servers import SERVER_APPLICATION_NAME, database_url, wait_for_server_sessions_to_end

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


def test_the_flush_deletes_and_keeps_truncate_where_asked_to_restart_or_cascade(postgres_only):
    tables = ["chat_message", "auth_user"]
    assert connection.ops.sql_flush(no_style(), tables) == [
        "SET CONSTRAINTS ALL DEFERRED;", 'DELETE FROM "chat_message";', 'DELETE FROM "auth_user";']
    assert connection.ops.sql_flush(no_style(), tables, reset_sequences=True) == [
        'TRUNCATE "chat_message", "auth_user" RESTART IDENTITY;']
    assert connection.ops.sql_flush(no_style(), tables, allow_cascade=True) == [
        'TRUNCATE "chat_message", "auth_user" CASCADE;']


def test_this_process_commits_without_waiting_for_the_disk_and_the_application_keeps_the_default():
    with connection.cursor() as cursor:
        if connection.vendor == "postgresql":
            cursor.execute("SHOW synchronous_commit")
            assert cursor.fetchone()[0] == "off"
        else:
            cursor.execute("PRAGMA synchronous")
            assert cursor.fetchone()[0] == 0  # OFF
    # The application's own connections (a server, a management command) keep the database's default.
    probe = ("import django; django.setup(); from django.db import connection; c = connection.cursor(); "
             "c.execute('SHOW synchronous_commit' if connection.vendor == 'postgresql' else 'PRAGMA synchronous'); "
             "print(c.fetchone()[0])")
    result = subprocess.run([sys.executable, "-c", probe], cwd=settings.BASE_DIR, capture_output=True, text=True,
                            timeout=60, env={**os.environ, "DATABASE_URL": database_url(),
                                             "PGAPPNAME": SERVER_APPLICATION_NAME,
                                             "DJANGO_SETTINGS_MODULE": "config.settings", "DEBUG": "1"})
    wait_for_server_sessions_to_end()  # the test database is dropped at the end of the run
    assert result.returncode == 0, result.stderr[-2000:]
    assert result.stdout.split()[-1] in ("on", "2"), result.stdout  # PostgreSQL's on, SQLite's FULL
