"""Deeper recall in the browser: a fact said in an old conversation, never saved
to memory, is found by a later question through the demo model's
`search: <words>`, and the chat shows the search as a tool note.

Chromium against the live daphne server, as in test_end_to_end.py.
"""
from __future__ import annotations

import pytest
from playwright.sync_api import expect

from agentmemory.models import MemoryDocument
from chat.models import Conversation

from .helpers import (
    assert_not_logged,
    make_person,
    orm,
    send,
    sign_in,
    wait_for_reply,
    wait_until_connected,
)

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

# The code has letters around its digits: the server log holds byte counts and ports, and a bare
# "7391" once matched the memory page's response size there.
CODE = "Q7391X"
FACT = f"My bicycle lock combination is {CODE}"
FACT_WORDS = "bicycle lock combination"


def test_a_fact_from_an_old_conversation_is_found_by_a_later_question(daphne_server, new_context):
    alice = make_person("alice", "pw-alice-123")
    page = new_context().new_page()
    sign_in(page, "alice", "pw-alice-123")
    wait_until_connected(page)

    # An old conversation: the fact is said in plain chat, so nothing goes to memory.
    send(page, FACT)
    wait_for_reply(page)
    assert orm(lambda: MemoryDocument.objects.filter(user=alice).count()) == 0

    # A new conversation asks for it.
    page.locator("#new-conversation").click()
    expect(page.locator(".message-assistant")).to_have_count(0)
    send(page, f"search: {FACT_WORDS}")
    reply = wait_for_reply(page)

    expect(reply.locator(".tool-note")).to_have_text(["Searched your past conversations: 1 result."])
    found = CODE in reply.locator(".message-body").inner_text()
    assert found, "the answer quotes the old conversation"
    assert orm(lambda: Conversation.objects.filter(user=alice).count()) == 2
    assert orm(lambda: MemoryDocument.objects.filter(user=alice).count()) == 0
    assert_not_logged(daphne_server, FACT, CODE)
