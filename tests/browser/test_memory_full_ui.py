"""Issue 12, item 3 (the page side): usage from page load, the memory-full
notice, and meters whose colour agrees with their label everywhere.

Green below 75 %, amber below 90 %, red from 90 %: the memory page's meters
(their painted bar, read from a screenshot) and labels, and the chat's usage
line. At 90 % or more, and after a turn refused for capacity, the chat shows
"Your memory is nearly full — review what it keeps" linking to /memory/.
"""
from __future__ import annotations

import re

import pytest
from playwright.sync_api import expect

from .helpers import make_person, open_memory_page, seed, send, sign_in, wait_for_reply, wait_until_connected
from .ui_helpers import SIZES, context_at, css_hue, dominant_hue

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

PROFILE_LIMIT, NOTES_LIMIT = 1375, 2200
HUES = {"ok": "green", "warn": "amber", "full": "red"}


def filler(characters: int, letter: str) -> tuple[str, ...]:
    """Entries of about 200 characters that add up to `characters` (with the 3-character separators)."""
    entries, left = [], characters
    while left > 0:
        size = min(200, left)
        entries.append(f"{letter}{len(entries):03d} " + letter * max(0, size - 5))
        left -= size + 3
    return tuple(entries)


@pytest.mark.parametrize("size", SIZES.values(), ids=SIZES.keys())
def test_a_nearly_full_memory_is_flagged_from_page_load(new_context, size):
    alice = make_person("alice", "pw-alice-123")
    seed(alice, about=filler(int(PROFILE_LIMIT * 0.93), "p"), memory=filler(int(NOTES_LIMIT * 0.80), "n"))
    page = context_at(new_context, size).new_page()
    sign_in(page, "alice", "pw-alice-123")

    usage = page.locator("#memory-usage")
    expect(usage).to_be_visible()
    expect(usage.locator('[data-usage-part="user"]')).to_have_class(re.compile(r"\blevel-full\b"))
    expect(usage.locator('[data-usage-part="memory"]')).to_have_class(re.compile(r"\blevel-warn\b"))
    assert css_hue(page, '#memory-usage [data-usage-part="user"]') == "red"
    assert css_hue(page, '#memory-usage [data-usage-part="memory"]') == "amber"
    notice = page.locator("#memory-full-notice")
    expect(notice).to_be_visible()
    expect(notice).to_contain_text("Your memory is nearly full — review what it keeps")
    # The deployment offers Tidy up (AGENTMEMORY TIDY_MODEL): the notice offers it too.
    expect(notice.get_by_role("link", name="let the assistant tidy it up")).to_have_attribute(
        "href", "/memory/#document-memory")
    link = notice.get_by_role("link", name="review what it keeps")
    expect(link).to_have_attribute("href", "/memory/")
    link.click()
    expect(page.get_by_role("heading", level=1)).to_have_text("Your memory")


def test_usage_shows_from_page_load_without_a_notice_when_there_is_room(new_context):
    alice = make_person("alice", "pw-alice-123")
    seed(alice, about=("Prefers short answers",))
    page = new_context().new_page()
    sign_in(page, "alice", "pw-alice-123")
    wait_until_connected(page)

    expect(page.locator("#memory-usage")).to_contain_text("Profile 1%")
    expect(page.locator('#memory-usage [data-usage-part="user"]')).to_have_class(re.compile(r"\blevel-ok\b"))
    assert css_hue(page, '#memory-usage [data-usage-part="user"]') == "green"
    expect(page.locator("#memory-full-notice")).to_be_hidden()


def test_a_turn_refused_for_capacity_shows_the_notice_in_plain_words(new_context):
    alice = make_person("alice", "pw-alice-123")
    seed(alice, memory=filler(int(NOTES_LIMIT * 0.86), "n"))
    page = new_context().new_page()
    sign_in(page, "alice", "pw-alice-123")
    wait_until_connected(page)
    expect(page.locator("#memory-full-notice")).to_be_hidden()

    send(page, "remember: " + "The release checklist lives in the wiki under ops " * 8)
    reply = wait_for_reply(page)

    expect(page.locator("#memory-full-notice")).to_be_visible()
    expect(page.locator("#memory-full-notice").get_by_role("link", name="review what it keeps")).to_have_attribute("href", "/memory/")
    text = reply.inner_text()
    for internal in ("over_capacity", "Operation 1", "(rejected)", "HTTP"):
        assert internal not in text, "the reply shows an internal word"


@pytest.mark.parametrize("size", SIZES.values(), ids=SIZES.keys())
def test_memory_page_meters_are_painted_in_the_label_colour(new_context, size):
    cases = {"ok": (0.40, 0.10), "warn": (0.80, 0.76), "full": (0.92, 0.99)}
    for level, (profile, notes) in cases.items():
        person = make_person(f"p-{level}", "pw-meter-123")
        seed(person, about=filler(int(PROFILE_LIMIT * profile), "p"), memory=filler(int(NOTES_LIMIT * notes), "n"))
        page = context_at(new_context, size).new_page()
        sign_in(page, f"p-{level}", "pw-meter-123")
        open_memory_page(page)
        for target in ("user", "memory"):
            label = page.locator(f'[data-usage-label="{target}"]')
            expect(label).to_have_class(re.compile(rf"\blevel-{level}\b"))
            assert css_hue(page, f'[data-usage-label="{target}"]') == HUES[level], (level, target)
            painted = dominant_hue(page.locator(f'[data-usage-meter="{target}"]').screenshot())
            assert painted == HUES[level], f"{target} meter at level {level} is painted {painted}"
        page.context.close()
