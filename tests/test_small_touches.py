"""Small things a new user notices: the address `make run` prints, and a favicon."""
from io import StringIO

import pytest
from django.core.management import call_command
from django.test import Client

from agentmemory.management.commands.demo_accounts import server_address


@pytest.mark.parametrize(("environ", "address"), [
    ({}, "http://127.0.0.1:8000/"),
    ({"PORT": "9123"}, "http://127.0.0.1:9123/"),
    ({"HOST": "0.0.0.0", "PORT": "8080"}, "http://127.0.0.1:8080/"),
    ({"HOST": "192.168.1.20", "PORT": "8001"}, "http://192.168.1.20:8001/"),
    ({"HOST": "::", "PORT": "8000"}, "http://[::1]:8000/"),
    ({"HOST": "::1", "PORT": "8000"}, "http://[::1]:8000/"),
    ({"HOST": "chat.local", "PORT": ""}, "http://chat.local:8000/"),
])
def test_server_address_follows_host_and_port(environ, address):
    assert server_address(environ) == address


@pytest.mark.django_db
def test_demo_accounts_prints_the_address_make_run_serves(monkeypatch):
    # `make run PORT=9123` (or PORT=9123 make run) puts PORT in the command's environment.
    monkeypatch.setenv("HOST", "127.0.0.1")
    monkeypatch.setenv("PORT", "9123")
    out = StringIO()

    call_command("demo_accounts", "--force", stdout=out)

    assert "Open http://127.0.0.1:9123/ and sign in" in out.getvalue()
    assert ":8000" not in out.getvalue()


def test_favicon_is_served_at_the_root():
    response = Client().get("/favicon.ico")

    assert response.status_code == 200
    assert response["Content-Type"] == "image/x-icon"
    assert b"".join(response.streaming_content).startswith(b"\x00\x00\x01\x00")  # an ICO header
    assert "max-age=86400" in response["Cache-Control"]


@pytest.mark.django_db
def test_pages_link_the_icon(user):
    client = Client()
    client.force_login(user)

    for url in ("/", "/memory/", "/accounts/login/"):
        html = client.get(url).content.decode()
        assert 'rel="icon"' in html and "favicon.svg" in html, url
    assert Client().get("/static/favicon.svg").status_code == 200
