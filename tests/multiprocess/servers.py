"""Live daphne processes for the multi-process and fault tests, and a socket client.

Each server is a real subprocess (`python -m daphne ... config.asgi:application`)
on a free port, pointed at the test database pytest-django created, with
DEBUG off, the offline demo model, memory on and the test run's SECRET_KEY,
so a session made here (`session_cookie`) signs a person in there. The
channel layer is in-memory unless the test passes REDIS_URL. Servers start
inside a test and are always killed at its end (`servers` fixture), each
wait is bounded, and a failing test gets the servers' logs in its report.

`LiveSocket` is a real WebSocket client (the `websockets` package) with the
session cookie and an `Origin` of the server, reading frames in the
background so a test can wait for any of them.
"""
from __future__ import annotations

import asyncio
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import quote, urlsplit, urlunsplit

import pytest
from django.conf import settings
from django.db import connection
from django.test import Client

STARTUP_SECONDS = 40
STOP_SECONDS = 10
DEMO_DELAY_MS = 5
# Variables of the test process that must not reach a server: it gets its own.
DROPPED_ENV = (
    "DATABASE_URL", "TEST_DB_NAME", "REDIS_URL", "OPENAI_API_KEY", "OPENAI_BASE_URL", "OPENAI_FALLBACK_MODEL",
    "OTEL_EXPORTER_OTLP_ENDPOINT", "EVAL_SERVICE_TOKEN", "API_DOCS_PUBLIC",
    # Set in this process while a browser test module runs (tests/browser/conftest.py); a server keeps Django's check.
    "DJANGO_ALLOW_ASYNC_UNSAFE",
)


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def database_url(*, host: str | None = None, port: int | None = None) -> str:
    """Return a DATABASE_URL for this run's test database (optionally via another host and port)."""
    settings_dict = connection.settings_dict
    name = str(settings_dict["NAME"])
    if connection.vendor == "sqlite":
        if name == ":memory:" or "mode=memory" in name:
            pytest.fail("These tests need a file SQLite test database; the server is another process.")
        return f"sqlite:///{Path(name).resolve()}"
    if connection.vendor != "postgresql":
        pytest.fail(f"These tests support SQLite and PostgreSQL, not {connection.vendor}.")
    user = quote(settings_dict.get("USER") or "", safe="")
    password = quote(settings_dict.get("PASSWORD") or "", safe="")
    credentials = f"{user}:{password}@" if password else (f"{user}@" if user else "")
    host = host or settings_dict.get("HOST") or "127.0.0.1"
    port = port or settings_dict.get("PORT") or 5432
    return f"postgres://{credentials}{host}:{port}/{quote(name, safe='')}"


# The live servers' PostgreSQL sessions carry this application_name (libpq reads PGAPPNAME), so a test
# can wait until a stopped server's sessions are gone: PostgreSQL ends a backend a moment after its
# client died, and the test database cannot be dropped at the end of the run while one is left.
SERVER_APPLICATION_NAME = "agentmemory-test-server"


def wait_for_server_sessions_to_end(timeout: float = STOP_SECONDS) -> None:
    """On PostgreSQL, wait until no stopped server's session is left on the test database."""
    if connection.vendor != "postgresql":
        return
    import psycopg

    settings_dict = connection.settings_dict
    host, port = postgres_address()
    try:
        with psycopg.connect(host=host, port=port, user=settings_dict.get("USER") or None,
                             password=settings_dict.get("PASSWORD") or None, dbname="postgres",
                             autocommit=True, connect_timeout=3) as probe:
            deadline = time.monotonic() + timeout
            while time.monotonic() < deadline:
                (left,) = probe.execute(
                    "SELECT count(*) FROM pg_stat_activity WHERE datname = %s AND application_name = %s",
                    [str(settings_dict["NAME"]), SERVER_APPLICATION_NAME]).fetchone()
                if not left:
                    return
                time.sleep(0.05)
    except psycopg.OperationalError:
        return  # the server itself is away (a test of that); nothing to wait for


def postgres_address() -> tuple[str, int]:
    settings_dict = connection.settings_dict
    return settings_dict.get("HOST") or "127.0.0.1", int(settings_dict.get("PORT") or 5432)


# --- servers -------------------------------------------------------------------------


@dataclass
class Server:
    name: str
    port: int
    process: subprocess.Popen
    log_path: Path

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def origin(self) -> str:
        return self.url

    @property
    def ws_url(self) -> str:
        return f"ws://127.0.0.1:{self.port}/ws/chat/"

    def log(self) -> str:
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""

    def get(self, path: str, *, headers: dict | None = None, timeout: float = 10) -> tuple[int, dict | str]:
        """GET a path; return the status and the JSON (or text) body."""
        return self.request("GET", path, headers=headers, timeout=timeout)

    def request(self, method: str, path: str, *, body: dict | None = None, headers: dict | None = None,
                timeout: float = 10) -> tuple[int, dict | str]:
        data = json.dumps(body).encode() if body is not None else None
        request = urllib.request.Request(self.url + path, data=data, method=method, headers={
            "Content-Type": "application/json", **(headers or {})})
        try:
            with urllib.request.urlopen(request, timeout=timeout) as response:
                status, raw = response.status, response.read()
        except urllib.error.HTTPError as error:
            status, raw = error.code, error.read()
        try:
            return status, json.loads(raw)
        except ValueError:
            return status, raw.decode(errors="replace")

    def kill(self) -> None:
        """SIGKILL: no shutdown hook, no finally block, no flush — like a crashed machine."""
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGKILL)
        self.process.wait(timeout=STOP_SECONDS)

    def stop(self) -> None:
        if self.process.poll() is not None:
            return
        self.process.terminate()
        try:
            self.process.wait(timeout=STOP_SECONDS)
        except subprocess.TimeoutExpired:
            self.kill()


@dataclass
class ServerFactory:
    started: list[Server] = field(default_factory=list)

    def start(self, name: str, *, wait_ready: bool = True, **env: str) -> Server:
        """Start a daphne server on the test database; `env` overrides its environment."""
        port = free_port()
        environment = {key: value for key, value in os.environ.items() if key not in DROPPED_ENV}
        environment.update({
            "DATABASE_URL": database_url(),
            "PGAPPNAME": SERVER_APPLICATION_NAME,
            "DEBUG": "0",
            # The test run's key: sessions made in this process sign people in there.
            "SECRET_KEY": settings.SECRET_KEY,
            "ALLOWED_HOSTS": "127.0.0.1",
            "SECURE_COOKIES": "0",
            "AGENTMEMORY_ENABLED": "1",
            "DEMO_MODEL_DELAY_MS": str(DEMO_DELAY_MS),
            "CHAT_TURN_RATE": "100000/min",
            "MEMORY_WRITE_RATE": "100000/min",
            "CONN_MAX_AGE": "0",
            "LOG_LEVEL": "INFO",
            "PYTHONUNBUFFERED": "1",
        })
        environment.update(env)
        log = tempfile.NamedTemporaryFile(prefix=f"daphne-{name}-", suffix=".log", delete=False)
        process = subprocess.Popen(
            [sys.executable, "-m", "daphne", "-b", "127.0.0.1", "-p", str(port), "config.asgi:application"],
            cwd=settings.BASE_DIR, env=environment, stdout=log, stderr=subprocess.STDOUT,
        )
        log.close()
        server = Server(name=name, port=port, process=process, log_path=Path(log.name))
        self.started.append(server)
        self._wait_until_serving(server, ready=wait_ready)
        return server

    def _wait_until_serving(self, server: Server, *, ready: bool) -> None:
        path = "/readyz" if ready else "/healthz"
        deadline = time.monotonic() + STARTUP_SECONDS
        last = None
        while time.monotonic() < deadline:
            if server.process.poll() is not None:
                pytest.fail(f"Server {server.name} exited with {server.process.returncode} before serving:\n"
                            f"{server.log()}")
            try:
                last = server.get(path, timeout=2)
                if last[0] == 200:
                    return
            except OSError:
                pass
            time.sleep(0.1)
        pytest.fail(f"Server {server.name} did not answer 200 on {path} within {STARTUP_SECONDS} s "
                    f"(last answer {last}):\n{server.log()}")

    def stop_all(self) -> None:
        for server in self.started:
            try:
                server.stop()
            finally:
                server.log_path.unlink(missing_ok=True)


@pytest.fixture
def servers(transactional_db, request):
    """Return a factory of live servers; every one is stopped (or killed) when the test ends."""
    factory = ServerFactory()
    request.node.live_servers = factory.started
    try:
        yield factory
    finally:
        try:
            factory.stop_all()
        finally:
            wait_for_server_sessions_to_end()


def attach_server_logs(item, report) -> None:
    """Add each live server's log to a failed test's report (logs never hold memory content)."""
    if report.failed:
        for server in getattr(item, "live_servers", []):
            report.sections.append((f"daphne {server.name} log", server.log()))


# --- Redis -----------------------------------------------------------------------------

# A database number of its own: the tests flush it before and after. Each
# pytest-xdist worker takes the next one down (gw0: 14, gw1: 13, ...), so
# parallel workers never flush each other's.
MULTIPROCESS_REDIS_DB = int(os.environ.get("TEST_MULTIPROCESS_REDIS_DB", "14")) - int(
    os.environ.get("PYTEST_XDIST_WORKER", "gw0").removeprefix("gw") or 0)


def redis_base_url() -> str:
    parts = urlsplit(os.environ.get("TEST_REDIS_URL", "redis://127.0.0.1:6379/15"))
    return urlunsplit((parts.scheme, parts.netloc, f"/{MULTIPROCESS_REDIS_DB}", "", ""))


@pytest.fixture
def redis_url():
    """Return a reachable Redis URL on a flushed database of its own, or skip (fail under REQUIRE_REDIS=1)."""
    import redis

    url = redis_base_url()
    try:
        client = redis.Redis.from_url(url, socket_connect_timeout=2, socket_timeout=5)
        client.ping()
    except redis.exceptions.RedisError as exc:
        reason = (f"needs Redis at {url} ({type(exc).__name__}); start redis-server or set TEST_REDIS_URL "
                  "(.ci/run starts one)")
        if os.environ.get("REQUIRE_REDIS") == "1":
            pytest.fail(reason)
        pytest.skip(reason)
    client.flushdb()
    try:
        yield url
    finally:
        client.flushdb()
        client.close()


# --- people and sockets ----------------------------------------------------------------


def _in_thread(function, /, *args, **kwargs):
    def run():
        try:
            return function(*args, **kwargs)
        finally:
            connection.close()  # an open connection would keep PostgreSQL from dropping the test database

    return asyncio.to_thread(run)


async def orm(function, /, *args, **kwargs):
    """Run ORM work in a worker thread (the tests are async) and close its connection."""
    return await _in_thread(function, *args, **kwargs)


async def session_cookie(user) -> str:
    def login() -> str:
        client = Client()
        client.force_login(user)
        return client.cookies["sessionid"].value

    return await orm(login)


class LiveSocket:
    """A chat socket on a live server; frames are read in the background."""

    def __init__(self, websocket, name: str) -> None:
        self.websocket = websocket
        self.name = name
        self.frames: list[dict] = []
        self.closed: BaseException | None = None
        self._arrived = asyncio.Event()
        self._reader = asyncio.create_task(self._read())

    @classmethod
    async def open(cls, server: Server, cookie: str, *, name: str = "") -> LiveSocket:
        from websockets.asyncio.client import connect

        websocket = await connect(
            server.ws_url, origin=server.origin, additional_headers={"Cookie": f"sessionid={cookie}"},
            proxy=None, open_timeout=10, max_size=None, compression=None,
        )
        return cls(websocket, name or server.name)

    async def _read(self) -> None:
        try:
            async for raw in self.websocket:
                self.frames.append(json.loads(raw))
                self._arrived.set()
        except Exception as exc:  # the server went away; tests look at `closed`
            self.closed = exc
        else:
            self.closed = ConnectionError("closed")
        finally:
            self._arrived.set()

    async def send(self, frame: dict | str | bytes) -> None:
        await self.websocket.send(json.dumps(frame) if isinstance(frame, dict) else frame)

    def of_type(self, kind: str, *, turn_id: str | None = None) -> list[dict]:
        return [frame for frame in self.frames
                if frame.get("type") == kind and (turn_id is None or frame.get("turn_id") == turn_id)]

    async def wait_for(self, predicate, *, timeout: float = 20, what: str = "a frame") -> None:
        """Wait until `predicate(self)` holds; fail naming `what` (and the frames seen) on timeout."""
        deadline = asyncio.get_running_loop().time() + timeout
        while not predicate(self):
            if self.closed is not None and not predicate(self):
                raise AssertionError(f"socket {self.name} closed ({self.closed!r}) before {what}; "
                                     f"frames: {[frame.get('type') for frame in self.frames]}")
            remaining = deadline - asyncio.get_running_loop().time()
            if remaining <= 0:
                raise AssertionError(f"socket {self.name}: timed out waiting for {what}; "
                                     f"frames: {[frame.get('type') for frame in self.frames]}")
            self._arrived.clear()
            try:
                await asyncio.wait_for(self._arrived.wait(), timeout=remaining)
            except asyncio.TimeoutError:
                pass

    async def turn(self, content: str, *, timeout: float = 30) -> dict:
        """Send a message and return the turn's last frame (turn_completed or turn_failed or error)."""
        seen = len(self.frames)
        await self.send({"type": "user_message", "content": content, "conversation_id": None})

        def finished(socket) -> bool:
            return any(frame.get("type") in ("turn_completed", "turn_failed", "error")
                       for frame in socket.frames[seen:])

        await self.wait_for(finished, timeout=timeout, what="the end of a turn")
        return next(frame for frame in self.frames[seen:]
                    if frame.get("type") in ("turn_completed", "turn_failed", "error"))

    async def close(self) -> None:
        await self.websocket.close()
        self._reader.cancel()
        try:
            await self._reader
        except (asyncio.CancelledError, Exception):
            pass
