"""A person in Chromium against a live daphne server: sign in, chat, memory.

Each test signs in through the login form, talks to the offline demo model
over the real socket, and checks both what the page shows and what the
database holds. The fact strings are distinctive so a leak would be found.
"""
from __future__ import annotations

import re

import pytest
from playwright.sync_api import expect

from .helpers import (
    assert_not_logged,
    entry_texts,
    make_person,
    mark_document,
    open_chat,
    open_memory_page,
    record_frames,
    rows_of,
    same_document,
    seed,
    send,
    sign_in,
    snapshot_of,
    wait_for_reply,
    wait_until_connected,
)

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

# Records every distinct text of the newest reply bubble as the page renders
# it, so the test sees the reply grow rather than only its final state.
RECORD_REPLY_TEXTS = """
() => {
  window.__replyTexts = [];
  new MutationObserver(() => {
    const bodies = document.querySelectorAll(".message-assistant .message-body");
    const last = bodies[bodies.length - 1];
    if (!last) return;
    const seen = window.__replyTexts;
    if (seen[seen.length - 1] !== last.textContent) seen.push(last.textContent);
  }).observe(document.getElementById("messages"), {subtree: true, childList: true, characterData: true});
}
"""


def test_signed_in_person_sees_the_reply_stream_in_word_by_word(new_context, screenshot):
    make_person("alice", "pw-alice-123")
    page = new_context().new_page()
    frames = record_frames(page)

    page.goto("/")
    expect(page).to_have_url(re.compile(r"/accounts/login/\?next=/$"))
    page.get_by_label("Username").fill("alice")
    page.get_by_label("Password").fill("wrong-password")
    page.get_by_role("button", name="Sign in").click()
    expect(page.get_by_role("alert")).to_contain_text("did not match")
    sign_in(page, "alice", "pw-alice-123")
    wait_until_connected(page)
    expect(page.locator("#demo-notice")).to_be_visible()

    page.evaluate(RECORD_REPLY_TEXTS)
    send(page, "Hello there")
    expect(page.locator(".message-user")).to_have_text(re.compile("Hello there"))
    reply = wait_for_reply(page)
    final = reply.locator(".message-body").inner_text()
    assert final.startswith("Hello! I do not know anything about you yet.")

    texts = page.evaluate("window.__replyTexts")
    growing = [text for text in texts if text and text != final]
    assert len(growing) >= 3, f"expected the reply to grow in several steps, saw {len(growing)}"
    assert all(final.startswith(text) for text in growing), "every partial reply is a prefix of the final one"
    assert [len(text) for text in growing] == sorted(len(text) for text in growing)
    assert frames.count("delta") >= 3 and frames.index("delta") < frames.index("turn_completed")
    expect(reply.locator(".outcome")).to_contain_text("No memory change")
    screenshot(page, "chat")


def test_remembered_fact_appears_on_the_open_memory_page_then_is_corrected_and_removed(
    new_context, screenshot, daphne_server
):
    fact = "The staging cluster is called heron-7741"
    corrected = "The staging cluster is called osprey-7742"
    alice = make_person("alice", "pw-alice-123")
    context = new_context()
    chat = context.new_page()
    sign_in(chat, "alice", "pw-alice-123")
    wait_until_connected(chat)
    memory = context.new_page()
    memory_frames = record_frames(memory)
    open_memory_page(memory)
    expect(memory.locator("#document-memory .memory-empty")).to_have_text("Nothing stored.")
    chat.bring_to_front()

    send(chat, f"remember: {fact}")

    # No reload here: the open page must pick the change up by itself.
    expect(memory.locator("#document-memory .memory-entry-text")).to_have_text([fact])
    expect(memory.locator("[data-usage-label=memory]")).to_have_text(f"{len(fact)} of 2,200 characters (1%)")
    assert "memory_changed" in memory_frames, "the page learned of the change over its socket"
    reply = wait_for_reply(chat)
    expect(reply.locator(".outcome-committed")).to_contain_text("Memory saved")
    expect(chat.locator("#memory-usage")).to_contain_text("Notes")
    assert rows_of(alice) == [("memory", fact)]
    screenshot(chat, "chat-remembered")
    screenshot(memory, "memory")

    entry = memory.locator("#document-memory .memory-entry").filter(has_text=fact)
    entry.locator("summary", has_text="Correct").click()
    entry.get_by_label("Corrected entry").fill(corrected)
    entry.get_by_role("button", name="Save correction").click()
    expect(memory.locator(".memory-messages")).to_contain_text("Corrected.")
    # The status shows when the server answers; the list follows when the page's refresh lands.
    expect(memory.locator("#document-memory .memory-entry-text")).to_have_text([corrected])
    assert rows_of(alice) == [("memory", corrected)]

    memory.locator("#document-memory .memory-entry").filter(has_text=corrected).get_by_role(
        "button", name="Remove").click()
    expect(memory.locator(".memory-messages")).to_contain_text("Removed.")
    expect(memory.locator("#document-memory .memory-empty")).to_have_text("Nothing stored.")
    assert rows_of(alice) == []
    assert snapshot_of(alice).memory == ()
    assert_not_logged(daphne_server, fact, corrected, "heron-7741", "osprey-7742")


def test_erase_all_asks_for_confirmation_and_then_empties_both_documents(new_context, screenshot):
    alice = make_person("alice", "pw-alice-123")
    seed(alice, about=("Prefers answers under five lines",), memory=("Deploys go through heron-7741",))
    page = new_context().new_page()
    sign_in(page, "alice", "pw-alice-123")
    open_memory_page(page)
    assert entry_texts(page, "user") == ["Prefers answers under five lines"]
    assert entry_texts(page, "memory") == ["Deploys go through heron-7741"]

    page.get_by_role("link", name="Erase everything…").click()
    expect(page.get_by_role("heading", name="Erase your memory?")).to_be_visible()
    expect(page.locator(".memory-page")).to_contain_text("1 entry about you and 1 note of the assistant")
    screenshot(page, "memory-erase-confirm")
    page.get_by_role("link", name="Cancel").click()
    expect(page.get_by_role("heading", name="Your memory")).to_be_visible()
    assert entry_texts(page, "memory") == ["Deploys go through heron-7741"]
    assert len(rows_of(alice)) == 2, "leaving the confirmation must erase nothing"

    page.get_by_role("link", name="Erase everything…").click()
    page.get_by_role("button", name="Erase memory", exact=True).click()
    expect(page.locator(".memory-messages")).to_contain_text("Erased 1 profile entry, 1 notes entry")
    expect(page.locator(".memory-messages")).to_contain_text("Receipt: erased on")
    expect(page.locator(".memory-document .memory-empty")).to_have_text(["Nothing stored.", "Nothing stored."])
    assert rows_of(alice) == []


def test_stop_mid_stream_leaves_memory_unchanged(new_context, screenshot, daphne_server):
    kept = "Backups run nightly at 02:00"
    alice = make_person("alice", "pw-alice-123")
    seed(alice, memory=(kept,))
    context = new_context()
    chat = context.new_page()
    sign_in(chat, "alice", "pw-alice-123")
    wait_until_connected(chat)
    memory = context.new_page()
    memory_frames = record_frames(memory)
    open_memory_page(memory)
    mark_document(memory)
    chat.bring_to_front()

    send(chat, "remember: The release train leaves on Thursdays")
    reply = chat.locator(".message-assistant").last
    # The tool call is staged; the confirmation is streaming when Stop lands.
    expect(reply.locator(".message-body")).to_contain_text("Done")
    chat.locator("#stop").click()

    expect(reply).to_have_class(re.compile(r"\bfailed\b"))
    expect(reply.locator(".outcome-discarded")).to_be_visible()
    assert "completes" not in reply.locator(".message-body").inner_text(), "Stop must cut the reply short"
    expect(chat.locator("#stop")).to_be_disabled()
    screenshot(chat, "chat-stopped")

    assert rows_of(alice) == [("memory", kept)]
    assert snapshot_of(alice).memory == (kept,)
    api = context.request.get("/api/memory/")
    assert api.ok
    assert api.json()["documents"]["memory"]["entries"] == [kept]
    # The socket still works, and the model sees the memory as it was.
    send(chat, "What do you remember?")
    after = wait_for_reply(chat)
    expect(after.locator(".message-body")).to_contain_text(kept)
    expect(after.locator(".message-body")).not_to_contain_text("release train")
    # No memory_changed reached the open memory page, and it never navigated.
    assert "memory_changed" not in memory_frames
    assert same_document(memory)
    assert entry_texts(memory, "memory") == [kept]
    assert_not_logged(daphne_server, kept, "release train")


def test_stop_on_a_plain_chat_says_so_once(new_context, daphne_server):
    make_person("alice", "pw-alice-123")
    chat = new_context().new_page()
    sign_in(chat, "alice", "pw-alice-123")
    wait_until_connected(chat)

    send(chat, "hello there")
    reply = chat.locator(".message-assistant").last
    expect(reply.locator(".message-body")).to_contain_text("Hello")
    chat.locator("#stop").click()

    expect(reply).to_have_class(re.compile(r"\bfailed\b"))
    # Nothing was staged, so nothing is said to be discarded: one line only.
    expect(reply.locator(".message-notes p")).to_have_count(1)
    expect(reply.locator(".outcome")).to_have_count(0)


def test_second_persons_browser_never_shows_the_first_persons_memory(new_context, screenshot, daphne_server):
    fact = "I maintain the heron-7741 billing service"
    alice = make_person("alice", "pw-alice-123")
    bob = make_person("bob", "pw-bob-123")
    alice_context, bob_context = new_context(), new_context()
    bob_memory = bob_context.new_page()
    bob_frames = record_frames(bob_memory)
    sign_in(bob_memory, "bob", "pw-bob-123")
    open_memory_page(bob_memory)
    mark_document(bob_memory)
    alice_chat = alice_context.new_page()
    sign_in(alice_chat, "alice", "pw-alice-123")
    wait_until_connected(alice_chat)

    send(alice_chat, f"remember about me: {fact}")
    expect(wait_for_reply(alice_chat).locator(".outcome-committed")).to_be_visible()
    assert rows_of(alice) == [("user", fact)]
    assert alice_context.request.get("/api/memory/").json()["documents"]["user"]["entries"] == [fact]

    # Bob's open page did not navigate on Alice's commit.
    assert same_document(bob_memory)
    bob_memory.reload()
    expect(bob_memory.locator(".memory-document .memory-empty")).to_have_text(["Nothing stored.", "Nothing stored."])
    leaked = "heron-7741" in bob_memory.content()
    assert not leaked, "the second person's memory page shows the first person's fact"
    response = bob_context.request.get("/api/memory/")
    assert response.ok
    leaked = "heron-7741" in response.text()
    assert not leaked, "the second person's /api/memory/ holds the first person's fact"
    documents = response.json()["documents"]
    assert documents["user"]["entries"] == [] and documents["memory"]["entries"] == []
    screenshot(bob_memory, "memory-second-person")

    bob_chat = bob_context.new_page()
    open_chat(bob_chat)
    send(bob_chat, "What do you remember about me?")
    reply = wait_for_reply(bob_chat)
    expect(reply.locator(".message-body")).to_contain_text("I do not know anything about you yet")
    leaked = "heron-7741" in bob_chat.content()
    assert not leaked, "the second person's chat shows the first person's fact"
    assert rows_of(bob) == []
    # Alice's commit reached none of Bob's sockets, however long he stayed.
    assert "memory_changed" not in bob_frames
    assert_not_logged(daphne_server, fact, "heron-7741")
