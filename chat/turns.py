"""One chat turn, shared by every transport (WebSocket consumer, REST views).

The turn keeps the write path's boundaries, so the transports stay thin and
the invariants are tested once, here:

- Identity comes from the transport's authenticated user and is bound with
  `memory_scope`; the model never names whose memory it edits.
- The snapshot is read at the start, in a worker thread. Any read error
  fails open: memory status "unavailable", an empty block, writes off.
- The agent for the turn is a request-local copy with this turn's prompt.
- The memory tool only stages on the turn's ledger. The ledger is committed
  once, after the final answer, in a worker thread that a cancel can still
  roll back. A cancel, disconnect, model error or exception before that
  discards it (and records the discard, without content).
- If the primary model fails after something was staged, no fallback runs
  in that ledger: the turn fails. A fallback runs only when nothing was
  staged, as a fresh attempt with a fresh scope.
- An unreachable database does not stop the answer either: the turn runs
  from this message alone, memory "unavailable", and stores nothing (the
  conversation log is skipped, not queued for later).

Frames for a live client go through `emit` (turn_started, delta, tool,
turn_completed, turn_failed); `run_turn` also returns the result or raises
`TurnFailed`, so a transport without streaming ignores `emit`. Each turn is
one `memory.turn` span (the eval turn an `eval.turn` span) holding only
metadata; the tool and commit spans are its children.
"""
from __future__ import annotations

import asyncio
import logging
import threading
import uuid
from collections.abc import Awaitable, Callable, Mapping, Sequence
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass, field
from datetime import datetime

from django.db import InterfaceError, OperationalError, close_old_connections, transaction
from django.utils import timezone

from agentmemory import notify, store
from agentmemory.conf import memory_settings
from agentmemory.prompt import compile_memory_prompt
from agentmemory.rules import MemoryValidationError, Operation, Snapshot, document_length, summarize
from agentmemory.scope import MemoryRequest, memory_scope
from agentmemory.telemetry import MemorySpan, memory_span

from .agent import AttemptResult, ModelError, RequestAgent, ToolEvent
from .agents import chat_agent, memory_free_agent
from .models import Conversation, Message

logger = logging.getLogger(__name__)

Emit = Callable[[dict], Awaitable[None]]

# Earlier messages of the conversation sent as context (the event log, not memory).
HISTORY_MESSAGES = 20
# A database that cannot be reached (not one that refuses a value): the turn answers without it.
UNREACHABLE = (OperationalError, InterfaceError)
TITLE_CHARS = 60

COMMITTED = "committed"
NOTHING_TO_COMMIT = "nothing_to_commit"
UNAVAILABLE = "unavailable"
DISABLED = "disabled"
DISCARDED = "discarded"
REJECTED = "rejected"

OUTCOME_MESSAGES = {
    COMMITTED: "Memory saved.",
    NOTHING_TO_COMMIT: "No memory change in this turn.",
    UNAVAILABLE: "Memory could not be read this turn: the answer was given without it and nothing was saved.",
    DISABLED: "Memory is off for this chat.",
    DISCARDED: "The turn did not complete, so its memory changes were discarded; nothing was saved.",
    REJECTED: (
        "The answer stands, but the memory change was not saved: it no longer fits your latest "
        "memory (it may have been edited meanwhile). Ask again to retry."
    ),
}


NOT_ANNOUNCED_MESSAGE = (
    "Memory saved, but your other open pages were not told (live updates are unavailable); reload them to see it."
)


@dataclass(frozen=True)
class MemoryOutcome:
    """What happened to memory in one turn, without any content."""

    status: str
    operation_count: int = 0
    changed: tuple[str, ...] = ()
    usage: Mapping | None = None
    code: str = ""
    message: str = ""

    def as_dict(self) -> dict:
        return {
            "status": self.status,
            "message": self.message or OUTCOME_MESSAGES[self.status],
            "operation_count": self.operation_count,
            "changed": list(self.changed),
            "usage": dict(self.usage) if self.usage is not None else None,
            "code": self.code,
        }


@dataclass(frozen=True)
class TurnResult:
    turn_id: str
    conversation_id: int | None
    reply: str
    model: str
    memory: MemoryOutcome
    tool_events: tuple[ToolEvent, ...] = ()
    message_id: int | None = None
    created_at: datetime | None = None

    def completed_frame(self) -> dict:
        return {
            "type": "turn_completed",
            "turn_id": self.turn_id,
            "conversation_id": self.conversation_id,
            "message": {
                "id": self.message_id,
                "role": Message.Role.ASSISTANT,
                "content": self.reply,
                "created_at": self.created_at.isoformat() if self.created_at else None,
            },
            "memory": self.memory.as_dict(),
        }


class TurnError(Exception):
    """A turn could not run or did not complete; `code` is stable and content-free."""

    code = "turn_error"


class ConversationNotFound(TurnError):
    code = "conversation_not_found"

    def __init__(self) -> None:
        super().__init__("No conversation of yours has this id; start a new one with conversation_id null.")


class TurnFailed(TurnError):
    """The turn started but gave no answer; memory was not changed."""

    def __init__(self, code: str, message: str, *, memory: MemoryOutcome, turn_id: str = "",
                 conversation_id: int | None = None) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.memory = memory
        self.turn_id = turn_id
        self.conversation_id = conversation_id

    def failed_frame(self) -> dict:
        return {
            "type": "turn_failed",
            "turn_id": self.turn_id,
            "conversation_id": self.conversation_id,
            "code": self.code,
            "message": self.message,
            "memory": self.memory.as_dict(),
        }


class _Cancelled(Exception):
    """The caller set the cancel event; the turn stops without committing."""


# --- the public entry points ---------------------------------------------------


async def run_turn(
    *,
    user,
    content: str,
    conversation_id: int | None = None,
    emit: Emit | None = None,
    cancel_event: threading.Event | None = None,
) -> TurnResult:
    """Run one turn for an authenticated person; return the answer and memory outcome.

    Raise ConversationNotFound for a conversation that is not theirs,
    TurnFailed when no answer was produced (nothing was committed), and
    re-raise CancelledError after discarding what was staged.
    """
    if not getattr(user, "is_authenticated", False):
        raise PermissionError("run_turn serves signed-in people only; untrusted traffic uses run_eval_turn.")
    config = memory_settings()
    turn = _Turn(
        user_id=user.pk,
        content=content,
        memory_on=config.enabled,
        limits=dict(config.limits),
        emit=_quiet(emit),
        cancel_event=cancel_event or threading.Event(),
    )
    return await turn.run(conversation_id)


async def run_eval_turn(*, content: str, emit: Emit | None = None) -> TurnResult:
    """Answer one message with the memory-free agent: no scope, no memory, no storage."""
    agent = await memory_free_agent()
    request_agent = agent.for_request(memory_prompt=None)
    turn_id = uuid.uuid4().hex
    send = _quiet(emit)
    history = [{"role": "user", "content": content}]
    with memory_span("eval.turn") as span:  # memory-free: outcome and duration, no memory attribute
        try:
            attempt, _ = await _attempts(
                request_agent, models=agent.models, history=history, emit=_tagged(send, turn_id),
                scope=lambda: nullcontext(None),
            )
        except _AttemptsFailed as exc:
            span.set_metadata(outcome="failed")
            raise TurnFailed(exc.code, exc.message, memory=MemoryOutcome(DISABLED), turn_id=turn_id) from exc
        span.set_metadata(outcome="completed")
    return TurnResult(
        turn_id=turn_id, conversation_id=None, reply=attempt.text, model=attempt.model,
        memory=MemoryOutcome(DISABLED), tool_events=attempt.tool_events,
    )


# --- one turn ----------------------------------------------------------------------


@dataclass
class _Prepared:
    conversation_id: int | None
    user_message_id: int | None
    history: list[dict]
    snapshot: Snapshot | None
    logged: bool = True  # False: the database was unreachable; nothing of this turn is stored


@dataclass
class _Turn:
    user_id: int
    content: str
    memory_on: bool
    limits: dict
    emit: Emit
    cancel_event: threading.Event
    turn_id: str = field(default_factory=lambda: uuid.uuid4().hex)
    prepared: _Prepared | None = None
    # Staged operations that no commit has decided on yet; discarded on any exit.
    pending: list[Operation] = field(default_factory=list)
    # Set when a commit's result is known, even if the task was cancelled meanwhile.
    settled: MemoryOutcome | None = None
    tool_events: list[ToolEvent] = field(default_factory=list)
    # For the turn's span only: what the model staged, and the commit's result.
    staged: list[Operation] = field(default_factory=list)
    committed: store.CommitResult | None = None

    async def run(self, conversation_id: int | None) -> TurnResult:
        # The turn's span is the parent of its tool and commit spans: the
        # context travels with the tasks into the commit's worker thread.
        with memory_span("memory.turn") as span:
            try:
                result = await self._run(conversation_id)
            except TurnFailed as failure:
                outcome = "cancelled" if failure.code == "cancelled" else "failed"
                self._trace(span, outcome=outcome, memory_status=failure.memory.status)
                raise
            except asyncio.CancelledError:
                settled = self.settled.status if self.settled else DISCARDED
                self._trace(span, outcome="cancelled", memory_status=settled)
                raise
            except BaseException as exc:  # before the turn started: not their conversation, or an error
                span.set_metadata(outcome="refused" if isinstance(exc, ConversationNotFound) else "failed")
                raise
            self._trace(span, outcome="completed", memory_status=result.memory.status)
            return result

    def _trace(self, span: MemorySpan, *, outcome: str, memory_status: str) -> None:
        """Put the design's metadata event on the turn's span: counts and labels, never content."""
        summary = summarize(self.staged)
        after = self.committed.snapshot if self.committed else (self.prepared.snapshot if self.prepared else None)
        span.set_metadata(
            outcome=outcome, memory_status=memory_status,
            operation_count=summary.operation_count, targets=summary.targets,
            user_characters=document_length(after.user) if after else None,
            memory_characters=document_length(after.memory) if after else None,
            retry_count=self.committed.retry_count if self.committed else None,
        )

    async def _run(self, conversation_id: int | None) -> TurnResult:
        self.prepared = await _in_thread(
            _prepare, user_id=self.user_id, content=self.content, conversation_id=conversation_id,
            load_memory=self.memory_on,
        )
        send = _tagged(self.emit, self.turn_id)
        try:
            agent = await chat_agent()
            await self.emit({"type": "turn_started", "turn_id": self.turn_id,
                             "conversation_id": self.prepared.conversation_id})
            memory_prompt = None
            if self.memory_on:
                memory_prompt = compile_memory_prompt(
                    snapshot=self.prepared.snapshot, limits=self.limits,
                    writes_enabled=self.prepared.snapshot is not None,
                )
            request_agent = agent.for_request(memory_prompt=memory_prompt)
            try:
                attempt, staged = await _attempts(
                    request_agent, models=agent.models, history=self.prepared.history, emit=send,
                    scope=self._scope, on_staged=self._track,
                )
            except _AttemptsFailed as exc:
                self.tool_events = list(exc.tool_events)
                if exc.staged:
                    raise TurnFailed(
                        "model_failed_after_staging",
                        "The model failed after proposing a memory change, so nothing was saved and no "
                        "fallback model ran. Send your message again.",
                        memory=self._discarded(),
                    ) from exc
                raise TurnFailed(exc.code, exc.message, memory=self._no_change()) from exc
            self.tool_events = list(attempt.tool_events)
            if self.cancel_event.is_set():
                raise _Cancelled()
            outcome = await self._commit(staged)
            return await self._complete(attempt, outcome)
        except asyncio.CancelledError:
            await self._fail(TurnFailed("cancelled", "The turn was stopped; nothing was saved.",
                                        memory=self.settled or self._discarded()), reason="cancelled")
            raise
        except _Cancelled:
            failure = TurnFailed("cancelled", "The turn was stopped; nothing was saved.", memory=self._discarded())
            await self._fail(failure, reason="cancelled")
            raise failure from None
        except TurnFailed as failure:
            await self._fail(failure, reason=failure.code)
            raise
        except Exception as exc:
            logger.error("chat turn failed: %s", type(exc).__name__)
            failure = TurnFailed(
                "internal_error", "Something went wrong on our side; nothing was saved. Try again.",
                memory=self._discarded(),
            )
            await self._fail(failure, reason="turn_error")
            raise failure from exc

    def _scope(self) -> AbstractContextManager[MemoryRequest | None]:
        if not self.memory_on:
            return nullcontext(None)
        snapshot = self.prepared.snapshot
        return memory_scope(self.user_id, snapshot is not None, snapshot=snapshot, limits=self.limits)

    def _track(self, operations: list[Operation]) -> None:
        self.pending = self.staged = operations

    async def _commit(self, operations: list[Operation]) -> MemoryOutcome:
        if not self.memory_on:
            return MemoryOutcome(DISABLED)
        if self.prepared.snapshot is None:
            return MemoryOutcome(UNAVAILABLE)
        if not operations:
            return MemoryOutcome(NOTHING_TO_COMMIT)
        count = len(operations)
        task = asyncio.ensure_future(
            store.commit_in_worker(
                user_id=self.user_id, operations=operations, cancel_event=self.cancel_event, limits=self.limits,
            )
        )
        try:
            result = await asyncio.shield(task)
        except asyncio.CancelledError:
            # The worker decides inside its transaction; learn what it decided.
            self.cancel_event.set()
            self.settled = await self._settle(task, count)
            raise
        except MemoryValidationError as exc:
            self.pending = []
            return MemoryOutcome(REJECTED, operation_count=count, code=exc.code)
        except store.CommitCancelled:
            self.pending = []
            raise _Cancelled() from None
        except Exception as exc:  # the commit rolled back; the answer still stands
            self.pending = []
            logger.warning("memory commit failed: %s", type(exc).__name__)
            return MemoryOutcome(
                DISCARDED, operation_count=count, code="commit_failed",
                message="The answer stands, but memory could not be saved (a database error). Try again later.",
            )
        self.pending = []
        return await self._committed(result, count)

    async def _settle(self, task: asyncio.Future, count: int) -> MemoryOutcome:
        try:
            result = await task
        except Exception:
            self.pending = []
            return MemoryOutcome(DISCARDED, operation_count=count)
        self.pending = []
        return await self._committed(result, count)

    async def _committed(self, result: store.CommitResult, count: int) -> MemoryOutcome:
        self.committed = result
        usage = notify.usage_payload(result.snapshot, self.limits)
        message = "" if result.changed else "Memory already held this; nothing changed."
        if result.changed:
            announced = await asyncio.shield(
                notify.broadcast_memory_changed(self.user_id, result.snapshot, self.limits)
            )
            if not announced:  # the channel layer failed: say so rather than leave other pages stale
                message = NOT_ANNOUNCED_MESSAGE
        return MemoryOutcome(
            COMMITTED, operation_count=count, changed=tuple(result.changed), usage=usage, message=message,
        )

    async def _complete(self, attempt: AttemptResult, outcome: MemoryOutcome) -> TurnResult:
        message_id = created_at = None
        if self.prepared.logged:
            try:
                message_id, created_at = await asyncio.shield(_in_thread(
                    _store_reply, conversation_id=self.prepared.conversation_id,
                    user_message_id=self.prepared.user_message_id, turn_id=self.turn_id, content=attempt.text,
                    outcome=outcome.status, metadata=self._metadata(model=attempt.model),
                ))
            except UNREACHABLE as exc:  # the answer (and a commit already made) still stand
                logger.warning("reply not stored in the conversation log: %s", type(exc).__name__)
        result = TurnResult(
            turn_id=self.turn_id, conversation_id=self.prepared.conversation_id, reply=attempt.text,
            model=attempt.model, memory=outcome, tool_events=attempt.tool_events,
            message_id=message_id, created_at=created_at,
        )
        await self.emit(result.completed_frame())
        return result

    async def _fail(self, failure: TurnFailed, *, reason: str) -> None:
        failure.turn_id = self.turn_id
        failure.conversation_id = self.prepared.conversation_id
        pending, self.pending = self.pending, []
        if pending:
            await asyncio.shield(_in_thread(
                store.record_discarded, user_id=self.user_id, operations=pending, reason=reason[:40],
            ))
        if self.prepared.logged:
            try:
                await asyncio.shield(_in_thread(
                    _store_failure, user_message_id=self.prepared.user_message_id, outcome=failure.memory.status,
                    metadata={**self._metadata(), "error": failure.code},
                ))
            except UNREACHABLE as exc:
                logger.warning("turn failure not stored in the conversation log: %s", type(exc).__name__)
        await self.emit(failure.failed_frame())

    def _discarded(self) -> MemoryOutcome:
        return MemoryOutcome(DISCARDED, operation_count=len(self.pending))

    def _no_change(self) -> MemoryOutcome:
        if not self.memory_on:
            return MemoryOutcome(DISABLED)
        if self.prepared.snapshot is None:
            return MemoryOutcome(UNAVAILABLE)
        return MemoryOutcome(DISCARDED)

    def _metadata(self, *, model: str = "") -> dict:
        data: dict = {"tools": [event.as_metadata() for event in self.tool_events]}
        if model:
            data["model"] = model
        return data


# --- attempts and the fallback rule -------------------------------------------------


class _AttemptsFailed(Exception):
    def __init__(self, error: ModelError, *, staged: list[Operation], tool_events: Sequence[ToolEvent]) -> None:
        super().__init__(error.message)
        self.code = error.code
        self.message = error.message
        self.staged = staged
        self.tool_events = tuple(tool_events)


async def _attempts(
    request_agent: RequestAgent,
    *,
    models: Sequence[str],
    history: Sequence[dict],
    emit: Emit,
    scope: Callable[[], AbstractContextManager[MemoryRequest | None]],
    on_staged: Callable[[list[Operation]], None] = lambda operations: None,
) -> tuple[AttemptResult, list[Operation]]:
    """Run the primary model, then the fallback only if nothing was staged.

    Each attempt gets a fresh scope (a fresh ledger on the same snapshot),
    so a fallback never sees or commits what a failed attempt staged.
    """
    for index, model in enumerate(models):
        with scope() as request:
            ledger = request.ledger if request is not None else None
            try:
                attempt = await request_agent.run_attempt(model=model, history=history, emit=emit)
            except ModelError as exc:
                staged = list(ledger.operations) if ledger else []
                on_staged(staged)
                if staged or index + 1 == len(models):
                    raise _AttemptsFailed(exc, staged=staged, tool_events=exc.tool_events) from exc
                # A fresh attempt: the client drops what the failed model streamed.
                await emit({"type": "delta", "text": "", "reset": True})
                continue
            except BaseException:
                on_staged(list(ledger.operations) if ledger else [])
                raise
            staged = list(ledger.operations) if ledger else []
            on_staged(staged)
            return attempt, staged
    raise AssertionError("an agent always has at least one model")


# --- storage (worker threads) -------------------------------------------------------


async def _in_thread(function, /, **kwargs):
    """Run ORM work in a worker thread, like a request: fresh connection rules."""
    return await asyncio.to_thread(_with_connection_rules, function, kwargs)


def _with_connection_rules(function, kwargs):
    close_old_connections()
    try:
        return function(**kwargs)
    finally:
        close_old_connections()


def _prepare(*, user_id, content: str, conversation_id: int | None, load_memory: bool) -> _Prepared:
    snapshot = None
    if load_memory:
        try:
            snapshot = store.load_snapshot(user_id=user_id)
        except Exception as exc:  # fail open: answer without memory, write nothing
            logger.warning("memory unavailable for this turn: %s", type(exc).__name__)
    try:
        with transaction.atomic():
            if conversation_id is None:
                conversation = Conversation.objects.create(user_id=user_id, title=_title(content))
            else:
                conversation = Conversation.objects.filter(pk=conversation_id, user_id=user_id).first()
                if conversation is None:
                    raise ConversationNotFound()
            earlier = list(
                conversation.messages.exclude(content="").order_by("-created_at", "-id")
                .values("role", "content")[:HISTORY_MESSAGES]
            )
            message = Message.objects.create(conversation=conversation, role=Message.Role.USER, content=content)
    except UNREACHABLE as exc:
        # Fail open here too: answer from this message alone and store nothing of the turn.
        logger.warning("conversation log unavailable for this turn: %s", type(exc).__name__)
        return _Prepared(conversation_id=conversation_id, user_message_id=None,
                         history=[{"role": "user", "content": content}], snapshot=snapshot, logged=False)
    history = [{"role": row["role"], "content": row["content"]} for row in reversed(earlier)]
    history.append({"role": "user", "content": content})
    return _Prepared(
        conversation_id=conversation.pk, user_message_id=message.pk, history=history, snapshot=snapshot,
    )


def _store_reply(*, conversation_id, user_message_id, turn_id, content, outcome, metadata):
    with transaction.atomic():
        message = Message.objects.create(
            conversation_id=conversation_id, role=Message.Role.ASSISTANT, content=content,
            memory_outcome=outcome, turn_id=turn_id, metadata=metadata,
        )
        Message.objects.filter(pk=user_message_id).update(memory_outcome=outcome, turn_id=turn_id)
        Conversation.objects.filter(pk=conversation_id).update(updated_at=timezone.now())
    return message.pk, message.created_at


def _store_failure(*, user_message_id, outcome, metadata):
    Message.objects.filter(pk=user_message_id).update(memory_outcome=outcome, metadata=metadata)


def _title(content: str) -> str:
    line = " ".join(content.split())
    return line if len(line) <= TITLE_CHARS else line[: TITLE_CHARS - 1] + "…"


# --- frames -----------------------------------------------------------------------


def _quiet(emit: Emit | None) -> Emit:
    """Return an emit that never fails the turn: a gone client is not an error."""

    async def send(frame: dict) -> None:
        if emit is None:
            return
        try:
            await emit(frame)
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            logger.debug("frame not delivered: %s", type(exc).__name__)

    return send


def _tagged(emit: Emit, turn_id: str) -> Emit:
    async def send(frame: dict) -> None:
        await emit({**frame, "turn_id": turn_id})

    return send
