"""Request bodies over DATA_UPLOAD_MAX_MEMORY_SIZE (default 1 MiB) against a
real daphne process: refused before they are read, not after.

daphne reads a whole body, into a temporary file past 100 KB, before it
calls the application; config/parsers.py's BoundedWebRequest refuses while
the body arrives. The server runs with TMPDIR pointed at a directory of the
test's own, and its open files are read from /proc during each upload, so
the test sees what the server kept on disk, not only what it answered.
"""
from __future__ import annotations

import json
import os
import select
import socket
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.multiprocess,
              pytest.mark.skipif(not Path("/proc/self/fd").is_dir(), reason="reads the server's open files from /proc")]

LIMIT = 1024 * 1024
ANSWER_SECONDS = 2
CHUNK = b"x" * 65536


def temporary_files(pid: int, tmpdir: Path) -> dict[str, int]:
    """The server's open files under its TMPDIR (Twisted's body files), with their sizes."""
    found = {}
    for fd in Path(f"/proc/{pid}/fd").iterdir():
        try:
            if os.readlink(fd).startswith(str(tmpdir)):
                found[fd.name] = os.stat(fd).st_size
        except OSError:  # closed meanwhile
            continue
    return found


def read_answer(conn: socket.socket, timeout: float = ANSWER_SECONDS) -> tuple[int, dict]:
    conn.settimeout(timeout)
    raw = b""
    while b"\r\n\r\n" not in raw:
        piece = conn.recv(65536)
        assert piece, f"the server closed without an answer: {raw!r}"
        raw += piece
    head, body = raw.split(b"\r\n\r\n", 1)
    length = int(next(line.split(b":")[1] for line in head.split(b"\r\n") if line.lower().startswith(b"content-length")))
    while len(body) < length:
        body += conn.recv(65536)
    return int(head.split(b" ")[1]), json.loads(body)


def request_head(extra: str) -> bytes:
    return (f"POST /api/chat/turns/ HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
            f"{extra}\r\n\r\n").encode()


def test_bodies_over_the_limit_are_refused_while_they_arrive(servers, tmp_path):
    server = servers.start("bodies", TMPDIR=str(tmp_path))
    pid = server.process.pid

    # A declared 100 MiB: answered when the headers end, before any of the body is read or stored.
    with socket.create_connection(("127.0.0.1", server.port)) as conn:
        started = time.monotonic()
        conn.sendall(request_head("Content-Length: 104857600") + CHUNK)
        status, body = read_answer(conn)
        answered = time.monotonic() - started
        assert (status, body["code"]) == (400, "body_too_large")
        assert temporary_files(pid, tmp_path) == {}
    assert answered < ANSWER_SECONDS

    # A chunked body of unknown length: answered once it passes the limit; the server keeps at most the limit.
    largest = 0
    sent = 0
    with socket.create_connection(("127.0.0.1", server.port)) as conn:
        conn.sendall(request_head("Transfer-Encoding: chunked"))
        while not select.select([conn], [], [], 0)[0]:
            assert sent < 64 * LIMIT, "no answer after 64 MiB"
            conn.sendall(b"%x\r\n" % len(CHUNK) + CHUNK + b"\r\n")
            sent += len(CHUNK)
            largest = max([largest, *temporary_files(pid, tmp_path).values()])
        status, body = read_answer(conn)
        assert (status, body["code"]) == (400, "body_too_large")
    assert largest <= LIMIT
    time.sleep(0.2)
    assert temporary_files(pid, tmp_path) == {}  # what was kept is gone

    # A client that sends the whole body before it reads (urllib) still reads the answer.
    request = urllib.request.Request(server.url + "/api/chat/turns/", data=b"x" * (3 * LIMIT), method="POST",
                                     headers={"Content-Type": "application/json"})
    with pytest.raises(urllib.error.HTTPError) as refused:
        urllib.request.urlopen(request, timeout=10)
    assert refused.value.code == 400 and json.loads(refused.value.read())["code"] == "body_too_large"

    # Under the limit the body reaches the application (which asks who is calling).
    status, body = server.request("POST", "/api/chat/turns/", body={"content": "x" * (LIMIT - 100)})
    assert (status, body["code"]) == (403, "not_authenticated")
    assert server.get("/healthz")[0] == 200
    print(f"\n100 MiB declared: refused in {answered * 1000:.0f} ms, nothing stored; chunked: refused after "
          f"{sent // 1024} KiB sent, at most {largest // 1024} KiB kept (limit {LIMIT // 1024} KiB)")
