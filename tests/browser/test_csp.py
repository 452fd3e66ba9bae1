"""The pages work under the Content-Security-Policy (django-csp, config/settings.py).

A person signs in, chats (the socket is `connect-src 'self'`), opens the
memory page, the API docs and, as staff, the admin, its review queue (with a
change to judge) and the write-quality dashboard; Chromium reports every
CSP violation on the console ("Refused to ... Content Security Policy"),
and there must be none.
"""
from __future__ import annotations

import pytest
from django.contrib.auth import get_user_model
from playwright.sync_api import expect

from agentmemory import store
from agentmemory.models import Actor
from agentmemory.rules import Operation

from .helpers import make_person, open_memory_page, orm, send, sign_in, wait_for_reply, wait_until_connected

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def test_every_page_works_under_the_content_security_policy(new_context):
    person = make_person("carol", "pw-carol-123")
    orm(lambda: get_user_model().objects.filter(pk=person.pk).update(is_staff=True, is_superuser=True))
    page = new_context().new_page()
    violations: list[str] = []
    page.on("console", lambda message: violations.append(message.text)
            if "Content Security Policy" in message.text else None)

    response = page.goto("/accounts/login/")
    policy = response.headers["content-security-policy"]
    assert "default-src 'self'" in policy and "script-src 'self'" in policy and "'unsafe-inline'" not in policy

    sign_in(page, "carol", "pw-carol-123")
    wait_until_connected(page)
    send(page, "remember: The CSP test runs in Chromium")
    reply = wait_for_reply(page)
    expect(reply.locator(".outcome")).to_contain_text("Memory saved")

    open_memory_page(page)
    expect(page.locator(".memory-entry-text", has_text="The CSP test runs in Chromium")).to_be_visible()

    page.goto("/api/docs/")
    expect(page.locator(".swagger-ui .info .title")).to_contain_text("Agent memory API", timeout=15_000)

    page.goto("/admin/")
    expect(page.locator("#site-name")).to_be_visible()
    page.goto("/admin/auth/user/")
    expect(page.locator("#result_list")).to_be_visible()

    # The review queue shows a change with its entries (their line breaks kept by a stylesheet).
    dora = make_person("dora", "pw-dora-123")
    orm(lambda: store.commit_operations(
        user_id=dora.pk, operations=[Operation(target="memory", action="add", content="Walks to work\non Mondays")],
        actor=Actor.AGENT, origin={"conversation_id": 1, "turn_id": "t1", "model": "small-model"}))
    page.goto("/admin/agentmemory/writereview/queue/")
    entry = page.locator(".review-entries li").first
    expect(entry).to_be_visible()
    assert entry.evaluate("node => getComputedStyle(node).whiteSpace") == "pre-wrap"
    page.goto("/admin/agentmemory/writereview/dashboard/")
    expect(page.locator("#review-figures")).to_be_visible()

    assert violations == []
