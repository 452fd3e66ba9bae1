"""A live daphne answers what it used to drop or fail (issue 53, finding 10).

- A request whose Accept-Language is 100,000 characters long is served (the
  language read from its first characters, the rest ignored); a header line
  past the server's bound (128 KiB) is answered 431, not dropped unanswered
  (config/request_heads.py).
- A chat socket's handshake while the database does not answer is a 503 with
  Retry-After, as a page's, not a 500 (config/unavailable.py). The server's
  database is a PostgreSQL port nothing listens on: every query fails for real.
"""
from __future__ import annotations

import base64
import os
import socket

import pytest

from .servers import free_port

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.multiprocess]


def exchange(port: int, head: str, *, timeout: float = 10) -> tuple[int, dict[str, str], bytes]:
    """Send a request head; return the answer's status, headers and what arrived of its body."""
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as conn:
        conn.sendall(head.encode("latin-1"))
        raw = b""
        while b"\r\n\r\n" not in raw:
            piece = conn.recv(65536)
            assert piece, f"the server closed without an answer: {raw[:200]!r}"
            raw += piece
    status_line, *lines = raw.split(b"\r\n\r\n", 1)[0].decode("latin-1").split("\r\n")
    headers = {name.strip().lower(): value.strip() for name, value in (line.split(":", 1) for line in lines)}
    return int(status_line.split(" ")[1]), headers, raw.split(b"\r\n\r\n", 1)[1]


def test_a_100000_character_accept_language_is_served_and_a_longer_line_answered(servers):
    server = servers.start("heads", wait_ready=False)
    language = ("de-DE," + "fr;q=0.5," * 12_500)[:100_000]  # the first choice first, then many others
    status, headers, _ = exchange(server.port, "GET /accounts/login/ HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                                               f"Accept-Language: {language}\r\nConnection: close\r\n\r\n")
    assert status == 200 and headers["content-language"] == "de"
    status, headers, body = exchange(server.port, "GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                                                  f"Accept-Language: {'x' * 200_000}\r\n\r\n")
    assert status == 431 and headers["content-type"] == "application/json" and b"headers_too_large" in body


def test_a_socket_handshake_during_a_database_outage_is_a_503(servers):
    server = servers.start("outage", wait_ready=False,
                           DATABASE_URL=f"postgres://nobody@127.0.0.1:{free_port()}/gone")
    key = base64.b64encode(os.urandom(16)).decode()
    status, headers, _ = exchange(server.port, (
        f"GET /ws/chat/ HTTP/1.1\r\nHost: 127.0.0.1:{server.port}\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
        f"Sec-WebSocket-Key: {key}\r\nSec-WebSocket-Version: 13\r\nOrigin: {server.origin}\r\n"
        "Cookie: sessionid=abcdefghijklmnopqrstuvwxyz012345\r\n\r\n"))
    assert status == 503 and headers["retry-after"] == "5"
    assert "Socket handshake database error: OperationalError" in server.log()
