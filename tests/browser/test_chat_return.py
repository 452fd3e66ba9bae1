"""Coming back to the chat: the latest conversation reopens, a counter warns near the limit, a favicon.

Chromium against the live daphne server, as in test_end_to_end.py.
"""
from __future__ import annotations

import re

import pytest
from django.conf import settings
from playwright.sync_api import expect

from chat.models import Conversation, Message

from .helpers import make_person, orm, send, sign_in, wait_for_reply, wait_until_connected

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def conversation_with(user, title: str, *texts: str) -> Conversation:
    def create():
        conversation = Conversation.objects.create(user=user, title=title)
        for index, text in enumerate(texts):
            Message.objects.create(conversation=conversation, role="user" if index % 2 == 0 else "assistant",
                                   content=text, memory_outcome="" if index % 2 == 0 else "nothing_to_commit")
        return conversation

    return orm(create)


def test_the_chat_reopens_the_latest_conversation_and_continues_it(new_context):
    alice = make_person("alice", "pw-alice-123")
    conversation_with(alice, "Older talk", "An older question", "An older answer")
    latest = conversation_with(alice, "Latest talk", "What is the plan for Thursday?", "Shipping the release.")
    page = new_context().new_page()

    sign_in(page, "alice", "pw-alice-123")
    wait_until_connected(page)

    expect(page.locator(".message-user .message-body")).to_have_text(["What is the plan for Thursday?"])
    expect(page.locator(".message-assistant .message-body")).to_have_text(["Shipping the release."])
    expect(page.locator(f'#conversation-list li[data-conversation-id="{latest.pk}"]')).to_have_class(
        re.compile(r"\bcurrent\b"))

    send(page, "And on Friday?")
    expect(page.locator(".message-assistant")).to_have_count(2)
    wait_for_reply(page)

    counts = orm(lambda: (Conversation.objects.filter(user=alice).count(),
                          Message.objects.filter(conversation=latest).count()))
    assert counts == (2, 4), "the message went to the reopened conversation, not a new one"


def test_a_person_without_conversations_gets_an_empty_chat(new_context):
    make_person("bob", "pw-bob-123")
    page = new_context().new_page()

    sign_in(page, "bob", "pw-bob-123")
    wait_until_connected(page)

    expect(page.locator("#messages > li")).to_have_count(0)
    expect(page.locator("#conversation-list")).to_contain_text("No conversations yet.")


def test_a_counter_appears_near_the_limit_and_says_when_a_paste_was_cut(new_context):
    limit = settings.CHAT_MAX_MESSAGE_CHARS
    make_person("carol", "pw-carol-123")
    context = new_context()
    context.grant_permissions(["clipboard-read", "clipboard-write"])
    page = context.new_page()
    sign_in(page, "carol", "pw-carol-123")
    wait_until_connected(page)
    box = page.locator("#message")
    counter = page.locator("#message-count")

    box.fill("a" * (limit * 8 // 10))
    expect(counter).to_be_hidden()

    box.fill("a" * (limit - 100))
    expect(counter).to_be_visible()
    expect(counter).to_have_text(f"{limit - 100:,} of {limit:,} characters")
    assert box.get_attribute("aria-describedby") == "message-count"

    box.fill("")
    page.evaluate("text => navigator.clipboard.writeText(text)", "b" * (limit + 500))
    box.focus()
    page.keyboard.press("Control+V")
    expect(counter).to_have_text(f"{limit:,} of {limit:,} characters: the limit. The pasted text was cut to fit.")
    assert len(box.input_value()) == limit

    box.fill("short")
    expect(counter).to_be_hidden()


def test_the_favicon_loads(new_context):
    page = new_context().new_page()

    response = page.request.get("/favicon.ico")

    assert response.status == 200 and response.headers["content-type"] == "image/x-icon"
