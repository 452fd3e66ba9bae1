"""Tidy up in the browser (issue 36, section 3), on the offline demo model.

A person whose notes repeat themselves presses Tidy up: the assistant's
tidied version appears under "Waiting for you" as one proposal, shown line
by line (here the repeat dropped; the entry it repeats stays as it was),
and nothing changes until Save; Save consolidates in place (the page's
script, no navigation) and the entry kept keeps its own source. Checks on
memory text are bare booleans or positions, so no memory content reaches
test output; the server log holds none of it.
"""
from __future__ import annotations

import pytest
from playwright.sync_api import expect

from agentmemory.models import MemoryProposal

from .helpers import (
    assert_not_logged,
    entry_texts,
    make_person,
    mark_document,
    open_memory_page,
    orm,
    same_document,
    seed,
    sign_in,
    snapshot_of,
)
from .ui_helpers import assert_no_axe_violations

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

VIM = "Edits code in helix-7731 every day."
VIM_AGAIN = "edits code in HELIX-7731 every day"
FRIDAYS = "Deploys the tern-4410 service on Fridays."


def pending_count(user) -> int:
    return orm(lambda: MemoryProposal.objects.filter(user_id=user.pk).count())


def test_tidy_up_then_save(new_context, daphne_server):
    alice = make_person("alice", "pw-alice-123")
    seed(alice, memory=(VIM, FRIDAYS, VIM_AGAIN), about=("Prefers short answers.",))
    page = new_context(bypass_csp=True).new_page()
    sign_in(page, "alice", "pw-alice-123")
    open_memory_page(page)
    mark_document(page)
    expect(page.get_by_role("button", name="Tidy up your profile")).to_have_count(0)  # one entry: nothing to tidy

    page.get_by_role("button", name="Tidy up your notes").click()

    proposal = page.locator(".proposal")
    expect(proposal).to_have_count(1)
    expect(proposal.locator(".proposal-when")).to_contain_text("Proposed by Tidy up on")
    # The line kept is the first entry, unchanged: the proposal only drops the repeat (no replace of an entry
    # by the same text; tidy.py).
    lines = proposal.locator(".proposal-op")
    expect(lines).to_have_count(1)
    expect(lines.nth(0).locator(".proposal-action")).to_have_text("Drop from your notes (repeated or out of date):")
    expect(page.locator("#memory-status")).to_contain_text("nothing changes until you choose Save")
    assert same_document(page), "the page's script posted the form and refreshed in place"
    assert snapshot_of(alice).memory == (VIM, FRIDAYS, VIM_AGAIN) and pending_count(alice) == 1
    assert_no_axe_violations(page, "the memory page with a Tidy up proposal")

    proposal.get_by_role("button", name="Save this proposed change").click()

    expect(page.locator("#memory-status")).to_contain_text("Saved to your memory.")
    expect(page.locator(".proposal")).to_have_count(0)
    assert entry_texts(page, "memory") == [VIM, FRIDAYS]
    assert snapshot_of(alice).memory == (VIM, FRIDAYS) and pending_count(alice) == 0
    kept = page.locator("#document-memory .memory-entry").nth(0)
    expect(kept.locator(".memory-entry-source").first).to_contain_text("Set by the system")  # its own source
    # Two entries are still left, but none repeats: the demo model finds nothing to tidy.
    page.get_by_role("button", name="Tidy up your notes").click()
    expect(page.locator("#tidy-memory-error")).to_contain_text("There is nothing to tidy up here")
    assert same_document(page)
    assert_not_logged(daphne_server, VIM, VIM_AGAIN, FRIDAYS)
