"""Property tests of provenance against the pure rules (issue 15, part 2).

For any snapshot with sources and any batch the rules accept (the same
strategies as test_rules_properties: small limits, special characters,
adds, replaces, removes, consolidations), `provenance.carry` gives exactly
one source per entry of the result, in order; an entry whose text survived
keeps its source, a new text gets the batch's source, and nothing of a
removed entry remains. Reapplying the batch to a later snapshot (as the
commit does under the lock) keeps the same guarantees.
"""
from datetime import datetime, timezone

from hypothesis import given
from hypothesis import strategies as st

from agentmemory import provenance
from agentmemory.rules import TARGETS, MemoryValidationError, apply_batch
from tests.test_rules_properties import LIMITS, PROFILE, operations, snapshot_and_batch, snapshots

T0 = datetime(2026, 11, 1, tzinfo=timezone.utc)
NEW = provenance.source("agent", datetime(2026, 12, 1, tzinfo=timezone.utc), conversation_id=7, turn_id="t7")


def old_sources(snapshot):
    """A distinct source per existing entry, so the test can tell which one moved where."""
    return {
        target: tuple(provenance.source("user", T0, conversation_id=1000 * index + position)
                      for position, _ in enumerate(snapshot.entries(target)))
        for index, target in enumerate(TARGETS)
    }


def check(before, sources, after, carried):
    for target in TARGETS:
        entries = after.entries(target)
        assert len(carried[target]) == len(entries)
        old = dict(zip(before.entries(target), sources[target]))
        for entry, item in zip(entries, carried[target]):
            assert item == (old[entry] if entry in old else NEW)
        kept_ids = {item.conversation_id for item in carried[target] if item is not NEW}
        removed = set(before.entries(target)) - set(entries)
        assert not any(old[entry].conversation_id in kept_ids for entry in removed)


@PROFILE
@given(snapshot_and_batch())
def test_sources_stay_aligned_with_entries_through_any_batch(case):
    snapshot, batch = case
    try:
        applied = apply_batch(snapshot, batch, LIMITS)
    except MemoryValidationError:
        return
    sources = old_sources(snapshot)

    check(snapshot, sources, applied.snapshot, provenance.carry(snapshot, sources, applied.snapshot, NEW))


@PROFILE
@given(st.data())
def test_reapplying_to_a_later_snapshot_keeps_them_aligned(data):
    staged_on = data.draw(snapshots())
    batch = data.draw(st.lists(operations(staged_on), min_size=1, max_size=6))
    latest = data.draw(snapshots())  # what the commit finds under the lock
    try:
        applied = apply_batch(staged_on, batch, LIMITS)
        pinned = apply_batch(latest, list(applied.operations), LIMITS)
    except MemoryValidationError:
        return
    sources = old_sources(latest)

    check(latest, sources, pinned.snapshot, provenance.carry(latest, sources, pinned.snapshot, NEW))


@given(snapshots())
def test_unknown_or_misaligned_sources_are_never_guessed(snapshot):
    for target in TARGETS:
        entries = snapshot.entries(target)
        assert provenance.aligned(entries, None) == (None,) * len(entries)
        assert provenance.aligned(entries, [{"by": "user", "at": "x"}] * (len(entries) + 1)) == (None,) * len(entries)


def test_sources_round_trip_through_json_without_content():
    item = provenance.source("agent", T0, conversation_id=12, turn_id="abc")

    assert provenance.Source.from_json(item.as_json()) == item
    assert set(item.as_json()) == {"by", "at", "conversation_id", "turn_id"}
    assert provenance.Source.from_json({"by": "root", "at": "x"}) is None


def test_dropping_a_conversation_keeps_the_entry_and_its_role():
    kept = provenance.source("agent", T0, conversation_id=12, turn_id="abc")
    other = provenance.source("agent", T0, conversation_id=13)

    result, changed = provenance.without_conversation((kept, other, None), 12)

    assert changed and result[0].by == "agent" and result[0].conversation_id is None and not result[0].turn_id
    assert result[1] == other and result[2] is None
