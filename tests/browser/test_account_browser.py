"""The account page in Chromium (config/account.py, templates/registration/account.html).

No axe-core violation at desktop and phone sizes (with a token, and after a
wrong password), nothing wider than a phone's screen (the header's Account
link included), none under the Content-Security-Policy, and "Sign out
everywhere" signs out this browser and another one, whose open chat goes to
the sign-in page.
"""
from __future__ import annotations

import re

import pytest
from playwright.sync_api import expect
from rest_framework.authtoken.models import Token

from .helpers import make_person, orm, sign_in, wait_until_connected
from .ui_helpers import SIZES, assert_no_axe_violations, context_at, sideways_overflow

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


@pytest.mark.parametrize("size", SIZES.values(), ids=SIZES.keys())
def test_the_account_page_has_no_axe_violations(new_context, size):
    person = make_person("alice", "pw-alice-123")
    key = orm(lambda: Token.objects.create(user_id=person.pk).key)
    page = context_at(new_context, size, bypass_csp=True).new_page()
    sign_in(page, "alice", "pw-alice-123")

    page.get_by_role("link", name="Account").click()
    expect(page.get_by_role("heading", name="Your account", level=1)).to_be_visible()
    assert page.locator("h1").count() == 1
    expect(page.locator("#token-state")).to_contain_text(f"ending in {key[-4:]}")
    assert key not in page.content()
    assert_no_axe_violations(page, "the account page with a token")
    assert sideways_overflow(page) <= 0, "the page and its header fit the screen"

    page.get_by_label("Your password").fill("not-my-password")
    page.get_by_role("button", name="Sign out everywhere").click()
    expect(page.get_by_role("alert")).to_have_text("That is not your password, so nothing was changed.")
    assert_no_axe_violations(page, "the account page after a wrong password")


def test_sign_out_everywhere_under_the_csp_ends_this_browser_and_another(new_context):
    person = make_person("bea", "pw-bea-12345")
    orm(lambda: Token.objects.create(user_id=person.pk))
    here = new_context().new_page()
    violations: list[str] = []
    here.on("console", lambda message: violations.append(message.text)
            if "Content Security Policy" in message.text else None)
    elsewhere = new_context().new_page()
    sign_in(elsewhere, "bea", "pw-bea-12345")
    wait_until_connected(elsewhere)

    sign_in(here, "bea", "pw-bea-12345")
    here.goto("/accounts/")
    here.get_by_role("button", name="Revoke this token").click()
    expect(here.get_by_role("status")).to_contain_text("Your API token was revoked")
    expect(here.locator("#token-state")).to_have_text("You have no API token.")

    here.get_by_label("Your password").fill("pw-bea-12345")
    here.get_by_role("button", name="Sign out everywhere").click()
    expect(here).to_have_url(re.compile(r"/accounts/login/"))
    expect(here.get_by_role("status")).to_contain_text("You are signed out everywhere")
    expect(elsewhere).to_have_url(re.compile(r"/accounts/login/"), timeout=10_000)
    assert violations == []
