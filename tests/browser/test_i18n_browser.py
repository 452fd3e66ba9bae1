"""The chat and the memory page in German, in Chromium (issue 41, translations).

A browser whose language is German (Playwright's locale "de-DE", so its
Accept-Language is German) signs in through the German login form, chats with
the offline demo model and saves a fact, and reads German around the reply:
the chat's own words (the JavaScript catalogue), the tool note and the memory
outcome (the server's sentences, in the socket's language). Then the memory
page. On both pages nothing of either catalogue (locale/de and
agentmemory/locale/de) shows in English, and axe-core finds no violation.

The demo model's reply itself is the model's text, not the page's: it and the
people's own messages are left out of the comparison. Failures name catalogue
strings, axe rules and selectors only, never memory content.
"""
from __future__ import annotations

import re

import pytest
from playwright.sync_api import expect

from tests.test_i18n_project import APP_CATALOGUES, PROJECT_CATALOGUES, untranslated

from .helpers import LAST_REPLY, make_person, seed, send, wait_for_reply
from .ui_helpers import assert_no_axe_violations

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

PASSWORD = "pw-hanna-123"
# The page's HTML as it is now, without the texts that are not the page's own words:
# message bodies (the person's and the model's) and memory entries (the person's facts).
PAGE_WORDS_ONLY = """
() => {
  const copy = document.documentElement.cloneNode(true);
  copy.querySelectorAll(".message-body, .memory-entry-text, textarea").forEach((node) => node.remove());
  return copy.outerHTML;
}
"""


def catalogues():
    missing = [path for path in APP_CATALOGUES[:1] if not path.exists()]
    if missing:
        pytest.skip(f"{missing[0].relative_to(missing[0].parents[4])} is missing: "
                    "the reusable app's German catalogue is not there yet")
    return PROJECT_CATALOGUES + [path for path in APP_CATALOGUES if path.exists()]


def sign_in_in_german(page, username: str, password: str) -> None:
    page.goto("/accounts/login/")
    expect(page.locator("html")).to_have_attribute("lang", "de")
    expect(page.get_by_role("heading", level=1)).to_have_text("Anmelden")
    page.get_by_label("Benutzername").fill(username)
    page.get_by_label("Passwort").fill(password)
    page.get_by_role("button", name="Anmelden").click()
    expect(page).to_have_url(re.compile(r"/$"))
    expect(page.locator(".site-user")).to_contain_text(f"Angemeldet als {username}")


def test_the_chat_and_the_memory_page_in_german(new_context):
    paths = catalogues()
    hanna = make_person("hanna", PASSWORD)
    seed(hanna, memory=("Das Projekt nutzt PostgreSQL 16",), about=("Trinkt morgens grünen Tee",))
    page = new_context(locale="de-DE", bypass_csp=True).new_page()
    errors: list[str] = []
    page.on("pageerror", lambda error: errors.append(type(error).__name__))

    sign_in_in_german(page, "hanna", PASSWORD)
    expect(page.locator("#connection")).to_have_text("Verbunden.")  # chat.js, through the JavaScript catalogue
    expect(page.locator("#send")).to_have_text("Senden")
    assert untranslated(page.evaluate(PAGE_WORDS_ONLY), paths) == []
    assert_no_axe_violations(page, "the empty chat in German")

    send(page, "remember: Hanna fährt sonntags Rad an der Elbe")
    reply = wait_for_reply(page)

    expect(reply.locator(".message-role")).to_have_text("Assistent")
    expect(page.locator(".message-user .message-role").last).to_have_text("Sie")
    # One memory line per answer: the outcome (the server's words, in German) took the tool note's place.
    expect(reply.locator('.tool-note[data-tool="memory_update"]')).to_have_count(0)
    outcome = reply.locator(".outcome").first
    expect(outcome).to_be_visible()
    expect(outcome).not_to_contain_text("Memory saved")
    expect(outcome.get_by_role("link")).to_have_text("Auf Ihrer Gedächtnisseite ansehen")
    expect(outcome.get_by_role("button")).to_have_accessible_name("Rückgängig (diese Änderung am Gedächtnis)")
    expect(page.locator("#memory-usage")).to_contain_text("Gedächtnis:")
    assert untranslated(page.evaluate(PAGE_WORDS_ONLY), paths) == []
    assert_no_axe_violations(page, "the chat after a reply in German")

    page.goto("/memory/")
    expect(page.locator("html")).to_have_attribute("lang", "de")
    expect(page.get_by_role("heading", level=1)).to_be_visible()
    expect(page.locator(".site-nav [aria-current=page]")).to_have_text("Gedächtnis")
    page.wait_for_load_state("networkidle")
    assert untranslated(page.evaluate(PAGE_WORDS_ONLY), paths) == []
    assert_no_axe_violations(page, "the memory page in German")
    assert errors == []


def test_the_account_pages_switch_turns_the_chat_german_without_the_browser(new_context):
    make_person("jonas", "pw-jonas-123")
    page = new_context(bypass_csp=True).new_page()  # an English browser
    page.goto("/accounts/login/")
    page.get_by_label("Username").fill("jonas")
    page.get_by_label("Password").fill("pw-jonas-123")
    page.get_by_role("button", name="Sign in").click()
    expect(page.locator("#connection")).to_have_text("Connected.")

    page.goto("/accounts/")
    page.get_by_label("Language of the pages").select_option("de")
    page.get_by_role("button", name="Use this language").click()

    expect(page).to_have_url(re.compile(r"/accounts/$"))
    expect(page.get_by_role("heading", level=1)).to_have_text("Ihr Konto")
    assert_no_axe_violations(page, "the account page in German")
    page.goto("/")
    expect(page.locator("#connection")).to_have_text("Verbunden.")
    send(page, "Hallo")
    expect(page.locator(LAST_REPLY).locator(".message-role")).to_have_text("Assistent")
