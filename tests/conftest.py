"""Shared fixtures. The database is real: SQLite by default, PostgreSQL when
DATABASE_URL points at one (make test runs both)."""
import os

import pytest
from django.contrib.auth import get_user_model
from django.db import connection
from hypothesis import settings as hypothesis_settings

from tests import fast_database

# This process's flush on PostgreSQL runs as DELETEs, its commits do not wait for fsync (tests/fast_database.py).
fast_database.install()

# CI replays the same examples every run and keeps no example database, so a
# red CI is reproducible; locally Hypothesis explores new examples each run.
hypothesis_settings.register_profile("ci", derandomize=True, database=None, print_blob=True)
if os.environ.get("CI"):
    hypothesis_settings.load_profile("ci")


@pytest.fixture(scope="session", autouse=True)
def quick_password_hashing():
    """Hash the tests' passwords with 1,000 PBKDF2 iterations, not 1,000,000 (tests/hashers.py)."""
    from django.conf import settings
    from django.contrib.auth.hashers import get_hashers, get_hashers_by_algorithm

    settings.PASSWORD_HASHERS = ["tests.hashers.QuickPBKDF2PasswordHasher", *settings.PASSWORD_HASHERS]
    get_hashers.cache_clear()
    get_hashers_by_algorithm.cache_clear()
    yield


def on_postgres() -> bool:
    return connection.vendor == "postgresql"


@pytest.fixture
def make_user(db):
    def make(username="alice", password="pw-alice-123", **extra):
        return get_user_model().objects.create_user(username=username, password=password, **extra)

    return make


@pytest.fixture
def user(make_user):
    return make_user("alice")


@pytest.fixture
def other_user(make_user):
    return make_user("bob", "pw-bob-123")


@pytest.fixture
def postgres_only():
    if not on_postgres():
        pytest.skip("needs a real PostgreSQL (make test runs the suite on it too)")


# Modules of pure code (rules, the threat scan, words, text calls, frames, the properties of pure
# functions). With TEST_DATABASE_FREE_ONCE=1 (scripts/test.sh's PostgreSQL stage) their tests that use no
# database are left out: they ran on SQLite. Their tests that do use it, and every other test, run on both.
DATABASE_FREE_MODULES = frozenset({
    "tests/test_threats.py", "tests/test_plain_words.py", "tests/test_rules.py", "tests/test_text_calls.py",
    "tests/test_prompt.py", "tests/test_raw_stream.py", "tests/test_rules_properties.py",
    "tests/test_provenance_properties.py", "tests/test_scope.py", "tests/test_claude_memory.py",
})
# The browser tests drive pages, scripts and styles, which are the same whatever the database: with
# TEST_DATABASE_FREE_ONCE=1 they run on SQLite only, except these modules, which are about what the
# database does (conversation search, which PostgreSQL and SQLite answer with different engines; the
# whole chat-to-memory path, live, on each database; a staff search of conversations).
BROWSER_ON_EVERY_DATABASE = frozenset({
    "tests/browser/test_search_browser.py", "tests/browser/test_end_to_end.py",
    "tests/browser/test_staff_reads_browser.py",
})
DATABASE_FIXTURES = frozenset({"db", "transactional_db", "django_db_reset_sequences", "django_db_serialized_rollback",
                               "live_server", "django_user_model", "admin_user", "admin_client"})


def uses_the_database(item) -> bool:
    return item.get_closest_marker("django_db") is not None or bool(DATABASE_FIXTURES & set(item.fixturenames))


def runs_once(item) -> bool:
    """Whether a test runs only on SQLite under TEST_DATABASE_FREE_ONCE=1 (it ran there already)."""
    module = item.nodeid.split("::")[0]
    if module in DATABASE_FREE_MODULES:
        return not uses_the_database(item)
    return item.get_closest_marker("browser") is not None and module not in BROWSER_ON_EVERY_DATABASE


def pytest_collection_modifyitems(config, items):
    if os.environ.get("TEST_DATABASE_FREE_ONCE") != "1":
        return
    free = {id(item) for item in items if runs_once(item)}
    # scripts/test.sh reads how many were left out, to check that the two suites add up.
    if os.environ.get("TEST_RUN_ONCE_REPORT"):
        with open(os.environ["TEST_RUN_ONCE_REPORT"], "w") as report:
            report.write(f"{len(free)}\n")
    if free:
        config.hook.pytest_deselected(items=[item for item in items if id(item) in free])
        items[:] = [item for item in items if id(item) not in free]
