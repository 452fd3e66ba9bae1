"""Entries that expire (issue 39, part 1): set from the page, the API and the tool; phrases read in the
person's time zone; never in a prompt once past; removed by one locked commit with a version, undoable."""
import json
from datetime import UTC, date, datetime, timedelta

import pytest
from django.core.management import call_command
from django.test import Client
from rest_framework.test import APIClient

from agentmemory import expiry, store, versions
from agentmemory.models import Actor, MemoryEvent, MemoryPreference, MemoryVersion, Outcome
from agentmemory.prompt import compile_memory_prompt
from agentmemory.rules import MemoryValidationError, Operation, Snapshot, apply_operations, render_document, usage
from agentmemory.scope import memory_scope
from agentmemory.tool import handle_memory_update
from agentmemory.turn import MemoryTurn

from .memory_helpers import csrf_token_for, fresh_throttle, seed  # noqa: F401  (fresh_throttle is autouse)

TRIP = "Is in Lisbon for a conference"
DESK = "Uses a standing desk"
FRIDAY = date(2026, 12, 4)  # a Friday


def today() -> str:
    return expiry.today_for(None)


def later(days: int) -> str:
    return (date.fromisoformat(today()) + timedelta(days=days)).isoformat()


def set_expiry_stored(user, entry: str, when: str, target: str = "memory") -> None:
    """Give a stored entry an expiry date, past ones included (trusted code: no `today` check)."""
    store.commit_operations(user_id=user.pk, actor=Actor.SYSTEM,
                            operations=[Operation(target=target, action="replace", match=entry, expires=when)])


# --- the rules and the phrases (pure) -------------------------------------------


@pytest.mark.parametrize(("phrase", "expected"), [
    ("2026-12-11", "2026-12-11"),
    ("today", "2026-12-04"),
    ("tomorrow", "2026-12-05"),
    ("for a week", "2026-12-11"),
    ("for 3 days", "2026-12-07"),
    ("in two weeks", "2026-12-18"),
    ("for a month", "2027-01-04"),
    ("until Sunday", "2026-12-06"),
    ("until Friday", "2026-12-11"),  # said on a Friday: the next one
    ("next Friday", "2026-12-11"),
    ("this week", "2026-12-06"),
    ("next week", "2026-12-13"),
    ("until 11 Dec", "2026-12-11"),
    ("Dec 1", "2027-12-01"),
    ("until I remove it", "never"),
    ("whenever it feels right", "whenever it feels right"),
])
def test_phrases_resolve_against_the_given_day(phrase, expected):
    assert expiry.resolve(phrase, FRIDAY.isoformat()) == expected


@pytest.mark.parametrize(("phrase", "expected"), [
    # Any script's decimal digits are digits (Arabic-Indic, fullwidth, Devanagari) ...
    ("for ٣ days", "2026-12-07"),
    ("for ３ days", "2026-12-07"),
    ("for ३ weeks", "2026-12-25"),
    ("١١ dec ٢٠٢٧", "2027-12-11"),
    # ... other digit characters, runs longer than a count or a year, and a count past the bound are not:
    # the phrase stays as sent, for the rules to refuse with a reason.
    ("for ² days", "for ² days"),
    ("for ① weeks", "for ① weeks"),
    ("²⁰²⁷ dec 11", "²⁰²⁷ dec 11"),
    ("for " + "9" * 5000 + " days", "for " + "9" * 5000 + " days"),
    ("11 dec " + "2" * 5000, "11 dec " + "2" * 5000),
    ("for 3661 days", "for 3661 days"),
    ("for 3660 days", "2036-12-11"),
    ("11 dec 0000", "11 dec 0000"),
])
def test_odd_digits_resolve_or_stay_as_sent(phrase, expected):
    assert expiry.resolve(phrase, FRIDAY.isoformat()) == expected


@pytest.mark.parametrize("phrase", ["for ² days", "for ① weeks", "for " + "9" * 5000 + " days", "²⁰²⁷ dec 11",
                                    "٢٠٢٧-١٢-١١", "for ⅷ days"])
def test_the_api_refuses_an_unreadable_expiry_with_its_error_shape(user, phrase):
    api = APIClient()
    api.force_authenticate(user)
    answer = api.post("/api/memory/operations/", {"operations": [
        {"target": "memory", "action": "add", "content": TRIP, "expires": phrase}]}, format="json")
    assert answer.status_code == 400 and answer["Content-Type"] == "application/json"
    assert answer.json()["code"] == "invalid_expiry" and answer.json()["detail"]
    assert not MemoryEvent.objects.filter(user=user, outcome=Outcome.COMMITTED).exists()


def test_the_day_is_the_persons_time_zone():
    # 23:30 UTC on Friday is already Saturday in Tokyo and still Friday in Los Angeles.
    moment = datetime(2026, 12, 4, 23, 30, tzinfo=UTC)
    assert expiry.today_where("Asia/Tokyo", moment) == "2026-12-05"
    assert expiry.today_where("America/Los_Angeles", moment) == "2026-12-04"
    assert expiry.resolve("until Sunday", expiry.today_where("Asia/Tokyo", moment)) == "2026-12-06"
    assert expiry.today_where("Not/AZone", moment) == "2026-12-04"  # settings.TIME_ZONE (UTC)


def test_rules_validate_the_expiry_and_count_its_note():
    start = Snapshot(memory=(DESK,))
    with pytest.raises(MemoryValidationError) as bad:
        apply_operations(start, [Operation(target="memory", action="add", content=TRIP, expires="soonish")])
    assert bad.value.code == "invalid_expiry"
    with pytest.raises(MemoryValidationError) as past:
        apply_operations(start, [Operation(target="memory", action="add", content=TRIP, expires="2026-12-03")],
                         today="2026-12-04")
    assert past.value.code == "expiry_past"
    with pytest.raises(MemoryValidationError) as gone:
        apply_operations(start, [Operation(target="memory", action="remove", match=DESK, expires="2026-12-05")])
    assert gone.value.code == "remove_with_expiry"
    with pytest.raises(MemoryValidationError) as february:
        apply_operations(start, [Operation(target="memory", action="add", content=TRIP, expires="2027-02-30")])
    assert february.value.code == "invalid_expiry"

    after = apply_operations(start, [Operation(target="memory", action="add", content=TRIP, expires="2026-12-11")],
                             today="2026-12-04")
    assert after.expiry_of("memory", TRIP) == "2026-12-11"
    plain = apply_operations(start, [Operation(target="memory", action="add", content=TRIP)])
    # " (until 2026-12-11)" is 19 characters of the prompt, counted like the entry's own.
    assert usage(after, "memory").used == usage(plain, "memory").used + 19
    with pytest.raises(MemoryValidationError) as full:
        apply_operations(start, [Operation(target="memory", action="add", content=TRIP, expires="2026-12-11")],
                         {"user": 100, "memory": usage(plain, "memory").used})
    assert full.value.code == "over_capacity"

    # A replace keeps the expiry unless it sets one; with expires alone only the date changes; "never" clears.
    reworded = apply_operations(after, [Operation(target="memory", action="replace", match="Lisbon",
                                                  content="Is in Lisbon for a talk")])
    assert reworded.expiry_of("memory", "Is in Lisbon for a talk") == "2026-12-11"
    moved = apply_operations(after, [Operation(target="memory", action="replace", match="Lisbon",
                                               expires="2026-12-20")])
    assert moved.entries("memory") == after.entries("memory") and moved.expiry_of("memory", TRIP) == "2026-12-20"
    cleared = apply_operations(after, [Operation(target="memory", action="replace", match="Lisbon", expires="never")])
    assert cleared.expiry_of("memory", TRIP) is None and cleared.expiry == ()
    assert after.unexpired("2026-12-12").memory == (DESK,)
    assert after.unexpired("2026-12-11").memory == (DESK, TRIP)  # the day itself still holds


# --- the store, the prompt, the turn ---------------------------------------------


def test_an_expiry_is_stored_in_provenance_and_read_by_the_turn(user):
    seed(user, memory_entries=[DESK, TRIP])
    set_expiry_stored(user, TRIP, later(3))
    state = store.load_state(user_id=user.pk)
    assert state.snapshot.expiry_of("memory", TRIP) == later(3)
    assert state.sources["memory"][1].expires == later(3) and state.sources["memory"][0].expires == ""
    row, turn_snapshot = store.load_for_turn(user_id=user.pk)
    assert turn_snapshot.expiry_of("memory", TRIP) == later(3)
    prompt = compile_memory_prompt(snapshot=turn_snapshot)
    assert f"{TRIP} (until {later(3)})" in prompt


@pytest.mark.parametrize("stored, expected", [
    # JSON text that never names "expires" is not decoded: no entry expires.
    ('[{"by": "agent", "at": "2026-12-01T10:00:00+00:00"}, {"by": "user", "at": "2026-12-02T10:00:00+00:00"}]', {}),
    ('[{"by": "agent", "at": "2026-12-01T10:00:00+00:00"}, '
     '{"by": "user", "at": "2026-12-02T10:00:00+00:00", "expires": "2026-12-11"}]', {TRIP: "2026-12-11"}),
    # The key written with an escape still counts (JSON allows it; the text check must not skip it).
    ('[{"by": "agent", "at": "2026-12-01T10:00:00+00:00"}, '
     '{"by": "user", "at": "2026-12-02T10:00:00+00:00", "\\u0065xpires": "2026-12-11"}]', {TRIP: "2026-12-11"}),
    # Decoded already (the ORM's read on SQLite) and the same rules as Source.from_json: a bad date or
    # role, or a list that does not align with the entries, expires nothing.
    ([{"by": "agent", "at": "x"}, {"by": "user", "at": "x", "expires": "2026-12-11"}], {TRIP: "2026-12-11"}),
    ([{"by": "agent", "at": "x"}, {"by": "user", "at": "x", "expires": "next week"}], {}),
    ([{"by": "agent", "at": "x"}, {"by": "intruder", "at": "x", "expires": "2026-12-11"}], {}),
    ([{"by": "user", "at": "x", "expires": "2026-12-11"}], {}),
])
def test_a_turns_read_finds_expiries_in_stored_sources_as_text_or_decoded(stored, expected):
    from agentmemory.store.reads import _snapshot_from_rows

    snapshot = _snapshot_from_rows([("memory", render_document([DESK, TRIP]), 1, stored)])
    assert snapshot.memory == (DESK, TRIP)
    assert snapshot.expiries("memory") == expected


def test_an_expired_entry_never_reaches_a_prompt_even_before_removal(user):
    seed(user, memory_entries=[DESK, TRIP])
    set_expiry_stored(user, TRIP, later(-1))
    turn = MemoryTurn(user_id=user.pk, enabled=True)
    snapshot = turn.read()
    assert snapshot.memory == (DESK,)
    prompt = turn.prompt()
    assert DESK in prompt and TRIP not in prompt
    # Still stored until its removal runs: only the prompt leaves it out.
    assert store.load_snapshot(user_id=user.pk).memory == (DESK, TRIP)


def test_the_tool_sets_an_expiry_from_a_phrase_in_the_persons_day(user):
    seed(user, memory_entries=[DESK])
    MemoryPreference.objects.create(user=user, time_zone="Asia/Tokyo")
    snapshot = store.load_snapshot(user_id=user.pk)
    with memory_scope(user.pk, True, snapshot=snapshot, today="2026-12-04") as request:
        reply = handle_memory_update(json.dumps({"operations": [
            {"target": "memory", "action": "add", "content": TRIP, "expires": "until Sunday"}]}))
        assert reply["success"] is True and reply["results"] == ["added; it expires after 2026-12-06"]
        refused = handle_memory_update(json.dumps({"operations": [
            {"target": "memory", "action": "replace", "match": "standing", "expires": "2026-11-30"}]}))
        assert refused["success"] is False and refused["code"] == "expiry_past"
        [staged] = request.ledger.operations
    assert staged.expires == "2026-12-06"
    result = store.commit_operations(user_id=user.pk, operations=[staged])
    assert result.snapshot.expiry_of("memory", TRIP) == "2026-12-06"


def test_the_api_sets_changes_and_clears_an_expiry(user):
    api = APIClient()
    api.force_authenticate(user)
    seed(user, memory_entries=[DESK])
    answer = api.post("/api/memory/operations/", {"operations": [
        {"target": "memory", "action": "add", "content": TRIP, "expires": "for a week"}]}, format="json")
    assert answer.status_code == 200
    assert answer.json()["documents"]["memory"]["expires"] == [None, later(7)]
    moved = api.post("/api/memory/operations/", {"operations": [
        {"target": "memory", "action": "replace", "match": "Lisbon", "expires": later(2)}]}, format="json")
    assert moved.status_code == 200 and moved.json()["documents"]["memory"]["expires"] == [None, later(2)]
    past = api.post("/api/memory/operations/", {"operations": [
        {"target": "memory", "action": "replace", "match": "Lisbon", "expires": "2001-01-01"}]}, format="json")
    assert past.status_code == 400 and past.json()["code"] == "expiry_past"
    cleared = api.post("/api/memory/operations/", {"operations": [
        {"target": "memory", "action": "replace", "match": "Lisbon", "expires": "never"}]}, format="json")
    assert cleared.json()["documents"]["memory"]["expires"] == [None, None]
    export = api.get("/api/memory/export/").json()
    assert "expires" not in export["documents"]["memory"]["sources"][1]


def test_the_page_sets_and_clears_an_expiry_and_shows_it(user):
    seed(user, memory_entries=[DESK, TRIP])
    page = Client()
    page.force_login(user)
    token = csrf_token_for(page)
    when = later(5)
    saved = page.post("/memory/expiry/", {"csrfmiddlewaretoken": token, "target": "memory", "entry": TRIP,
                                          "preset": "", "date": when, "tz": "Europe/Lisbon"})
    assert saved.status_code == 302
    assert store.load_state(user_id=user.pk).snapshot.expiry_of("memory", TRIP) == when
    assert MemoryPreference.objects.get(user=user).time_zone == "Europe/Lisbon"
    html = page.get("/memory/").content.decode()
    assert f'<time datetime="{when}">Until ' in html
    assert "Kept until " in html and ", then removed" in html  # the History line of the change
    assert "Set to expire: Until" not in html and ": Until" not in html

    cleared = page.post("/memory/expiry/", {"csrfmiddlewaretoken": token, "target": "memory", "entry": TRIP,
                                            "preset": "never", "date": ""})
    assert cleared.status_code == 302
    assert store.load_state(user_id=user.pk).snapshot.expiry == ()
    refused = page.post("/memory/expiry/", {"csrfmiddlewaretoken": token, "target": "memory", "entry": TRIP,
                                            "preset": "", "date": "2001-01-01"},
                        headers={"Accept": "application/json"})
    assert refused.status_code == 400 and refused.json()["message"] == "That date has passed. Choose today or a later date."


# --- removal: the job, the person's read, undo -------------------------------------


def removal_versions(user) -> int:
    return MemoryVersion.objects.filter(user=user, by="expiry").count()


def test_the_removal_job_commits_once_with_a_version_and_undo_brings_the_entry_back(user, other_user):
    seed(user, memory_entries=[DESK, TRIP])
    seed(other_user, memory_entries=[DESK])
    set_expiry_stored(user, TRIP, later(-2))
    set_expiry_stored(other_user, DESK, later(3))  # not yet

    call_command("memory_remove_expired", stdout=open("/dev/null", "w"))
    assert store.load_snapshot(user_id=user.pk).memory == (DESK,)
    assert store.load_snapshot(user_id=other_user.pk).memory == (DESK,)
    assert removal_versions(user) == 1 and removal_versions(other_user) == 0
    [event] = MemoryEvent.objects.filter(user=user, actor=Actor.EXPIRY)
    assert event.outcome == Outcome.COMMITTED
    assert expiry.remove_expired(user_id=user.pk) is None  # nothing left to remove: no second commit
    assert removal_versions(user) == 1

    [change] = [found for found in versions.changes(user_id=user.pk) if found.by == "expiry"]
    versions.undo(user_id=user.pk, change_id=change.id)
    back = store.load_snapshot(user_id=user.pk)
    assert back.memory == (DESK, TRIP)
    assert back.expiry == ()  # its date passed: undoing the removal keeps the entry for good
    assert expiry.remove_expired(user_id=user.pk) is None


def test_the_persons_next_read_removes_what_is_past_and_history_says_so(user):
    seed(user, memory_entries=[DESK, TRIP])
    set_expiry_stored(user, TRIP, later(-1))
    api = APIClient()
    api.force_authenticate(user)
    state = api.get("/api/memory/").json()
    assert state["documents"]["memory"]["entries"] == [DESK]
    assert removal_versions(user) == 1
    page = Client()
    page.force_login(user)
    html = page.get("/memory/").content.decode()
    assert ": it was set to expire" in html and removal_versions(user) == 1


def test_undo_of_an_expiry_change_puts_the_old_date_back(user):
    seed(user, memory_entries=[TRIP])
    set_expiry_stored(user, TRIP, later(4))
    result = store.commit_operations(user_id=user.pk, actor=Actor.USER, operations=[
        Operation(target="memory", action="replace", match=TRIP, expires=later(9))])
    assert store.load_snapshot(user_id=user.pk).expiry_of("memory", TRIP) == later(9)
    [document] = versions.change(user_id=user.pk, change_id=result.change_id).documents
    assert document.expiry_changes == ((TRIP, later(4), later(9)),)
    versions.undo(user_id=user.pk, change_id=result.change_id)
    assert store.load_snapshot(user_id=user.pk).expiry_of("memory", TRIP) == later(4)


def test_an_entry_whose_date_moved_later_is_not_removed(user):
    seed(user, memory_entries=[TRIP])
    set_expiry_stored(user, TRIP, later(-1))
    set_expiry_stored(user, TRIP, later(2))
    assert expiry.remove_expired(user_id=user.pk) is None
    assert store.load_snapshot(user_id=user.pk).memory == (TRIP,)
    assert removal_versions(user) == 0


# --- proposals and the Claude memory files carry it --------------------------------


def test_a_proposal_keeps_and_shows_the_expiry_and_saving_it_sets_it(user):
    from agentmemory import proposals

    proposal_id = proposals.create(user_id=user.pk, operations=[
        Operation(target="memory", action="add", content=TRIP, expires=later(6))])
    api = APIClient()
    api.force_authenticate(user)
    [item] = api.get("/api/memory/proposals/").json()["proposals"]
    assert item["operations"][0]["expires"] == later(6)
    page = Client()
    page.force_login(user)
    html = page.get("/memory/").content.decode()
    assert '<span class="proposal-expiry">(Until ' in html
    proposals.save(user_id=user.pk, proposal_id=proposal_id)
    assert store.load_state(user_id=user.pk).snapshot.expiry_of("memory", TRIP) == later(6)


def test_the_claude_memory_files_show_set_and_clear_an_expiry():
    from agentmemory.integrations.claude_memory import handle_memory_command

    start = Snapshot(memory=(DESK, TRIP), expiry=(("memory", TRIP, "2026-12-11"),))
    with memory_scope(1, True, snapshot=start, today="2026-12-04") as request:
        shown = handle_memory_command({"command": "view", "path": "/memories/notes.md"})
        assert shown.text.splitlines()[1:] == [f"     1\t{DESK}", f"     2\t{TRIP} (until 2026-12-11)"]
        moved = handle_memory_command({"command": "str_replace", "path": "/memories/notes.md",
                                       "old_str": "(until 2026-12-11)", "new_str": "(until 2026-12-20)"})
        assert moved.status == "staged"
        assert request.ledger.snapshot.expiry_of("memory", TRIP) == "2026-12-20"
        assert request.ledger.snapshot.entries("memory") == (DESK, TRIP)
        cleared = handle_memory_command({"command": "str_replace", "path": "/memories/notes.md",
                                         "old_str": " (until 2026-12-20)", "new_str": ""})
        assert cleared.status == "staged" and request.ledger.snapshot.expiry == ()
        dated = handle_memory_command({"command": "insert", "path": "/memories/notes.md", "insert_line": 2,
                                       "insert_text": "On call this week (until 2026-12-06)"})
        assert dated.status == "staged"
        assert request.ledger.snapshot.expiry_of("memory", "On call this week") == "2026-12-06"


@pytest.mark.parametrize("message, spoken", [
    ("I'm on vacation until Friday", True),
    ("We freeze deploys for two weeks", True),
    ("Remember this for now: the staging host is pluto", True),
    ("The release is on 2026-12-20", True),
    ("remember about me: is fluent in Japanese", False),
    ("I use Neovim with LSP", False),
    ("You may keep this: prefers tabs", False),  # "may" is no month
])
def test_a_message_speaks_of_time_or_not(message, spoken):
    assert expiry.mentions_time(message) is spoken


def test_the_model_may_not_set_an_expiry_the_person_did_not_ask_for(user):
    from agentmemory.gate import TurnSources

    plain = TurnSources.from_messages([{"role": "user", "content": "remember about me: is fluent in Japanese"}])
    with memory_scope(user.pk, True, snapshot=Snapshot(), today="2026-12-04", sources=plain) as request:
        reply = handle_memory_update(json.dumps({"operations": [
            {"target": "user", "action": "add", "content": "Is fluent in Japanese", "expires": "2020-01-01"}]}))
        [staged] = request.ledger.operations
    assert reply["success"] is True and "expires was left out" in reply["message"]
    assert staged.expires is None

    timed = TurnSources.from_messages([{"role": "user", "content": "remember until Sunday: standup moves to 10:00"}])
    with memory_scope(user.pk, True, snapshot=Snapshot(), today="2026-12-04", sources=timed) as request:
        reply = handle_memory_update(json.dumps({"operations": [
            {"target": "memory", "action": "add", "content": "Standup is at 10:00", "expires": "until Sunday"}]}))
        [staged] = request.ledger.operations
    assert reply["success"] is True and "left out" not in reply["message"]
    assert staged.expires == "2026-12-06"
