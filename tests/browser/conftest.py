"""A live daphne server and Debian's Chromium for the browser tests.

The server is a real subprocess (`python -m daphne ... config.asgi:application`)
on a free port, pointed at the very test database pytest-django created, with
DEBUG off, the offline demo model and the in-memory channel layer. Browsers
are driven through Playwright's sync API with `/usr/bin/chromium`; Playwright
downloads nothing.

One Chromium serves a whole test module (starting Playwright and Chromium
took about a second per test); every test gets contexts of its own, so no
cookie, storage or page crosses from one test to the next.

Playwright's sync API keeps an asyncio loop marked as running in this thread
for as long as it is started, and Django refuses ORM calls under a running
loop. While a module's browser is up, this test process sets
DJANGO_ALLOW_ASYNC_UNSAFE, so the fixtures' database work (a test user, the
flush at a test's end) runs in this thread; it is unset when the module's
browser closes, and it never reaches a server (each is started without it).
Tests reach the ORM through `helpers.orm()`, which runs the call in a worker
thread.
"""
from __future__ import annotations

import os
import socket
import subprocess
import sys
import tempfile
import time
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import pytest
from django.conf import settings
from django.db import connection

from tests.multiprocess import servers as multiprocess_servers
from tests.scripted_model import ScriptedModel

CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]
SCREENSHOTS = Path(settings.BASE_DIR) / "artifacts" / "screenshots"
# Words of the demo model's replies arrive this far apart, so a Stop can land
# mid-stream and several deltas are visible before a reply completes.
DEMO_DELAY_MS = 50
STARTUP_SECONDS = 30
# Set while a module's browser is up (see the module note); never passed to a server.
ASYNC_UNSAFE = "DJANGO_ALLOW_ASYNC_UNSAFE"

# Counts the page's WebSockets that reached "open", so a test can wait until
# the memory page listens before it changes memory elsewhere. It observes
# only; the page's own code runs unchanged.
OBSERVE_SOCKETS = """
(() => {
  const Native = window.WebSocket;
  window.__socketsOpen = 0;
  window.WebSocket = class extends Native {
    constructor(...args) {
      super(...args);
      this.addEventListener("open", () => { window.__socketsOpen += 1; });
    }
  };
})();
"""


@dataclass
class LiveServer:
    url: str
    process: subprocess.Popen
    log_path: Path

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")


def _wait_for_port(process: subprocess.Popen, port: int, log_path: Path) -> None:
    deadline = time.monotonic() + STARTUP_SECONDS
    while time.monotonic() < deadline:
        if process.poll() is not None:
            pytest.fail(f"The daphne server exited with {process.returncode} before listening:\n"
                        f"{log_path.read_text(errors='replace')}")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                return
        except OSError:
            time.sleep(0.1)
    pytest.fail(f"The daphne server did not listen on port {port} within {STARTUP_SECONDS} s:\n"
                f"{log_path.read_text(errors='replace')}")


@pytest.fixture(scope="session")
def chromium_path() -> Path:
    if not CHROMIUM.exists():
        reason = "needs Debian's Chromium at /usr/bin/chromium: apt-get install -y chromium (.ci/run does)"
        # CI sets REQUIRE_BROWSER=1: there a missing browser is a failure, not a skip.
        if os.environ.get("REQUIRE_BROWSER") == "1":
            pytest.fail(reason)
        pytest.skip(reason)
    return CHROMIUM


def _serve(extra_env: dict[str, str]):
    """Start a daphne server against the test database; yield it; stop it."""
    # After django_db_setup the connection's NAME is the test database's.
    database_url = multiprocess_servers.database_url()
    port = multiprocess_servers.free_port()
    env = dict(os.environ)
    for name in ("REDIS_URL", "OPENAI_API_KEY", "OPENAI_BASE_URL", "OTEL_EXPORTER_OTLP_ENDPOINT", "TEST_DB_NAME",
                 ASYNC_UNSAFE):
        env.pop(name, None)  # one process, the demo model, no tracing
    env.update({
        "DATABASE_URL": database_url,
        "PGAPPNAME": multiprocess_servers.SERVER_APPLICATION_NAME,
        "DEBUG": "0",
        "SECRET_KEY": "browser-test-only-secret-key",
        "ALLOWED_HOSTS": "127.0.0.1",
        "SECURE_COOKIES": "0",
        "AGENTMEMORY_ENABLED": "1",
        "DEMO_MODEL_DELAY_MS": str(DEMO_DELAY_MS),
        "CHAT_TURN_RATE": "1000/min",
        "MEMORY_WRITE_RATE": "1000/min",
        "PYTHONUNBUFFERED": "1",
        **extra_env,
    })
    log = tempfile.NamedTemporaryFile(prefix="browser-daphne-", suffix=".log", delete=False)
    log_path = Path(log.name)
    process = subprocess.Popen(
        [sys.executable, "-m", "daphne", "-b", "127.0.0.1", "-p", str(port), "config.asgi:application"],
        cwd=settings.BASE_DIR, env=env, stdout=log, stderr=subprocess.STDOUT,
    )
    log.close()
    server = LiveServer(url=f"http://127.0.0.1:{port}", process=process, log_path=log_path)
    try:
        _wait_for_port(process, port, log_path)
        yield server
    finally:
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=10)
        log_path.unlink(missing_ok=True)
        multiprocess_servers.wait_for_server_sessions_to_end()


@pytest.fixture(scope="session")
def daphne_server(chromium_path, django_db_setup):
    """Start one daphne server for the session against the test database (the demo model)."""
    yield from _serve({})


@pytest.fixture(scope="session")
def scripted_site(chromium_path, django_db_setup):
    """A second daphne server whose model is a ScriptedModel over real HTTP.

    Yields (server, model): push the model's answers, then chat through
    `scripted_context`. The model runs in this process (a thread); daphne
    reaches it as it would a hosted API.
    """
    model = ScriptedModel().start()
    try:
        for server in _serve({
            "OPENAI_API_KEY": "scripted",
            "OPENAI_BASE_URL": model.base_url,
            "OPENAI_MODEL": "scripted-primary",
            "OPENAI_MAX_RETRIES": "0",
            "OPENAI_TIMEOUT": "20",
        }):
            yield server, model
    finally:
        model.stop()


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item, call):
    """Attach the server's log to a failed browser test's report, and only then.

    The log holds request lines and warnings, never memory content (the
    tests assert so with their distinctive facts).
    """
    report = yield
    funcargs = getattr(item, "funcargs", {})
    scripted = funcargs.get("scripted_site")
    for name, server in (("daphne server log", funcargs.get("daphne_server")),
                         ("scripted daphne server log", scripted[0] if scripted else None)):
        if report.failed and isinstance(server, LiveServer) and server.log_path.exists():
            report.sections.append((name, server.log()))
    return report


@pytest.fixture
def live_server_url(daphne_server, transactional_db) -> str:
    return daphne_server.url


@pytest.fixture(scope="module")
def module_browser(chromium_path):
    """Return a Chromium browser that lives for one test module (see the module note)."""
    from playwright.sync_api import sync_playwright

    before = os.environ.get(ASYNC_UNSAFE)
    os.environ[ASYNC_UNSAFE] = "true"
    try:
        with sync_playwright() as playwright:
            chromium = playwright.chromium.launch(executable_path=str(chromium_path), args=CHROMIUM_ARGS)
            try:
                yield chromium
            finally:
                chromium.close()
    finally:
        if before is None:
            os.environ.pop(ASYNC_UNSAFE, None)
        else:
            os.environ[ASYNC_UNSAFE] = before


@pytest.fixture
def browser(module_browser, live_server_url):
    """Return the module's Chromium, with the test's database and server ready."""
    return module_browser


@contextmanager
def _contexts(browser, base_url: str):
    """Yield a factory of browser contexts on `base_url`; close them all afterwards."""
    contexts = []

    def make(**options):
        # Options go to Playwright's new_context: a phone's viewport, or
        # bypass_csp=True where a test injects axe-core into the page.
        # English unless a test asks for another language (locale="de-DE"): the
        # pages follow the browser's Accept-Language (LocaleMiddleware).
        settings_ = {"viewport": {"width": 1200, "height": 820}, "locale": "en-US", **options}
        context = browser.new_context(base_url=base_url, **settings_)
        context.set_default_timeout(10_000)
        context.add_init_script(OBSERVE_SOCKETS)
        contexts.append(context)
        return context

    try:
        yield make
    finally:
        for context in contexts:
            context.close()


@pytest.fixture
def new_context(browser, live_server_url):
    """Return a factory of browser contexts: one per person, like separate browsers."""
    with _contexts(browser, live_server_url) as make:
        yield make


@pytest.fixture
def scripted_context(browser, scripted_site, transactional_db):
    """Like `new_context`, on the scripted model's server (its script starts empty)."""
    server, model = scripted_site
    model.reset()
    with _contexts(browser, server.url) as make:
        yield make
    errors = list(model.errors)
    if errors:
        pytest.fail("the scripted model's script failed: " + "; ".join(errors), pytrace=False)


@pytest.fixture
def screenshot():
    """Return a function that saves a full-page screenshot under artifacts/screenshots/."""
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)

    def save(page, name: str) -> Path:
        path = SCREENSHOTS / f"{name}-{connection.vendor}.png"
        page.screenshot(path=str(path), full_page=True)
        return path

    return save
