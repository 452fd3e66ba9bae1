"""Issue 12, item 7: the app's own pages pass axe-core with zero violations.

Login, chat (empty, and after a reply), memory (with and without entries,
after a failed add) and the erase confirmation, at desktop and phone sizes.
One h1 per page, a skip link that moves the focus to the content, the message
box focused on load, and one announcement per finished reply.
"""
from __future__ import annotations

import pytest
from playwright.sync_api import expect

from .helpers import make_person, open_memory_page, seed, send, sign_in, wait_for_reply, wait_until_connected
from .ui_helpers import SIZES, assert_no_axe_violations, context_at

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

# Counts what happens to the polite live region that announces replies,
# and to any other live region inside the message list, while a reply streams.
WATCH_ANNOUNCER = """
() => {
  window.__announcements = [];
  const region = document.getElementById("reply-announcer");
  new MutationObserver(() => { window.__announcements.push(region.textContent); })
    .observe(region, {subtree: true, childList: true, characterData: true});
}
"""


def one_h1(page) -> None:
    assert page.locator("h1").count() == 1, "a page has exactly one level-one heading"


@pytest.mark.parametrize("size", SIZES.values(), ids=SIZES.keys())
def test_every_own_page_has_no_axe_violations(new_context, size):
    alice = make_person("alice", "pw-alice-123")
    page = context_at(new_context, size, bypass_csp=True).new_page()

    page.goto("/accounts/login/")
    one_h1(page)
    assert_no_axe_violations(page, "the login page")
    page.get_by_label("Username").fill("alice")
    page.get_by_label("Password").fill("wrong")
    page.get_by_role("button", name="Sign in").click()
    expect(page.get_by_role("alert")).to_be_visible()
    assert_no_axe_violations(page, "the login page with an error")

    sign_in(page, "alice", "pw-alice-123")
    wait_until_connected(page)
    one_h1(page)
    assert_no_axe_violations(page, "the empty chat")
    send(page, "Hello there")
    wait_for_reply(page)
    assert_no_axe_violations(page, "the chat after a reply")
    page.locator("#demo-notice summary").click()
    assert_no_axe_violations(page, "the chat with the demo notice open")

    open_memory_page(page)
    one_h1(page)
    assert_no_axe_violations(page, "the memory page without entries")
    page.locator("#add-user").fill("x" * 1400)
    page.locator("#document-user .memory-add").get_by_role("button", name="Add").click()
    expect(page.locator("#add-user-error .memory-error")).to_be_visible()
    assert_no_axe_violations(page, "the memory page with an error")

    seed(alice, about=("Prefers answers under five lines",), memory=("Deploys go through heron-7741",))
    page.reload()
    page.locator("#document-memory details summary").first.click()
    assert_no_axe_violations(page, "the memory page with entries")

    page.get_by_role("link", name="Erase everything…").click()
    one_h1(page)
    assert_no_axe_violations(page, "the erase confirmation")


def test_skip_link_and_focus_on_load(new_context):
    make_person("bob", "pw-bob-123")
    page = new_context().new_page()
    sign_in(page, "bob", "pw-bob-123")
    wait_until_connected(page)

    # The message box has the focus as soon as the chat is open.
    expect(page.locator("#message")).to_be_focused()

    for path in ("/memory/", "/memory/erase/"):
        page.goto(path)
        page.keyboard.press("Tab")
        skip = page.get_by_role("link", name="Skip to main content")
        expect(skip).to_be_focused()
        expect(skip).to_be_visible()
        page.keyboard.press("Enter")
        expect(page.locator("main#main")).to_be_focused()


def test_a_finished_reply_is_announced_once_not_word_by_word(new_context):
    make_person("carol", "pw-carol-123")
    page = new_context().new_page()
    sign_in(page, "carol", "pw-carol-123")
    wait_until_connected(page)
    assert page.locator("#messages[aria-live]").count() == 0, "the streaming list is not a live region"
    page.evaluate(WATCH_ANNOUNCER)

    send(page, "Hello there")
    reply = wait_for_reply(page)
    final = reply.locator(".message-body").inner_text()

    announcements = page.evaluate("window.__announcements")
    assert announcements == [f"Assistant: {final}"], f"{len(announcements)} announcements for one reply"
    send(page, "Hello again")
    expect(page.locator(".message-assistant")).to_have_count(2)
    wait_for_reply(page)
    assert len(page.evaluate("window.__announcements")) == 2
