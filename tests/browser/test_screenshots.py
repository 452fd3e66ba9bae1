"""Screenshots of the chat and the memory page at desktop (1280) and phone (390) widths.

The chat is shown twice: with the offline demo model, and with a rendered code
answer written by a scripted model over real HTTP (`scripted_site`).

`make screenshots` runs this with UPDATE_SCREENSHOTS=1 and writes
docs/screenshots/*.png; in the ordinary suite it writes them under
artifacts/screenshots/ instead and still checks that each page fits its width.
The memory shown is made up for the pictures.
"""
from __future__ import annotations

import os
from pathlib import Path

import pytest
from django.conf import settings
from playwright.sync_api import expect

from tests.scripted_model import text

from .helpers import make_person, open_memory_page, seed, send, sign_in, wait_for_reply, wait_until_connected
from .ui_helpers import SIZES, context_at, sideways_overflow

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

DOCS = Path(settings.BASE_DIR) / "docs" / "screenshots"
ARTIFACTS = Path(settings.BASE_DIR) / "artifacts" / "screenshots"


def target_dir() -> Path:
    folder = DOCS if os.environ.get("UPDATE_SCREENSHOTS") == "1" else ARTIFACTS
    folder.mkdir(parents=True, exist_ok=True)
    return folder


@pytest.mark.parametrize("name", SIZES.keys())
def test_screenshots_of_the_chat_and_the_memory_page(new_context, name):
    size = SIZES[name]
    person = make_person("dana", "pw-dana-123")
    seed(person, about=("Prefers short answers with code first", "Works in UTC+1 and writes Python"),
         memory=("The project deploys with make deploy on Fridays",
                 "Tests run on PostgreSQL 16 and SQLite"))
    page = context_at(new_context, size).new_page()
    folder = target_dir()

    sign_in(page, "dana", "pw-dana-123")
    wait_until_connected(page)
    send(page, "remember: The staging server is called heron")
    wait_for_reply(page)
    send(page, "What do you remember about me?")
    expect(page.locator(".message-assistant")).to_have_count(2)
    wait_for_reply(page)
    page.locator("#message").blur()
    assert sideways_overflow(page) <= 0
    page.screenshot(path=str(folder / f"chat-{name}.png"), full_page=name == "phone")

    open_memory_page(page)
    expect(page.locator("#document-memory .memory-entry")).to_have_count(3)
    assert sideways_overflow(page) <= 0
    page.screenshot(path=str(folder / f"memory-{name}.png"), full_page=True)


CODE_ANSWER = "\n".join([
    "Use slicing, which returns a new list:",
    "",
    "```python",
    "numbers = [1, 2, 3, 4]",
    "backwards = numbers[::-1]",
    "print(backwards)  # [4, 3, 2, 1]",
    "```",
    "",
    "Or reverse it **in place** with `numbers.reverse()`:",
    "",
    "| Way | New list? |",
    "|-----|-----------|",
    "| `numbers[::-1]` | yes |",
    "| `numbers.reverse()` | no |",
])


@pytest.mark.parametrize("name", SIZES.keys())
def test_screenshot_of_a_rendered_code_answer(scripted_context, scripted_site, name):
    size = SIZES[name]
    _server, model = scripted_site
    make_person("dana", "pw-dana-123")
    page = context_at(scripted_context, size).new_page()
    folder = target_dir()

    sign_in(page, "dana", "pw-dana-123")
    wait_until_connected(page)
    model.push(text(CODE_ANSWER))
    send(page, "How do I reverse a list in Python?")
    body = wait_for_reply(page).locator(".message-body")
    expect(body.locator(".code-block .code-lang")).to_have_text("python")
    expect(body.locator("table td")).to_have_count(4)
    page.locator("#message").blur()
    assert sideways_overflow(page) <= 0
    page.screenshot(path=str(folder / f"chat-code-{name}.png"), full_page=name == "phone")
