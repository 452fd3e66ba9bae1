"""A TCP forwarder the fault tests put between a server and PostgreSQL or Redis.

`cut()` closes the listening socket and resets every forwarded connection,
so the service is really unreachable for the server behind it: open
connections break and new ones are refused, exactly as when the service is
down. `restore()` listens on the same port again. It runs in threads of its
own, so it keeps forwarding while a test blocks.
"""
from __future__ import annotations

import socket
import threading

BUFFER = 65536


class TcpProxy:
    def __init__(self, target: tuple[str, int]) -> None:
        self.target = target
        self.port = 0
        self._listener: socket.socket | None = None
        self._pairs: set[tuple[socket.socket, socket.socket]] = set()
        self._lock = threading.Lock()
        self.connections = 0  # accepted since start, for the report

    def start(self) -> TcpProxy:
        self._listen()
        return self

    def _listen(self) -> None:
        listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.bind(("127.0.0.1", self.port))
        listener.listen(64)
        self.port = listener.getsockname()[1]
        self._listener = listener
        threading.Thread(target=self._accept, args=(listener,), daemon=True, name="tcp-proxy-accept").start()

    def _accept(self, listener: socket.socket) -> None:
        while True:
            try:
                client, _ = listener.accept()
            except OSError:
                return  # cut() closed the listener
            try:
                upstream = socket.create_connection(self.target, timeout=5)
                upstream.settimeout(None)
            except OSError:
                client.close()
                continue
            pair = (client, upstream)
            with self._lock:
                self._pairs.add(pair)
                self.connections += 1
            self._start_pumps(client, upstream, pair)

    def _start_pumps(self, client: socket.socket, upstream: socket.socket, pair) -> None:
        """Forward both ways, each in a thread (a subclass may read what passes)."""
        threading.Thread(target=self._pump, args=(client, upstream, pair), daemon=True).start()
        threading.Thread(target=self._pump, args=(upstream, client, pair), daemon=True).start()

    def _pump(self, source: socket.socket, destination: socket.socket, pair) -> None:
        try:
            while data := source.recv(BUFFER):
                destination.sendall(data)
        except OSError:
            pass
        finally:
            self._drop(pair)

    def _drop(self, pair) -> None:
        with self._lock:
            self._pairs.discard(pair)
        for end in pair:
            try:
                end.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            end.close()

    def cut(self) -> None:
        """Refuse new connections and break the open ones."""
        if self._listener is not None:
            try:
                # close() alone would leave the accept() in progress listening (Linux): wake it first.
                self._listener.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            self._listener.close()
            self._listener = None
        with self._lock:
            pairs = list(self._pairs)
        for pair in pairs:
            self._drop(pair)

    def restore(self) -> None:
        """Accept and forward again, on the same port."""
        if self._listener is None:
            self._listen()

    def close(self) -> None:
        self.cut()
