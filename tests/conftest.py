"""Shared fixtures. The database is real: SQLite by default, PostgreSQL when
DATABASE_URL points at one (make test runs both)."""
import pytest
from django.contrib.auth import get_user_model
from django.db import connection


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
