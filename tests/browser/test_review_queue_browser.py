"""The review queue and the write-quality dashboard, in Chromium against the live server (issue 40).

A reviewer holding `review_memory_writes` and `view_memory_content` judges
a sampled change with the keyboard only (each verdict has a key, 1 to 5);
the person then reads on their memory page that support flagged an entry,
and in History that support staff reviewed an entry. The queue and the
dashboard pass axe-core with zero violations, at desktop and phone widths,
with the site's Content-Security-Policy on and no violation of it.
"""
from __future__ import annotations

import pytest
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Permission
from playwright.sync_api import expect

from agentmemory import store
from agentmemory.models import Actor, WriteReview
from agentmemory.rules import Operation

from .helpers import make_person, orm, sign_in
from .ui_helpers import SIZES, assert_no_axe_violations, context_at

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

FLAGGED = "Badger-2290"
PERMISSIONS = ("review_memory_writes", "view_memory_content")


def make_reviewer(username: str, password: str):
    reviewer = make_person(username, password)

    def grant():
        get_user_model().objects.filter(pk=reviewer.pk).update(is_staff=True)
        reviewer.user_permissions.add(*Permission.objects.filter(codename__in=PERMISSIONS))

    orm(grant)
    return reviewer


@pytest.mark.parametrize("size", SIZES.values(), ids=SIZES.keys())
def test_a_reviewer_judges_by_keyboard_and_the_person_is_told(daphne_server, new_context, size):
    alice = make_person("alice", "pw-alice-123")
    orm(lambda: store.commit_operations(
        user_id=alice.pk, operations=[Operation(target="memory", action="add", content=f"Door code {FLAGGED}")],
        actor=Actor.AGENT, origin={"conversation_id": 3, "turn_id": "t1", "model": "small-model"}))
    make_reviewer("support", "pw-support-123")

    staff = context_at(new_context, size).new_page()
    violations: list[str] = []
    staff.on("console", lambda message: violations.append("csp")
             if "Content Security Policy" in message.text else None)
    sign_in(staff, "support", "pw-support-123")
    staff.goto("/admin/agentmemory/writereview/queue/")
    expect(staff.locator(".review-entries")).to_contain_text(FLAGGED)
    expect(staff.locator(".review-facts")).to_contain_text("small-model")
    assert_no_axe_violations(staff, "the review queue")
    staff.keyboard.press("3")  # "Secret or sensitive": its key (review_queue.js; the button also has accesskey 3)
    expect(staff.locator(".messagelist")).to_contain_text("Verdict recorded.")
    expect(staff.locator("#content")).to_contain_text("Nothing left to review this week.")
    verdicts = orm(lambda: list(WriteReview.objects.values_list("verdict", flat=True)))
    assert verdicts == ["sensitive"]

    staff.goto("/admin/agentmemory/writereview/dashboard/")
    expect(staff.locator("#review-figures tbody")).to_contain_text("small-model")
    assert FLAGGED not in staff.content()
    assert_no_axe_violations(staff, "the write-quality dashboard")
    assert violations == [], "the queue and the dashboard keep to the Content-Security-Policy"

    person = context_at(new_context, size).new_page()
    sign_in(person, "alice", "pw-alice-123")
    person.goto("/memory/")
    notice = person.locator(".memory-review-notice")
    expect(notice).to_contain_text("Support flagged an entry as possibly sensitive. Remove it?")
    expect(person.locator(".history-table tbody")).to_contain_text("Support staff reviewed an entry")
    assert_no_axe_violations(person, "the memory page with a review notice")
    notice.get_by_role("button", name="Remove it").click()
    expect(person.locator(".memory-review-notice")).to_have_count(0)
    expect(person.locator("#document-memory")).not_to_contain_text(FLAGGED)
