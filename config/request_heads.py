"""How long a request's head (its request line and headers) may be under daphne, and how a longer one is answered.

Twisted's HTTP channel, which daphne serves with, reads each header line up
to 16 KiB and dropped the connection without a word past that: a browser
(or a proxy, or a probe) with a 100,000-character Accept-Language got no
answer at all. `HeadBoundChannel` reads a head of up to MAX_HEAD_BYTES, lines
included, so such a request is served; Django then reads only the first 500
characters of Accept-Language (its own bound), and the rest is ignored. A
line past the bound is answered 431 with the API's JSON error shape, and the
connection closes. `bound_daphne_heads` installs it (config/asgi.py), before
daphne opens its first connection.
"""
from __future__ import annotations

import json

from django.utils.translation import gettext
from twisted.web import http

# Room for a long cookie jar or header, far past what nginx passes on (8 KiB a line by default).
MAX_HEAD_BYTES = 128 * 1024


class HeadBoundChannel(http.HTTPChannel):
    """Twisted's HTTP/1.1 channel, with a larger bound on the head and an answer past it."""

    MAX_LENGTH = MAX_HEAD_BYTES
    totalHeadersSize = MAX_HEAD_BYTES

    def lineLengthExceeded(self, line):
        body = json.dumps({"code": "headers_too_large", "detail": gettext(
            "A request header is too long for this server; nothing was done.")}).encode()
        self.transport.write(b"HTTP/1.1 431 Request Header Fields Too Large\r\nContent-Type: application/json\r\n"
                             b"Content-Length: %d\r\nConnection: close\r\n\r\n" % len(body) + body)
        self.loseConnection()


def _bounded_channel_protocol(factory):
    # What twisted.web.http.HTTPFactory.protocol builds (HTTP/1.1, or HTTP/2 when negotiated), with our channel.
    return http._GenericHTTPChannelProtocol(HeadBoundChannel())


def bound_daphne_heads() -> None:
    """Make daphne's HTTP factory build `HeadBoundChannel`s (it builds one per connection)."""
    import daphne.http_protocol

    daphne.http_protocol.HTTPFactory.protocol = _bounded_channel_protocol
