"""Entries that expire on the memory page, in Chromium (issue 39): set an expiry under an entry, see it
beside the entry, clear it; at desktop and phone sizes, with the browser's own time zone sent; axe-core
finds nothing. The import (part 2): paste ChatGPT's memories, review each item, move one to the other
document and leave one out, see a refused secret's reason, save; axe-core finds nothing on the review screen.

Checks on memory text are bare booleans, so no memory content reaches test output; the server log is
checked to hold none of it.
"""
from __future__ import annotations

import pytest
from playwright.sync_api import expect

from agentmemory import store
from agentmemory.models import MemoryPreference

from .helpers import assert_not_logged, make_person, open_memory_page, orm, seed, sign_in
from .ui_helpers import SIZES, assert_no_axe_violations, context_at, sideways_overflow, wider_than_viewport

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

TRIP = "Is in Vellmarsh for the harbour survey"


def open_expiry(entry, summary: str) -> None:
    """Open the entry's expiry form (a page refresh may keep it open)."""
    details = entry.locator("details[id^='expiry-']")
    expect(details.locator("summary")).to_contain_text(summary)
    if not details.evaluate("node => node.open"):
        details.locator("summary").click()


def stored_expiry(person) -> str | None:
    return orm(lambda: store.load_state(user_id=person.pk).snapshot.expiry_of("memory", TRIP))


@pytest.mark.parametrize("size", SIZES.values(), ids=SIZES.keys())
def test_setting_and_clearing_an_expiry(new_context, daphne_server, size):
    person = make_person("alice", "pw-alice-123")
    seed(person, memory=(TRIP,))
    page = context_at(new_context, size, bypass_csp=True, timezone_id="Pacific/Auckland").new_page()
    sign_in(page, "alice", "pw-alice-123")
    open_memory_page(page)

    entry = page.locator(".memory-entry").first
    open_expiry(entry, "Expiry")
    entry.get_by_label("Keep this entry").select_option("week")
    assert_no_axe_violations(page, "the memory page with the expiry form open")
    entry.get_by_role("button", name="Save expiry").click()

    expect(page.locator(".memory-entry-expiry")).to_have_count(1)
    expect(page.locator(".memory-entry-expiry")).to_contain_text("Until ")
    week = stored_expiry(person)
    assert week is not None
    assert orm(lambda: MemoryPreference.objects.get(user=person).time_zone) == "Pacific/Auckland"
    assert_no_axe_violations(page, "the memory page with an entry that expires")
    overflow = sideways_overflow(page)
    assert overflow <= 0, f"the memory page scrolls sideways by {overflow}px: {wider_than_viewport(page)}"

    entry = page.locator(".memory-entry").first
    open_expiry(entry, "Change expiry")
    entry.get_by_label("Keep this entry").select_option("never")
    entry.get_by_role("button", name="Save expiry").click()

    expect(page.locator(".memory-entry-expiry")).to_have_count(0)
    assert stored_expiry(person) is None
    assert_no_axe_violations(page, "the memory page after clearing an expiry")
    assert_not_logged(daphne_server, TRIP)


IMPORTED = ("Prefers metric units.", "Is training for a half marathon in April.",
            "Project Quillfeather uses Rust and PostgreSQL.")
IMPORT_SECRET = "My GitHub token is ghp_" + "Zq8Lw3Rt6Yp1Xv4Nm7Kb2Hc5Jd9Fg0Sa1Ut3"


@pytest.mark.parametrize("size", SIZES.values(), ids=SIZES.keys())
def test_the_import_review_screen(new_context, daphne_server, size):
    person = make_person("alice", "pw-alice-123")
    page = context_at(new_context, size, bypass_csp=True).new_page()
    sign_in(page, "alice", "pw-alice-123")
    open_memory_page(page)

    page.get_by_label("Paste it here").fill("\n".join((*IMPORTED, IMPORT_SECRET)))
    page.get_by_role("button", name="Read the import").click()
    expect(page.get_by_role("heading", name="Review your import")).to_be_visible()
    expect(page.locator(".import-items tbody tr")).to_have_count(3)
    expect(page.locator(".import-refused li")).to_have_count(1)
    expect(page.locator(".import-refused")).to_contain_text("a password, token or key")
    assert "ghp_" not in page.content()
    assert_no_axe_violations(page, "the import review screen")
    overflow = sideways_overflow(page)
    assert overflow <= 0, f"the import review scrolls sideways by {overflow}px: {wider_than_viewport(page)}"

    page.get_by_label("Where item 1 goes").select_option("memory")
    page.get_by_label("Where item 2 goes").select_option("skip")
    page.get_by_role("button", name="Save this import").click()
    expect(page.get_by_role("heading", name="Your memory")).to_be_visible()
    documents = orm(lambda: store.load_state(user_id=person.pk).snapshot)
    assert documents.user == () and documents.memory == (IMPORTED[0], IMPORTED[2])
    expect(page.locator(".memory-entry").first).to_contain_text("Imported from ChatGPT")
    assert_no_axe_violations(page, "the memory page after an import")
    for text in (*IMPORTED, IMPORT_SECRET):
        assert_not_logged(daphne_server, text)
