"""The memory side of one turn, for any agent loop: read, stage, commit once.

This is agentmemory's public API for a turn. A chat app (ours in `chat/`,
or another project's own loop over the plain `openai` client) gets every
guarantee of the design through it:

- `load()` reads the person's memory fail-open under a bounded wait: after a
  read error or a timeout the turn goes on with memory "unavailable" and
  writes off, never with an invented empty snapshot.
- `prompt()` and `tools` are what this turn offers the model.
- `attempt()` binds a fresh scope (a new ledger on the same snapshot) for
  each model attempt, so a fallback never sees or commits what a failed
  attempt staged; `may_fall_back` says whether a fallback may run at all.
- `commit()` commits what the final attempt staged, once, after the answer
  is complete, in a worker thread that a cancel can still roll back.
- `discard()` ends a turn that did not complete.

The turn's `outcome` is decided once. After a commit has returned, nothing
later (a reply that cannot be stored, a Stop, a disconnect) turns it into
"discarded": `discard()` then returns the committed outcome unchanged.

Outcome statuses (the `status` of `MemoryOutcome`): committed, proposed,
nothing_to_commit, unavailable, disabled, discarded, rejected, unconfirmed. `code` names
the reason (content-free); `message` is a plain sentence for the person;
`memory_full` says the person should review their memory (a change was
refused for capacity, or a document is at FULL_PERCENT or more).

A commit whose connection failed at its COMMIT (`store.CommitOutcomeUnknown`)
is not guessed at: the turn asks the database, within
AGENTMEMORY COMMIT_CONFIRM_SECONDS, whether its change id is stored
(`store.confirm`). Stored: committed, as any commit. Not stored: discarded,
code "connection_lost". No answer in time: status unconfirmed (code
"unconfirmed"), which says so in plain words; the memory page and History
show the truth once the database answers, and a retry under the same
idempotency key answers the truth too (the key's outcome is written in the
commit's transaction, so it exists exactly when the change does).

Memory is off for a turn (status disabled) when the deployment flag is off
(no code), in a temporary chat (`temporary=True`, code "temporary"), or when
the person switched it off (`agentmemory.preferences`, code "memory_off",
read with the memory). A person who switches memory off while a turn runs
gets nothing saved from that turn: the commit reads the switch under the
person's lock (discarded, code "switched_off").

Trusted code judges what the model staged (`agentmemory.gate`, with the
turn's messages from `heard()`): an operation it doubts (a transient note, a
chat summary, an edit the person's message did not ask for) is not
committed but proposed; the rest commits, in the same transaction (status
committed, code "partly_asked", with `proposal_id`), or, when every
operation is doubted, status proposed with code "asked".

A person who chose "ask before saving" (`preferences`, save_mode "ask") gets
a proposal instead of a commit, created at the same point and under the same
conditions (`agentmemory.proposals`): status proposed, with `proposal_id`.
Set `conversation_id` and `turn_id` on the memory turn before `commit()` so
the proposal says where it came from.

With `idempotency_key` (the client's Idempotency-Key, `agentmemory.idempotency`)
the turn's commit (or proposal) happens at most once per person and key: a
second commit with the same key, in this process or another, commits nothing
and returns the first one's outcome (`replayed` is then True). The key's
record is written in the commit's own transaction, so a crash cannot leave a
commit without it. Claim the key with `idempotency.claim` around the whole
request too, and a retry does not even run the model again.
"""
from __future__ import annotations

import asyncio
import logging
import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, replace

from django.utils.translation import gettext_lazy

from . import gate, idempotency, notify, preferences, proposals, store, tidy
from .conf import memory_settings
from .expiry import today_where
from .prompt import compile_memory_prompt
from .rules import FULL_PERCENT, TARGETS, MemoryValidationError, Operation, Snapshot, apply_operations, usage
from .scope import MemoryLedger, MemoryRequest, memory_scope
from .tool import MEMORY_UPDATE_TOOL
from .workers import in_worker

logger = logging.getLogger(__name__)

COMMITTED = "committed"
PROPOSED = "proposed"
NOTHING_TO_COMMIT = "nothing_to_commit"
UNAVAILABLE = "unavailable"
DISABLED = "disabled"
DISCARDED = "discarded"
REJECTED = "rejected"
UNCONFIRMED = "unconfirmed"

STATUS_DISABLED = "disabled"
STATUS_AVAILABLE = "available"
STATUS_UNAVAILABLE = "unavailable"

# What the person reads for each status; `CODE_MESSAGES` refines it by code. People-facing, so translatable
# (lazy: `MemoryOutcome.message` returns it as a plain str for JSON). The model never reads these.
OUTCOME_MESSAGES = {
    COMMITTED: gettext_lazy("Memory saved."),
    PROPOSED: gettext_lazy("The assistant proposed a memory change; nothing is saved until you choose Save."),
    NOTHING_TO_COMMIT: gettext_lazy("No memory change in this turn."),
    UNAVAILABLE: gettext_lazy(
        "Memory could not be read this turn: the answer was given without it and nothing was saved."),
    DISABLED: gettext_lazy("Memory is off for this chat."),
    DISCARDED: gettext_lazy("The turn did not complete, so its memory changes were discarded; nothing was saved."),
    REJECTED: gettext_lazy(
        "The answer stands, but the memory change was not saved: it no longer fits your memory as "
        "it is now. Ask again to retry."
    ),
    UNCONFIRMED: gettext_lazy("We could not confirm whether this was saved; your memory page shows what is stored."),
}
# "Remember this until Friday": the memory line says until when ("Memory saved, until Fri 11 Dec.").
SAVED_UNTIL = gettext_lazy("Memory saved, until %(date)s.")
CODE_MESSAGES = {
    "unchanged": gettext_lazy("Memory already held this; nothing changed."),
    "not_announced": gettext_lazy(
        "Memory saved, but your other open pages were not told (live updates are unavailable); "
        "reload them to see it."
    ),
    "conflict": gettext_lazy(
        "Your memory changed while this reply was being written, so this change was not saved. "
        "Look at your memory page, then ask again if it is still needed."
    ),
    "commit_failed": gettext_lazy(
        "The answer stands, but memory could not be saved (a database error). Try again later."),
    "connection_lost": gettext_lazy(
        "The answer stands, but the connection to the database broke while saving, and nothing was saved. "
        "Ask again to save it."
    ),
    "memory_busy": gettext_lazy(
        "The answer stands, but memory was busy and this change was not saved. Try again in a moment."),
    "cancelled": gettext_lazy("The turn was stopped before its memory change was saved; nothing was saved."),
    "account_closed": gettext_lazy("Your account was closed or deactivated during this reply; nothing was saved."),
    "session_ended": gettext_lazy("You were signed out during this reply, so its memory change was not saved."),
    "memory_off": gettext_lazy("Memory is off in your settings: this chat did not use or change it."),
    "temporary": gettext_lazy("Temporary chat: memory was not used or changed, and this chat is not kept."),
    "switched_off": gettext_lazy("Memory was turned off during this reply, so its change was not saved."),
    "asked": gettext_lazy(
        "Nothing was saved yet: the assistant suggested remembering something that may not last or that you "
        "did not ask to change. It is shown under the answer: choose Save to keep it, or Discard."
    ),
    "partly_asked": gettext_lazy(
        "Memory saved, except a suggestion shown under the answer that may not last or that you did not ask "
        "to change: choose Save to keep it too, or Discard."
    ),
    "erased": gettext_lazy("Your memory was erased while this reply was being written, so nothing from it was saved."),
    "over_capacity": gettext_lazy(
        "The answer stands, but the memory change was not saved: your memory is full. "
        "Review what it keeps on your memory page."
    ),
}


@dataclass(frozen=True)
class MemoryOutcome:
    """What happened to memory in one turn, without any content."""

    status: str
    operation_count: int = 0
    changed: tuple[str, ...] = ()
    usage: Mapping | None = None
    code: str = ""
    memory_full: bool = False
    proposal_id: int | None = None  # status proposed: the proposal to save or discard
    change_id: int | None = None  # status committed with a change: the change to undo (`agentmemory.versions`)
    # Make room after a save that did not fit (`MemoryTurn.make_room`): "proposed", or the code of why nothing
    # was ("not_offered", "already_stored", tidy's failure code, "error:<Type>"); "" when not tried. Content-free,
    # for the curation eval and logs; not part of `as_dict` (frames and the API do not carry it).
    room: str = ""
    # Status committed: the last day (ISO) of what this turn saved with an expiry ("" none, or several days).
    until: str = ""

    @property
    def message(self) -> str:
        # In the active language, as a plain str (it goes into JSON: channel frames, REST responses).
        if self.until and self.status == COMMITTED and not self.code:
            from .words import expiry_day  # words reads this module's sentences

            return str(SAVED_UNTIL) % {"date": expiry_day(self.until)}
        return str(CODE_MESSAGES.get(self.code) or OUTCOME_MESSAGES[self.status])

    @property
    def saved(self) -> bool:
        """True when a commit wrote a change that is now stored."""
        return self.status == COMMITTED and bool(self.changed)

    def as_dict(self) -> dict:
        return {
            "status": self.status,
            "message": self.message,
            "operation_count": self.operation_count,
            "changed": list(self.changed),
            "usage": dict(self.usage) if self.usage is not None else None,
            "code": self.code,
            "memory_full": self.memory_full,
            "proposal_id": self.proposal_id,
            "change_id": self.change_id,
            "until": self.until or None,
        }


class MemoryTurn:
    """The memory of one authenticated person for one turn.

    `user_id` must come from the authentication layer (`request.user.pk`,
    `scope["user"].pk`), never from model output.
    """

    def __init__(
        self, *, user_id, enabled: bool | None = None, limits: Mapping[str, int] | None = None,
        temporary: bool = False, idempotency_key: str | None = None,
    ) -> None:
        config = memory_settings()
        self.user_id = user_id
        self.enabled = config.enabled if enabled is None else enabled
        # Why memory is off for this turn when it is: "temporary", "memory_off", or "" (the deployment).
        self.off_code = ""
        # "Ask before saving": the finished turn proposes its change instead of committing it.
        self.ask_first = False
        # Where a proposal came from (set by the chat before the commit); no content.
        self.conversation_id: int | None = None
        self.turn_id = ""
        # The model whose answer staged the batch (set by the chat before the commit), for the
        # write-quality figures (`agentmemory.review`); "" when unknown.
        self.model = ""
        # The commit happens once per key; a commit already made under it is replayed, not repeated.
        self.idempotency_key = idempotency_key
        self.replayed = False
        if self.enabled and temporary:
            self.enabled, self.off_code = False, "temporary"
        self.limits = dict(limits or config.limits)
        # What the turn's messages said, for trusted judgement of what the model stages (`heard`).
        self._heard: list | None = None  # the turn's messages (`heard`), read into `sources` when first needed
        self._asks_memory: bool | None = None  # `gate.asks_memory` of the latest message, read once a turn
        self._sources: gate.TurnSources | None = None
        self.snapshot: Snapshot | None = None
        self.today: str | None = None
        self.erasures: int | None = None  # the person's erase count, read with the memory
        self.committed: store.CommitResult | None = None
        self._ledger: MemoryLedger | None = None
        self.room = ""  # what make_room did (`MemoryOutcome.room`)
        self._outcome: MemoryOutcome | None = None

    # --- reading ----------------------------------------------------------------

    def read(self) -> Snapshot | None:
        """Read the snapshot in this thread (fail open); return it, or None."""
        self.snapshot = self._read() if self.enabled else None
        return self.snapshot

    def _read(self) -> Snapshot | None:
        try:
            # One bounded read of the person's switch and their memory (one round trip on PostgreSQL).
            row, snapshot = store.load_for_turn(user_id=self.user_id, timeout=memory_settings().read_timeout)
            settings = preferences.from_row(row)
            # An erase after this read ends what the turn stages (its commit compares the count under the lock).
            self.erasures = int(row[2] or 0) if row is not None else 0
            if not settings.use_memory:
                self.enabled, self.off_code = False, "memory_off"
                return None
            self.ask_first = settings.ask_first
            # Expiry dates are the person's days; an entry past its date never reaches the prompt,
            # even before its removal commits (`agentmemory.expiry`).
            self.today = today_where(row[3] if row is not None else "")
            return snapshot.unexpired(self.today) if snapshot is not None else None
        except Exception as exc:  # fail open: answer without memory, write nothing
            logger.warning("memory unavailable for this turn: %s", type(exc).__name__)
            return None

    async def load(self) -> Snapshot | None:
        """Read the snapshot in a worker thread, waiting at most the read timeout.

        The database bounds the query itself; this bounds the wait for a
        connection too. A read that answers late is ignored.
        """
        if not self.enabled:
            return None
        worker = asyncio.ensure_future(in_worker(self._read))
        try:
            self.snapshot = await asyncio.wait_for(asyncio.shield(worker), timeout=memory_settings().read_timeout + 1)
        except asyncio.TimeoutError:
            logger.warning("memory unavailable for this turn: the read timed out")
            self.snapshot = None
        return self.snapshot

    @property
    def status(self) -> str:
        if not self.enabled:
            return STATUS_DISABLED
        return STATUS_AVAILABLE if self.snapshot is not None else STATUS_UNAVAILABLE

    @property
    def writes_enabled(self) -> bool:
        return self.enabled and self.snapshot is not None

    def heard(self, messages) -> None:
        """Give trusted code the turn's messages (`{"role", "content"}`, oldest first, the person's last).

        Call before `attempt()`. The gate (`agentmemory.gate`) then refuses a
        staged entry that holds a value any of these messages gave as a
        secret, and asks the person (a proposal, not a commit) about a
        transient note or an edit their latest message did not ask for.
        Without it only the entries' own features are judged.
        """
        self._heard, self._sources, self._asks_memory = list(messages), None, None

    def heard_tool_result(self, content) -> None:
        """Give trusted code a tool result of this turn as the loop appends it (its text, or JSON).

        A value it gives as a secret (a conversation_search hit that holds a
        password the person gave in an earlier chat) is then refused in what
        the model stages after it, however spelled, like a value the person
        gave. Sources already read are extended by this result's secrets
        alone; nothing else of the turn is read again.
        """
        message = {"role": "tool", "content": content}
        self._heard = [*(self._heard or []), message]
        if self._sources is not None:
            found = [value for value in gate.turn_secrets([message]) if value not in self._sources.secrets]
            if found:
                self._sources = replace(self._sources, secrets=(*self._sources.secrets, *found))

    @property
    def sources(self) -> gate.TurnSources | None:
        """What the gate knows of the turn's messages (None before `heard`).

        Read on first use, so a turn with memory off (which never stages, and
        so never asks) pays nothing for it: reading the messages (secrets, with
        detect-secrets, the threat scan, the intent) was a tenth of a plain
        turn's CPU (docs/benchmarks.md).
        """
        if self._sources is None and self._heard is not None:
            self._sources = gate.TurnSources.from_messages(self._heard)
        return self._sources

    def _latest_message(self) -> str:
        """The person's latest message's text ("" without one), without reading the turn for the gate."""
        if self._sources is not None:
            return self._sources.message
        latest = next((m for m in reversed(self._heard or []) if m.get("role") == "user"), None)
        return gate.message_text(latest.get("content")) if latest is not None else ""

    def _source_intent(self) -> str:
        """What the person's latest message did (`gate.intent`), for the commit's event; never its words."""
        if self._sources is not None:
            return self._sources.intent
        latest = self._latest_message()
        return gate.intent(latest) if latest else gate.UNKNOWN

    # --- what the model is offered ----------------------------------------------------

    @property
    def answers_from_memory(self) -> bool:
        """True when the person's latest message only asks what memory holds (`gate.asks_memory`).

        Trusted code then offers no `memory_update` for the turn and tells the
        model to answer from the block: a question about a fact never
        rewrites it, and a small model that calls tools on recall questions
        answers from the prompt instead. Needs `heard()` and the gate on.
        """
        if not (self.enabled and self._heard is not None and memory_settings().gate):
            return False
        if self._asks_memory is None:  # asked for by the prompt, the tools and the turn's end: read once
            self._asks_memory = gate.asks_memory(self._latest_message())
        return self._asks_memory

    def prompt(self, *, policy_version: str | None = None) -> str | None:
        """Return the memory section of this turn's system prompt (None when memory is off)."""
        if not self.enabled:
            return None
        return compile_memory_prompt(
            snapshot=self.snapshot, limits=self.limits, writes_enabled=self.writes_enabled,
            policy_version=policy_version or memory_settings().policy_version,
            answer_from_memory=self.answers_from_memory,
        )

    @property
    def tools(self) -> tuple[dict, ...]:
        """The tool definitions (Chat Completions format) to offer the model."""
        return (MEMORY_UPDATE_TOOL,) if self.enabled and not self.answers_from_memory else ()

    # --- staging ----------------------------------------------------------------------

    @contextmanager
    def attempt(self) -> Iterator[MemoryRequest | None]:
        """Bind a fresh scope for one model attempt; the tool stages on its ledger."""
        if not self.enabled:
            self._ledger = None
            yield None
            return
        # Read when the tool first judges a staged change: a turn without a memory call never reads them.
        sources = (lambda: self.sources or gate.TurnSources.unknown()) if memory_settings().gate else None
        with memory_scope(self.user_id, self.writes_enabled, snapshot=self.snapshot, limits=self.limits,
                          ask_first=self.ask_first, sources=sources, today=self.today) as request:
            self._ledger = request.ledger
            yield request

    @property
    def staged(self) -> list[Operation]:
        """What the latest attempt staged (pinned operations, in order)."""
        return list(self._ledger.operations) if self._ledger is not None else []

    @property
    def staged_reasons(self) -> list[str]:
        """Why each staged operation is to be asked about rather than saved ("" = commit), in order."""
        return list(self._ledger.reasons) if self._ledger is not None else []

    @property
    def may_fall_back(self) -> bool:
        """A fallback model may run only when the failed attempt staged nothing."""
        return not self.staged

    # --- the one outcome -----------------------------------------------------------------

    @property
    def outcome(self) -> MemoryOutcome | None:
        return self._outcome

    async def commit(self, *, cancel_event: threading.Event | None = None) -> MemoryOutcome:
        """Commit the staged batch after the final answer; return the turn's outcome.

        Call once, only when the answer is complete. A batch that no longer
        applies to the latest memory is `rejected` (code `conflict` when an
        entry it edits changed meanwhile); a database error or a lock wait
        past the limit is `discarded`, and the answer stands. If the task is
        cancelled meanwhile, the worker's transaction decides (the event is
        set) and the outcome records what it decided before CancelledError.
        With an idempotency key, a commit already made under it is not
        repeated: its outcome is returned (and `replayed` is True). A
        connection lost at the COMMIT is settled on what the database then
        says (committed, or discarded "connection_lost"), or `unconfirmed`
        when it does not answer within COMMIT_CONFIRM_SECONDS.
        """
        if self._outcome is not None:
            return self._outcome
        if not self.enabled:
            return self._settle(MemoryOutcome(DISABLED, code=self.off_code))
        if self.snapshot is None:
            return self._settle(MemoryOutcome(UNAVAILABLE))
        operations = self.staged
        event = cancel_event or threading.Event()
        if not operations:
            first = await self._first_outcome()
            if first is not None:
                return first
            unsaved = self._unsaved_statements()
            if unsaved:
                why = gate.unsaved_reason(self.sources or gate.TurnSources.unknown())
                return await self._propose(unsaved, event, [why] * len(unsaved), code="asked")
            return self._settle(MemoryOutcome(NOTHING_TO_COMMIT))
        reasons = self.staged_reasons
        if self.ask_first:
            return await self._propose(operations, event, reasons)
        if any(reasons):
            keep, ask, asked = gate.split(operations, reasons, start=self.snapshot, limits=self.limits)
            if not keep:
                return await self._propose(ask, event, asked, code="asked")
            return await self._commit_and_ask(keep, ask, asked, event)
        guard = self._guard(lambda *, snapshot, changed, outcome, limits, change_id=None: MemoryOutcome(
            COMMITTED, operation_count=len(operations), changed=tuple(changed),
            usage=notify.usage_payload(snapshot, limits), code="" if changed else "unchanged", change_id=change_id,
            until=self._until(snapshot) if changed else "",
        ))
        worker = asyncio.ensure_future(
            store.commit_in_worker(user_id=self.user_id, operations=operations, cancel_event=event, limits=self.limits,
                                   origin={"conversation_id": self.conversation_id, "turn_id": self.turn_id,
                                           "model": self.model, "source_intent": self._source_intent()},
                                   guard=guard, erasures=self.erasures)
        )
        return await self._decided(worker, event, len(operations),
                                   lambda result: self._committed(result, len(operations)))

    async def _propose(self, operations: list[Operation], event: threading.Event, reasons: list[str],
                       code: str = "") -> MemoryOutcome:
        """Store the staged batch as a proposal, at the point where a commit would run."""
        guard = self._guard(lambda *, proposal_id: MemoryOutcome(
            PROPOSED, operation_count=len(operations), proposal_id=proposal_id, code=code))
        worker = asyncio.ensure_future(in_worker(
            proposals.create, user_id=self.user_id, operations=operations,
            conversation_id=self.conversation_id, turn_id=self.turn_id, should_cancel=event.is_set, guard=guard,
            reasons=reasons, erasures=self.erasures, model=self.model,
            quotes=self._quotes(operations, reasons),
        ))

        async def proposed(proposal_id: int) -> MemoryOutcome:
            # Open memory pages refresh and list it (usage only on the wire; memory is unchanged).
            await asyncio.shield(notify.broadcast_memory_changed(self.user_id, self.snapshot, self.limits))  # type: ignore[arg-type]
            return self._settle(MemoryOutcome(PROPOSED, operation_count=len(operations), proposal_id=proposal_id,
                                              code=code))

        return await self._decided(worker, event, len(operations), proposed)

    async def _commit_and_ask(self, keep: list[Operation], ask: list[Operation], reasons: list[str],
                              event: threading.Event) -> MemoryOutcome:
        """Commit what trusted code does not doubt and propose the rest, in one transaction."""
        count = len(keep) + len(ask)
        guard = self._guard(
            lambda *, snapshot, changed, outcome, limits, change_id=None, proposal_id=None: MemoryOutcome(
                COMMITTED, operation_count=count, changed=tuple(changed), usage=notify.usage_payload(snapshot, limits),
                code="partly_asked", change_id=change_id, proposal_id=proposal_id,
            ))
        worker = asyncio.ensure_future(in_worker(
            store.commit_watch()(proposals.commit_and_propose), user_id=self.user_id, keep=keep, ask=ask,
            reasons=reasons,
            conversation_id=self.conversation_id, turn_id=self.turn_id, should_cancel=event.is_set,
            limits=self.limits, guard=guard, erasures=self.erasures, model=self.model,
            source_intent=self._source_intent(), quotes=self._quotes(ask, reasons),
        ))

        async def done(both) -> MemoryOutcome:
            result, proposal_id = both
            outcome = await self._committed(result, count)
            if not result.changed:  # open memory pages still list the proposal
                await asyncio.shield(notify.broadcast_memory_changed(self.user_id, result.snapshot, self.limits))
            code = "partly_asked" if outcome.code in ("", "unchanged") else outcome.code
            self._outcome = replace(outcome, proposal_id=proposal_id, code=code)
            return self._outcome

        async def confirmed(result: store.CommitResult) -> MemoryOutcome:
            # Committed with its proposal, in one transaction: find the proposal this turn made.
            proposal_id = await in_worker(self._proposal_of_turn) if self.turn_id else None
            return await done((result, proposal_id))

        return await self._decided(worker, event, count, done, confirmed)

    def _quotes(self, operations: Sequence[Operation], reasons: Sequence[str]) -> list[str]:
        """The person's own sentence each asked operation is shown beside (`gate.said`; "" = none)."""
        sources = self._sources
        if sources is None:  # the gate never read the turn: it asked nothing a sentence explains
            return [""] * len(operations)
        return [gate.said(operation, why, sources) for operation, why in zip(operations, reasons)]

    def _unsaved_statements(self) -> list[Operation]:
        """The person's lasting statements the model did not save, as profile adds to ask about (`gate`).

        Only when the gate is on, the turn may write, the model made no
        memory call at all, the message was not a question about memory, and
        each entry is new and fits beside the profile as it is.
        """
        ledger = self._ledger
        if (ledger is None or ledger.calls or not self.writes_enabled or self.replayed or self.snapshot is None
                or not memory_settings().gate or self._heard is None or self.answers_from_memory
                or not gate.may_be_unsaved(self._latest_message())):  # before reading the turn for the gate
            return []
        sources = self.sources
        if sources is None:
            return []
        offered: list[Operation] = []
        snapshot = self.snapshot
        for entry in gate.unsaved_statements(sources):
            operation = Operation(target="user", action="add", content=entry)
            if entry in snapshot.entries("user"):
                continue
            try:
                snapshot = apply_operations(snapshot, [operation], self.limits)
            except (MemoryValidationError, ValueError):
                continue
            offered.append(operation)
        return offered

    def _proposal_of_turn(self) -> int | None:
        return next((proposal.id for proposal in proposals.pending(user_id=self.user_id)
                     if proposal.turn_id == self.turn_id[:64]), None)

    async def _decided(self, worker: asyncio.Future, event: threading.Event, count: int, done,
                       confirmed=None) -> MemoryOutcome:
        """Await the worker's transaction (a commit or a proposal) and settle the outcome from it.

        If the task is cancelled meanwhile, the event is set, the worker's
        transaction decides, the outcome records what it decided, and
        CancelledError is re-raised. `done` turns the worker's result into the outcome;
        `confirmed` (default `done`) the commit's result when its outcome was
        unknown and the database then confirmed it.
        """
        try:
            result = await asyncio.shield(worker)
        except asyncio.CancelledError:
            event.set()
            try:
                result = await worker
            except idempotency.AlreadyCommitted as first:
                self._replay(first.outcome)
            except store.CommitOutcomeUnknown as unknown:
                await asyncio.shield(self._unknown(unknown, count, confirmed or done))
            except Exception as exc:
                self._settle(self._failed(exc, count))
            else:
                await done(result)
            raise
        except store.CommitOutcomeUnknown as unknown:
            return await self._unknown(unknown, count, confirmed or done)
        except idempotency.AlreadyCommitted as first:
            # A commit under this idempotency key already stands: nothing was written now.
            return self._replay(first.outcome)
        except store.UnknownUser:
            # Deactivated or deleted while the turn ran: nothing is written.
            return await self.discard(reason="account_closed")
        except store.MemoryTurnedOff:
            # The person switched memory off while the turn ran.
            return await self.discard(reason="switched_off")
        except Exception as exc:
            return self._settle(self._failed(exc, count))
        return await done(result)

    async def _unknown(self, unknown: store.CommitOutcomeUnknown, count: int, confirmed) -> MemoryOutcome:
        """The COMMIT's answer was lost: ask the database (bounded) and settle on what it says, or say we could not."""
        try:
            truth = await in_worker(unknown.confirm)
        except Exception as exc:  # confirm answers UNKNOWN rather than raise; be sure all the same
            logger.warning("memory commit outcome not confirmed: %s", type(exc).__name__)
            truth = store.Confirmation.UNKNOWN
        if truth is store.Confirmation.COMMITTED:
            return await confirmed(unknown.result)
        if truth is store.Confirmation.NOT_COMMITTED:
            return self._settle(MemoryOutcome(DISCARDED, operation_count=count, code="connection_lost"))
        return self._settle(MemoryOutcome(UNCONFIRMED, operation_count=count, code="unconfirmed"))

    async def discard(self, *, reason: str) -> MemoryOutcome:
        """End a turn that did not complete: drop what was staged; return the outcome.

        A committed outcome stays committed: the commit already happened.
        """
        if self._outcome is not None:
            return self._outcome
        operations = self.staged
        if operations:
            await asyncio.shield(in_worker(
                store.record_discarded,
                user_id=self.user_id, operations=operations, reason=reason[:40],
            ))
            return self._settle(MemoryOutcome(DISCARDED, operation_count=len(operations), code=reason[:40]))
        if not self.enabled:
            return self._settle(MemoryOutcome(DISABLED, code=self.off_code))
        if self.snapshot is None:
            return self._settle(MemoryOutcome(UNAVAILABLE))
        return self._settle(MemoryOutcome(NOTHING_TO_COMMIT))

    # --- making room -------------------------------------------------------------------

    @property
    def wants_room(self) -> bool:
        """True when an add was refused for capacity that `make_room` could offer as a proposal."""
        return self._ledger is not None and bool(self._ledger.room_wanted)

    async def make_room(self) -> int | None:
        """After a save that did not fit, propose a tidied document that keeps it; return the proposal's id or None.

        Runs after the commit (outside the turn's staging and transaction),
        only when the model's add was refused for capacity and trusted code
        would otherwise have let it through (`MemoryLedger.room_wanted`),
        memory is on and the deployment offers Tidy up. It is ONE tidy
        request (`agentmemory.tidy.propose` with the refused entries as
        `pending`): no chat history, the same scan, capacity and pins as
        every write, and nothing is saved until the person saves the
        proposal. Any failure proposes nothing (a code in the log, never
        content).
        """
        ledger = self._ledger
        if ledger is None or not ledger.room_wanted or not self.enabled or self.replayed:
            return None
        if not tidy.offered():
            self.room = "not_offered"
            return None
        saved = self.committed.snapshot if self.committed is not None else self.snapshot
        wanted = [(target, content) for target, content in ledger.room_wanted
                  if saved is None or content not in saved.entries(target)]
        if not wanted:
            self.room = "already_stored"
            return None
        target = wanted[0][0]
        pending = [content for where, content in wanted if where == target]
        try:
            proposal_id = await in_worker(tidy.propose, user_id=self.user_id, target=target, pending=pending)
        except tidy.TidyFailed as failed:
            logger.info("make room: nothing proposed (%s)", failed.code)
            self.room = str(failed.code)[:40]
        except Exception as exc:
            logger.warning("make room: nothing proposed (%s)", type(exc).__name__)
            self.room = f"error:{type(exc).__name__}"[:40]
        else:
            self.room = "proposed"
            return proposal_id
        return None

    # --- idempotency ---------------------------------------------------------------------

    def _guard(self, outcome: Callable[..., MemoryOutcome]) -> idempotency.CommitGuard | None:
        """The commit's guard for this turn's key: it stores `outcome(**facts)`, settled, content-free."""
        if self.idempotency_key is None:
            return None
        return idempotency.CommitGuard(user_id=self.user_id, key=self.idempotency_key,
                                       describe=lambda **facts: _stored(self._settled(outcome(**facts))))

    async def _first_outcome(self) -> MemoryOutcome | None:
        """The outcome of a commit already made under this turn's key, settled as this turn's; or None."""
        if self.idempotency_key is None:
            return None
        try:
            stored = await in_worker(idempotency.first_outcome, user_id=self.user_id, key=self.idempotency_key)
        except Exception as exc:  # nothing is committed either way: the turn goes on
            logger.warning("idempotency record not read: %s", type(exc).__name__)
            return None
        return self._replay(stored) if stored is not None else None

    def _replay(self, stored: Mapping) -> MemoryOutcome:
        """Settle the turn on the first commit's stored outcome; nothing is committed now."""
        if self._outcome is None:
            self.replayed = True
            self._outcome = MemoryOutcome(
                status=str(stored["status"]), operation_count=int(stored.get("operation_count") or 0),
                changed=tuple(stored.get("changed") or ()), usage=stored.get("usage"),
                code=str(stored.get("code") or ""),
                memory_full=bool(stored.get("memory_full")), proposal_id=stored.get("proposal_id"),
                change_id=stored.get("change_id"), until=str(stored.get("until") or ""),
            )
        return self._outcome

    def _settled(self, outcome: MemoryOutcome) -> MemoryOutcome:
        return replace(outcome, memory_full=self._memory_full(outcome))

    def _settle(self, outcome: MemoryOutcome) -> MemoryOutcome:
        if self._outcome is None:
            self._outcome = self._settled(outcome)
        return self._outcome

    def _memory_full(self, outcome: MemoryOutcome) -> bool:
        """True when the person should review their memory: a change did not fit, or it is nearly full."""
        if not self.enabled:
            return False
        refused = outcome.code == "over_capacity" or (self._ledger is not None and self._ledger.capacity_refused)
        if refused:
            return True
        if outcome.usage is not None:
            return any(document["percent"] >= FULL_PERCENT for document in outcome.usage.values())
        if self.snapshot is None:
            return False
        return any(usage(self.snapshot, target, self.limits).percent >= FULL_PERCENT for target in TARGETS)

    def _failed(self, exc: BaseException, count: int) -> MemoryOutcome:
        if isinstance(exc, MemoryValidationError):
            return MemoryOutcome(REJECTED, operation_count=count, code=exc.code)
        if isinstance(exc, store.CommitCancelled):
            return MemoryOutcome(DISCARDED, operation_count=count, code="cancelled")
        if store.is_lock_timeout(exc):
            logger.warning("memory commit gave up waiting for the person's lock")
            return MemoryOutcome(DISCARDED, operation_count=count, code="memory_busy")
        logger.warning("memory commit failed: %s", type(exc).__name__)
        return MemoryOutcome(DISCARDED, operation_count=count, code="commit_failed")

    def _until(self, snapshot) -> str:
        return _until_of(self.staged, snapshot) if snapshot is not None else ""

    async def _committed(self, result: store.CommitResult, count: int) -> MemoryOutcome:
        self.committed = result
        code = "" if result.changed else "unchanged"
        outcome = self._settle(MemoryOutcome(
            COMMITTED, operation_count=count, changed=tuple(result.changed),
            usage=notify.usage_payload(result.snapshot, self.limits), code=code,
            change_id=result.change_id, until=self._until(result.snapshot) if result.changed else "",
        ))
        if result.changed:
            announced = await asyncio.shield(
                notify.broadcast_memory_changed(self.user_id, result.snapshot, self.limits)
            )
            if announced is False:  # the channel layer failed: say so rather than leave other pages stale
                self._outcome = outcome = replace(outcome, code="not_announced")
        return outcome


def _until_of(operations, snapshot) -> str:
    """The one last day the entries these operations wrote now hold until ("" for none or several)."""
    days = {snapshot.expiry_of(op.target, op.content) for op in operations
            if op.action in ("add", "replace") and op.content and op.expires}
    days.discard(None)
    return days.pop() if len(days) == 1 else ""


def _stored(outcome: MemoryOutcome) -> dict:
    """What an idempotency record keeps of an outcome: its fields, without the sentence (derived)."""
    stored = outcome.as_dict()
    del stored["message"]
    return stored
