"""The memory page: a person sees, corrects, adds, exports and erases their memory."""
import json
import logging
import re
import threading
import time

import pytest
from asgiref.sync import async_to_sync
from channels.layers import get_channel_layer
from django.db import connection, transaction
from django.test import Client, override_settings

from agentmemory import store
from agentmemory.api import MemoryWriteThrottle
from agentmemory.models import Actor, MemoryEvent, Outcome
from agentmemory.notify import group_name
from agentmemory.rules import Operation

from .memory_helpers import (  # noqa: F401  (fresh_throttle is an autouse fixture)
    ATTRIBUTE_ESCAPED,
    ATTRIBUTE_PAYLOAD,
    ATTRIBUTE_RAW,
    SCRIPT_ESCAPED,
    SCRIPT_PAYLOAD,
    document_count,
    entries_of,
    event_values,
    fresh_throttle,
    seed,
)

SENTINEL = "Ozymandias-7731 prefers tabs"


@pytest.fixture
def alice_client(user):
    client = Client()
    client.force_login(user)
    return client


def entry_block(html: str, text: str) -> str:
    """Return the <li> of the entry whose visible text is `text`."""
    for block in re.findall(r'<li class="memory-entry[^"]*">.*?</li>', html, flags=re.S):
        if f'<p class="memory-entry-text">{text}</p>' in block:
            return block
    raise AssertionError("entry not on the page")


def test_memory_page_requires_sign_in(client, user):
    response = client.get("/memory/")

    assert response.status_code == 302
    assert response["Location"].startswith("/accounts/login/")


def test_page_shows_both_documents_each_entry_usage_and_last_update(alice_client, user):
    seed(user, user_entries=["Prefers short code examples.", "Works in UTC+2."],
         memory_entries=["The project uses Django 5.2."])

    response = alice_client.get("/memory/")

    html = response.content.decode()
    assert response.status_code == 200
    assert "USER PROFILE" in html and "AGENT MEMORY" in html
    assert html.count('<li class="memory-entry') == 3
    for text in ("Prefers short code examples.", "Works in UTC+2.", "The project uses Django 5.2."):
        entry_block(html, text)
    user_used = len("Prefers short code examples.\n§\nWorks in UTC+2.")
    assert f"{user_used:,} of 1,375 characters ({user_used * 100 // 1375}%)" in html
    assert f'value="{user_used}"' in html
    assert "Last updated:" in html and "<time datetime=" in html


def test_add_fact_about_me_commits_as_the_person(alice_client, user):
    response = alice_client.post("/memory/add/", {"target": "user", "content": "  Likes dark mode.  "})

    assert response.status_code == 302
    assert entries_of(user)["user"] == ("Likes dark mode.",)
    event = MemoryEvent.objects.get(user=user)
    assert (event.actor, event.outcome, event.actions) == (Actor.USER, Outcome.COMMITTED, {"add": 1})


def test_add_note_to_memory_document(alice_client, user):
    alice_client.post("/memory/add/", {"target": "memory", "content": "Deploys happen on Fridays."})

    assert entries_of(user) == {"user": (), "memory": ("Deploys happen on Fridays.",)}


def test_correct_replaces_exactly_that_entry(alice_client, user):
    seed(user, user_entries=["Uses vim.", "Uses Python 3.10."])

    response = alice_client.post(
        "/memory/correct/", {"target": "user", "entry": "Uses Python 3.10.", "content": "Uses Python 3.11."}
    )

    assert response.status_code == 302
    assert entries_of(user)["user"] == ("Uses vim.", "Uses Python 3.11.")
    assert MemoryEvent.objects.filter(user=user, actor=Actor.USER).get().actions == {"replace": 1}


def test_posted_entry_with_browser_line_endings_still_matches(alice_client, user):
    seed(user, memory_entries=["Line one\nline two"])

    alice_client.post("/memory/remove/", {"target": "memory", "entry": "Line one\r\nline two"})

    assert entries_of(user)["memory"] == ()


def test_remove_deletes_exactly_that_entry(alice_client, user):
    seed(user, user_entries=["Uses vim.", "Uses zsh."])

    alice_client.post("/memory/remove/", {"target": "user", "entry": "Uses zsh."})

    assert entries_of(user)["user"] == ("Uses vim.",)


def test_an_entry_contained_in_a_longer_entry_is_removed_on_its_own(alice_client, user):
    seed(user, user_entries=["Likes tea", "Likes tea with milk"])

    response = alice_client.post("/memory/remove/", {"target": "user", "entry": "Likes tea"})

    assert response.status_code == 302
    assert entries_of(user)["user"] == ("Likes tea with milk",)


def test_stale_entry_never_edits_a_longer_entry_that_contains_it(alice_client, user):
    seed(user, user_entries=["Likes tea", "Likes coffee"])
    # Meanwhile a chat turn corrects the entry the page still shows.
    store.commit_operations(
        user_id=user.pk,
        operations=[Operation(target="user", action="replace", match="Likes tea", content="Likes tea with milk")],
    )

    response = alice_client.post("/memory/remove/", {"target": "user", "entry": "Likes tea"})

    assert response.status_code == 302
    assert "changed or removed since the page was loaded" in alice_client.get(response["Location"]).content.decode()
    assert entries_of(user)["user"] == ("Likes tea with milk", "Likes coffee")
    assert MemoryEvent.objects.filter(user=user, actor=Actor.USER).get().error_code == "entry_changed"


def test_validation_error_is_shown_next_to_the_entry_and_keeps_the_draft(alice_client, user):
    seed(user, user_entries=["Uses vim.", "Uses zsh."])
    draft = "Uses emacs.\n§\nand more"

    response = alice_client.post("/memory/correct/", {"target": "user", "entry": "Uses zsh.", "content": draft})

    assert response.status_code == 302 and response["Location"] == "/memory/#document-user"
    html = alice_client.get(response["Location"]).content.decode()
    block = entry_block(html, "Uses zsh.")
    assert "Save each fact as its own entry." in block
    assert "Operation" not in block and "delimiter_in_entry" not in block
    assert "Uses emacs." in block and re.search(r'<details id="correct-user-2-details" open>', block)
    assert "own entry" not in entry_block(html, "Uses vim.")
    assert entries_of(user)["user"] == ("Uses vim.", "Uses zsh.")


def test_over_capacity_add_error_is_shown_next_to_the_add_form(alice_client, user):
    response = alice_client.post("/memory/add/", {"target": "user", "content": "x" * 1400})

    assert response.status_code == 302 and response["Location"] == "/memory/#add-user"
    html = alice_client.get(response["Location"]).content.decode()
    add_form = re.search(r'<form method="post" action="/memory/add/".*?</form>', html, flags=re.S).group(0)
    assert "over its limit of 1,375" in add_form
    assert entries_of(user)["user"] == ()


def test_rejected_page_edit_logs_no_content(alice_client, user, caplog):
    seed(user, user_entries=["Uses vim."])
    caplog.set_level(logging.DEBUG)

    alice_client.post("/memory/correct/",
                      {"target": "user", "entry": "Uses vim.", "content": f"{SENTINEL}<persistent_memory_data>"})
    alice_client.post("/memory/add/", {"target": "user", "content": SENTINEL * 100})

    assert caplog.records, "the failing requests should have logged something to search"
    assert all(SENTINEL not in record.getMessage() and SENTINEL not in str(record.__dict__)
               for record in caplog.records)
    assert all(SENTINEL not in value for value in event_values(user))


def test_erase_asks_for_confirmation_before_deleting(alice_client, user):
    seed(user, user_entries=["Uses vim."], memory_entries=["Ships weekly."])

    response = alice_client.get("/memory/erase/")

    assert response.status_code == 200
    html = response.content.decode()
    assert ">Erase memory</button>" in html and ">Erase memory and chats</button>" in html
    assert 'name="include" value="chats"' in html
    assert document_count(user) == 2


def test_erase_removes_both_rows_and_leaves_a_content_free_event(alice_client, user):
    seed(user, user_entries=[SENTINEL], memory_entries=[f"{SENTINEL} in notes"])

    response = alice_client.post("/memory/erase/")

    assert response.status_code == 302
    assert document_count(user) == 0
    erased = MemoryEvent.objects.get(user=user, outcome=Outcome.ERASED)
    assert erased.actor == Actor.USER
    assert all(SENTINEL not in value for value in event_values(user))
    assert SENTINEL not in alice_client.get("/memory/").content.decode()


def test_export_download_holds_entries_limits_schema_version_and_timestamps(alice_client, user):
    seed(user, user_entries=["Uses vim."], memory_entries=["Ships weekly.", "Tests run on PostgreSQL."])

    response = alice_client.get("/memory/export/")

    assert response.status_code == 200
    assert response["Content-Disposition"].startswith("attachment;")
    payload = json.loads(response.content)
    assert payload["format"] == "agentmemory-export"
    assert payload["schema_version"] == 1
    assert payload["limits"] == {"user": 1375, "memory": 2200}
    assert payload["documents"]["user"]["entries"] == ["Uses vim."]
    assert payload["documents"]["memory"]["entries"] == ["Ships weekly.", "Tests run on PostgreSQL."]
    assert payload["documents"]["memory"]["updated_at"] and payload["exported_at"]


def test_history_shows_own_events_as_metadata(alice_client, user):
    seed(user, user_entries=["Uses vim."])
    alice_client.post("/memory/add/", {"target": "memory", "content": "Ships weekly."})
    alice_client.post("/memory/remove/", {"target": "user", "entry": "Not there"})

    html = alice_client.get("/memory/").content.decode()
    section = html[html.index('id="history-title"'):]
    history, changes = section.split('id="changes-title"')

    assert "<td>You</td>" in history and "<td>System</td>" in history
    assert "Added 1 entry to your notes" in history
    assert "The entry had changed since the page was loaded, so nothing was saved." in history
    assert "entry_changed" not in history and "1 add" not in history
    # The rows are metadata; what each change did, entry by entry, is listed below them, on the owner's page.
    assert "Ships weekly." not in history and "Uses vim." not in history
    assert "Ships weekly." in changes and "Uses vim." in changes and "Not there" not in changes


def test_script_and_attribute_payloads_are_inert_on_the_page(alice_client, user):
    seed(user, user_entries=[SCRIPT_PAYLOAD], memory_entries=[ATTRIBUTE_PAYLOAD])

    html = alice_client.get("/memory/").content.decode()

    assert SCRIPT_ESCAPED in html and ATTRIBUTE_ESCAPED in html
    assert SCRIPT_PAYLOAD not in html and ATTRIBUTE_RAW not in html
    # The escaped text is also what the forms post back, so the entries stay editable.
    alice_client.post("/memory/remove/", {"target": "memory", "entry": ATTRIBUTE_PAYLOAD})
    assert entries_of(user)["memory"] == ()


def test_page_change_tells_open_chat_sockets(alice_client, user):
    layer = get_channel_layer()
    channel = async_to_sync(layer.new_channel)()
    async_to_sync(layer.group_add)(group_name(user.pk), channel)

    alice_client.post("/memory/add/", {"target": "user", "content": "Likes dark mode."})

    message = async_to_sync(layer.receive)(channel)
    assert message["type"] == "memory.changed"
    assert message["usage"]["user"]["used"] == len("Likes dark mode.")
    assert "Likes dark mode." not in json.dumps(message)


@override_settings(AGENTMEMORY={"ENABLED": False})
def test_page_still_shows_corrects_and_erases_with_memory_switched_off(alice_client, user):
    seed(user, user_entries=["Uses vim."])

    html = alice_client.get("/memory/").content.decode()
    alice_client.post("/memory/correct/", {"target": "user", "entry": "Uses vim.", "content": "Uses helix."})

    assert "not using memory right now" in html and "Uses vim." in html
    assert entries_of(user)["user"] == ("Uses helix.",)
    assert alice_client.post("/memory/erase/").status_code == 302
    assert document_count(user) == 0


def test_page_writes_share_the_memory_writes_budget(alice_client, user, monkeypatch):
    monkeypatch.setattr(MemoryWriteThrottle, "THROTTLE_RATES", {"memory_writes": "2/min"})

    statuses = [alice_client.post("/memory/add/", {"target": "user", "content": f"Fact {n}."},
                                  HTTP_ACCEPT="application/json").status_code
                for n in range(3)]
    plain = alice_client.post("/memory/add/", {"target": "user", "content": "Fact 3."}, follow=True)

    assert statuses == [200, 200, 429]
    assert plain.redirect_chain == [("/memory/#add-user", 302)]
    assert "Too many memory changes in a short time" in plain.content.decode()
    assert entries_of(user)["user"] == ("Fact 0.", "Fact 1.")
    assert alice_client.get("/memory/").status_code == 200


@pytest.mark.django_db(transaction=True)
def test_page_edit_racing_an_agent_commit_keeps_both_changes(postgres_only, make_user):
    person = make_user("racer")
    seed(person, user_entries=["Uses Python 3.10.", "Uses vim."])
    page = Client()
    page.force_login(person)
    results = {}

    def page_edit():
        try:
            results["page"] = page.post("/memory/correct/", {
                "target": "user", "entry": "Uses Python 3.10.", "content": "Uses Python 3.12.",
            }).status_code
        finally:
            connection.close()  # the test client keeps its thread's connection (no request_finished close)

    def agent_commit():
        try:
            store.commit_operations(user_id=person.pk, operations=[
                Operation(target="user", action="add", content="Prefers short answers."),
                Operation(target="memory", action="add", content="The team deploys on Fridays."),
            ])
            results["agent"] = "committed"
        finally:
            connection.close()

    threads = [threading.Thread(target=page_edit), threading.Thread(target=agent_commit)]
    # Hold the person's lock until both writers are queued behind it, so the
    # two commits really overlap; then let them go.
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute("SELECT id FROM auth_user WHERE id = %s FOR UPDATE", [person.pk])
        for thread in threads:
            thread.start()
        _wait_for_lock_waiters(cursor, 2)
    for thread in threads:
        thread.join(timeout=30)

    assert results == {"page": 302, "agent": "committed"}
    assert entries_of(person) == {
        "user": ("Uses Python 3.12.", "Uses vim.", "Prefers short answers."),
        "memory": ("The team deploys on Fridays.",),
    }
    assert MemoryEvent.objects.filter(user=person, outcome=Outcome.COMMITTED).count() == 3


def _wait_for_lock_waiters(cursor, count: int, timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        # Statistics views are frozen for the rest of a transaction unless cleared.
        cursor.execute("SELECT pg_stat_clear_snapshot()")
        cursor.execute(
            "SELECT count(*) FROM pg_stat_activity "
            "WHERE wait_event_type = 'Lock' AND datname = current_database()"
        )
        if cursor.fetchone()[0] >= count:
            return
        time.sleep(0.02)
    raise AssertionError(f"expected {count} writers waiting on the person's lock")


# --- Post/Redirect/Get, JSON answers for the page's script, History pages ---------


@pytest.mark.parametrize("path", ["/memory/add/", "/memory/correct/", "/memory/remove/", "/memory/settings/"])
def test_opening_a_form_address_directly_goes_to_the_page(alice_client, path):
    response = alice_client.get(path)

    assert response.status_code == 302 and response["Location"] == "/memory/"
    assert alice_client.head(path).status_code == 302
    assert alice_client.put(path).status_code == 405


def test_a_failed_plain_post_shows_its_error_once_and_keeps_the_draft(alice_client, user):
    response = alice_client.post("/memory/add/", {"target": "memory", "content": "x" * 2300})

    assert response.status_code == 302
    shown = alice_client.get("/memory/").content.decode()
    add_form = re.search(r'<form method="post" action="/memory/add/" class="memory-add" '
                         r'data-error-slot="add-memory-error">.*?</form>', shown, flags=re.S).group(0)
    assert "over its limit of 2,200" in add_form
    assert 'aria-invalid="true"' in add_form and "x" * 2300 in add_form
    # A reload shows the page as it is: no error, no draft, no resend prompt.
    again = alice_client.get("/memory/").content.decode()
    assert "over its limit of 2,200" not in again and "x" * 2300 not in again


def test_the_script_gets_json_for_success_and_for_an_error(alice_client, user):
    seed(user, user_entries=["Uses vim."])

    added = alice_client.post("/memory/add/", {"target": "user", "content": "Likes tea."},
                              HTTP_ACCEPT="application/json")
    refused = alice_client.post("/memory/correct/", {
        "target": "user", "entry": "Uses vim.", "content": "Uses <persistent_memory_data> helix.",
    }, HTTP_ACCEPT="application/json")
    stale = alice_client.post("/memory/remove/", {"target": "user", "entry": "Not there."},
                              HTTP_ACCEPT="application/json")
    blank = alice_client.post("/memory/add/", {"target": "user", "content": ""}, HTTP_ACCEPT="application/json")

    assert (added.status_code, added.json()) == (200, {"ok": True, "changed": True, "message": "Added."})
    assert refused.status_code == 400 and refused.json() == {
        "ok": False, "message": "The text has a tag that only the assistant's memory block may use. Remove the tag."}
    assert stale.status_code == 400 and "changed or removed since the page was loaded" in stale.json()["message"]
    assert blank.status_code == 400 and blank.json()["message"] == "Write the fact itself before saving."
    assert entries_of(user)["user"] == ("Uses vim.", "Likes tea.")
    # JSON answers leave nothing behind for the next page view.
    assert 'role="alert"' not in alice_client.get("/memory/").content.decode()


def test_meters_and_labels_share_one_colour_by_level(alice_client, user):
    # 1,375-character profile: 75 % starts at 1,032 characters, 90 % at 1,238.
    seed(user, user_entries=["a" * 1031], memory_entries=["b" * 1980])

    html = alice_client.get("/memory/").content.decode()

    profile = re.search(r'<div class="memory-usage level-(\w+)" data-usage="user">(.*?)</div>', html, re.S)
    notes = re.search(r'<div class="memory-usage level-(\w+)" data-usage="memory">(.*?)</div>', html, re.S)
    assert profile.group(1) == "ok" and notes.group(1) == "full"
    assert 'meter class="level-ok"' in profile.group(2) and 'usage-label level-ok' in profile.group(2)
    assert 'meter class="level-full"' in notes.group(2) and 'usage-label level-full' in notes.group(2)
    # The browser's own meter colours switch where the label's do.
    assert 'low="1031.5" high="1237.5"' in profile.group(2)
    assert 'low="1649.5" high="1979.5"' in notes.group(2)


def test_history_pages_through_every_event(alice_client, user):
    for number in range(30):
        seed(user, user_entries=[f"Fact {number}."])

    first = alice_client.get("/memory/").content.decode()
    second = alice_client.get("/memory/?page=2").content.decode()
    beyond = alice_client.get("/memory/?page=99").content.decode()
    junk = alice_client.get("/memory/?page=abc").content.decode()

    def rows(html):
        return html.split('class="history-table"')[1].split("</table>")[0].count("<tr>") - 1

    assert rows(first) == 25 and rows(second) == 5
    assert 'href="?page=2#history" rel="next"' in first and 'rel="prev"' not in first
    assert 'href="?page=1#history" rel="prev"' in second and 'rel="next"' not in second
    assert "Page 2 of 2" in second and 'aria-label="History pages"' in second
    assert rows(beyond) == 5 and rows(junk) == 25


def test_history_selector_pages(user):
    from agentmemory.selectors import recent_events

    for number in range(7):
        seed(user, memory_entries=[f"Note {number}."])

    page = recent_events(user_id=user.pk, page=2, per_page=3)
    last = recent_events(user_id=user.pk, page=5, per_page=3)
    empty = recent_events(user_id=user.pk + 1000)

    assert (len(page), page.number, page.page_count, page.total) == (3, 2, 3, 7)
    assert page.has_previous and page.has_next
    assert (len(last), last.number, last.has_next) == (1, 3, False)
    assert (len(empty), empty.number, empty.page_count, bool(empty)) == (0, 1, 1, False)


@override_settings(AGENTMEMORY={"ENABLED": False})
def test_with_the_deployment_flag_off_neither_page_offers_the_switch(alice_client, user):
    memory_page = alice_client.get("/memory/").content.decode()
    chat_page = alice_client.get("/").content.decode()

    assert 'id="use-memory"' not in memory_page and 'action="/memory/settings/"' not in memory_page
    assert 'id="use-memory"' not in chat_page
    assert 'id="temporary-toggle"' in chat_page  # a temporary chat is still possible


def test_the_switch_form_turns_memory_off_and_redirects_back(alice_client, user):
    from agentmemory import preferences

    page = alice_client.get("/memory/").content.decode()
    assert 'role="switch" id="use-memory"' in page and "checked" in page.split('id="use-memory"')[1][:200]

    off = alice_client.post("/memory/settings/", {"use_memory": ["0", "1"][:1]})
    unsafe = alice_client.post("/memory/settings/", {"use_memory": "1", "next": "https://evil.example/"})
    back = alice_client.post("/memory/settings/", {"use_memory": "0", "next": "/"})
    bad = alice_client.post("/memory/settings/", {"use_memory": "maybe"}, HTTP_ACCEPT="application/json")
    json_on = alice_client.post("/memory/settings/", {"use_memory": ["0", "1"]}, HTTP_ACCEPT="application/json")

    assert (off.status_code, off["Location"]) == (302, "/memory/")
    assert unsafe["Location"] == "/memory/"
    assert back["Location"] == "/"
    assert bad.status_code == 400 and bad.json()["ok"] is False
    assert json_on.json() == {"ok": True, "message": json_on.json()["message"], "use_memory": True,
                              "agent_memory_enabled": True}
    assert preferences.use_memory(user_id=user.pk) is True
    assert list(MemoryEvent.objects.filter(user=user, outcome__in=["memory_on", "memory_off"])
                .order_by("id").values_list("outcome", flat=True)) == ["memory_off", "memory_on", "memory_off",
                                                                       "memory_on"]
