"""Issue 12, items 1 and 2 (the page side): the person's memory switch and temporary chats.

The chat header has "Temporary chat" and "Use memory"; the memory page has
"Use memory in chats" (a form that works without JavaScript). A temporary
chat is marked as such, is not listed or stored, and leaves memory alone.
"""
from __future__ import annotations

import re

import pytest
from playwright.sync_api import expect

from agentmemory import preferences
from agentmemory.models import MemoryEvent
from chat.models import Conversation

from .helpers import (
    make_person,
    open_memory_page,
    orm,
    record_frames,
    rows_of,
    seed,
    send,
    sign_in,
    wait_for_reply,
    wait_until_connected,
)
from .ui_helpers import SIZES, assert_no_axe_violations, context_at

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def use_memory_of(user) -> bool:
    return orm(preferences.use_memory, user_id=user.pk)


@pytest.mark.parametrize("size", SIZES.values(), ids=SIZES.keys())
def test_a_temporary_chat_is_marked_not_listed_not_stored_and_leaves_memory_alone(new_context, size):
    alice = make_person("alice", "pw-alice-123")
    seed(alice, memory=("Deploys go through heron-7741",))
    page = context_at(new_context, size, bypass_csp=True).new_page()
    frames = record_frames(page)
    sign_in(page, "alice", "pw-alice-123")
    wait_until_connected(page)

    page.get_by_role("switch", name="Temporary chat").check()
    expect(page.get_by_role("heading", level=1)).to_have_text("Temporary chat")
    expect(page.locator("#temporary-banner")).to_be_visible()
    expect(page.locator("#temporary-banner")).to_contain_text("Not kept in your conversations")
    assert_no_axe_violations(page, "a temporary chat")

    send(page, "remember: The temporary fact is osprey-7742")
    first = wait_for_reply(page)
    expect(first.locator(".outcome")).to_contain_text("Temporary chat")
    send(page, "What do you remember?")
    expect(page.locator(".message-assistant")).to_have_count(2)
    second = wait_for_reply(page)
    # The temporary chat neither reads memory nor stored the fact.
    expect(second.locator(".message-body")).not_to_contain_text("heron-7741")

    assert orm(lambda: Conversation.objects.filter(user=alice).count()) == 0
    assert rows_of(alice) == [("memory", "Deploys go through heron-7741")]
    expect(page.locator("#conversation-list")).to_contain_text("No conversations yet.")
    assert "turn_completed" in frames

    # Leaving it starts an ordinary chat again, which uses memory.
    page.get_by_role("switch", name="Temporary chat").uncheck()
    expect(page.get_by_role("heading", level=1)).to_have_text("Chat")
    expect(page.locator("#temporary-banner")).to_be_hidden()
    expect(page.locator("#messages > li")).to_have_count(0)
    send(page, "What do you remember?")
    expect(wait_for_reply(page).locator(".message-body")).to_contain_text("heron-7741")
    assert orm(lambda: Conversation.objects.filter(user=alice).count()) == 1


@pytest.mark.parametrize("size", SIZES.values(), ids=SIZES.keys())
def test_the_chat_header_switch_turns_memory_off_and_on(new_context, size):
    alice = make_person("alice", "pw-alice-123")
    seed(alice, memory=("Deploys go through heron-7741",))
    page = context_at(new_context, size).new_page()
    sign_in(page, "alice", "pw-alice-123")
    wait_until_connected(page)
    switch = page.get_by_role("switch", name="Use memory")
    expect(switch).to_be_checked()

    switch.uncheck()
    expect(page.locator("#memory-link")).to_contain_text("You turned memory off")
    expect(switch).to_be_enabled()
    assert use_memory_of(alice) is False
    send(page, "What do you remember?")
    reply = wait_for_reply(page)
    expect(reply.locator(".message-body")).not_to_contain_text("heron-7741")

    page.reload()
    wait_until_connected(page)
    expect(page.get_by_role("switch", name="Use memory")).not_to_be_checked()
    page.get_by_role("switch", name="Use memory").check()
    expect(page.locator("#memory-link")).to_contain_text("remembers a few facts")
    assert use_memory_of(alice) is True
    events = orm(lambda: list(MemoryEvent.objects.filter(user=alice, outcome__in=["memory_on", "memory_off"])
                              .order_by("id").values_list("outcome", "actor")))
    assert events == [("memory_off", "user"), ("memory_on", "user")]


def test_the_memory_page_switch_works_with_and_without_javascript(new_context):
    alice = make_person("alice", "pw-alice-123")
    context = new_context()
    page = context.new_page()
    chat = context.new_page()
    sign_in(page, "alice", "pw-alice-123")
    chat.goto("/")
    wait_until_connected(chat)
    open_memory_page(page)

    switch = page.get_by_role("switch", name="Use memory in chats")
    expect(switch).to_be_checked()
    expect(page.locator("#use-memory-save")).to_be_hidden()
    switch.uncheck()
    expect(page.locator("#use-memory-state")).to_contain_text("Off: your chats neither read nor change")
    expect(page.locator(".memory-messages")).to_contain_text("Memory is off")
    assert use_memory_of(alice) is False
    # The open chat hears of it over its socket.
    expect(chat.get_by_role("switch", name="Use memory")).not_to_be_checked()

    plain = new_context(java_script_enabled=False).new_page()
    plain.goto("/accounts/login/")
    plain.get_by_label("Username").fill("alice")
    plain.get_by_label("Password").fill("pw-alice-123")
    plain.get_by_role("button", name="Sign in").click()
    plain.goto("/memory/")
    plain.get_by_role("switch", name="Use memory in chats").check()
    plain.get_by_role("button", name="Save").click()
    expect(plain).to_have_url(re.compile(r"/memory/$"))
    expect(plain.locator(".memory-messages")).to_contain_text("Memory is on")
    expect(plain.get_by_role("switch", name="Use memory in chats")).to_be_checked()
    assert use_memory_of(alice) is True
