"""The chat socket's Origin check: exact scheme, host and port.

Channels' AllowedHostsOriginValidator compares the host only, so a page on
any port or scheme of an allowed host (`http://127.0.0.1:9999`) could drive
a person's socket. Here an Origin is accepted only when, normalised
(lower-case scheme and host, the scheme's default port made explicit), it
is one of `CHAT_ALLOWED_ORIGINS`, or it is the socket's own origin: the
handshake's Host header, when that host is in ALLOWED_HOSTS, with the scheme
Django's `request.is_secure()` would give the page: https for wss, http for
ws, or what SECURE_PROXY_SSL_HEADER says when it is set (TRUST_PROXY_HEADERS
behind nginx, which ends TLS and speaks ws to daphne). So `make run` on any
port serves its own page without configuration, and a page on another port
or scheme of the same host is refused.

The check is channels' `OriginValidator` over the exact entries of
`CHAT_ALLOWED_ORIGINS` (read at each handshake, so `override_settings`
holds), with two things of ours added: an Origin must be a well-formed
http(s) origin (`normalize`), and the own-origin rule above. channels'
wildcards (`*`, a host without a scheme, `.example.com` for subdomains) are
not honoured in `CHAT_ALLOWED_ORIGINS`: only exact origins count.

`CHAT_ALLOWED_ORIGINS` defaults to the exact CSRF_TRUSTED_ORIGINS (the
documented deployment: `https://chat.example.com`), and to nothing else:
without them only the socket's own origin opens it. (It once defaulted to
http and https on the default ports of each ALLOWED_HOSTS name, which let a
page on port 80 or 443 of 127.0.0.1 drive a socket served on port 8001.)
"""
from __future__ import annotations

from urllib.parse import ParseResult, urlparse, urlsplit

from channels.security.websocket import OriginValidator

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


def derive_origins(csrf_trusted_origins: list[str]) -> list[str]:
    """The default CHAT_ALLOWED_ORIGINS: the exact CSRF_TRUSTED_ORIGINS; wildcards are never derived."""
    return [origin for origin in csrf_trusted_origins if "*" not in origin]


def page_scheme(scope, headers: dict[bytes, bytes]) -> str:
    """http or https: the scheme of the page that opened the socket, as `request.is_secure()` sees it."""
    from django.conf import settings

    proxy_header = getattr(settings, "SECURE_PROXY_SSL_HEADER", None)
    if proxy_header:
        name, secure_value = proxy_header  # ("HTTP_X_FORWARDED_PROTO", "https")
        value = headers.get(name.removeprefix("HTTP_").replace("_", "-").lower().encode())
        if value is not None:
            return "https" if value.decode("latin1").split(",", 1)[0].strip() == secure_value else "http"
    return SOCKET_SCHEMES.get(scope.get("scheme", "ws"), "http")


def exact(patterns: list[str]) -> list[str]:
    """The normalised exact origins of `patterns`; wildcards, subdomain patterns and non-origins are dropped."""
    origins = [normalize(pattern) for pattern in patterns]
    return [origin for origin in origins if origin is not None and not origin.split("://", 1)[1].startswith(".")]


def own_origin(scope) -> bool:
    """Whether the handshake's Origin is the socket's own: the page that opened it came from this host and port."""
    from django.conf import settings
    from django.http.request import split_domain_port, validate_host

    headers = dict(scope.get("headers") or [])
    origin = normalize(headers.get(b"origin", b"").decode("latin1"))
    if origin is None:
        return False
    host = headers.get(b"host", b"").decode("latin1")
    domain, _ = split_domain_port(host)
    if not domain or not validate_host(domain, settings.ALLOWED_HOSTS):
        return False
    return origin == normalize(f"{page_scheme(scope, headers)}://{host}")


class ExactOriginValidator(OriginValidator):
    """channels' OriginValidator with exact origins only, plus the socket's own origin (refused before accept).

    `allowed_origins` defaults to settings.CHAT_ALLOWED_ORIGINS, read at each handshake.
    """

    def __init__(self, application, allowed_origins: list[str] | None = None) -> None:
        super().__init__(application, allowed_origins)

    @property
    def allowed_origins(self) -> list[str]:
        from django.conf import settings

        return exact(settings.CHAT_ALLOWED_ORIGINS if self.configured is None else self.configured)

    @allowed_origins.setter
    def allowed_origins(self, origins: list[str] | None) -> None:
        self.configured = origins

    async def __call__(self, scope, receive, send):
        if scope["type"] != "websocket":  # OriginValidator raises; this one guards only the socket
            return await self.application(scope, receive, send)
        if own_origin(scope):
            return await self.application(scope, receive, send)
        return await super().__call__(scope, receive, send)

    def valid_origin(self, parsed_origin: ParseResult | None) -> bool:
        # Only a well-formed http(s) origin is compared (no path, query or credentials; a bad port is
        # refused here, where channels' port lookup would raise), and in its normal form.
        origin = normalize(parsed_origin.geturl()) if parsed_origin is not None else None
        return origin is not None and super().valid_origin(urlparse(origin))
