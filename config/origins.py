"""The chat socket's Origin check: exact scheme, host and port.

Channels' AllowedHostsOriginValidator compares the host only, so a page on
any port or scheme of an allowed host (`http://127.0.0.1:9999`) could drive
a person's socket. Here an Origin is accepted only when, normalised
(lower-case scheme and host, the scheme's default port made explicit), it
is one of `CHAT_ALLOWED_ORIGINS`, or it is the socket's own origin: the
handshake's Host header, with http for ws and https for wss, when that host
is in ALLOWED_HOSTS (so `make run` on any port serves its own page without
configuration, and a page on another port of the same host is refused).

`CHAT_ALLOWED_ORIGINS` defaults to CSRF_TRUSTED_ORIGINS when that is set
(the documented deployment: `https://chat.example.com`), else to http and
https on the default ports of each ALLOWED_HOSTS name (development).
"""
from __future__ import annotations

from urllib.parse import urlsplit

DEFAULT_PORTS = {"http": 80, "https": 443}
SOCKET_SCHEMES = {"ws": "http", "wss": "https"}


def normalize(origin: str) -> str | None:
    """Return "scheme://host:port", or None for anything that is not an http(s) origin."""
    try:
        parts = urlsplit(origin.strip())
        scheme = parts.scheme.lower()
        host = (parts.hostname or "").lower()
        port = parts.port or DEFAULT_PORTS.get(scheme)
    except ValueError:  # a bad port
        return None
    if scheme not in DEFAULT_PORTS or not host or parts.path not in ("", "/") or parts.query or parts.username:
        return None
    if ":" in host:  # IPv6
        host = f"[{host}]"
    return f"{scheme}://{host}:{port}"


def derive_origins(csrf_trusted_origins: list[str], allowed_hosts: list[str]) -> list[str]:
    """The default CHAT_ALLOWED_ORIGINS (see the module docstring); wildcards are never derived."""
    exact = [origin for origin in csrf_trusted_origins if "*" not in origin]
    if exact:
        return exact
    hosts = [host for host in allowed_hosts if host and "*" not in host and not host.startswith(".")]
    return [f"{scheme}://{host}" for host in hosts for scheme in ("https", "http")]


def origin_allowed(scope) -> bool:
    from django.conf import settings
    from django.http.request import split_domain_port, validate_host

    headers = dict(scope.get("headers") or [])
    raw = headers.get(b"origin")
    if not raw:
        return False
    origin = normalize(raw.decode("latin1"))
    if origin is None:
        return False
    if origin in {normalize(allowed) for allowed in settings.CHAT_ALLOWED_ORIGINS}:
        return True
    # The socket's own origin: the page that opened it was served by this host and port.
    host = headers.get(b"host", b"").decode("latin1")
    scheme = SOCKET_SCHEMES.get(scope.get("scheme", "ws"), "http")
    domain, _ = split_domain_port(host)
    if not domain or not validate_host(domain, settings.ALLOWED_HOSTS):
        return False
    return origin == normalize(f"{scheme}://{host}")


class ExactOriginValidator:
    """ASGI: refuse a WebSocket handshake whose Origin is not allowed exactly (before accept)."""

    def __init__(self, application) -> None:
        self.application = application

    async def __call__(self, scope, receive, send):
        if scope["type"] == "websocket" and not origin_allowed(scope):
            from channels.security.websocket import WebsocketDenier

            return await WebsocketDenier()(scope, receive, send)
        return await self.application(scope, receive, send)
