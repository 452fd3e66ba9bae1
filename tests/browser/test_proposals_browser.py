"""Issue 15, part 1 (the people-facing side): ask before saving.

With "Ask me before saving" a chat reply's memory change waits as a
proposal: the chat shows it in plain words under the reply with Save,
Discard and an Edit box for added facts, and the memory page lists it under
"Waiting for you", with and without JavaScript. A proposal whose entry
changed meanwhile is refused in plain words and saves nothing. axe-core
finds nothing on either page, at desktop and phone sizes.

Checks on memory text are bare booleans, so no memory content reaches test
output; the server log is checked to hold none of it.
"""
from __future__ import annotations

import pytest
from playwright.sync_api import expect

from agentmemory import preferences
from agentmemory.models import MemoryProposal

from .helpers import (
    assert_not_logged,
    make_person,
    open_memory_page,
    orm,
    rows_of,
    seed,
    send,
    sign_in,
    snapshot_of,
    wait_for_reply,
    wait_until_connected,
)
from .ui_helpers import PHONES, SIZES, assert_no_axe_violations, context_at, sideways_overflow, wider_than_viewport

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

FACT = "The ferry to Brindlemoor leaves at 06:40"
EDITED = "The ferry to Brindlemoor leaves at 07:15"
STALE = "Rebased the heron-7741 branch"

STALE_WORDS = "Your memory changed since this was proposed, so it no longer applies. Nothing was saved"


def ask_first(user) -> None:
    orm(preferences.set_save_mode, user_id=user.pk, save_mode="ask")


def pending_count(user) -> int:
    return orm(lambda: MemoryProposal.objects.filter(user_id=user.pk).count())


def signed_in_chat(new_context, name: str, size: dict | None = None, **options):
    person = make_person(name, f"pw-{name}-123")
    ask_first(person)
    context = context_at(new_context, size, **options) if size else new_context(**options)
    page = context.new_page()
    sign_in(page, name, f"pw-{name}-123")
    wait_until_connected(page)
    return person, page


def propose_in_chat(page, command: str):
    """Send a demo command in ask mode; return the reply once its proposal shows."""
    replies = page.locator(".message-assistant")
    before = replies.count()
    send(page, command)
    expect(replies).to_have_count(before + 1)
    reply = wait_for_reply(page)
    expect(reply.locator(".outcome-proposed")).to_contain_text("nothing is saved until you choose Save")
    expect(reply.get_by_role("button", name="Save")).to_be_visible()
    return reply


def assert_fits(page, where: str) -> None:
    overflow = sideways_overflow(page)
    assert overflow <= 0, f"{where} scrolls sideways by {overflow}px: {wider_than_viewport(page)}"


@pytest.mark.parametrize("size", SIZES.values(), ids=SIZES.keys())
def test_propose_then_save_from_the_chat(new_context, daphne_server, size):
    alice, page = signed_in_chat(new_context, "alice", size, bypass_csp=True)

    reply = propose_in_chat(page, f"remember: {FACT}")

    body_says_proposed = "I proposed adding that to your notes" in reply.locator(".message-body").inner_text()
    assert body_says_proposed, "the demo model says it proposed, not saved"
    line = reply.locator(".proposal-line").first.inner_text()
    assert line == f"Add to your notes: \u201c{FACT}\u201d", "the change in plain words"
    assert snapshot_of(alice).memory == () and pending_count(alice) == 1
    assert_no_axe_violations(page, "the chat with a proposal")
    if size["width"] < 600:
        assert_fits(page, "the chat with a proposal")

    reply.get_by_role("button", name="Save").click()

    result = reply.locator(".proposal-result")
    expect(result).to_contain_text("Saved to your memory.")
    expect(result).to_be_focused()
    expect(result.get_by_role("link", name="See your memory page")).to_have_attribute("href", "/memory/")
    expect(reply.get_by_role("button", name="Save")).to_have_count(0)
    assert snapshot_of(alice).memory == (FACT,) and pending_count(alice) == 0
    assert_no_axe_violations(page, "the chat after saving a proposal")
    assert_not_logged(daphne_server, FACT)


def test_propose_then_discard_from_the_chat_with_the_keyboard(new_context):
    bob, page = signed_in_chat(new_context, "bob")
    reply = propose_in_chat(page, f"remember about me: {FACT}")
    expect(reply.locator(".proposal-line").first).to_contain_text("Add to your profile:")

    discard = reply.get_by_role("button", name="Discard")
    discard.focus()
    page.keyboard.press("Enter")

    expect(reply.locator(".proposal-result")).to_have_text("Discarded; nothing was saved.")
    expect(reply.locator(".proposal-result")).to_be_focused()
    assert rows_of(bob) == [] and pending_count(bob) == 0


def test_propose_edit_then_save(new_context):
    carol, page = signed_in_chat(new_context, "carol")
    reply = propose_in_chat(page, f"remember: {FACT}")

    edit = reply.get_by_role("button", name="Edit")
    expect(edit).to_have_attribute("aria-expanded", "false")
    edit.click()
    expect(edit).to_have_attribute("aria-expanded", "true")
    box = reply.get_by_label("Text to save")
    expect(box).to_be_focused()
    box.fill(EDITED)
    reply.get_by_role("button", name="Save").click()

    expect(reply.locator(".proposal-result")).to_contain_text("Saved to your memory.")
    assert snapshot_of(carol).memory == (EDITED,)


def test_an_emptied_edit_is_refused_in_plain_words(new_context):
    dave, page = signed_in_chat(new_context, "dave")
    reply = propose_in_chat(page, f"remember: {FACT}")
    reply.get_by_role("button", name="Edit").click()
    reply.get_by_label("Text to save").fill("   ")
    reply.get_by_role("button", name="Save").click()

    expect(reply.locator(".proposal-result")).to_have_text("Write the fact itself before saving.")
    expect(reply.get_by_role("button", name="Save")).to_be_enabled()
    assert snapshot_of(dave).memory == () and pending_count(dave) == 1


def test_a_stale_proposal_says_the_memory_changed_and_saves_nothing(new_context):
    erin = make_person("erin", "pw-erin-123")
    seed(erin, memory=(STALE,))
    ask_first(erin)
    page = new_context().new_page()
    sign_in(page, "erin", "pw-erin-123")
    wait_until_connected(page)
    reply = propose_in_chat(page, "correct: heron => Rebased the heron-7742 branch")
    line = reply.locator(".proposal-line").first.inner_text()
    assert line.startswith("Change in your notes: \u201c") and "\u2192" in line

    # Meanwhile the entry is changed on the memory page (another tab).
    other = page.context.new_page()
    open_memory_page(other)
    entry = other.locator("#document-memory .memory-entry").first
    entry.locator("summary", has_text="Correct").click()
    entry.get_by_label("Corrected entry").fill("Merged the heron branch")
    entry.get_by_role("button", name="Save correction").click()
    expect(other.locator("#memory-status")).to_contain_text("Corrected.")
    other.close()

    reply.get_by_role("button", name="Save").click()

    result = reply.locator(".proposal-result")
    expect(result).to_contain_text(STALE_WORDS)
    expect(result).to_be_focused()
    codes_hidden = all(code not in result.inner_text() for code in ("conflict", "no_match", "400"))
    assert codes_hidden, "people read sentences, not codes"
    assert snapshot_of(erin).memory == ("Merged the heron branch",)
    # Saving again cannot help; discarding still can.
    expect(reply.get_by_role("button", name="Save")).to_have_count(0)
    reply.get_by_role("button", name="Discard").click()
    expect(result).to_have_text("Discarded; nothing was saved.")
    assert pending_count(erin) == 0


def test_a_reopened_conversation_offers_a_still_pending_proposal(new_context):
    fay, page = signed_in_chat(new_context, "fay")
    propose_in_chat(page, f"remember: {FACT}")

    page.reload()
    wait_until_connected(page)
    reply = page.locator(".message-assistant").last
    expect(reply.locator(".outcome-proposed")).to_be_visible()
    reply.get_by_role("button", name="Save").click()
    expect(reply.locator(".proposal-result")).to_contain_text("Saved to your memory.")
    assert snapshot_of(fay).memory == (FACT,)


@pytest.mark.parametrize("size", SIZES.values(), ids=SIZES.keys())
def test_the_memory_page_lists_a_pending_proposal_and_saves_it(new_context, size):
    gus, page = signed_in_chat(new_context, "gus", size, bypass_csp=True)
    propose_in_chat(page, f"remember: {FACT}")
    propose_in_chat(page, f"remember about me: {EDITED}")

    open_memory_page(page)
    section = page.locator("#proposals")
    expect(section.get_by_role("heading", name="Waiting for you")).to_be_visible()
    expect(section.locator(".proposal")).to_have_count(2)
    expect(page.get_by_role("radio", name="Ask me before saving")).to_be_checked()
    assert_no_axe_violations(page, "the memory page with pending proposals")
    if size["width"] < 600:
        assert_fits(page, "the memory page with pending proposals")
    page.locator("#proposals details summary").first.click()
    assert_no_axe_violations(page, "the memory page with a proposal's edit box open")

    newest = section.locator(".proposal").first
    expect(newest).to_contain_text("Add to your profile:")
    newest.get_by_role("button", name="Save").click()

    expect(page.locator("#memory-status")).to_contain_text("Saved to your memory.")
    expect(section.locator(".proposal")).to_have_count(1)
    expect(page.locator("#proposals-title")).to_be_focused()
    expect(page.locator("#document-user .memory-entry-text")).to_have_count(1)
    assert snapshot_of(gus).user == (EDITED,)

    section.locator(".proposal").first.get_by_role("button", name="Discard").click()
    expect(page.locator("#memory-status")).to_contain_text("Discarded; nothing was saved.")
    expect(section.locator(".proposal")).to_have_count(0)
    expect(section).to_contain_text("Nothing is waiting for you.")
    assert snapshot_of(gus).memory == () and pending_count(gus) == 0


def test_the_memory_page_saves_an_edited_proposal_without_javascript(new_context):
    hal, page = signed_in_chat(new_context, "hal")
    propose_in_chat(page, f"remember: {FACT}")
    propose_in_chat(page, "remember: Another fact to leave waiting")

    plain = new_context(java_script_enabled=False).new_page()
    sign_in(plain, "hal", "pw-hal-123")
    plain.goto("/memory/")
    proposal = plain.locator("#proposals .proposal").last
    proposal.locator("summary", has_text="Edit").click()
    proposal.get_by_label("Text to save").fill("")
    proposal.get_by_role("button", name="Save").click()

    # Back on the page: the error beside the proposal, the edit box open.
    expect(plain).to_have_url(f"{plain.url.split('#')[0]}#proposal-{orm(_oldest_id, hal)}")
    proposal = plain.locator("#proposals .proposal").last
    expect(proposal.locator(".memory-error")).to_have_text("Write the fact itself before saving.")
    expect(proposal.get_by_label("Text to save")).to_be_visible()
    assert snapshot_of(hal).memory == ()

    proposal.get_by_label("Text to save").fill(EDITED)
    proposal.get_by_role("button", name="Save").click()
    expect(plain.locator("#memory-status")).to_contain_text("Saved to your memory.")
    expect(plain.locator("#proposals .proposal")).to_have_count(1)
    assert snapshot_of(hal).memory == (EDITED,)

    plain.locator("#proposals .proposal").first.get_by_role("button", name="Discard").click()
    expect(plain.locator("#memory-status")).to_contain_text("Discarded; nothing was saved.")
    assert pending_count(hal) == 0 and snapshot_of(hal).memory == (EDITED,)

    # "Save changes" works without JavaScript too.
    plain.get_by_role("radio", name="Save automatically").check()
    plain.locator("#save-mode").get_by_role("button", name="Apply").click()
    expect(plain.locator("#memory-status")).to_contain_text("Changes are saved automatically")
    assert orm(preferences.load, user_id=hal.pk).save_mode == "auto"


def _oldest_id(user) -> int:
    return MemoryProposal.objects.filter(user_id=user.pk).order_by("created_at", "id").values_list("id", flat=True)[0]


def test_the_save_changes_setting_switches_in_place(new_context):
    ida = make_person("ida", "pw-ida-123")
    page = new_context().new_page()
    sign_in(page, "ida", "pw-ida-123")
    open_memory_page(page)
    page.evaluate("window.__sameDocument = true")

    page.get_by_role("radio", name="Ask me before saving").check()

    expect(page.locator("#memory-status")).to_contain_text("asks before saving")
    expect(page.locator("#save-mode-state")).to_contain_text("nothing is saved until you choose Save")
    expect(page.locator("#proposals")).to_contain_text("Nothing is waiting for you.")
    assert page.evaluate("window.__sameDocument === true"), "the page did not navigate"
    assert orm(preferences.load, user_id=ida.pk).save_mode == "ask"


LONG_WORD = "supercalifragilistic-" * 8  # one unbreakable 168-character word


@pytest.mark.parametrize("size", PHONES, ids=[str(size["width"]) for size in PHONES])
def test_proposals_fit_a_phone(new_context, size):
    _, page = signed_in_chat(new_context, "jo", size)
    reply = propose_in_chat(page, f"remember: Path /srv/{LONG_WORD}/releases")
    reply.get_by_role("button", name="Edit").click()
    assert_fits(page, "the chat with a proposal's edit box open")
    box = reply.get_by_role("button", name="Discard").bounding_box()
    assert box["x"] + box["width"] <= size["width"], "Discard is on the screen"

    open_memory_page(page)
    page.locator("#proposals details summary").first.click()
    assert_fits(page, "the memory page with a proposal's edit box open")
