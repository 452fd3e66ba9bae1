"""Support staff's review of what the assistant saved: the sample, the verdicts, the figures.

The population of a week is every change the assistant itself committed
(actor "agent", outcome "committed", with its versions still kept) in that
week (Monday to Sunday, UTC), of people who allow review and have memory
switched on (`MemoryPreference.allow_review`, `use_memory`). Changes the
person made, undid or restored are never in it.

`sample` draws at most AGENTMEMORY["REVIEW_SAMPLE_PER_WEEK"] changes of a
week, stratified by (model, policy version): each stratum gets an equal
share (what a small stratum cannot use goes to the others, in turn), so a
small model or a policy on trial is not drowned by the big one. The draw is
a seeded shuffle of each stratum's ids: the same seed and the same
population give the same sample, in the same order. The queue walks it and
shows the first change without a verdict.

The queue records each showing (`record_showing`, `ReviewShowing`) before
its page is sent, for a change it drew. A verdict (`record_verdict`) is
accepted only from a reviewer the change was shown to, and only once per
change (a concurrent second one is `AlreadyJudged`, never a database error).
It is metadata only (`WriteReview`): it never edits memory. "Secret or sensitive" leaves a notice on the person's memory
page, which offers to remove the entry or keep it (`notices`,
`close_notice`).

`dashboard` turns the verdicts and the events into figures per week, model
and policy version: verdict counts, save precision ("worth keeping" among
the judged) with a 95 % Wilson interval, and from the assistant's events the
share of batches over capacity, duplicates, and diverted to questions
(outcome "proposed"). Nothing in it is content.
"""
from __future__ import annotations

import math
import random
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import date, datetime, time, timedelta
from datetime import timezone as dt_timezone

from django.db import IntegrityError, transaction
from django.db.models import Count, Q

from . import versions
from .conf import memory_settings
from .models import Actor, MemoryEvent, Outcome, ReviewShowing, Verdict, WriteReview

Z_95 = 1.959963984540054


class NotSampled(LookupError):
    """The change is not one a reviewer may judge (not the assistant's, excluded, erased or already judged)."""


class NotShown(NotSampled):
    """The change was never shown to this reviewer by the queue, so it takes no verdict of theirs."""


class AlreadyJudged(NotSampled):
    """The change has its verdict already (perhaps another reviewer's, a moment before)."""


def sample_size() -> int:
    return max(0, memory_settings().review_sample_per_week)


def default_seed() -> str:
    return memory_settings().review_seed


def week_of(moment: datetime | date) -> date:
    """The Monday (UTC) of the week `moment` falls in."""
    day = moment.astimezone(dt_timezone.utc).date() if isinstance(moment, datetime) else moment
    return day - timedelta(days=day.weekday())


def _week_bounds(week: date) -> tuple[datetime, datetime]:
    start = datetime.combine(week_of(week), time.min, tzinfo=dt_timezone.utc)
    return start, start + timedelta(days=7)


@dataclass(frozen=True)
class Candidate:
    """One change in a week's population: ids and labels, no content."""

    event_id: int
    user_id: int
    model: str
    policy_version: str
    # What the person's message in the turn did (`SourceIntent`), "" when not recorded; never its words.
    source_intent: str = ""

    @property
    def stratum(self) -> tuple[str, str]:
        return (self.model, self.policy_version)


def population(week: date) -> list[Candidate]:
    """Every change of the week the assistant committed for people who allow review, oldest first."""
    start, end = _week_bounds(week)
    rows = (
        MemoryEvent.objects.filter(actor=Actor.AGENT, outcome=Outcome.COMMITTED, created_at__gte=start,
                                   created_at__lt=end, versions__isnull=False)
        .exclude(user__memory_preference__allow_review=False)
        .exclude(user__memory_preference__use_memory=False)
        .values_list("pk", "user_id", "model", "policy_version", "source_intent").distinct().order_by("pk")
    )
    return [Candidate(*row) for row in rows]


def sample(week: date, *, seed: str | None = None, size: int | None = None) -> list[Candidate]:
    """Draw the week's sample: at most `size`, stratified by (model, policy version), reproducible from `seed`."""
    seed = default_seed() if seed is None else seed
    size = sample_size() if size is None else max(0, size)
    strata: dict[tuple[str, str], list[Candidate]] = {}
    for candidate in population(week):
        strata.setdefault(candidate.stratum, []).append(candidate)
    keys = sorted(strata)
    for key in keys:  # one seeded shuffle per stratum, independent of the others
        random.Random(f"{seed}|{week_of(week).isoformat()}|{key[0]}|{key[1]}").shuffle(strata[key])
    quotas = _allocate({key: len(strata[key]) for key in keys}, size)
    # Interleave the strata, so the queue's first items already span them.
    drawn: list[Candidate] = []
    for index in range(max(quotas.values(), default=0)):
        drawn.extend(strata[key][index] for key in keys if index < quotas[key])
    return drawn


def _allocate(sizes: dict, total: int) -> dict:
    """Equal shares of `total` over the strata, capped by each one's size; leftovers go round in key order."""
    quotas = dict.fromkeys(sizes, 0)
    remaining = min(total, sum(sizes.values()))
    while remaining:
        open_keys = [key for key in sorted(sizes) if quotas[key] < sizes[key]]
        share = max(1, remaining // len(open_keys))
        for key in open_keys:
            give = min(share, sizes[key] - quotas[key], remaining)
            quotas[key] += give
            remaining -= give
            if not remaining:
                break
    return quotas


def next_candidate(week: date, *, seed: str | None = None) -> Candidate | None:
    """The first change of the week's sample without a verdict (None: the week is done)."""
    drawn = sample(week, seed=seed)
    judged = set(WriteReview.objects.filter(event_id__in=[c.event_id for c in drawn]).values_list("event_id",
                                                                                                   flat=True))
    return next((candidate for candidate in drawn if candidate.event_id not in judged), None)


def progress(week: date, *, seed: str | None = None) -> tuple[int, int]:
    """(judged, drawn) for the week's sample."""
    drawn = sample(week, seed=seed)
    judged = WriteReview.objects.filter(event_id__in=[c.event_id for c in drawn]).count()
    return judged, len(drawn)


@dataclass(frozen=True)
class Item:
    """What a reviewer sees of one change: the entries as added or changed, where, who, when."""

    candidate: Candidate
    change: versions.Change
    created_at: datetime

    @property
    def documents(self):
        return self.change.documents


def item(candidate: Candidate) -> Item:
    """Read one sampled change's versions (memory content: for staff holding the content permission)."""
    change = versions.change(user_id=candidate.user_id, change_id=candidate.event_id)
    return Item(candidate=candidate, change=change, created_at=change.created_at)


def eligible(event_id: int) -> Candidate:
    """The change as a candidate, if a reviewer may judge it now; raise NotSampled."""
    event = MemoryEvent.objects.filter(pk=event_id).values_list("created_at", flat=True).first()
    if event is None:
        raise NotSampled("No such change.")
    found = next((c for c in population(week_of(event)) if c.event_id == event_id), None)
    if found is None:
        raise NotSampled("This change is not the assistant's, or its person is not reviewed.")
    return found


def record_showing(*, candidate: Candidate, week: date, staff, seed: str | None = None) -> None:
    """Record that the queue shows `candidate` to `staff`; raise NotSampled unless the week's sample drew it.

    Called before the page is sent: no showing, no page. The showing is what
    `record_verdict` asks for, so it is kept only for a change of the draw.
    """
    if candidate not in sample(week, seed=seed):
        raise NotSampled("This change is not in the week's sample.")
    ReviewShowing.objects.bulk_create([ReviewShowing(event_id=candidate.event_id, staff=staff,
                                                     week=week_of(week))], ignore_conflicts=True)


def record_verdict(*, event_id: int, verdict: str, staff) -> WriteReview:
    """Record one verdict on a change the assistant saved; raise NotSampled, NotShown, AlreadyJudged or ValueError.

    Only a change the queue showed this reviewer (drawn in its week's sample
    then) takes their verdict, and only the first verdict counts: a second,
    even one racing it, is AlreadyJudged. Never edits memory. "Secret or
    sensitive" opens a notice on the person's memory page.
    """
    if verdict not in Verdict.values:
        raise ValueError(f"verdict must be one of {', '.join(Verdict.values)}")
    with transaction.atomic():
        candidate = eligible(int(event_id))
        if not ReviewShowing.objects.filter(event_id=candidate.event_id, staff_id=staff.pk).exists():
            raise NotShown("This change was not shown to this reviewer.")
        if WriteReview.objects.filter(event_id=candidate.event_id).exists():
            raise AlreadyJudged("This change already has a verdict.")
        created_at = MemoryEvent.objects.values_list("created_at", flat=True).get(pk=candidate.event_id)
        try:
            # A savepoint: a verdict committed since the check above (one verdict per change) is
            # an answer, not a failed transaction.
            with transaction.atomic():
                return WriteReview.objects.create(
                    user_id=candidate.user_id, event_id=candidate.event_id, verdict=verdict,
                    week=week_of(created_at), model=candidate.model, policy_version=candidate.policy_version,
                    staff=staff, staff_username=staff.get_username(), notice_open=verdict == Verdict.SENSITIVE,
                )
        except IntegrityError:
            if WriteReview.objects.filter(event_id=candidate.event_id).exists():
                raise AlreadyJudged("This change already has a verdict.") from None
            raise NotSampled("This change is gone.") from None


# --- the person's side ------------------------------------------------------------------------


@dataclass(frozen=True)
class Notice:
    """A "secret or sensitive" verdict the person has not answered: the entries it flagged still in memory."""

    id: int
    entries: tuple[tuple[str, str], ...]  # (target, entry)


def notices(*, user_id, snapshot) -> list[Notice]:
    """The person's open notices whose flagged entries are still in memory (`snapshot`)."""
    open_reviews = list(WriteReview.objects.filter(user_id=user_id, notice_open=True).values_list("pk", "event_id"))
    if not open_reviews:
        return []
    kept = {change.id: change for change in versions.changes(user_id=user_id,
                                                             event_ids=[event for _, event in open_reviews])}
    found = []
    for review_id, event_id in open_reviews:
        change = kept.get(event_id)
        if change is None:
            continue
        entries = tuple((document.target, entry.after) for document in change.documents
                        for entry in document.entries
                        if entry.after and entry.after in snapshot.entries(document.target))
        if entries:
            found.append(Notice(id=review_id, entries=entries))
    return found


def close_notice(*, user_id, review_id) -> bool:
    """The person answered (kept or removed the entry): the notice goes; True when one was open."""
    return bool(WriteReview.objects.filter(pk=review_id, user_id=user_id, notice_open=True).update(notice_open=False))


def answer_notice(*, user_id, review_id, remove: bool) -> bool:
    """The person's answer to a notice: remove the flagged entries (their own edit, audited) or keep them.

    Either way the notice closes; return False when no open notice of theirs has this id.
    Raise what `services.remove_entry` raises (the entry changed meanwhile, memory unavailable).
    """
    from . import services
    from .store import load_snapshot

    if not WriteReview.objects.filter(pk=review_id, user_id=user_id, notice_open=True).exists():
        return False
    if remove:
        for notice in notices(user_id=user_id, snapshot=load_snapshot(user_id=user_id)):
            if notice.id == review_id:
                for target, entry in notice.entries:
                    services.remove_entry(user_id=user_id, target=target, entry=entry)  # type: ignore[arg-type]
    return close_notice(user_id=user_id, review_id=review_id)


def set_allow_review(*, user_id, allow: bool) -> bool:
    """The person's "may support staff review samples" setting; True when it changed."""
    from .models import MemoryPreference
    from .store import lock_person

    with transaction.atomic():
        lock_person(user_id=user_id)
        preference, _ = MemoryPreference.objects.get_or_create(user_id=user_id)
        if preference.allow_review == bool(allow):
            return False
        preference.allow_review = bool(allow)
        preference.save(update_fields=["allow_review", "updated_at"])
    return True


def allows_review(*, user_id) -> bool:
    from .models import MemoryPreference

    value = MemoryPreference.objects.filter(user_id=user_id).values_list("allow_review", flat=True).first()
    return True if value is None else bool(value)


def export_rows(*, user_id) -> list[dict]:
    """The person's verdicts as their export shows them: which change, the verdict, when; no staff name."""
    return [
        {"change_id": row.event_id, "verdict": row.verdict, "reviewed_at": row.created_at,
         "notice_open": row.notice_open}
        for row in WriteReview.objects.filter(user_id=user_id).order_by("created_at", "pk")
    ]


# --- the figures ------------------------------------------------------------------------------


def wilson(successes: int, total: int, z: float = Z_95) -> tuple[float, float] | None:
    """The Wilson score interval of a proportion (None for no trials)."""
    if total <= 0:
        return None
    p = successes / total
    denominator = 1 + z * z / total
    centre = (p + z * z / (2 * total)) / denominator
    half = z * math.sqrt(p * (1 - p) / total + z * z / (4 * total * total)) / denominator
    return max(0.0, centre - half), min(1.0, centre + half)


def _rate(part: int, whole: int) -> float | None:
    return round(part / whole, 4) if whole else None


def dashboard(*, weeks: Iterable[date] | None = None) -> dict:
    """The write-quality figures per week, model and policy version; JSON-ready, no content."""
    wanted = sorted({week_of(week) for week in weeks}) if weeks is not None else None
    rows: dict[tuple[str, str, str], dict] = {}

    def row(week: date, model: str, policy: str) -> dict:
        key = (week.isoformat(), model, policy)
        if key not in rows:
            rows[key] = {"week": key[0], "model": model, "policy_version": policy,
                         "verdicts": dict.fromkeys(Verdict.values, 0), "reviewed": 0,
                         "batches": 0, "committed": 0, "over_capacity": 0, "duplicates": 0, "proposed": 0}
        return rows[key]

    reviews = WriteReview.objects.all()
    if wanted is not None:
        reviews = reviews.filter(week__in=wanted)
    for week, model, policy, verdict, count in (reviews.values_list("week", "model", "policy_version", "verdict")
                                                .annotate(n=Count("pk")).order_by()):
        target = row(week, model, policy)
        target["verdicts"][verdict] += count
        target["reviewed"] += count
    events = MemoryEvent.objects.filter(actor=Actor.AGENT, outcome__in=[
        Outcome.COMMITTED, Outcome.UNCHANGED, Outcome.REJECTED, Outcome.PROPOSED])
    if wanted is not None:
        bounds = Q()
        for week in wanted:
            start, end = _week_bounds(week)
            bounds |= Q(created_at__gte=start, created_at__lt=end)
        events = events.filter(bounds)
    for created_at, model, policy, outcome, error_code in events.values_list(
            "created_at", "model", "policy_version", "outcome", "error_code").iterator():
        target = row(week_of(created_at), model, policy)
        target["batches"] += 1
        target["committed"] += outcome == Outcome.COMMITTED
        target["over_capacity"] += outcome == Outcome.REJECTED and error_code == "over_capacity"
        target["duplicates"] += outcome == Outcome.UNCHANGED or (
            outcome == Outcome.REJECTED and error_code == "replace_duplicate")
        target["proposed"] += outcome == Outcome.PROPOSED
    figures = []
    for key in sorted(rows):
        target = rows[key]
        judged = target["reviewed"]
        keep = target["verdicts"][Verdict.KEEP]
        interval = wilson(keep, judged)
        figures.append({
            "week": target["week"], "model": target["model"], "policy_version": target["policy_version"],
            "verdicts": target["verdicts"], "reviewed": judged,
            "precision": _rate(keep, judged),
            "precision_interval": [round(interval[0], 4), round(interval[1], 4)] if interval else None,
            "sensitive": target["verdicts"][Verdict.SENSITIVE],
            "batches": target["batches"],
            "over_capacity_rate": _rate(target["over_capacity"], target["batches"]),
            "duplicate_rate": _rate(target["duplicates"], target["batches"]),
            "question_rate": _rate(target["proposed"], target["batches"]),
        })
    return {"format": "agentmemory-write-quality", "confidence": 0.95, "rows": figures}

