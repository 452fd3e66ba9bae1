"""Rollout readiness: the `memory_readiness` probe leaves no data on success or
failure and exits non-zero with the failing step; the system checks catch
unsafe settings; the rollout flag is off unless the environment turns it on."""
import copy
import os
import subprocess
import sys
from pathlib import Path

import pytest
from django.conf import settings as django_settings
from django.contrib.auth import get_user_model
from django.core.management import call_command
from django.core.management.base import CommandError
from django.db import connection
from django.db.migrations.recorder import MigrationRecorder

from agentmemory.checks import check_capture_content, check_limits, check_logging_redaction
from agentmemory.management.commands.memory_readiness import PROBE_PREFIX
from agentmemory.models import MemoryDocument, MemoryEvent
from agentmemory.threats import MAX_SCAN_CHARS
from tests.conftest import on_postgres

ROOT = Path(__file__).resolve().parent.parent


def row_counts() -> dict[str, int]:
    return {
        "users": get_user_model().objects.count(),
        "documents": MemoryDocument.objects.count(),
        "events": MemoryEvent.objects.count(),
        "probe users": get_user_model().objects.filter(username__startswith=PROBE_PREFIX).count(),
    }


@pytest.fixture
def existing_memory(make_user):
    """Someone else's memory, which the probe must neither touch nor count on."""
    from agentmemory import store
    from agentmemory.rules import Operation

    person = make_user("carol")
    store.commit_operations(user_id=person.pk, operations=[Operation("user", "add", content="Prefers tea.")])
    return person


@pytest.fixture
def block_memory_updates():
    """A database trigger that refuses every UPDATE of a memory row: a real
    failure in the probe's update step, after its insert succeeded."""
    with connection.cursor() as cursor:
        if on_postgres():
            cursor.execute(
                "CREATE FUNCTION readiness_test_block() RETURNS trigger AS $$ "
                "BEGIN RAISE EXCEPTION 'updates blocked by the test'; END $$ LANGUAGE plpgsql"
            )
            cursor.execute(
                "CREATE TRIGGER readiness_test_block BEFORE UPDATE ON agentmemory_document "
                "FOR EACH ROW EXECUTE FUNCTION readiness_test_block()"
            )
        else:
            cursor.execute(
                "CREATE TRIGGER readiness_test_block BEFORE UPDATE ON agentmemory_document "
                "BEGIN SELECT RAISE(ABORT, 'updates blocked by the test'); END"
            )
    try:
        yield
    finally:
        with connection.cursor() as cursor:
            if on_postgres():
                cursor.execute("DROP TRIGGER IF EXISTS readiness_test_block ON agentmemory_document")
                cursor.execute("DROP FUNCTION IF EXISTS readiness_test_block()")
            else:
                cursor.execute("DROP TRIGGER IF EXISTS readiness_test_block")


# --- the probe ---------------------------------------------------------------------


@pytest.mark.django_db(transaction=True)
def test_readiness_probe_passes_and_leaves_no_rows(existing_memory, capsys):
    before = row_counts()
    call_command("memory_readiness")
    assert "Memory readiness probe passed" in capsys.readouterr().out
    assert row_counts() == before
    assert before["probe users"] == 0


@pytest.mark.django_db(transaction=True)
def test_a_probe_failing_at_insert_leaves_no_rows(existing_memory, settings):
    settings.AGENTMEMORY = {**settings.AGENTMEMORY, "MEMORY_LIMIT": 5}
    before = row_counts()
    with pytest.raises(CommandError) as caught:
        call_command("memory_readiness")
    message = str(caught.value)
    assert "failed at 'insert'" in message and "over its limit of 5" in message
    assert "AGENTMEMORY limits" in message  # what to check next
    assert row_counts() == before


@pytest.mark.django_db(transaction=True)
def test_a_probe_failing_at_update_after_its_insert_leaves_no_rows(existing_memory, block_memory_updates):
    before = row_counts()
    with pytest.raises(CommandError) as caught:
        call_command("memory_readiness")
    assert "failed at 'update'" in str(caught.value)
    assert "run `python manage.py migrate`" in str(caught.value)
    assert row_counts() == before


@pytest.mark.django_db
def test_the_probe_refuses_to_run_before_the_memory_migration():
    MigrationRecorder.Migration.objects.filter(app="agentmemory").delete()
    before = row_counts()
    with pytest.raises(CommandError) as caught:
        call_command("memory_readiness")
    assert "agentmemory.0001_initial" in str(caught.value)
    assert "python manage.py migrate" in str(caught.value)
    assert row_counts() == before


def _database_url() -> str:
    db = connection.settings_dict
    if connection.vendor == "sqlite":
        return f"sqlite:///{db['NAME']}"
    host = db.get("HOST") or "127.0.0.1"
    port = db.get("PORT") or 5432
    return f"postgres://{db['USER']}@{host}:{port}/{db['NAME']}"


def _manage(*args: str, **env: str) -> subprocess.CompletedProcess:
    environment = {**os.environ, "SECRET_KEY": "test-only", "DATABASE_URL": _database_url(), **env}
    environment.pop("TEST_DB_NAME", None)
    return subprocess.run(
        [sys.executable, "manage.py", *args], cwd=ROOT, env=environment, capture_output=True, text=True,
        timeout=120,
    )


@pytest.mark.django_db(transaction=True)
def test_the_command_exits_zero_on_success_and_non_zero_with_the_step_on_failure(existing_memory):
    before = row_counts()
    passed = _manage("memory_readiness")
    assert passed.returncode == 0, passed.stderr[-2000:]
    assert "probe passed" in passed.stdout

    failed = _manage("memory_readiness", AGENTMEMORY_MEMORY_LIMIT="5")
    assert failed.returncode == 1
    assert "Memory readiness probe failed at 'insert'" in failed.stderr
    assert row_counts() == before


# --- system checks -----------------------------------------------------------------


def test_project_settings_raise_none_of_the_memory_checks():
    assert check_limits() == [] and check_capture_content() == [] and check_logging_redaction() == []


def test_capture_flag_outside_debug_is_a_warning(settings):
    settings.DEBUG = False
    settings.AGENTMEMORY = {**settings.AGENTMEMORY, "CAPTURE_CONTENT": True}
    assert [w.id for w in check_capture_content()] == ["agentmemory.W001"]
    settings.DEBUG = True
    assert check_capture_content() == []


@pytest.mark.parametrize("value", [0, -1, MAX_SCAN_CHARS + 1, "2200", True])
def test_limits_the_scanner_cannot_cover_are_errors(settings, value):
    settings.AGENTMEMORY = {**settings.AGENTMEMORY, "USER_LIMIT": value}
    assert [e.id for e in check_limits()] == ["agentmemory.E001"]


def test_a_zero_commit_attempt_budget_is_an_error(settings):
    settings.AGENTMEMORY = {**settings.AGENTMEMORY, "COMMIT_ATTEMPTS": 0}
    assert [e.id for e in check_limits()] == ["agentmemory.E002"]


def test_a_logging_handler_without_the_filter_is_a_warning(settings):
    logging_config = copy.deepcopy(django_settings.LOGGING)
    logging_config["handlers"]["file"] = {"class": "logging.FileHandler", "filename": "/tmp/x.log"}
    settings.LOGGING = logging_config
    warnings = check_logging_redaction()
    assert [w.id for w in warnings] == ["agentmemory.W002"] and "'file'" in warnings[0].msg


# --- the rollout flag --------------------------------------------------------------


def _flag_in_a_fresh_process(**env: str) -> str:
    environment = {key: value for key, value in os.environ.items() if key != "AGENTMEMORY_ENABLED"}
    environment.update(SECRET_KEY="test-only", **env)
    result = subprocess.run(
        [sys.executable, "-c",
         "import django, os; os.environ['DJANGO_SETTINGS_MODULE'] = 'config.settings'; django.setup(); "
         "from agentmemory.conf import memory_settings; print(memory_settings().enabled)"],
        cwd=ROOT, env=environment, capture_output=True, text=True, timeout=120,
    )
    assert result.returncode == 0, result.stderr[-2000:]
    return result.stdout.strip()


def test_memory_is_off_unless_the_environment_turns_it_on():
    assert _flag_in_a_fresh_process() == "False"
    assert _flag_in_a_fresh_process(AGENTMEMORY_ENABLED="1") == "True"


def test_make_run_turns_memory_on():
    makefile = (ROOT / "Makefile").read_text()
    assert "run: export AGENTMEMORY_ENABLED ?= 1" in makefile
