"""Shared fixtures. The database is real: SQLite by default, PostgreSQL when
DATABASE_URL points at one (make test runs both)."""
import os

import pytest
from django.contrib.auth import get_user_model
from django.db import connection
from hypothesis import settings as hypothesis_settings

# CI replays the same examples every run and keeps no example database, so a
# red CI is reproducible; locally Hypothesis explores new examples each run.
hypothesis_settings.register_profile("ci", derandomize=True, database=None, print_blob=True)
if os.environ.get("CI"):
    hypothesis_settings.load_profile("ci")


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
