"""Support staff review what the assistant saved (issue 40): the sample, the queue, verdicts, the figures.

Changes are made through the store as the assistant (actor agent, with its
model) or the person; the admin is driven over HTTP. Assertions compute
booleans first, so a failure never prints an entry.
"""
import io
import json
from datetime import date, datetime, timedelta
from datetime import timezone as dt_timezone

import pytest
from django.core.management import call_command
from django.test import Client
from django.utils import timezone

from agentmemory import preferences, review, services, store
from agentmemory.conf import memory_settings
from agentmemory.models import Actor, MemoryEvent, Outcome, Verdict, Viewed, WriteReview
from agentmemory.rules import Operation

from .memory_helpers import entries_of, fresh_throttle  # noqa: F401  (fresh_throttle is autouse)
from .test_staff_privacy import staff_client

QUEUE = "/admin/agentmemory/writereview/queue/"
DASHBOARD = "/admin/agentmemory/writereview/dashboard/"
REVIEW = ("agentmemory", "review_memory_writes")
CONTENT = ("agentmemory", "view_memory_content")
SECRET = "Plover-4471"


def agent_saves(person, text, *, model="model-a", target="memory", source_intent="explicit") -> int:
    result = store.commit_operations(user_id=person.pk, operations=[Operation(target=target, action="add",
                                                                              content=text)],
                                     actor=Actor.AGENT, origin={"conversation_id": 7, "turn_id": "t", "model": model,
                                                                "source_intent": source_intent})
    return result.change_id


def this_week() -> date:
    return review.week_of(timezone.now())


def shown_to(staff, change) -> None:
    """What the queue does when its page shows `change` to `staff`."""
    review.record_showing(candidate=review.eligible(change), week=this_week(), staff=staff)


def test_the_assistants_batches_name_their_model_and_policy(user):
    change = agent_saves(user, "Works in Lisbon")
    services.add_entry(user_id=user.pk, target="user", content="Likes tea")
    agent, person = (MemoryEvent.objects.get(pk=change),
                     MemoryEvent.objects.filter(user=user, actor=Actor.USER).get())
    assert (agent.model, agent.policy_version) == ("model-a", memory_settings().policy_version)
    assert (person.model, person.policy_version) == ("", "")
    # The source message's role in the turn, a code and never words; only for the assistant's batches.
    assert (agent.source_intent, person.source_intent) == ("explicit", "")
    forged = agent_saves(user, "Plays chess", source_intent="remember: Plays chess")
    assert MemoryEvent.objects.get(pk=forged).source_intent == ""


def test_the_queue_shows_the_source_messages_role_and_not_its_words(user, make_user):
    agent_saves(user, "Works in Lisbon", source_intent="statement")
    _, judge = staff_client(make_user, "judge", REVIEW, CONTENT)
    shown = judge.get(QUEUE).content.decode()
    assert "<dt>The person's message</dt><dd>Said something, without asking to remember it</dd>" in shown


def test_only_the_assistants_changes_of_people_who_allow_review_are_sampled(user, other_user, make_user):
    mine = agent_saves(user, "Works in Lisbon")
    services.add_entry(user_id=user.pk, target="user", content="Likes tea")  # the person's own: never sampled
    excluded = agent_saves(other_user, "Plays chess")
    review.set_allow_review(user_id=other_user.pk, allow=False)
    off = make_user("carol", "pw-carol-123")
    switched_off = agent_saves(off, "Sails on weekends")
    preferences.set_use_memory(user_id=off.pk, use_memory=False)
    drawn = {candidate.event_id for candidate in review.sample(this_week())}
    assert drawn == {mine}
    assert excluded not in drawn and switched_off not in drawn
    staff = make_user("judge", "pw-judge-123", is_staff=True)
    for change in (excluded, switched_off):
        with pytest.raises(review.NotSampled):
            review.record_verdict(event_id=change, verdict=Verdict.KEEP, staff=staff)
    assert not WriteReview.objects.exists()


def test_the_sample_is_reproducible_from_its_seed_bounded_and_stratified(user, settings):
    big = [agent_saves(user, f"Big model fact {n}", model="big") for n in range(20)]
    small = [agent_saves(user, f"Small model fact {n}", model="small") for n in range(2)]
    week = this_week()
    first = review.sample(week, seed="s1", size=6)
    assert first == review.sample(week, seed="s1", size=6)
    assert [c.event_id for c in review.sample(week, seed="s2", size=6)] != [c.event_id for c in first]
    chosen = [c.event_id for c in first]
    assert len(chosen) == 6 and len(set(chosen)) == 6
    assert set(small) <= set(chosen)  # the small stratum is not drowned: both of its changes
    assert len(set(chosen) & set(big)) == 4
    settings.AGENTMEMORY = {**settings.AGENTMEMORY, "REVIEW_SAMPLE_PER_WEEK": 3}
    assert len(review.sample(week, seed="s1")) == 3
    assert review.sample(week - timedelta(days=7), seed="s1") == []  # another week's population


def test_review_needs_its_permission_and_content_needs_view_memory_content_as_well(user, make_user):
    change = agent_saves(user, SECRET)
    _, nobody = staff_client(make_user, "nobody", CONTENT)
    assert nobody.get(QUEUE).status_code == 403
    assert nobody.get(DASHBOARD).status_code == 403
    assert nobody.post(QUEUE, {"change": change, "verdict": "keep"}).status_code == 403
    _, reviewer = staff_client(make_user, "reviewer", REVIEW)
    page = reviewer.get(QUEUE)
    assert page.status_code == 200 and reviewer.get(DASHBOARD).status_code == 200
    assert SECRET not in page.content.decode()
    assert not MemoryEvent.objects.filter(user=user, outcome=Outcome.VIEWED).exists()
    assert reviewer.post(QUEUE, {"change": change, "verdict": "keep"}).status_code == 403
    assert not WriteReview.objects.exists()


def test_each_view_of_the_queue_is_audited_and_the_person_reads_it_in_history(user, make_user):
    change = agent_saves(user, SECRET)
    _, judge = staff_client(make_user, "judge", REVIEW, CONTENT)
    for _ in range(2):
        shown = judge.get(QUEUE).content.decode()
        assert SECRET in shown and 'accesskey="3"' in shown
    views = list(MemoryEvent.objects.filter(user=user, outcome=Outcome.VIEWED)
                 .values_list("viewed", "staff_username", "targets"))
    assert views == [(Viewed.REVIEW, "judge", {"memory": 1})] * 2
    person = Client()
    person.force_login(user)
    history = person.get("/memory/").content.decode()
    assert "Support staff reviewed an entry" in history
    judge.post(QUEUE, {"change": change, "verdict": "keep", "week": this_week().isoformat()})
    verdict = WriteReview.objects.get()
    assert (verdict.event_id, verdict.verdict, verdict.model, verdict.staff_username) == (
        change, "keep", "model-a", "judge")
    assert "Nothing left to review this week." in judge.get(QUEUE).content.decode()


def test_a_sensitive_verdict_notifies_the_person_and_does_not_edit_memory(user, make_user):
    change = agent_saves(user, SECRET)
    _, judge = staff_client(make_user, "judge", REVIEW, CONTENT)
    before = entries_of(user)
    judge.get(QUEUE)  # the change is shown before it is judged
    judge.post(QUEUE, {"change": change, "verdict": "sensitive"})
    assert entries_of(user) == before
    person = Client()
    person.force_login(user)
    page = person.get("/memory/").content.decode()
    assert "Support flagged an entry as possibly sensitive. Remove it?" in page
    notice = WriteReview.objects.get()
    assert notice.notice_open
    person.post(f"/memory/review-notices/{notice.pk}/", {"answer": "remove"})
    assert SECRET not in entries_of(user)["memory"]
    notice.refresh_from_db()
    assert not notice.notice_open
    assert "Support flagged" not in person.get("/memory/").content.decode()
    figures = review.dashboard()["rows"]
    assert [(row["sensitive"], row["reviewed"]) for row in figures] == [(1, 1)]


def test_the_person_can_keep_a_flagged_entry_and_turn_review_off(user, make_user):
    change = agent_saves(user, SECRET)
    staff = make_user("judge", "pw-judge-123", is_staff=True)
    shown_to(staff, change)
    notice = review.record_verdict(event_id=change, verdict=Verdict.SENSITIVE, staff=staff)
    person = Client()
    person.force_login(user)
    person.post(f"/memory/review-notices/{notice.pk}/", {"answer": "keep"})
    assert SECRET in entries_of(user)["memory"]
    assert not WriteReview.objects.get().notice_open
    assert review.allows_review(user_id=user.pk)  # on by default
    person.post("/memory/review-setting/", {"allow_review": "0"})
    assert not review.allows_review(user_id=user.pk)
    agent_saves(user, "Works in Lisbon")
    assert review.sample(this_week()) == []


def test_verdicts_are_exported_and_erased_with_the_person(user, make_user):
    change = agent_saves(user, SECRET)
    staff = make_user("judge", "pw-judge-123", is_staff=True)
    shown_to(staff, change)
    review.record_verdict(event_id=change, verdict=Verdict.WRONG_DOCUMENT, staff=staff)
    person = Client()
    person.force_login(user)
    exported = json.loads(person.get("/memory/export/").content)
    assert [(row["change_id"], row["verdict"]) for row in exported["reviews"]] == [(change, "wrong_document")]
    assert "judge" not in json.dumps(exported["reviews"])
    services.erase_memory(user_id=user.pk, actor=Actor.USER)
    assert not WriteReview.objects.filter(user=user).exists()


WEEK = date(2026, 11, 2)  # a Monday


def _event(person, outcome, *, model="m", policy="v3", error_code="", when=None) -> MemoryEvent:
    event = MemoryEvent.objects.create(user=person, actor=Actor.AGENT, outcome=outcome, model=model,
                                       policy_version=policy, error_code=error_code)
    MemoryEvent.objects.filter(pk=event.pk).update(
        created_at=when or datetime(2026, 11, 4, 12, tzinfo=dt_timezone.utc))
    return event


@pytest.fixture
def known_verdicts(user, make_user):
    """Week of 2 Nov 2026, model m, policy v3: 10 verdicts, 8 worth keeping (Wilson 95 %: 0.4902-0.9433);
    20 batches: 10 committed, 2 over capacity, 3 unchanged + 1 replace_duplicate, 4 proposed."""
    staff = make_user("judge", "pw-judge-123", is_staff=True)
    verdicts = [Verdict.KEEP] * 8 + [Verdict.SENSITIVE, Verdict.WRONG_CONTENT]
    for verdict in verdicts:
        event = _event(user, Outcome.COMMITTED)
        WriteReview.objects.create(user=user, event=event, verdict=verdict, week=WEEK, model="m",
                                   policy_version="v3", staff=staff, staff_username="judge")
    for _ in range(2):
        _event(user, Outcome.REJECTED, error_code="over_capacity")
    for _ in range(3):
        _event(user, Outcome.UNCHANGED)
    _event(user, Outcome.REJECTED, error_code="replace_duplicate")
    for _ in range(4):
        _event(user, Outcome.PROPOSED)
    _event(user, Outcome.COMMITTED, model="other", when=datetime(2026, 11, 9, 1, tzinfo=dt_timezone.utc))
    MemoryEvent.objects.create(user=user, actor=Actor.USER, outcome=Outcome.COMMITTED)  # not the assistant's


def test_the_dashboard_figures_match_a_fixture_of_known_values(known_verdicts):
    rows = review.dashboard(weeks=[WEEK])["rows"]
    assert len(rows) == 1
    row = rows[0]
    assert (row["week"], row["model"], row["policy_version"]) == ("2026-11-02", "m", "v3")
    assert row["verdicts"] == {"keep": 8, "not_worth": 0, "sensitive": 1, "wrong_document": 0, "wrong_content": 1}
    assert row["precision"] == 0.8
    assert row["precision_interval"] == [0.4902, 0.9433]
    assert row["batches"] == 20
    assert (row["over_capacity_rate"], row["duplicate_rate"], row["question_rate"]) == (0.1, 0.2, 0.2)
    everything = review.dashboard()["rows"]
    assert [(r["week"], r["model"], r["reviewed"], r["precision"]) for r in everything] == [
        ("2026-11-02", "m", 10, 0.8), ("2026-11-09", "other", 0, None)]


def test_wilson_interval_edges():
    assert review.wilson(0, 0) is None
    low, high = review.wilson(0, 10)
    assert low == 0.0 and round(high, 4) == 0.2775
    low, high = review.wilson(10, 10)
    assert round(low, 4) == 0.7225 and round(high, 4) == 1.0


def test_the_command_prints_the_dashboards_json_and_no_content(known_verdicts, user, make_user):
    output = io.StringIO()
    call_command("memory_review_dashboard", "--week", "2026-11-05", stdout=output)
    printed = json.loads(output.getvalue())
    assert printed == json.loads(json.dumps(review.dashboard(weeks=[WEEK])))
    _, reviewer = staff_client(make_user, "reviewer", REVIEW)
    html = reviewer.get(DASHBOARD).content.decode()
    assert "0.4902" in html and "0.9433" in html


# --- issue 53: a verdict needs a showing; concurrent verdicts ----------------------------------------


def test_a_verdict_is_taken_only_on_a_change_the_queue_showed_that_reviewer(user, other_user, make_user):
    shown = agent_saves(user, SECRET)
    never_shown = agent_saves(other_user, "Plays chess")
    judge, judge_client = staff_client(make_user, "judge", REVIEW, CONTENT)
    _, bystander = staff_client(make_user, "bystander", REVIEW, CONTENT)
    page = judge_client.get(QUEUE).content.decode()
    first = review.next_candidate(this_week()).event_id
    assert f'name="change" value="{first}"' in page
    other = never_shown if first == shown else shown
    # Another person's change the page never showed, and the shown one by a reviewer who never saw it.
    refused = [judge_client.post(QUEUE, {"change": other, "verdict": "sensitive"}),
               bystander.post(QUEUE, {"change": first, "verdict": "sensitive"})]
    assert [answer.status_code for answer in refused] == [403, 403]
    assert all("was not shown to you" in answer.content.decode() for answer in refused)
    assert not WriteReview.objects.exists()
    person = Client()
    person.force_login(user if other == shown else other_user)
    assert "Support flagged" not in person.get("/memory/").content.decode()
    assert judge_client.post(QUEUE, {"change": first, "verdict": "keep"}).status_code == 302
    assert list(WriteReview.objects.values_list("event_id", "staff_id")) == [(first, judge.pk)]
    again = judge_client.post(QUEUE, {"change": first, "verdict": "sensitive"})
    assert again.status_code == 409 and "already has a verdict" in again.content.decode()
    assert WriteReview.objects.get().verdict == "keep"


def test_only_a_change_drawn_in_the_weeks_sample_can_be_shown(user, settings, make_user):
    changes = [agent_saves(user, f"Fact number {n}") for n in range(3)]
    settings.AGENTMEMORY = {**settings.AGENTMEMORY, "REVIEW_SAMPLE_PER_WEEK": 1}
    drawn = {candidate.event_id for candidate in review.sample(this_week())}
    undrawn = next(change for change in changes if change not in drawn)
    staff = make_user("judge", "pw-judge-123", is_staff=True)
    with pytest.raises(review.NotSampled):
        shown_to(staff, undrawn)
    with pytest.raises(review.NotShown):
        review.record_verdict(event_id=undrawn, verdict=Verdict.SENSITIVE, staff=staff)
    assert not WriteReview.objects.exists()


@pytest.mark.parametrize("posted", [{"change": "²", "verdict": "keep"}, {"change": "①", "verdict": "keep"},
                                    {"change": "9" * 5000, "verdict": "keep"}, {"change": "-1", "verdict": "keep"},
                                    {"verdict": "keep"}, {"change": "shown", "verdict": "nope"}])
def test_odd_review_forms_are_refused_with_a_sentence(user, make_user, posted):
    change = agent_saves(user, SECRET)
    _, judge = staff_client(make_user, "judge", REVIEW, CONTENT)
    judge.get(QUEUE)
    posted = {**posted, "change": str(change)} if posted.get("change") == "shown" else posted
    answer = judge.post(QUEUE, posted)
    assert answer.status_code in (400, 404) and not WriteReview.objects.exists()
    assert "here is the next one" in answer.content.decode() or "choose one of the buttons" in answer.content.decode()


@pytest.mark.parametrize("week", ["2026-02-30", "0001-01-01", "9999-12-31", "²⁰²⁶-⁰¹-⁰¹", "٢٠٢٦-١٢-٠٧"])
def test_an_odd_week_shows_this_week_or_that_one(user, make_user, week):
    change = agent_saves(user, SECRET)
    _, judge = staff_client(make_user, "judge", REVIEW, CONTENT)
    assert judge.get(QUEUE, {"week": week}).status_code == 200
    assert judge.get(QUEUE).status_code == 200
    assert judge.post(QUEUE, {"change": change, "verdict": "keep", "week": week}).status_code == 302


@pytest.mark.django_db(transaction=True)
def test_concurrent_verdicts_on_one_change_give_one_verdict_and_409s(user, make_user):
    import threading

    from django.db import connection

    from tests.conftest import on_postgres

    change = agent_saves(user, SECRET)
    reviewers = [staff_client(make_user, f"judge{n}", REVIEW, CONTENT) for n in range(8 if on_postgres() else 4)]
    for _, client in reviewers:
        assert f'value="{change}"' in client.get(QUEUE).content.decode()
    start = threading.Barrier(len(reviewers))
    statuses: list[int] = []

    def judge(client, verdict):
        try:
            start.wait(10)
            statuses.append(client.post(QUEUE, {"change": change, "verdict": verdict}).status_code)
        finally:
            connection.close()

    threads = [threading.Thread(target=judge, args=(client, "sensitive" if n % 2 else "keep"))
               for n, (_, client) in enumerate(reviewers)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    assert sorted(statuses) == [302] + [409] * (len(reviewers) - 1)
    assert WriteReview.objects.filter(event_id=change).count() == 1
