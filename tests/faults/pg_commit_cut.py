"""A PostgreSQL proxy that cuts a connection at the COMMIT of a transaction that wrote a memory change.

It sits between the application's connections and PostgreSQL, on 127.0.0.1
only, and reads the client's side of the wire protocol (version 3). After the
startup (an SSLRequest or GSSENCRequest it answers itself with 'N', so the
stream stays plain text) each message is a type byte, a length and a body.
A transaction that changed memory sent its audit event's INSERT ... RETURNING
(`marker`, as a simple query 'Q' or a Parse 'P'); when the proxy is armed,
the next simple-query COMMIT on that connection is the fault:

- "deliver": the COMMIT reaches the server, which commits; its answer is
  swallowed and the connection cut. The change is stored and the
  application never hears so.
- "drop": the COMMIT is not sent and the connection is cut: the server sees
  its client go and rolls back. Nothing is stored.

With `refuse=True` the proxy then also stops listening and breaks every
connection (`TcpProxy.cut`): the database is unreachable until `restore()`.
It fires once per `arm()`. Everything else passes unchanged, both ways.
"""
from __future__ import annotations

import socket
import threading
from dataclasses import dataclass

from tests.faults.tcp_proxy import BUFFER, TcpProxy

SSL_REQUEST = 80877103
GSSENC_REQUEST = 80877104
MODES = ("deliver", "drop")


@dataclass
class _Stream:
    wrote: bool = False  # this transaction wrote a memory change (the marker passed)
    swallow: bool = False  # the COMMIT went through: drop the server's answer and cut
    refuse: bool = False


class PgCommitCut(TcpProxy):
    def __init__(self, target: tuple[str, int], *, marker: bytes) -> None:
        super().__init__(target)
        self.marker = marker
        self._armed: tuple[str, bool] | None = None
        self._arm_lock = threading.Lock()
        self.fired = threading.Event()

    def arm(self, mode: str, *, refuse: bool = False) -> None:
        """Cut at the next COMMIT of a transaction that wrote a memory change."""
        assert mode in MODES
        self.fired.clear()
        with self._arm_lock:
            self._armed = (mode, refuse)

    def disarm(self) -> None:
        with self._arm_lock:
            self._armed = None

    def _take_arm(self) -> tuple[str, bool] | None:
        with self._arm_lock:
            armed, self._armed = self._armed, None
            return armed

    def _start_pumps(self, client: socket.socket, upstream: socket.socket, pair) -> None:
        stream = _Stream()
        threading.Thread(target=self._client_side, args=(client, upstream, pair, stream), daemon=True).start()
        threading.Thread(target=self._server_side, args=(upstream, client, pair, stream), daemon=True).start()

    def _fire(self, pair, refuse: bool) -> None:
        self.fired.set()
        if refuse:
            self.cut()
        else:
            self._drop(pair)

    def _client_side(self, client: socket.socket, upstream: socket.socket, pair, stream: _Stream) -> None:
        buffer = b""
        starting = True
        try:
            while data := client.recv(BUFFER):
                buffer += data
                out = bytearray()
                while True:
                    if starting:  # length, then a code: no type byte yet
                        if len(buffer) < 8 or len(buffer) < int.from_bytes(buffer[:4], "big"):
                            break
                        length = int.from_bytes(buffer[:4], "big")
                        message, buffer = buffer[:length], buffer[length:]
                        if int.from_bytes(message[4:8], "big") in (SSL_REQUEST, GSSENC_REQUEST):
                            client.sendall(b"N")  # no encryption: the client goes on in plain text
                            continue
                        out += message
                        starting = False
                        continue
                    if len(buffer) < 5 or len(buffer) < 1 + int.from_bytes(buffer[1:5], "big"):
                        break
                    length = 1 + int.from_bytes(buffer[1:5], "big")
                    message, buffer = buffer[:length], buffer[length:]
                    kind, body = message[:1], message[5:]
                    if kind in (b"Q", b"P") and self.marker in body and b"RETURNING" in body:
                        stream.wrote = True
                    if kind == b"Q":
                        command = body.rstrip(b"\0").strip().upper()
                        if command == b"COMMIT" and stream.wrote:
                            armed = self._take_arm()
                            if armed is not None:
                                mode, refuse = armed
                                upstream.sendall(bytes(out))
                                out.clear()
                                if mode == "drop":
                                    self._fire(pair, refuse)
                                    return
                                stream.refuse, stream.swallow = refuse, True  # before the answer can come
                                upstream.sendall(message)
                                continue
                        if command in (b"COMMIT", b"ROLLBACK"):
                            stream.wrote = False
                    out += message
                if out:
                    upstream.sendall(bytes(out))
        except OSError:
            pass
        finally:
            self._drop(pair)

    def _server_side(self, upstream: socket.socket, client: socket.socket, pair, stream: _Stream) -> None:
        try:
            while data := upstream.recv(BUFFER):
                if stream.swallow:  # the server answered the COMMIT: it committed; the client never hears
                    self._fire(pair, stream.refuse)
                    return
                client.sendall(data)
        except OSError:
            pass
        finally:
            self._drop(pair)
