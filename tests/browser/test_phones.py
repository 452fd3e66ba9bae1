"""Issue 12, item 6: the chat and the memory page on phones (360 to 414 px).

No sideways scrolling (document.scrollingElement.scrollWidth <= innerWidth),
the newest message in view after sending, the demo notice collapsed, History
a list instead of a table, and a header that stays one row.
"""
from __future__ import annotations

import pytest
from playwright.sync_api import expect

from .helpers import make_person, open_memory_page, seed, send, sign_in, wait_for_reply, wait_until_connected
from .ui_helpers import DESKTOP, PHONES, context_at, in_viewport, sideways_overflow, wider_than_viewport

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

LONG_WORD = "supercalifragilistic-" * 8  # one unbreakable 168-character word


def assert_fits(page, where: str) -> None:
    overflow = sideways_overflow(page)
    assert overflow <= 0, f"{where} scrolls sideways by {overflow}px: {wider_than_viewport(page)}"


@pytest.mark.parametrize("size", PHONES, ids=[str(size["width"]) for size in PHONES])
def test_the_chat_fits_a_phone_and_keeps_the_newest_message_in_view(new_context, size):
    make_person("alice", "pw-alice-123")
    page = context_at(new_context, size).new_page()
    sign_in(page, "alice", "pw-alice-123")
    wait_until_connected(page)

    header = page.locator(".site-header").bounding_box()
    assert header["height"] < 56, "the header stays one row"
    notice = page.locator("#demo-notice")
    expect(notice).to_be_visible()
    assert notice.evaluate("node => node.tagName === 'DETAILS' && !node.open"), "the demo notice starts collapsed"
    # The chat comes before the conversation list on a phone.
    chat_top = page.locator(".chat-main").bounding_box()["y"]
    assert chat_top < page.locator(".chat-sidebar").bounding_box()["y"]
    assert_fits(page, "the chat")

    for number in range(4):
        send(page, f"Hello number {number} {LONG_WORD}")
        expect(page.locator(".message-assistant")).to_have_count(number + 1)
        wait_for_reply(page)
        assert in_viewport(page, ".message-assistant:last-child"), "the newest reply is in view"
    assert in_viewport(page, "#message"), "the message box stays in view"
    assert_fits(page, "the chat with long messages")

    notice.locator("summary").click()
    assert notice.evaluate("node => node.open")
    assert_fits(page, "the chat with the demo notice open")


@pytest.mark.parametrize("size", PHONES, ids=[str(size["width"]) for size in PHONES])
def test_the_memory_page_fits_a_phone_and_history_is_a_list(new_context, size):
    alice = make_person("alice", "pw-alice-123")
    seed(alice, about=(f"Works on {LONG_WORD}", "Prefers short answers"),
         memory=("The build uses make", f"Path: /srv/{LONG_WORD}/releases"))
    page = context_at(new_context, size).new_page()
    sign_in(page, "alice", "pw-alice-123")
    open_memory_page(page)

    assert_fits(page, "the memory page")
    expect(page.locator(".history-list")).to_be_visible()
    expect(page.locator(".history-table")).to_be_hidden()
    expect(page.locator(".history-list > li")).to_have_count(1)
    page.locator("#document-memory details summary").first.click()
    assert_fits(page, "the memory page with a correction open")
    page.locator("#add-user").fill("x" * 1400)
    page.locator("#document-user .memory-add").get_by_role("button", name="Add").click()
    expect(page.locator("#add-user-error .memory-error")).to_be_visible()
    assert_fits(page, "the memory page with an error")

    page.get_by_role("link", name="Erase everything…").click()
    assert_fits(page, "the erase confirmation")


def test_desktop_keeps_the_table_and_the_sidebar_beside_the_chat(new_context):
    alice = make_person("alice", "pw-alice-123")
    seed(alice, about=("Prefers short answers",))
    page = context_at(new_context, DESKTOP).new_page()
    sign_in(page, "alice", "pw-alice-123")
    wait_until_connected(page)
    sidebar, chat = page.locator(".chat-sidebar").bounding_box(), page.locator(".chat-main").bounding_box()
    assert sidebar["x"] < chat["x"] and abs(sidebar["y"] - chat["y"]) < 2
    send(page, "Hello")
    wait_for_reply(page)
    assert in_viewport(page, ".message-assistant:last-child")

    open_memory_page(page)
    expect(page.locator(".history-table")).to_be_visible()
    expect(page.locator(".history-list")).to_be_hidden()
    assert_fits(page, "the memory page")
