"""Issue 25, part 2 in Chromium: Undo from the chat's "Memory saved" line, and the memory page's History
showing each change entry by entry with Undo this change and Restore this version, at desktop and phone
sizes, with and without JavaScript; axe-core finds nothing.

Checks on memory text are bare booleans, so no memory content reaches test output; the server log is
checked to hold none of it.
"""
from __future__ import annotations

import re

import pytest
from playwright.sync_api import expect

from agentmemory import store
from agentmemory.models import Actor
from agentmemory.rules import Operation

from .helpers import (
    assert_not_logged,
    make_person,
    open_memory_page,
    orm,
    send,
    sign_in,
    snapshot_of,
    wait_for_reply,
    wait_until_connected,
)
from .ui_helpers import SIZES, assert_no_axe_violations, context_at, sideways_overflow, wider_than_viewport

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

FACT = "The ferry to Brindlemoor leaves at 06:40"
LATER = "The ferry to Brindlemoor leaves at 07:15"


def commit(user, *operations, actor=Actor.USER):
    return orm(store.commit_operations, user_id=user.pk, operations=list(operations), actor=actor)


def assert_fits(page, where: str) -> None:
    overflow = sideways_overflow(page)
    assert overflow <= 0, f"{where} scrolls sideways by {overflow}px: {wider_than_viewport(page)}"


@pytest.mark.parametrize("size", SIZES.values(), ids=SIZES.keys())
def test_undo_from_the_chat(new_context, daphne_server, size):
    person = make_person("alice", "pw-alice-123")
    page = context_at(new_context, size, bypass_csp=True).new_page()
    sign_in(page, "alice", "pw-alice-123")
    wait_until_connected(page)

    send(page, f"remember: {FACT}")
    reply = wait_for_reply(page)
    expect(reply.locator(".outcome-committed")).to_contain_text("Memory saved.")
    assert snapshot_of(person).memory == (FACT,)
    undo = reply.get_by_role("button", name="Undo this memory change")
    expect(undo).to_be_visible()
    assert_no_axe_violations(page, "the chat with a saved change")
    if size["width"] < 600:
        assert_fits(page, "the chat with Undo")

    undo.click()

    expect(reply.locator(".outcome-undo-result")).to_have_text("Undone: your memory is as it was before this reply.")
    expect(undo).to_have_count(0)
    assert snapshot_of(person).memory == ()
    assert_no_axe_violations(page, "the chat after an undo")
    assert_not_logged(daphne_server, FACT)


def test_undo_from_the_chat_after_the_entry_changed_says_why(new_context):
    person = make_person("bob", "pw-bob-123")
    page = new_context().new_page()
    sign_in(page, "bob", "pw-bob-123")
    wait_until_connected(page)
    send(page, f"remember: {FACT}")
    reply = wait_for_reply(page)
    commit(person, Operation(target="memory", action="replace", match="06:40", content=LATER))

    reply.get_by_role("button", name="Undo this memory change").click()

    result = reply.locator(".outcome-undo-result")
    expect(result).to_contain_text("Something this change wrote has changed since, so nothing was undone.")
    codes_hidden = all(code not in result.inner_text() for code in ("conflict", "409"))
    assert codes_hidden, "people read sentences, not codes"
    assert snapshot_of(person).memory == (LATER,)


@pytest.mark.parametrize("size", SIZES.values(), ids=SIZES.keys())
def test_history_shows_each_change_and_restores_a_version(new_context, size):
    person = make_person("carol", "pw-carol-123")
    commit(person, Operation(target="memory", action="add", content=FACT), actor=Actor.AGENT)
    commit(person, Operation(target="memory", action="replace", match="06:40", content=LATER))
    page = context_at(new_context, size, bypass_csp=True).new_page()
    sign_in(page, "carol", "pw-carol-123")
    open_memory_page(page)

    changes = page.locator(".change-list > .change")
    expect(changes).to_have_count(2)
    newest, oldest = changes.nth(0), changes.nth(1)
    expect(newest.locator(".change-when")).to_contain_text("You")
    expect(newest.locator(".change-changed")).to_have_count(1)
    shown = newest.locator(".change-changed").inner_text()
    assert "Changed" in shown and FACT in shown and LATER in shown, "the change reads entry by entry"
    expect(oldest.locator(".change-when")).to_contain_text("The assistant, in a chat")
    expect(oldest.locator(".change-added")).to_have_count(1)
    assert_no_axe_violations(page, "History with changes")
    if size["width"] < 600:
        assert_fits(page, "History with changes")

    oldest.get_by_role("button", name="Restore this version").click()

    expect(page.locator("#memory-status")).to_contain_text("Restored: your memory is as that change left it.")
    expect(page.locator("#history-title")).to_be_focused()
    assert snapshot_of(person).memory == (FACT,)
    expect(page.locator(".change-list > .change")).to_have_count(3)
    expect(page.locator(".change-list > .change").first.locator(".change-when")).to_contain_text(
        "restoring an earlier version")
    expect(page.locator("#document-memory .memory-entry-source")).to_contain_text("Restored by you")
    assert_no_axe_violations(page, "History after a restore")


def test_history_undo_works_without_javascript(new_context):
    person = make_person("dave", "pw-dave-123")
    commit(person, Operation(target="memory", action="add", content=FACT), actor=Actor.AGENT)
    page = new_context(java_script_enabled=False).new_page()
    sign_in(page, "dave", "pw-dave-123")
    page.goto("/memory/#history")

    page.locator(".change").first.get_by_role("button", name="Undo this change").click()

    expect(page).to_have_url(re.compile(r"/memory/#history$"))
    expect(page.locator(".memory-messages")).to_contain_text("Undone: your memory is as it was before that change.")
    assert snapshot_of(person).memory == ()
    # Undo again: the entry it would remove is gone; the reason shows beside the change, nothing changes.
    page.locator(".change").nth(1).get_by_role("button", name="Undo this change").click()
    expect(page.locator(".change.has-error .memory-error")).to_contain_text("nothing was undone")
    assert snapshot_of(person).memory == ()
