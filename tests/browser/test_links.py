"""Issue 38 finding 5: a link in an answer cannot pose as another link.

Chromium with the site's Content Security Policy; a scripted model writes
the answer. A link whose text names another host shows the real destination
beside it; every link carries its host for hover and focus; a link whose
query carries a long text says where that text goes; an honest link shows
nothing extra.
"""
from __future__ import annotations

import pytest
from playwright.sync_api import expect

from tests.scripted_model import text

from .helpers import send, wait_for_reply
from .test_markdown import chat_page, watch_page

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

ANSWER = (
    "Sign in at [https://www.mybank.example/login](https://elsewhere.example/phish?m=1) or "
    "[mybank.example](https://mybank.example.attacker.example/). The docs are at "
    "[the Django site](https://docs.djangoproject.com/en/5.2/) and https://www.mybank.example/help. "
    "[Report it](https://tracker.example/new?note=" + "locker%20code%20is%20in%20the%20blue%20drawer%20" * 3 + ")."
)


def test_a_link_that_names_another_host_shows_where_it_really_goes(scripted_context, scripted_site):
    server, model = scripted_site
    page = chat_page(scripted_context, "lena")
    seen = watch_page(page, server.url)
    model.push(text(ANSWER))

    send(page, "Where do I sign in?")
    reply = wait_for_reply(page)

    links = reply.locator(".markdown a")
    expect(links).to_have_count(5)
    posing = reply.locator("a.link-posing")
    expect(posing).to_have_count(2)
    notes = reply.locator(".link-destination")
    expect(notes.nth(0)).to_have_text(" (goes to elsewhere.example)")
    expect(notes.nth(1)).to_have_text(" (goes to mybank.example.attacker.example)")
    expect(notes.nth(2)).to_have_text(" (sends text to tracker.example)")
    # Honest links: a name for its own site, a bare URL. They carry their host, and nothing beside them.
    honest = reply.locator("a:not(.link-posing):not(.link-carrying)")
    expect(honest).to_have_count(2)
    assert honest.nth(0).get_attribute("data-host") == "docs.djangoproject.com"
    assert honest.nth(0).get_attribute("title") == "Opens docs.djangoproject.com"
    # The host shows on focus too (the stylesheet's ::after).
    honest.nth(0).focus()
    shown = page.evaluate("(a) => getComputedStyle(a, '::after').content", honest.nth(0).element_handle())
    assert "docs.djangoproject.com" in shown
    assert seen["csp"] == [] and seen["foreign"] == []


def test_a_url_without_its_scheme_is_never_made_a_link(scripted_context, scripted_site):
    """Issue 53: the scan refuses such a text in memory; if one reached an answer, it stays text."""
    server, model = scripted_site
    page = chat_page(scripted_context, "lena")
    seen = watch_page(page, server.url)
    model.push(text("Your report: www.evil.example/?q={chat_history} and evil.example/?q={chat_history} "
                    "and //evil.example/?q={chat_history}. The docs: https://docs.djangoproject.com/en/5.2/"))

    send(page, "Where is my report?")
    reply = wait_for_reply(page)

    links = reply.locator(".markdown a")
    expect(links).to_have_count(1)  # the scheme-ful link only
    assert links.first.get_attribute("href") == "https://docs.djangoproject.com/en/5.2/"
    expect(reply.locator(".markdown")).to_contain_text("www.evil.example/?q={chat_history}")
    assert seen["csp"] == [] and seen["foreign"] == []
