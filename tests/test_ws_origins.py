"""Exact WebSocket origins (config/origins.py): scheme, host and port must match
CHAT_ALLOWED_ORIGINS or the socket's own origin; the default list is the
exact CSRF_TRUSTED_ORIGINS and nothing else (live: tests/multiprocess/test_live_quiet_defaults.py)."""
import pytest
from channels.testing import WebsocketCommunicator
from django.test import override_settings

from config.origins import derive_origins, normalize
from tests.chat_helpers import fresh_agents, session_cookie  # noqa: F401


async def handshake(user, origin: bytes | None, *, host: bytes | None = None, scheme: str = "ws",
                    forwarded_proto: bytes | None = None) -> bool:
    from config.asgi import application

    headers = [(b"cookie", f"sessionid={await session_cookie(user)}".encode())]
    if origin is not None:
        headers.append((b"origin", origin))
    if host is not None:
        headers.append((b"host", host))
    if forwarded_proto is not None:
        headers.append((b"x-forwarded-proto", forwarded_proto))
    communicator = WebsocketCommunicator(application, "/ws/chat/", headers=headers)
    communicator.scope["scheme"] = scheme
    connected, _ = await communicator.connect(timeout=5)
    await communicator.disconnect()
    return connected


@pytest.mark.parametrize("origin, accepted", [
    (b"http://127.0.0.1:8001", True),        # the socket's own: the Procfile's port
    (b"HTTP://127.0.0.1:8001/", True),
    (b"http://127.0.0.1", False),            # port 80 of the same host: once derived from ALLOWED_HOSTS
    (b"https://127.0.0.1", False),           # port 443, likewise
    (b"http://127.0.0.1:80", False),
    (b"https://localhost", False),
    (b"http://127.0.0.1:9999", False),       # another port of an allowed host
    (b"HTTP://LOCALHOST:31337", False),
    (b"https://127.0.0.1:8443", False),
    (b"ftp://127.0.0.1", False),
    (b"null", False),
    (b"http://evil.example", False),
    (b"http://127.0.0.1.evil.example", False),
    (None, False),
])
@pytest.mark.django_db(transaction=True)
async def test_only_exact_origins_open_a_socket(user, origin, accepted):  # the default settings
    assert await handshake(user, origin, host=b"127.0.0.1:8001") is accepted


@pytest.mark.django_db(transaction=True)
async def test_the_sockets_own_origin_is_allowed_on_any_port_and_only_that(user):
    # `make run` on port 8000: the page's origin is the socket's own host and port.
    assert await handshake(user, b"http://127.0.0.1:8000", host=b"127.0.0.1:8000")
    assert await handshake(user, b"https://localhost:8443", host=b"localhost:8443", scheme="wss")
    assert not await handshake(user, b"http://127.0.0.1:9999", host=b"127.0.0.1:8000")
    assert not await handshake(user, b"https://127.0.0.1:8000", host=b"127.0.0.1:8000")  # scheme differs
    assert not await handshake(user, b"http://evil.example:8000", host=b"evil.example:8000")  # not an allowed host


@pytest.mark.django_db(transaction=True)
@override_settings(CHAT_ALLOWED_ORIGINS=[], ALLOWED_HOSTS=["chat.example.com"],
                   SECURE_PROXY_SSL_HEADER=("HTTP_X_FORWARDED_PROTO", "https"))
async def test_behind_the_tls_proxy_the_own_origin_is_https_as_django_sees_it(user):
    # nginx ends TLS and speaks ws to daphne; TRUST_PROXY_HEADERS=1 trusts its X-Forwarded-Proto.
    host = b"chat.example.com"
    assert await handshake(user, b"https://chat.example.com", host=host, forwarded_proto=b"https")
    assert not await handshake(user, b"http://chat.example.com", host=host, forwarded_proto=b"https")
    assert not await handshake(user, b"https://chat.example.com", host=host, forwarded_proto=b"http")
    assert not await handshake(user, b"https://chat.example.com:8443", host=host, forwarded_proto=b"https")
    with override_settings(SECURE_PROXY_SSL_HEADER=None):  # not trusted: the header is ignored
        assert not await handshake(user, b"https://chat.example.com", host=host, forwarded_proto=b"https")


@pytest.mark.django_db(transaction=True)
@override_settings(CHAT_ALLOWED_ORIGINS=["https://chat.example.com"], ALLOWED_HOSTS=["chat.example.com"])
async def test_a_configured_list_is_exact(user):
    assert await handshake(user, b"https://chat.example.com")
    assert await handshake(user, b"https://CHAT.example.com:443")
    assert not await handshake(user, b"http://chat.example.com")
    assert not await handshake(user, b"https://chat.example.com:8443")
    assert not await handshake(user, b"http://127.0.0.1")  # no longer derived


@pytest.mark.django_db(transaction=True)
@override_settings(CHAT_ALLOWED_ORIGINS=["*", "127.0.0.1", ".example.com", "https://.example.com", "http://x:99999",
                                         "https://chat.example.com/path"],
                   ALLOWED_HOSTS=["127.0.0.1", "chat.example.com"])
async def test_channels_wildcards_are_not_honoured_only_exact_origins(user):
    # config/origins.py is channels' OriginValidator over the exact entries only (tests/test_one_rule.py).
    assert not await handshake(user, b"http://evil.example", host=b"127.0.0.1:8001")
    assert not await handshake(user, b"http://127.0.0.1:9999", host=b"127.0.0.1:8001")
    assert not await handshake(user, b"https://chat.example.com", host=b"127.0.0.1:8001")
    assert not await handshake(user, b"https://sub.example.com", host=b"127.0.0.1:8001")
    assert not await handshake(user, b"http://x:99999", host=b"127.0.0.1:8001")
    assert not await handshake(user, None, host=b"127.0.0.1:8001")
    assert await handshake(user, b"http://127.0.0.1:8001", host=b"127.0.0.1:8001")  # its own origin still


@pytest.mark.django_db(transaction=True)
@override_settings(CHAT_ALLOWED_ORIGINS=["https://chat.example.com"], ALLOWED_HOSTS=["chat.example.com"])
async def test_an_origin_with_a_path_query_or_credentials_is_refused(user):
    assert await handshake(user, b"https://chat.example.com/")
    for origin in (b"https://chat.example.com/path", b"https://chat.example.com?q", b"https://u@chat.example.com",
                   b"https://chat.example.com:99999", b"https://chat.example.com:x"):
        assert not await handshake(user, origin), origin


def test_normalize():
    assert normalize("HTTPS://Chat.Example.com") == "https://chat.example.com:443"
    assert normalize("http://127.0.0.1:8000/") == "http://127.0.0.1:8000"
    assert normalize("http://[::1]:8000") == "http://[::1]:8000"
    for bad in ("null", "", "ws://x", "http://", "http://x:99999", "http://user@x", "http://x/path"):
        assert normalize(bad) is None, bad


def test_the_default_is_the_exact_csrf_trusted_origins_and_nothing_else():
    assert derive_origins(["https://chat.example.com"]) == ["https://chat.example.com"]
    assert derive_origins([]) == []  # the socket's own origin only
    assert derive_origins(["https://*.example.com"]) == []


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
    assert origins(CHAT_ALLOWED_ORIGINS="", CSRF_TRUSTED_ORIGINS="", ALLOWED_HOSTS="127.0.0.1") == []
    assert origins(CHAT_ALLOWED_ORIGINS="https://a.example,https://b.example:8443") == [
        "https://a.example", "https://b.example:8443"]
