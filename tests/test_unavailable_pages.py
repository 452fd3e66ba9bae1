"""A page whose database does not answer: a 503 page saying so, never Django's bare 500 (issue 37).

The database fails for real: after signing in, the test's connection is pointed at
a PostgreSQL port nothing listens on, so every query raises the driver's
OperationalError from wherever it runs (the session's load, the user's lookup,
the view). No mock of the database. (SQLite's in-memory test database cannot be
cut this way; tests/faults/test_database_unreachable.py also asks a live server
behind a cut proxy for the memory page.) A bug that is not the database's stays
Django's own 500.
"""
from __future__ import annotations

import socket
import sys

import pytest
from django.db import connection
from django.test import Client, RequestFactory

from config.unavailable import server_error

pytestmark = pytest.mark.django_db(transaction=True)


def _closed_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


@pytest.fixture
def cut(postgres_only):
    """Call it to make every new connection fail; the connection settings come back afterwards."""
    saved = dict(connection.settings_dict)

    def cut_now() -> None:
        connection.close()
        connection.settings_dict.update(HOST="127.0.0.1", PORT=str(_closed_port()))

    yield cut_now
    connection.close()
    connection.settings_dict.clear()
    connection.settings_dict.update(saved)


def _assert_unavailable_page(response) -> None:
    assert response.status_code == 503
    assert response["Retry-After"] == "5"
    assert response["Content-Type"].startswith("text/html")
    body = response.content.decode()
    assert "The database did not answer" in body
    assert "Traceback" not in body and "OperationalError" not in body


@pytest.mark.parametrize("path", ["/memory/", "/accounts/", "/"])
def test_a_signed_in_page_during_an_outage_is_a_503_page_saying_so(user, cut, path):
    client = Client(raise_request_exception=False)
    client.force_login(user)
    cut()
    _assert_unavailable_page(client.get(path))


def test_a_memory_page_form_during_an_outage_is_a_503_page(user, cut):
    client = Client(raise_request_exception=False)
    client.force_login(user)
    cut()
    _assert_unavailable_page(client.post("/memory/", {"target": "memory", "content": "a fact"}))


def test_a_sign_in_during_an_outage_is_a_503_page_saying_so(cut):
    cut()
    client = Client(raise_request_exception=False)
    _assert_unavailable_page(client.post("/accounts/login/", {"username": "someone", "password": "pw"}))


def test_another_error_stays_djangos_500():
    """Only the database's outage is a 503: a bug is still Django's 500, not a claim about the database."""
    request = RequestFactory().get("/memory/")
    try:
        raise ValueError("a bug")
    except ValueError:
        assert sys.exc_info()[0] is ValueError
        response = server_error(request)
    assert response.status_code == 500
    assert "The database did not answer" not in response.content.decode()
