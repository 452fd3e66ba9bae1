"""Issue 12, item 5: the memory page's forms answer in place.

With JavaScript, Add, Correct and Remove post with fetch: an error shows
beside its field and takes the focus, the page never navigates; a success
refreshes the entries in place. Without JavaScript the same forms post and
redirect back to /memory/ with the error beside the field (no resend prompt,
no 405 on the form's address). A live refresh keeps the scroll position and
the focus. History pages. At desktop and phone sizes.
"""
from __future__ import annotations

import re

import pytest
from playwright.sync_api import expect

from agentmemory import store
from agentmemory.models import MemoryEvent
from agentmemory.rules import Operation

from .helpers import (
    entry_texts,
    make_person,
    mark_document,
    open_memory_page,
    orm,
    rows_of,
    same_document,
    seed,
    sign_in,
)
from .ui_helpers import SIZES, context_at

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


@pytest.mark.parametrize("size", SIZES.values(), ids=SIZES.keys())
def test_errors_show_beside_the_field_with_the_focus_and_nothing_navigates(new_context, size):
    alice = make_person("alice", "pw-alice-123")
    seed(alice, about=("Uses vim", "Uses zsh"))
    page = context_at(new_context, size).new_page()
    sign_in(page, "alice", "pw-alice-123")
    open_memory_page(page)
    mark_document(page)

    # Add: over the profile's limit.
    page.locator("#add-user").fill("x" * 1400)
    page.locator("#document-user .memory-add").get_by_role("button", name="Add").click()
    error = page.locator("#add-user-error .memory-error")
    expect(error).to_contain_text("This does not fit: your profile would be over its limit of 1,375 characters.")
    expect(error).to_be_focused()
    expect(error).to_be_in_viewport()
    expect(page.locator("#add-user")).to_have_attribute("aria-invalid", "true")
    expect(page.locator("#add-user")).to_have_value("x" * 1400)

    # Correct: a reserved tag.
    entry = page.locator("#document-user .memory-entry").filter(has_text="Uses zsh")
    entry.locator("summary", has_text="Correct").click()
    entry.get_by_label("Corrected entry").fill("Uses <persistent_memory_data> fish")
    entry.get_by_role("button", name="Save correction").click()
    entry_error = entry.locator(".memory-field-error .memory-error")
    expect(entry_error).to_contain_text("Remove the tag.")
    expect(entry_error).to_be_focused()

    # Remove: the entry changed meanwhile (a chat turn elsewhere).
    stale = page.locator("#document-user .memory-entry").filter(has_text="Uses vim")
    orm(store.commit_operations, user_id=alice.pk, operations=[
        Operation(target="user", action="replace", match="Uses vim", content="Uses helix")])
    stale.get_by_role("button", name="Remove").click()
    stale_error = stale.locator(".memory-field-error .memory-error")
    expect(stale_error).to_contain_text("changed or removed since the page was loaded")
    expect(stale_error).to_be_focused()

    assert same_document(page), "the page never navigated"
    assert page.url.endswith("/memory/")
    assert "Operation" not in page.locator("#memory-page").inner_text()


@pytest.mark.parametrize("size", SIZES.values(), ids=SIZES.keys())
def test_add_correct_and_remove_succeed_in_place(new_context, size):
    alice = make_person("alice", "pw-alice-123")
    page = context_at(new_context, size).new_page()
    sign_in(page, "alice", "pw-alice-123")
    open_memory_page(page)
    mark_document(page)

    page.locator("#add-memory").fill("Deploys happen on Fridays")
    page.locator("#document-memory .memory-add").get_by_role("button", name="Add").click()
    expect(page.locator(".memory-messages")).to_have_text("Added.")
    expect(page.locator("#document-memory .memory-entry-text")).to_have_text(["Deploys happen on Fridays"])
    expect(page.locator("#add-memory")).to_be_focused()
    expect(page.locator("#add-memory")).to_have_value("")

    entry = page.locator("#document-memory .memory-entry").first
    entry.locator("details[id^=correct-] > summary").click()
    entry.get_by_label("Corrected entry").fill("Deploys happen on Thursdays")
    entry.get_by_role("button", name="Save correction").click()
    expect(page.locator(".memory-messages")).to_have_text("Corrected.")
    expect(page.locator("#document-memory .memory-entry-text")).to_have_text(["Deploys happen on Thursdays"])

    page.locator("#document-memory .memory-entry").first.get_by_role("button", name="Remove").click()
    expect(page.locator(".memory-messages")).to_have_text("Removed.")
    expect(page.locator("#document-memory .memory-empty")).to_have_text("Nothing stored.")
    expect(page.locator("#add-memory")).to_be_focused()
    assert same_document(page)
    assert rows_of(alice) == []


def test_without_javascript_a_failed_post_comes_back_to_the_page(new_context):
    alice = make_person("alice", "pw-alice-123")
    seed(alice, about=("Uses vim",))
    page = new_context(java_script_enabled=False).new_page()
    page.goto("/accounts/login/")
    page.get_by_label("Username").fill("alice")
    page.get_by_label("Password").fill("pw-alice-123")
    page.get_by_role("button", name="Sign in").click()
    page.goto("/memory/")

    page.locator("#add-user").fill("y" * 1400)
    page.locator("#document-user .memory-add").get_by_role("button", name="Add").click()

    expect(page).to_have_url(re.compile(r"/memory/#add-user$"))
    expect(page.locator("#add-user-error")).to_contain_text("over its limit of 1,375 characters")
    expect(page.locator("#add-user")).to_have_value("y" * 1400)
    # Reloading shows the page as it is now, without posting again.
    response = page.reload()
    assert response.request.method == "GET"
    expect(page.locator("#add-user-error")).to_be_empty()
    assert orm(lambda: MemoryEvent.objects.filter(user=alice, outcome="rejected").count()) == 1

    # Opening a form's address is the page, not a 405.
    response = page.goto("/memory/add/")
    assert response.ok and page.url.endswith("/memory/")
    expect(page.get_by_role("heading", level=1)).to_have_text("Your memory")

    # A plain successful post redirects too.
    page.locator("#add-user").fill("Uses helix")
    page.locator("#document-user .memory-add").get_by_role("button", name="Add").click()
    expect(page.locator(".memory-messages")).to_have_text("Added.")
    assert entry_texts(page, "user") == ["Uses vim", "Uses helix"]


def test_a_live_refresh_keeps_the_scroll_position_and_the_focus(new_context):
    alice = make_person("alice", "pw-alice-123")
    seed(alice, memory=tuple(f"Project note number {n} about the build" for n in range(12)))
    context = context_at(new_context, SIZES["phone"])
    page = context.new_page()
    sign_in(page, "alice", "pw-alice-123")
    open_memory_page(page)
    mark_document(page)

    # Focus a control far down the page, without typing.
    correct = "details[id^=correct-] > summary"  # an entry's Correct disclosure (its Expiry one has a summary too)
    focus_target = page.locator("#document-memory .memory-entry").nth(10).locator(correct)
    focus_target.focus()
    focus_target.scroll_into_view_if_needed()
    page.mouse.wheel(0, 150)
    page.wait_for_timeout(200)
    before = page.evaluate("window.scrollY")
    assert before > 500

    token = next(c["value"] for c in context.cookies() if c["name"] == "csrftoken")
    response = context.request.post("/api/memory/operations/", data={"operations": [
        {"target": "memory", "action": "add", "content": "A note added from elsewhere"}]},
        headers={"X-CSRFToken": token, "Referer": page.url})
    assert response.ok

    expect(page.locator("#document-memory .memory-entry-text").last).to_have_text("A note added from elsewhere")
    assert same_document(page), "refreshed in place, not reloaded"
    assert abs(page.evaluate("window.scrollY") - before) <= 2
    expect(page.locator("#document-memory .memory-entry").nth(10).locator(correct)).to_be_focused()


@pytest.mark.parametrize("size", SIZES.values(), ids=SIZES.keys())
def test_history_pages_with_links(new_context, size):
    alice = make_person("alice", "pw-alice-123")
    for number in range(30):
        seed(alice, about=(f"Fact {number}",))
    page = context_at(new_context, size).new_page()
    sign_in(page, "alice", "pw-alice-123")
    open_memory_page(page)

    pages = page.get_by_role("navigation", name="History pages")
    expect(pages).to_contain_text("Page 1 of 2")
    shown = "table.history-table tbody tr" if size["width"] > 700 else ".history-list > li"
    expect(page.locator(shown)).to_have_count(25)
    expect(page.locator(".history-table" if size["width"] <= 700 else ".history-list")).to_be_hidden()

    pages.get_by_role("link", name="Older changes").click()
    expect(page).to_have_url(re.compile(r"\?page=2#history$"))
    expect(page.locator(shown)).to_have_count(5)
    expect(page.get_by_role("navigation", name="History pages")).to_contain_text("Page 2 of 2")
    page.get_by_role("navigation", name="History pages").get_by_role("link", name="Newer changes").click()
    expect(page.locator(shown)).to_have_count(25)
