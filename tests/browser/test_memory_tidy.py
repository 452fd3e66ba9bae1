"""Tidy up in the browser (issue 36, section 3), on the offline demo model.

A person whose notes repeat themselves presses Tidy up: the assistant's
tidied version appears under "Waiting for you" as one proposal, the merge
shown line by line, and nothing changes until Save; Save consolidates in
place (the page's script, no navigation) and the merged line says where its
entries came from. Checks on memory text are bare booleans or positions, so
no memory content reaches test output; the server log holds none of it.
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
    lines = proposal.locator(".proposal-op")
    expect(lines).to_have_count(2)
    expect(lines.nth(0)).to_contain_text("Part of a merged line, so removed from your notes")
    expect(lines.nth(1)).to_contain_text("Merge into one line in your notes")
    expect(page.locator("#memory-status")).to_contain_text("nothing changes until you choose Save")
    assert same_document(page), "the page's script posted the form and refreshed in place"
    assert snapshot_of(alice).memory == (VIM, FRIDAYS, VIM_AGAIN) and pending_count(alice) == 1
    assert_no_axe_violations(page, "the memory page with a Tidy up proposal")

    proposal.get_by_role("button", name="Save this proposed change").click()

    expect(page.locator("#memory-status")).to_contain_text("Saved to your memory.")
    expect(page.locator(".proposal")).to_have_count(0)
    assert entry_texts(page, "memory") == [VIM, FRIDAYS]
    assert snapshot_of(alice).memory == (VIM, FRIDAYS) and pending_count(alice) == 0
    merged = page.locator("#document-memory .memory-entry").nth(0)
    expect(merged.locator(".memory-entry-source").first).to_contain_text("Tidied up by the assistant")
    expect(merged.locator(".memory-entry-origins")).to_contain_text("Set by the system")
    # Two entries are still left, but none repeats: the demo model finds nothing to tidy.
    page.get_by_role("button", name="Tidy up your notes").click()
    expect(page.locator("#tidy-memory-error")).to_contain_text("There is nothing to tidy up here")
    assert same_document(page)
    assert_not_logged(daphne_server, VIM, VIM_AGAIN, FRIDAYS)
