"""What a person does in the browser, and what the database holds meanwhile.

Every sign-in goes through the real login form; every database read goes
through `orm()` (Playwright is running in this thread).
"""
from __future__ import annotations

import json
import re
import time
from concurrent.futures import ThreadPoolExecutor

from django.contrib.auth import get_user_model
from django.contrib.auth.hashers import PBKDF2PasswordHasher
from django.db import connection
from playwright.sync_api import Page, expect

from agentmemory import store
from agentmemory.models import Actor, MemoryDocument
from agentmemory.rules import Operation, Snapshot


LAST_REPLY = ".message-assistant >> nth=-1"


def orm(function, /, *args, **kwargs):
    """Run ORM work in a worker thread (Django refuses it under Playwright's loop)."""

    def run():
        try:
            return function(*args, **kwargs)
        finally:
            # An open connection left in the worker would keep PostgreSQL
            # from dropping the test database at the end of the run.
            connection.close()

    with ThreadPoolExecutor(max_workers=1) as pool:
        return pool.submit(run).result()


class _QuickHasher(PBKDF2PasswordHasher):
    # The server verifies with the iteration count stored in the hash, so the
    # real login form still checks this password; only the tests' setup (and
    # a wrong attempt) skip the production cost of hashing.
    iterations = 1_000


def make_person(username: str, password: str):
    hasher = _QuickHasher()
    encoded = hasher.encode(password, hasher.salt())
    return orm(lambda: get_user_model().objects.create(username=username, password=encoded))


def seed(user, *, memory: tuple[str, ...] = (), about: tuple[str, ...] = ()) -> None:
    operations = [Operation(target="user", action="add", content=text) for text in about]
    operations += [Operation(target="memory", action="add", content=text) for text in memory]
    orm(store.commit_operations, user_id=user.pk, operations=operations, actor=Actor.SYSTEM)


def snapshot_of(user) -> Snapshot:
    return orm(store.load_snapshot, user_id=user.pk)


def rows_of(user) -> list[tuple[str, str]]:
    return orm(lambda: list(
        MemoryDocument.objects.filter(user_id=user.pk).order_by("memory_type").values_list("memory_type", "content")
    ))


def sign_in(page: Page, username: str, password: str) -> None:
    """Sign in through the login form and land on the chat."""
    page.goto("/accounts/login/")
    page.get_by_label("Username").fill(username)
    page.get_by_label("Password").fill(password)
    page.get_by_role("button", name="Sign in").click()
    expect(page).to_have_url(re.compile(r"/$"))
    expect(page.locator(".site-user")).to_contain_text(f"Signed in as {username}")


def open_chat(page: Page) -> None:
    page.goto("/")
    wait_until_connected(page)


def wait_until_connected(page: Page) -> None:
    expect(page.locator("#connection")).to_have_text("Connected.")


def open_memory_page(page: Page) -> None:
    """Open the memory page and wait until its socket listens for memory_changed."""
    page.goto("/memory/")
    expect(page.get_by_role("heading", name="Your memory")).to_be_visible()
    # Polled from here: Playwright's in-page polling of wait_for_function
    # compiles the expression in the page, which the page's CSP (no eval) forbids.
    deadline = time.monotonic() + 10
    while not page.evaluate("window.__socketsOpen >= 1"):
        assert time.monotonic() < deadline, "the memory page's socket did not open"
        page.wait_for_timeout(50)


def send(page: Page, text: str) -> None:
    page.locator("#message").fill(text)
    page.locator("#send").click()


def wait_for_reply(page: Page, *, timeout: float | None = None):
    """Wait until the last reply completed or failed (`timeout` in ms, Playwright's default without); return it."""
    reply = page.locator(LAST_REPLY)
    expect(reply).not_to_have_class(re.compile(r"\bpending\b"), timeout=timeout)
    return reply


def record_frames(page: Page) -> list[str]:
    """Return a list that fills with the type of every socket frame the page receives.

    Call it before the page opens its socket; it follows the page across
    navigations.
    """
    types: list[str] = []

    def watch(socket) -> None:
        socket.on("framereceived", lambda payload: types.append(_frame_type(payload)))

    page.on("websocket", watch)
    return types


def _frame_type(payload) -> str:
    try:
        return str(json.loads(payload).get("type"))
    except (TypeError, ValueError, AttributeError):
        return "unreadable"


def mark_document(page: Page) -> None:
    """Tag the current document, so a later check can tell whether it navigated."""
    page.evaluate("window.__sameDocument = true")


def same_document(page: Page) -> bool:
    return page.evaluate("window.__sameDocument === true")


def entry_texts(page: Page, target: str) -> list[str]:
    return page.locator(f"#document-{target} .memory-entry-text").all_inner_texts()


def assert_not_logged(server, *texts: str) -> None:
    """Fail when the server's log holds any of these memory texts."""
    log = server.log()
    leaked = [index for index, text in enumerate(texts) if text in log]
    # Positions only: the assertion message must not repeat memory content.
    assert not leaked, f"the server log holds memory text number(s) {leaked}"
