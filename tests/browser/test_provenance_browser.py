"""Provenance in the browser (issue 15, part 2): an entry's "From your chat" link
opens the conversation it came from, not merely the latest one.

Chromium against the live daphne server with the offline demo model.
"""
from __future__ import annotations

import re

import pytest
from playwright.sync_api import expect

from chat.models import Conversation, Message

from .helpers import make_person, open_memory_page, orm, send, sign_in, wait_for_reply, wait_until_connected

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

FACT = "The release train leaves on Thursdays"


def newer_conversation(user) -> Conversation:
    def create():
        conversation = Conversation.objects.create(user=user, title="A later talk")
        Message.objects.create(conversation=conversation, role="user", content="Something else entirely")
        return conversation

    return orm(create)


def test_an_entrys_source_link_opens_the_conversation_it_came_from(new_context):
    alice = make_person("alice", "pw-alice-123")
    page = new_context().new_page()
    sign_in(page, "alice", "pw-alice-123")
    wait_until_connected(page)
    send(page, f"remember: {FACT}")
    wait_for_reply(page)
    source_id = orm(lambda: Conversation.objects.filter(user=alice).values_list("pk", flat=True).get())
    newer_conversation(alice)  # the chat alone would now reopen this one

    open_memory_page(page)
    entry = page.locator(".memory-entry", has_text=FACT)
    link = entry.locator(".memory-entry-source a")
    expect(link).to_contain_text("From your chat")
    link.click()

    expect(page).to_have_url(re.compile(rf"/\?conversation={source_id}$"))
    expect(page.locator(".message-user .message-body").first).to_contain_text(FACT)
    expect(page.locator("#conversation-list li.current")).to_have_attribute("data-conversation-id", str(source_id))
