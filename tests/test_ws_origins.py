"""Exact WebSocket origins (config/origins.py): scheme, host and port must match
CHAT_ALLOWED_ORIGINS or the socket's own origin."""
import pytest
from channels.testing import WebsocketCommunicator
from django.test import override_settings

from config.origins import derive_origins, normalize
from tests.chat_helpers import fresh_agents, session_cookie  # noqa: F401




async def handshake(user, origin: bytes | None, *, host: bytes | None = None, scheme: str = "ws") -> bool:
    from config.asgi import application

    headers = [(b"cookie", f"sessionid={await session_cookie(user)}".encode())]
    if origin is not None:
        headers.append((b"origin", origin))
    if host is not None:
        headers.append((b"host", host))
    communicator = WebsocketCommunicator(application, "/ws/chat/", headers=headers)
    communicator.scope["scheme"] = scheme
    connected, _ = await communicator.connect(timeout=5)
    await communicator.disconnect()
    return connected


@pytest.mark.parametrize("origin, accepted", [
    (b"http://127.0.0.1", True),            # derived from ALLOWED_HOSTS (development)
    (b"https://localhost", True),
    (b"http://127.0.0.1:80", True),          # the default port, spelled out
    (b"http://127.0.0.1:9999", False),       # another port of an allowed host: the case
    (b"HTTP://LOCALHOST:31337", False),
    (b"https://127.0.0.1:8443", False),
    (b"ftp://127.0.0.1", False),
    (b"null", False),
    (b"http://evil.example", False),
    (b"http://127.0.0.1.evil.example", False),
    (None, False),
])
@pytest.mark.django_db(transaction=True)
async def test_only_exact_origins_open_a_socket(user, origin, accepted):
    assert await handshake(user, origin) is accepted


@pytest.mark.django_db(transaction=True)
async def test_the_sockets_own_origin_is_allowed_on_any_port_and_only_that(user):
    # `make run` on port 8000: the page's origin is the socket's own host and port.
    assert await handshake(user, b"http://127.0.0.1:8000", host=b"127.0.0.1:8000")
    assert await handshake(user, b"https://localhost:8443", host=b"localhost:8443", scheme="wss")
    assert not await handshake(user, b"http://127.0.0.1:9999", host=b"127.0.0.1:8000")
    assert not await handshake(user, b"https://127.0.0.1:8000", host=b"127.0.0.1:8000")  # scheme differs
    assert not await handshake(user, b"http://evil.example:8000", host=b"evil.example:8000")  # not an allowed host


@pytest.mark.django_db(transaction=True)
@override_settings(CHAT_ALLOWED_ORIGINS=["https://chat.example.com"], ALLOWED_HOSTS=["chat.example.com"])
async def test_a_configured_list_is_exact(user):
    assert await handshake(user, b"https://chat.example.com")
    assert await handshake(user, b"https://CHAT.example.com:443")
    assert not await handshake(user, b"http://chat.example.com")
    assert not await handshake(user, b"https://chat.example.com:8443")
    assert not await handshake(user, b"http://127.0.0.1")  # no longer derived


def test_normalize():
    assert normalize("HTTPS://Chat.Example.com") == "https://chat.example.com:443"
    assert normalize("http://127.0.0.1:8000/") == "http://127.0.0.1:8000"
    assert normalize("http://[::1]:8000") == "http://[::1]:8000"
    for bad in ("null", "", "ws://x", "http://", "http://x:99999", "http://user@x", "http://x/path"):
        assert normalize(bad) is None, bad


def test_the_default_comes_from_csrf_trusted_origins_else_allowed_hosts():
    assert derive_origins(["https://chat.example.com"], ["chat.example.com"]) == ["https://chat.example.com"]
    assert derive_origins([], ["127.0.0.1", ".example.com", "*"]) == ["https://127.0.0.1", "http://127.0.0.1"]
    assert derive_origins(["https://*.example.com"], ["a"]) == ["https://a", "http://a"]


def test_settings_derive_the_default_and_an_empty_variable_means_the_default():
    import json
    import os
    import subprocess
    import sys

    from django.conf import settings

    code = ("import django, json; django.setup(); from django.conf import settings; "
            "print(json.dumps(settings.CHAT_ALLOWED_ORIGINS))")

    def origins(**env):
        environment = {**os.environ, "DJANGO_SETTINGS_MODULE": "config.settings", "SECRET_KEY": "x", **env}
        out = subprocess.run([sys.executable, "-c", code], env=environment, cwd=settings.BASE_DIR,
                             capture_output=True, text=True, check=True).stdout
        return json.loads(out)

    assert origins(CHAT_ALLOWED_ORIGINS="", CSRF_TRUSTED_ORIGINS="https://chat.example.com",
                   ALLOWED_HOSTS="chat.example.com") == ["https://chat.example.com"]
    assert origins(CHAT_ALLOWED_ORIGINS="", CSRF_TRUSTED_ORIGINS="", ALLOWED_HOSTS="127.0.0.1") == [
        "https://127.0.0.1", "http://127.0.0.1"]
    assert origins(CHAT_ALLOWED_ORIGINS="https://a.example,https://b.example:8443") == [
        "https://a.example", "https://b.example:8443"]
