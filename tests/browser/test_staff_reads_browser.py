"""Staff reads in the admin, in Chromium against the live daphne server (issue 27, item 3).

A support staff member holding the content permission signs in, searches
conversations for words of a message and opens the conversation; the person
then reads in History that support staff searched and viewed their
conversations, without the staff member's name; the server's log (daphne's
access log included) never holds the search term.
"""
from __future__ import annotations

import pytest
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Permission
from playwright.sync_api import expect

from chat.models import Conversation, Message

from .helpers import assert_not_logged, make_person, orm, sign_in

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

TERM = "Marlin-6620"
PERMISSIONS = ("view_conversation", "view_message", "view_memory_content")


def make_reader(username: str, password: str):
    reader = make_person(username, password)

    def grant():
        get_user_model().objects.filter(pk=reader.pk).update(is_staff=True)
        reader.user_permissions.add(*Permission.objects.filter(codename__in=PERMISSIONS))

    orm(grant)
    return reader


def test_the_person_sees_that_support_staff_searched_and_opened_their_conversation(daphne_server, new_context):
    alice = make_person("alice", "pw-alice-123")
    conversation = orm(lambda: Conversation.objects.create(user=alice, title="Boat"))
    orm(lambda: Message.objects.create(conversation=conversation, role="user", content=f"the boat is {TERM}"))
    make_reader("support", "pw-support-123")

    staff = new_context().new_page()
    sign_in(staff, "support", "pw-support-123")
    staff.goto("/admin/chat/conversation/")
    staff.locator("#searchbar").fill(TERM)
    staff.locator("#searchbar").press("Enter")
    expect(staff.locator("#result_list .field-user")).to_have_text(["alice"])
    staff.locator("#result_list th.field-id a").click()
    expect(staff.locator(".field-content")).to_contain_text(TERM)

    person = new_context().new_page()
    sign_in(person, "alice", "pw-alice-123")
    person.goto("/memory/#history")
    rows = person.locator(".history-table tbody")
    expect(rows).to_contain_text("Support staff searched conversations, and yours were among the results")
    expect(rows).to_contain_text("Support staff viewed one of your conversations")
    named = "support" in rows.inner_text().replace("Support staff", "")
    assert not named, "the person reads that support staff looked, not who"
    assert_not_logged(daphne_server, TERM)
