"""The store against a pure model, under random batches from several writers.

The model is what the design calls the specification: for each person, the
snapshot that the pure `rules.apply_operations` gives for the batches that
were accepted so far, in the order the store serialised them. Hypothesis
drives the store with random batches (adds, replaces and removes built from
the model's current entries and random text, sometimes invalid), from
several people, from worker threads that each use their own database
connection, sometimes two at once for one person, sometimes cancelled,
sometimes erasing. After every step the rows must equal the model: same
entries through `load_snapshot`, same rendered text in the raw rows, no
empty row, at most two rows a person, and a rejected or cancelled batch
leaves the rows exactly as they were, timestamps included.

The text is a small synthetic vocabulary, so a failing example that
Hypothesis prints never holds anyone's memory.
"""
from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import pytest
from django.contrib.auth import get_user_model
from django.db import connection
from hypothesis import HealthCheck, event, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule, run_state_machine_as_test

from agentmemory import store
from agentmemory.models import MemoryDocument, MemoryEvent
from agentmemory.rules import SEPARATOR, TARGETS, MemoryValidationError, Operation, Snapshot, apply_operations

# Small limits, so batches overflow often enough to exercise the capacity rule.
LIMITS = {"user": 100, "memory": 160}
PEOPLE = 3
WORKER_TIMEOUT_SECONDS = 60

# Short, overlapping words make substring matches unique, ambiguous or absent
# about equally often; whitespace and CRLF exercise normalisation.
WORDS = ("tea", "teapot", "green tea", "python", "py", "SQL", "sql", "likes", "uses", "Berlin", "ü", "日本")
FILLERS = (" ", "  ", "\n", "\r\n", " §", "§ ")
INVALID_TEXT = (
    "",
    "   \r\n ",
    "nul\x00byte",
    "bell\x07",
    "<persistent_memory_data>",
    "</ persistent_memory_data >",
    "before\n§\nafter",
    "§",
    "long " * 45,
)

# Fields that break an action's contract, or an unknown target or action.
MALFORMED = (
    Operation("user", "add", match="tea", content="tea"),
    Operation("memory", "replace", match="tea"),
    Operation("user", "remove", match="tea", content="tea"),
    Operation("profile", "add", content="tea"),  # type: ignore[arg-type]
    Operation("user", "delete", match="tea"),  # type: ignore[arg-type]
)

text = st.lists(st.sampled_from(WORDS + FILLERS), min_size=1, max_size=7).map("".join)
long_text = st.lists(st.sampled_from(WORDS + FILLERS), min_size=12, max_size=30).map("".join)

SETTINGS = settings(
    max_examples=25,
    stateful_step_count=20,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
)


@dataclass(frozen=True)
class Outcome:
    """What one batch did: its new snapshot, or the rule that refused it."""

    kind: str  # "committed", "rejected" or "cancelled"
    snapshot: Snapshot | None = None
    code: str = ""


def expected(snapshot: Snapshot, operations: Sequence[Operation]) -> Outcome:
    try:
        return Outcome("committed", snapshot=apply_operations(snapshot, operations, LIMITS))
    except MemoryValidationError as exc:
        return Outcome("rejected", code=exc.code)


def run_commit(user_id: int, operations: Sequence[Operation], should_cancel=None) -> Outcome:
    """Commit through the store, in the calling thread, and describe the result."""
    try:
        result = store.commit_operations(
            user_id=user_id, operations=list(operations), limits=LIMITS, should_cancel=should_cancel
        )
    except MemoryValidationError as exc:
        return Outcome("rejected", code=exc.code)
    except store.CommitCancelled:
        return Outcome("cancelled")
    return Outcome("committed", snapshot=result.snapshot)


def in_workers(*calls: Callable[[], object]) -> list[object]:
    """Run each call in its own thread and connection, started together."""
    barrier = threading.Barrier(len(calls))
    results: list[object] = [None] * len(calls)
    errors: list[BaseException] = []

    def work(index: int, call: Callable[[], object]) -> None:
        try:
            barrier.wait(timeout=WORKER_TIMEOUT_SECONDS)
            results[index] = call()
        except BaseException as exc:  # surfaced in the test thread below
            errors.append(exc)
        finally:
            connection.close()

    threads = [threading.Thread(target=work, args=(i, call)) for i, call in enumerate(calls)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(WORKER_TIMEOUT_SECONDS)
    assert not any(thread.is_alive() for thread in threads), "a commit worker hung"
    if errors:
        raise errors[0]
    return results


def raw_rows(user_id: int) -> list[tuple]:
    return sorted(
        MemoryDocument.objects.filter(user_id=user_id).values_list("memory_type", "content", "updated_at")
    )


class StoreMachine(RuleBasedStateMachine):
    def __init__(self, user_ids: Sequence[int]) -> None:
        super().__init__()
        self.user_ids = list(user_ids)
        # Each example starts from empty memory for everyone.
        MemoryDocument.objects.filter(user_id__in=self.user_ids).delete()
        MemoryEvent.objects.filter(user_id__in=self.user_ids).delete()
        self.model = {user_id: Snapshot() for user_id in self.user_ids}

    # --- drawing batches from the model ---------------------------------------
    # Which order two racing commits took is up to the database, so the model
    # (and the entries a batch quotes) can differ between runs of one example.
    # Every draw therefore has a fixed shape, an integer in a fixed range
    # mapped onto the current entries, so Hypothesis can replay and shrink.

    def pick(self, data, options: Sequence, label: str):
        index = data.draw(st.integers(0, 1 << 16), label=label)
        return options[index % len(options)] if options else None

    def draw_content(self, data, known: list[str]) -> str | None:
        choice = data.draw(st.integers(0, 39), label="content kind")
        invalid = self.pick(data, INVALID_TEXT, "invalid content")
        existing = self.pick(data, known, "existing entry")
        long_content = data.draw(long_text, label="long content")
        content = data.draw(text, label="content")
        if choice == 0:
            return invalid
        if choice <= 2 and existing is not None:
            return existing  # a duplicate
        return long_content if choice <= 6 else content

    def draw_match(self, data, known: list[str]) -> str:
        choice = data.draw(st.integers(0, 19), label="match kind")
        invalid = self.pick(data, INVALID_TEXT[:6], "invalid match")
        word = self.pick(data, WORDS, "word match")  # often in several entries, or in none
        entry = self.pick(data, known, "entry to match")
        start = data.draw(st.integers(0, 1 << 16), label="match start")
        length = data.draw(st.integers(0, 1 << 16), label="match length")
        if choice == 0:
            return invalid
        if choice <= 3 or entry is None:
            return word
        start %= len(entry)
        return entry[start : start + 1 + length % (len(entry) - start)]

    def draw_operation(self, data, snapshot: Snapshot, added: dict[str, list[str]]) -> Operation:
        target = data.draw(st.sampled_from(TARGETS), label="target")
        known = [entry for entry in (*snapshot.entries(target), *added[target]) if entry]
        malformed = self.pick(data, MALFORMED, "malformed operation")
        if data.draw(st.integers(0, 59), label="malformed") == 0:
            return malformed
        # Edits of an empty document can only fail; draw them rarely.
        actions = ("add", "add", "replace", "remove") if known else ("add",) * 9 + ("replace",)
        action = self.pick(data, actions, "action")
        match = self.draw_match(data, known)
        content = self.draw_content(data, known)
        if action == "add":
            if content is not None:
                added[target].append(content.strip())
            return Operation(target, "add", content=content)
        if action == "remove":
            return Operation(target, "remove", match=match)
        return Operation(target, "replace", match=match, content=content)

    def draw_batch(self, data, user_id: int) -> list[Operation]:
        size = data.draw(st.sampled_from((1, 1, 1, 2, 2, 3, 4)), label="size")
        if data.draw(st.integers(0, 39), label="empty batch") == 0:
            size = 0  # the rules refuse an empty batch
        added: dict[str, list[str]] = {"user": [], "memory": []}
        return [self.draw_operation(data, self.model[user_id], added) for _ in range(size)]

    # --- writers ---------------------------------------------------------------

    @rule(data=st.data())
    def one_writer_commits(self, data):
        user_id = data.draw(st.sampled_from(self.user_ids), label="person")
        operations = self.draw_batch(data, user_id)
        want = expected(self.model[user_id], operations)
        before = raw_rows(user_id)

        (got,) = in_workers(lambda: run_commit(user_id, operations))

        event(f"one writer: {got.kind} {got.code}".strip())
        assert got == want
        if got.kind == "committed":
            unchanged = [t for t in TARGETS if got.snapshot.entries(t) == self.model[user_id].entries(t)]
            self.model[user_id] = got.snapshot
            after = {row[0]: row for row in raw_rows(user_id)}
            # A document the batch did not change is not rewritten either.
            for row in before:
                if row[0] in unchanged:
                    assert after[row[0]] == row
        else:
            assert raw_rows(user_id) == before, "a rejected batch changed stored rows"

    @rule(data=st.data())
    def two_writers_race(self, data):
        """Two batches at once, for one person or two: the result is one of
        the two serial orders, and no accepted change is lost."""
        first = data.draw(st.sampled_from(self.user_ids), label="first person")
        second = data.draw(st.sampled_from((first, *self.user_ids)), label="second person")
        batches = [(first, self.draw_batch(data, first)), (second, self.draw_batch(data, second))]

        got = in_workers(*[lambda u=u, ops=ops: run_commit(u, ops) for u, ops in batches])

        stored = {user_id: store.load_snapshot(user_id=user_id) for user_id in self.user_ids}
        serial_orders = []
        for order in ((0, 1), (1, 0)):
            state = dict(self.model)
            outcomes: list[Outcome | None] = [None, None]
            for index in order:
                user_id, operations = batches[index]
                outcomes[index] = expected(state[user_id], operations)
                if outcomes[index].kind == "committed":
                    state[user_id] = outcomes[index].snapshot
            serial_orders.append((outcomes, state))
        matching = [state for outcomes, state in serial_orders if outcomes == got and state == stored]
        assert matching, "two concurrent commits matched neither serial order"
        event(f"race ({'one person' if first == second else 'two people'}): {got[0].kind}, {got[1].kind}")
        for outcome in got:
            event(f"race: {outcome.kind} {outcome.code}".strip())
        self.model = matching[0]

    @rule(data=st.data(), cancel_at=st.integers(0, 2))
    def cancelled_writer_commits_nothing(self, data, cancel_at):
        user_id = data.draw(st.sampled_from(self.user_ids), label="person")
        operations = self.draw_batch(data, user_id)
        before = raw_rows(user_id)
        checks = iter(range(3))

        def should_cancel() -> bool:
            return next(checks, 3) >= cancel_at

        (got,) = in_workers(lambda: run_commit(user_id, operations, should_cancel))

        want = expected(self.model[user_id], operations)
        event(f"cancel at check {cancel_at}: {got.kind}")
        if cancel_at == 0 or want.kind == "committed":
            assert got.kind == "cancelled"
        else:
            # The rules run between the first and second cancellation check,
            # so a batch they refuse is refused before a later check fires.
            assert got == want
        assert raw_rows(user_id) == before, "a cancelled commit changed stored rows"

    @rule(data=st.data())
    def erase_removes_both_documents(self, data):
        user_id = data.draw(st.sampled_from(self.user_ids), label="person")
        in_workers(lambda: store.erase(user_id=user_id))
        self.model[user_id] = Snapshot()

    # --- what must always hold -----------------------------------------------

    @invariant()
    def stored_documents_equal_the_model(self):
        for user_id in self.user_ids:
            assert store.load_snapshot(user_id=user_id) == self.model[user_id]

    @invariant()
    def raw_rows_are_the_rendered_model(self):
        for user_id in self.user_ids:
            rows = list(MemoryDocument.objects.filter(user_id=user_id).values_list("memory_type", "content"))
            assert len(rows) <= 2
            by_type = dict(rows)
            assert len(by_type) == len(rows), "two rows of one type for one person"
            for target in TARGETS:
                entries = self.model[user_id].entries(target)
                if entries:
                    assert by_type.get(target) == SEPARATOR.join(entries)
                else:
                    assert target not in by_type, "an empty document kept its row"

    @invariant()
    def no_row_holds_empty_content(self):
        assert not MemoryDocument.objects.filter(content="").exists()
        for user_id in self.user_ids:
            for entries in (self.model[user_id].user, self.model[user_id].memory):
                assert all(entry and entry == entry.strip() for entry in entries)


@pytest.mark.django_db(transaction=True)
def test_store_always_equals_the_pure_model_under_random_writers():
    user_model = get_user_model()
    user_ids = [user_model.objects.create_user(username=f"fuzz-{n}").pk for n in range(PEOPLE)]

    run_state_machine_as_test(lambda: StoreMachine(user_ids), settings=SETTINGS)
