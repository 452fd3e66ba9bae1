"""Property tests of apply_operations: for any snapshot and any batch, the
result fits its limits, every entry survives a render/parse round trip, a
duplicate add changes nothing, and a rejected batch leaves the staged
snapshot exactly as it was.

Small limits make the capacity rule bite often; the alphabet is biased
towards the characters the rules treat specially (newlines, carriage
returns, the section sign of the delimiter, control characters, the
reserved tag).
"""
import unicodedata
from dataclasses import replace

from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from agentmemory.rules import (
    MAX_OPERATIONS,
    apply_batch,
    SEPARATOR,
    TARGETS,
    MemoryValidationError,
    Operation,
    Snapshot,
    apply_operations,
    document_length,
    normalize_entry,
    parse_document,
    render_document,
)
from agentmemory.scope import MemoryLedger, stage_operations

LIMITS = {"user": 30, "memory": 45}
PROFILE = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])

pieces = st.one_of(
    st.sampled_from(["a", "b", "c", "fact", "note", " ", "\n", "\r", "\r\n", "§", SEPARATOR, "\t", "\x00",
                     "\x1b", "<persistent_memory_data>", "</PERSISTENT_MEMORY_DATA>", "é", "😀"]),
    st.text(max_size=4),
)
raw_text = st.lists(pieces, max_size=8).map("".join)


def _valid(text: str) -> bool:
    try:
        normalize_entry(text)
    except MemoryValidationError:
        return False
    return True


valid_entry = (
    st.lists(
        st.one_of(
            st.sampled_from(["a", "fact", "note", "§", " ", "\n", "é", "😀"]),
            st.characters(codec="utf-8", exclude_categories=["Cs", "Cc"]),
        ),
        min_size=1,
        max_size=10,
    )
    .map("".join)
    .filter(_valid)
    .map(normalize_entry)
)


@st.composite
def snapshots(draw):
    """Snapshots that the rules could have produced: valid, unique, within limits."""
    documents = {}
    for target in TARGETS:
        entries = draw(st.lists(valid_entry, unique=True, max_size=4))
        while entries and document_length(entries) > LIMITS[target]:
            entries.pop()
        documents[target] = tuple(entries)
    return Snapshot(**documents)


@st.composite
def substrings(draw, entries):
    entry = draw(st.sampled_from(entries))
    start = draw(st.integers(0, len(entry) - 1))
    stop = draw(st.integers(start + 1, len(entry)))
    return entry[start:stop]


@st.composite
def operations(draw, snapshot: Snapshot):
    target = draw(st.sampled_from(TARGETS))
    action = draw(st.sampled_from(["add", "replace", "remove"]))
    existing = snapshot.entries(target)
    # One operation in six carries hostile text; the rest are plausible edits.
    # (Hypothesis favours small and boundary integers, hence middle values.)
    hostile = draw(st.integers(0, 5)) == 3
    match_source = substrings(existing) if existing and not hostile else raw_text
    content_source = raw_text if hostile else valid_entry
    # Mostly well-formed field combinations, sometimes not, so both paths run.
    if draw(st.integers(0, 19)) != 10:
        match = None if action == "add" else draw(match_source)
        content = None if action == "remove" else draw(content_source)
    else:
        match = draw(st.one_of(st.none(), match_source))
        content = draw(st.one_of(st.none(), content_source))
    return Operation(target=target, action=action, match=match, content=content)


@st.composite
def snapshot_and_batch(draw):
    snapshot = draw(snapshots())
    batch = draw(st.lists(operations(snapshot), min_size=1, max_size=5))
    return snapshot, batch


def _entry_is_clean(entry: str) -> bool:
    return (
        bool(entry)
        and entry == entry.strip()
        and SEPARATOR not in entry
        and "§" not in entry.split("\n")
        and "\r" not in entry
        and not any(ch != "\n" and unicodedata.category(ch) == "Cc" for ch in entry)
        and "persistent_memory_data" not in entry.lower().replace(" ", "")
    )


@PROFILE
@given(snapshot_and_batch())
def test_capacity_is_never_exceeded(case):
    snapshot, batch = case
    try:
        result = apply_operations(snapshot, batch, LIMITS)
    except MemoryValidationError as exc:
        event(f"rejected: {exc.code}")
        return
    event("applied")
    for target in TARGETS:
        assert len(SEPARATOR.join(result.entries(target))) <= LIMITS[target]


@PROFILE
@given(snapshot_and_batch())
def test_no_delimiter_inside_an_entry_and_documents_round_trip(case):
    snapshot, batch = case
    try:
        result = apply_operations(snapshot, batch, LIMITS)
    except MemoryValidationError:
        return
    for target in TARGETS:
        entries = result.entries(target)
        assert all(_entry_is_clean(entry) for entry in entries)
        assert len(set(entries)) == len(entries)
        assert parse_document(render_document(entries)) == entries


@PROFILE
@given(snapshots(), raw_text, st.sampled_from(TARGETS))
def test_duplicate_add_is_idempotent(snapshot, content, target):
    batch = [Operation(target=target, action="add", content=content)]
    try:
        once = apply_operations(snapshot, batch, LIMITS)
    except MemoryValidationError:
        return
    assert apply_operations(once, batch, LIMITS) == once
    assert apply_operations(snapshot, batch * 2, LIMITS) == once


@PROFILE
@given(snapshots(), st.sampled_from(TARGETS), st.data())
def test_adding_an_existing_entry_changes_nothing(snapshot, target, data):
    if not snapshot.entries(target):
        return
    entry = data.draw(st.sampled_from(snapshot.entries(target)))
    padded = data.draw(st.sampled_from(["", " ", "\n", "\r\n", "  \r\n "]))
    batch = [Operation(target=target, action="add", content=padded + entry + padded)]
    assert apply_operations(snapshot, batch, LIMITS) == snapshot


@PROFILE
@given(snapshot_and_batch())
def test_a_failed_batch_leaves_the_snapshot_unchanged(case):
    snapshot, batch = case
    ledger = MemoryLedger(snapshot=snapshot, operations=[Operation("user", "add", content="staged before")])
    before_operations = list(ledger.operations)
    try:
        stage_operations(ledger, batch, LIMITS)
    except MemoryValidationError as exc:
        assert ledger.snapshot == snapshot
        assert ledger.operations == before_operations
        if exc.code == "turn_budget":  # the turn's 20 operations include the one staged before
            assert len(before_operations) + len(batch) > MAX_OPERATIONS
            return
        # Rejection is a property of the batch, not of chance.
        try:
            apply_operations(snapshot, batch, LIMITS)
        except MemoryValidationError as again:
            assert (again.code, again.position) == (exc.code, exc.position)
        else:
            raise AssertionError("the same batch was accepted on a second try")
    else:
        assert ledger.snapshot == apply_operations(snapshot, batch, LIMITS)
        assert ledger.operations == before_operations + list(apply_batch(snapshot, batch, LIMITS).operations)
        assert [replace(o, entry=None) for o in ledger.operations[1:]] == batch
