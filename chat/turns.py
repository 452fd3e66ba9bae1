"""One chat turn, shared by every transport (WebSocket consumer, REST views).

This module keeps the conversation log, runs the agent loop and relays
frames; the memory side of the turn (read fail-open, a fresh scope per model
attempt, one commit after the complete answer, the one outcome) belongs to
`agentmemory.turn.MemoryTurn`, which any other agent loop can use the same
way. So the transports stay thin and the invariants are tested once:

- Identity comes from the transport's authenticated user; the model never
  names whose memory it edits.
- The agent for the turn is a request-local copy with this turn's prompt.
- Only a complete answer commits: a cancel, disconnect, model error, an
  answer that did not finish, or an exception before the commit discards
  what was staged (and records the discard, without content).
- If the primary model fails after something was staged, no fallback runs
  in that ledger: the turn fails. A fallback runs only when nothing was
  staged, as a fresh attempt with a fresh scope.
- Once the commit has returned, nothing later contradicts it: if the reply
  cannot be stored, or the person presses Stop while it is stored, the turn
  still completes with the committed outcome and says the reply was not
  stored.
- An unreachable database does not stop the answer either: the turn runs
  from this message alone, memory "unavailable", and stores nothing (the
  conversation log is skipped, not queued for later).
- A temporary chat (`TemporaryChat`, held by the transport) neither reads
  nor writes memory and never touches the conversation log: its messages
  live only in the transport's object and go with it.
- Memory is off for a person who switched it off (`agentmemory.preferences`):
  the memory turn reads the switch with the memory and offers no tool.
- A turn commits only while the credential it came with still holds: the
  transport's `signed_in` check (`chat.credentials`) is read again just
  before a staged change is committed, and a session or token that ended
  while the answer was written (sign-out, a password change, a revoked
  token) fails the turn `session_ended` with nothing saved.

Frames for a live client go through `emit` (turn_started, delta, tool,
turn_completed, turn_failed); `run_turn` also returns the result or raises
`TurnFailed`, so a transport without streaming ignores `emit`. Each turn is
one `memory.turn` span (the eval turn an `eval.turn` span) holding only
metadata; the tool and commit spans are its children.

Why one module of about 600 lines: `_Turn` is one turn's sequence (prepare
the log, read memory, the model attempts under the deadline, the commit,
storing the reply, the one outcome), and each invariant above holds across
those steps (a Stop between the commit and the stored reply, a fallback only
when nothing was staged). Split by step, each piece would be read without the
others it must agree with. The memory side already lives in
`agentmemory.turn`, the log in `chat.log`, the agent loop in `chat.agent`.
"""
from __future__ import annotations

import asyncio
import logging
import re
import threading
import uuid
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime

from django.conf import settings
from django.db import InterfaceError, OperationalError
from django.utils.translation import gettext, gettext_noop

from agentmemory.rules import rendered_length, summarize
from agentmemory.telemetry import MemorySpan, memory_span
from agentmemory.turn import (
    CODE_MESSAGES,
    DISABLED,
    OUTCOME_MESSAGES,
    MemoryOutcome,
    MemoryTurn,
)
from agentmemory.workers import in_worker

from . import log, retention
from .agent import AttemptResult, ModelError, RequestAgent, ToolEvent
from .agents import chat_agent, memory_free_agent
from .models import Message
from .search import SearchScope

logger = logging.getLogger(__name__)

Emit = Callable[[dict], Awaitable[None]]

# Earlier messages of the conversation sent as context (the event log, not memory).
HISTORY_MESSAGES = 20
# A database that cannot be reached (not one that refuses a value): the turn answers without it.
UNREACHABLE = (OperationalError, InterfaceError)
TITLE_CHARS = 60

# Re-exported for transports and tests: the memory turn owns the outcome words.
NOT_ANNOUNCED_MESSAGE = CODE_MESSAGES["not_announced"]
__all__ = ["OUTCOME_MESSAGES", "MemoryOutcome", "NOT_ANNOUNCED_MESSAGE", "TemporaryChat", "run_turn", "run_eval_turn"]

# The sentences a person reads, marked here (gettext_noop) and translated where they are sent
# (gettext), in the language of the request or socket; the codes next to them stay as they are.
REPLY_NOT_STORED = gettext_noop("This reply could not be saved in your conversation history.")
# Said to the person (a `tool` frame under the answer) while a save that did not fit is offered again
# with room made for it (`_Turn._make_room`); the model never reads it.
ROOM_NOTE = gettext_noop("Your memory is full: the assistant is proposing a tidier version with room for this.")
SESSION_ENDED = "session_ended"
SESSION_ENDED_MESSAGE = gettext_noop("You were signed out before this reply completed (signed out everywhere, "
                                     "password changed or API token revoked); nothing was saved.")
TURN_TIMEOUT = "turn_timeout"
TURN_TIMEOUT_MESSAGE = gettext_noop("The answer took too long and was stopped; nothing was saved to memory.")
_UNSTORABLE = re.compile("[\x00\ud800-\udfff]")


@dataclass
class TemporaryChat:
    """A chat that is never stored: its earlier messages live here, in the transport, only.

    The WebSocket consumer keeps at most one per socket; it ends with the
    socket. `id` is what the client sends back to continue it.
    """

    id: str = field(default_factory=lambda: uuid.uuid4().hex)
    history: list[dict] = field(default_factory=list)

    def remember(self, user_content: str, reply: str) -> None:
        self.history.extend([{"role": Message.Role.USER, "content": user_content},
                             {"role": Message.Role.ASSISTANT, "content": reply}])
        del self.history[:-HISTORY_MESSAGES]


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
    # A plain sentence for the person when something beside memory went wrong
    # after the answer (the reply could not be stored).
    notice: str = ""
    temporary_id: str | None = None  # set for a temporary chat (never stored)

    def completed_frame(self) -> dict:
        return {
            "type": "turn_completed",
            "turn_id": self.turn_id,
            "conversation_id": self.conversation_id,
            "temporary": self.temporary_id is not None,
            "temporary_id": self.temporary_id,
            "message": {
                "id": self.message_id,
                "role": Message.Role.ASSISTANT,
                "content": self.reply,
                "created_at": self.created_at.isoformat() if self.created_at else None,
            },
            "memory": self.memory.as_dict(),
            "notice": self.notice,
        }


class TurnError(Exception):
    """A turn could not run or did not complete; `code` is stable and content-free."""

    code = "turn_error"


class ConversationNotFound(TurnError):
    code = "conversation_not_found"

    def __init__(self) -> None:
        super().__init__(gettext("No conversation of yours has this id; start a new one with conversation_id null."))


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
        self.temporary_id: str | None = None
        # The turn's tool calls as metadata (set by the turn), for reports and evals.
        self.tool_events: tuple[ToolEvent, ...] = ()

    def failed_frame(self) -> dict:
        return {
            "type": "turn_failed",
            "turn_id": self.turn_id,
            "conversation_id": self.conversation_id,
            "temporary": self.temporary_id is not None,
            "temporary_id": self.temporary_id,
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
    temporary: TemporaryChat | None = None,
    signed_in: Callable[[], bool] | None = None,
    idempotency_key: str | None = None,
    completed: Callable[[TurnResult], None] | None = None,
) -> TurnResult:
    """Run one turn for an authenticated person; return the answer and memory outcome.

    With `temporary`, the turn continues that temporary chat: no memory, no
    conversation log (`conversation_id` must be None). `signed_in` re-reads
    the credential the turn came with (`chat.credentials`, run in a worker
    thread) just before a staged change is committed; False fails the turn
    `session_ended` and commits nothing. With `idempotency_key` (claimed by
    the transport, `agentmemory.idempotency`) the turn's memory commit
    happens once per key: a commit already made under it is replayed, not
    repeated. `completed` sees the result as soon as the turn is complete,
    even when a cancel arrives while the reply is stored (the turn then
    re-raises CancelledError, yet it did complete).
    Raise ConversationNotFound for a conversation that is not theirs,
    TurnFailed when no answer was produced (nothing was committed), and
    re-raise CancelledError after discarding what was staged.
    """
    if not getattr(user, "is_authenticated", False):
        raise PermissionError("run_turn serves signed-in people only; untrusted traffic uses run_eval_turn.")
    if temporary is not None and conversation_id is not None:
        raise ValueError("a temporary chat is never stored, so it has no conversation_id")
    turn = _Turn(
        user_id=user.pk,
        content=content,
        memory=MemoryTurn(user_id=user.pk, temporary=temporary is not None, idempotency_key=idempotency_key),
        emit=_quiet(emit),
        cancel_event=cancel_event or threading.Event(),
        temporary=temporary,
        signed_in=signed_in,
        completed=completed,
    )
    return await turn.run(conversation_id)


async def run_eval_turn(*, content: str, emit: Emit | None = None) -> TurnResult:
    """Answer one message with the memory-free agent: no scope, no memory, no storage."""
    agent = await memory_free_agent()
    request_agent = agent.for_request(memory_prompt=None)
    turn_id = uuid.uuid4().hex
    send = _quiet(emit)
    history = [{"role": "user", "content": content}]
    deadline = turn_deadline()
    with memory_span("eval.turn") as span:  # memory-free: outcome and duration, no memory attribute
        try:
            attempt = await _bounded(deadline, _attempts(
                request_agent, models=agent.models, history=history, emit=_tagged(send, turn_id),
                memory=MemoryTurn(user_id=None, enabled=False),
            ))
        except _AttemptsFailed as exc:
            span.set_metadata(outcome="failed")
            raise TurnFailed(exc.code, exc.message, memory=MemoryOutcome(DISABLED), turn_id=turn_id) from exc
        except _DeadlinePassed:
            span.set_metadata(outcome="failed")
            raise TurnFailed(TURN_TIMEOUT, gettext(TURN_TIMEOUT_MESSAGE), memory=MemoryOutcome(DISABLED),
                             turn_id=turn_id) from None
        span.set_metadata(outcome="completed")
    return TurnResult(
        turn_id=turn_id, conversation_id=None, reply=storable(attempt.text), model=attempt.model,
        memory=MemoryOutcome(DISABLED), tool_events=attempt.tool_events,
    )


# --- one turn ----------------------------------------------------------------------


@dataclass
class _Prepared:
    conversation_id: int | None
    user_message_id: int | None
    history: list[dict]
    logged: bool = True  # False: the database was unreachable; nothing of this turn is stored


@dataclass
class _Turn:
    user_id: int
    content: str
    memory: MemoryTurn
    emit: Emit
    cancel_event: threading.Event
    turn_id: str = field(default_factory=lambda: uuid.uuid4().hex)
    prepared: _Prepared = None  # type: ignore[assignment]  # set by the turn's start, before anything reads it
    tool_events: list[ToolEvent] = field(default_factory=list)
    temporary: TemporaryChat | None = None
    signed_in: Callable[[], bool] | None = None
    completed: Callable[[TurnResult], None] | None = None

    @property
    def temporary_id(self) -> str | None:
        return self.temporary.id if self.temporary is not None else None

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
                settled = self.memory.outcome.status if self.memory.outcome else "discarded"
                self._trace(span, outcome="cancelled", memory_status=settled)
                raise
            except BaseException as exc:  # before the turn started: not their conversation, or an error
                span.set_metadata(outcome="refused" if isinstance(exc, ConversationNotFound) else "failed")
                raise
            self._trace(span, outcome="completed", memory_status=result.memory.status)
            return result

    def _trace(self, span: MemorySpan, *, outcome: str, memory_status: str) -> None:
        """Put the design's metadata event on the turn's span: counts and labels, never content."""
        summary = summarize(self.memory.staged)
        committed = self.memory.committed
        after = committed.snapshot if committed else self.memory.snapshot
        span.set_metadata(
            outcome=outcome, memory_status=memory_status,
            operation_count=summary.operation_count, targets=summary.targets,
            user_characters=rendered_length(after, "user") if after else None,
            memory_characters=rendered_length(after, "memory") if after else None,
            retry_count=committed.retry_count if committed else None,
            # Operations trusted code doubted and offered to the person instead (`agentmemory.gate`).
            asked_count=sum(1 for reason in self.memory.staged_reasons if reason),
        )

    async def _run(self, conversation_id: int | None) -> TurnResult:
        deadline = turn_deadline()
        if self.temporary is not None:  # no memory to read and nothing to log: no database at all
            self.prepared = _Prepared(
                conversation_id=None, user_message_id=None, logged=False,
                history=[*self.temporary.history, {"role": Message.Role.USER, "content": self.content}],
            )
        else:
            self.prepared = await in_worker(
                _prepare, user_id=self.user_id, content=self.content, conversation_id=conversation_id,
                memory=self.memory,
            )
        # Where a proposal ("ask before saving") of this turn comes from; ids only.
        self.memory.conversation_id, self.memory.turn_id = self.prepared.conversation_id, self.turn_id
        # Trusted code judges what the model stages against what this turn's messages said.
        self.memory.heard(self.prepared.history)
        send = _tagged(self.emit, self.turn_id)
        attempt = None
        try:
            agent = await chat_agent()
            await self.emit({"type": "turn_started", "turn_id": self.turn_id,
                             "conversation_id": self.prepared.conversation_id,
                             "temporary": self.temporary is not None, "temporary_id": self.temporary_id})
            # Search only the person's own stored conversations, and only while memory is on for
            # this turn (never in a temporary chat, with their switch off, or without the log).
            search = (SearchScope(user_id=self.user_id, exclude_conversation_id=self.prepared.conversation_id)
                      if self.memory.enabled and self.temporary is None and self.prepared.logged else None)
            request_agent = agent.for_request(memory_prompt=self.memory.prompt(), search=search,
                                              memory_tool=not self.memory.answers_from_memory,
                                              heard=self.memory.heard_tool_result)
            try:
                attempt = await _bounded(deadline, _attempts(
                    request_agent, models=agent.models, history=self.prepared.history, emit=send,
                    memory=self.memory,
                ))
            except _DeadlinePassed:
                # The stream was closed when the deadline cancelled it; the slot frees as this returns.
                raise TurnFailed(TURN_TIMEOUT, gettext(TURN_TIMEOUT_MESSAGE),
                                 memory=await self.memory.discard(reason=TURN_TIMEOUT)) from None
            except _AttemptsFailed as exc:
                self.tool_events = list(exc.tool_events)
                if exc.staged and exc.code != "model_incomplete":
                    raise TurnFailed(
                        "model_failed_after_staging",
                        gettext("The model failed after proposing a memory change, so nothing was saved and no "
                                "fallback model ran. Send your message again."),
                        memory=await self.memory.discard(reason="model_failed_after_staging"),
                    ) from exc
                raise TurnFailed(exc.code, exc.message, memory=await self.memory.discard(reason=exc.code)) from exc
            self.tool_events = list(attempt.tool_events)
            if self.cancel_event.is_set():
                raise _Cancelled()
            if self.memory.staged and self.signed_in is not None and not await in_worker(self.signed_in):
                raise TurnFailed(SESSION_ENDED, gettext(SESSION_ENDED_MESSAGE),
                                 memory=await self.memory.discard(reason=SESSION_ENDED))
            self.memory.model = attempt.model  # the model whose answer staged the batch (write-quality figures)
            outcome = await self.memory.commit(cancel_event=self.cancel_event)
            if outcome.code == "cancelled":
                raise _Cancelled()
            if (outcome.saved or outcome.status == "proposed") and self.prepared.logged:
                # Deleted while the turn ran: the change stands, without a link to a chat that is gone.
                await _forget_links_if_gone(self.user_id, self.prepared.conversation_id)
            if outcome.code == "account_closed":  # checked under the commit's lock
                raise TurnFailed(SESSION_ENDED, gettext("Your account was deactivated or deleted before this reply "
                                                         "completed; nothing was saved."), memory=outcome)
        except asyncio.CancelledError:
            if attempt is not None and self.memory.outcome is not None and self.memory.outcome.code != "cancelled":
                # The commit finished while the task was being cancelled: the turn is complete.
                await self._complete(attempt, self.memory.outcome)
                raise
            await self._fail(TurnFailed("cancelled", gettext("The turn was stopped; nothing was saved."),
                                        memory=await self.memory.discard(reason="cancelled")))
            raise
        except _Cancelled:
            failure = TurnFailed("cancelled", gettext("The turn was stopped; nothing was saved."),
                                 memory=await self.memory.discard(reason="cancelled"))
            await self._fail(failure)
            raise failure from None
        except TurnFailed as failure:
            await self._fail(failure)
            raise
        except Exception as exc:
            logger.error("chat turn failed: %s", type(exc).__name__)
            failed = TurnFailed(
                "internal_error", gettext("Something went wrong on our side; nothing was saved. Try again."),
                memory=await self.memory.discard(reason="turn_error"),
            )
            await self._fail(failed)
            raise failed from exc
        return await self._complete(attempt, outcome)

    async def _complete(self, attempt: AttemptResult, outcome: MemoryOutcome) -> TurnResult:
        """Store the reply and report the turn complete; the outcome is already decided.

        A Stop or disconnect while the reply is stored waits for the store to
        finish and then re-raises: the person still gets the one true outcome.
        """
        cancelled = False
        if outcome.memory_full and outcome.proposal_id is None and self.memory.wants_room:
            outcome, cancelled = await self._make_room(outcome)
        reply = storable(attempt.text)
        message_id = created_at = None
        notice = ""
        if self.prepared.logged:
            store_reply = asyncio.ensure_future(in_worker(
                log.store_reply, conversation_id=self.prepared.conversation_id,
                user_message_id=self.prepared.user_message_id, turn_id=self.turn_id, content=reply,
                outcome=outcome.status, metadata=self._metadata(model=attempt.model),
            ))
            while not store_reply.done():
                try:
                    await asyncio.shield(store_reply)
                except asyncio.CancelledError:
                    cancelled = True
                except Exception:
                    break
            try:
                message_id, created_at = store_reply.result()
            except Exception as exc:  # the answer and a commit already made still stand
                logger.warning("reply not stored in the conversation log: %s", type(exc).__name__)
                notice = gettext(REPLY_NOT_STORED)
        if self.temporary is not None:
            self.temporary.remember(self.content, reply)
        result = TurnResult(
            turn_id=self.turn_id, conversation_id=self.prepared.conversation_id, reply=reply,
            model=attempt.model, memory=outcome, tool_events=attempt.tool_events,
            message_id=message_id, created_at=created_at, notice=notice, temporary_id=self.temporary_id,
        )
        if self.completed is not None:
            self.completed(result)
        await self.emit(result.completed_frame())
        if cancelled:
            raise asyncio.CancelledError()
        return result

    async def _make_room(self, outcome: MemoryOutcome) -> tuple[MemoryOutcome, bool]:
        """A save did not fit: offer a tidied document that keeps it, as a proposal under the answer.

        One tidy request after the commit (`MemoryTurn.make_room`); a Stop
        while it runs lets it finish in the background (its proposal waits on
        the memory page) and the turn completes as decided.
        """
        await self.emit({"type": "tool", "tool": "memory_update", "status": "making_room", "operation_count": 0,
                         "message": gettext(ROOM_NOTE)})
        making = asyncio.ensure_future(self.memory.make_room())
        try:
            proposal_id = await asyncio.shield(making)
        except asyncio.CancelledError:
            return outcome, True
        if proposal_id is None:
            return replace(outcome, room=self.memory.room), False
        return replace(outcome, proposal_id=proposal_id, room=self.memory.room), False

    async def _fail(self, failure: TurnFailed) -> None:
        failure.turn_id = self.turn_id
        failure.conversation_id = self.prepared.conversation_id
        failure.temporary_id = self.temporary_id
        failure.tool_events = tuple(self.tool_events)
        if self.prepared.logged:
            try:
                await asyncio.shield(in_worker(
                    _store_failure, user_message_id=self.prepared.user_message_id, outcome=failure.memory.status,
                    metadata={**self._metadata(), "error": failure.code},
                ))
            except UNREACHABLE as exc:
                logger.warning("turn failure not stored in the conversation log: %s", type(exc).__name__)
        await self.emit(failure.failed_frame())

    def _metadata(self, *, model: str = "") -> dict:
        data: dict = {"tools": [event.as_metadata() for event in self.tool_events]}
        if model:
            data["model"] = model
        return data


def storable(text: str) -> str:
    """Return `text` as any database (and UTF-8 JSON) can hold it: no NUL, no lone surrogate."""
    return _UNSTORABLE.sub(lambda found: "" if found.group() == "\x00" else "\ufffd", text)


# --- the turn's deadline -------------------------------------------------------------


class _DeadlinePassed(Exception):
    """The turn's model work ran past CHAT_TURN_TIMEOUT_SECONDS and was cancelled."""


def turn_deadline() -> float:
    """Return the event-loop time by which this turn's model work must end."""
    return asyncio.get_running_loop().time() + settings.CHAT_TURN_TIMEOUT_SECONDS


async def _bounded(deadline: float, work: Awaitable[AttemptResult]) -> AttemptResult:
    """Await `work` until `deadline`; past it, cancel it and raise _DeadlinePassed.

    Cancelling the work leaves the model stream's `async with`, which closes
    the HTTP response, so the model server stops generating. A TimeoutError
    the work raised by itself is not the deadline and passes through.
    """
    bound = asyncio.timeout_at(deadline)
    try:
        async with bound:
            return await work
    except TimeoutError:
        if bound.expired():
            raise _DeadlinePassed() from None
        raise


# --- attempts and the fallback rule -------------------------------------------------


class _AttemptsFailed(Exception):
    def __init__(self, error: ModelError, *, staged: bool, tool_events: Sequence[ToolEvent]) -> None:
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
    memory: MemoryTurn,
) -> AttemptResult:
    """Run the primary model, then the fallback only if nothing was staged.

    Each attempt gets a fresh scope from the memory turn (a fresh ledger on
    the same snapshot), so a fallback never sees or commits what a failed
    attempt staged.
    """
    for index, model in enumerate(models):
        with memory.attempt():
            try:
                return await request_agent.run_attempt(model=model, history=history, emit=emit)
            except ModelError as exc:
                if not memory.may_fall_back or index + 1 == len(models):
                    raise _AttemptsFailed(exc, staged=not memory.may_fall_back, tool_events=exc.tool_events) from exc
        # A fresh attempt: the client drops what the failed model streamed.
        await emit({"type": "delta", "text": "", "reset": True})
    raise AssertionError("an agent always has at least one model")


# --- storage (worker threads: agentmemory.workers.in_worker) ------------------------


async def _forget_links_if_gone(user_id, conversation_id: int | None) -> None:
    try:
        await asyncio.shield(in_worker(retention.forget_links_if_gone, user_id=user_id,
                                       conversation_id=conversation_id))
    except Exception as exc:  # the commit stands; a link to a gone chat names no content, and the page shows none
        logger.warning("links to a deleted conversation not checked: %s", type(exc).__name__)


def _prepare(*, user_id, content: str, conversation_id: int | None, memory: MemoryTurn) -> _Prepared:
    # In the log's thread and connection: one handoff and one connection per turn for both.
    memory.read()
    try:
        if conversation_id is None:  # a new conversation has no earlier messages
            conversation_id, message_id = log.start_new(user_id=user_id, title=_title(content), content=content)
            earlier: list[tuple[str, str]] = []
        else:
            message_id, earlier = log.continue_conversation(
                user_id=user_id, conversation_id=conversation_id, content=content, history=HISTORY_MESSAGES)
    except log.NotTheirs:
        raise ConversationNotFound() from None
    except UNREACHABLE as exc:
        # Fail open here too: answer from this message alone and store nothing of the turn.
        logger.warning("conversation log unavailable for this turn: %s", type(exc).__name__)
        return _Prepared(conversation_id=conversation_id, user_message_id=None,
                         history=[{"role": "user", "content": content}], logged=False)
    history = [{"role": role, "content": text} for role, text in reversed(earlier)]
    history.append({"role": "user", "content": content})
    return _Prepared(conversation_id=conversation_id, user_message_id=message_id, history=history)


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
