"""Idempotency keys: a request retried with the same key runs, and commits, once.

A client that retries after a dropped connection cannot know whether its
first request ran. It sends the same `Idempotency-Key` header
(draft-ietf-httpapi-idempotency-key-header) with the retry, and the server
answers from the first attempt instead of running it again. This module owns
that concept for every route and loop that takes a key: the chat's
`POST /api/chat/turns/`, `POST /api/memory/operations/`, and the memory turn
API (`MemoryTurn(idempotency_key=...)`) that another project's agent loop uses.

The key. 1 to 255 visible ASCII characters (no space, comma, quote or
backslash), sent bare (`Idempotency-Key: 4f1c...`) or as the draft's
Structured Field string (`Idempotency-Key: "4f1c..."`); a random UUID is a
good key. Anything else is refused (`InvalidKey`, 400): a comma also catches
a repeated header, which the server joins with commas. Keys are per person:
the same key from two people names two unrelated requests, and nobody can
see or block another person's result.

The record (`models.IdempotencyKey`), one per person and key, holds nothing
the person could not already read, and nothing they could have deleted
elsewhere: the key as its SHA-256, the request as a fingerprint (SHA-256 of
method, path and canonical JSON body), the state (running / done), the
result as a status and a body without memory content or reply text (a chat
turn's reply is a reference to its message; the memory route keeps only its
outcome and rebuilds the memory state as it is now), and the memory outcome
of the one commit made under the key.

Claiming (`claim`) is insert-first, in its own short transaction: the unique
constraint on (person, key) decides between concurrent duplicates, on every
process, so exactly one of them runs (`Claim`); the others find the record
and get its stored result (`Replay`), 409 while it runs (`InProgress`), or
422 when the body differs (`KeyReused`, checked before anything else).

Failures. The record keeps only final results: a chat turn that answered
(200, whatever its memory outcome), a batch of memory operations that
committed (200) or that the memory rules refused as it stood (400, with the
rule's code). Anything that committed nothing and might succeed on a retry
releases the key (`release`), so the retry runs afresh: a turn that failed,
was cancelled, timed out or hit a server error, a conversation that was not
found, a busy database, a full turn budget.

A crashed first attempt. A running record carries a lease (`locked_until`,
the longest the request can run: for a chat turn CHAT_TURN_TIMEOUT_SECONDS
and a margin). Until it ends a retry gets 409 with Retry-After; after, the
first retry takes the key over and runs. The commit itself never runs twice:
`CommitGuard` writes the memory outcome into the record inside the commit's
own transaction, under the person's lock, and a later commit under the same
key (a takeover, a host loop's retry) finds it and commits nothing, answering
the first outcome (`AlreadyCommitted`).

The window. A record counts for AGENTMEMORY["IDEMPOTENCY_WINDOW_HOURS"]
(default 24) after it was made; an older one is ignored, and deleted by the
person's next claim and by `expire` (`manage.py memory_expire_idempotency_keys`,
safe to run from cron). Erasing one's memory deletes all of a person's
records; deleting a conversation deletes those that refer to it; deleting the
account deletes them with it (`store.lock_owner_for_deletion`).

Nothing here logs a key, a fingerprint's input or a body.
"""
from __future__ import annotations

import hashlib
import json
import math
import re
import uuid
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta

from django.contrib.auth import get_user_model
from django.db import IntegrityError, transaction
from django.utils import timezone
from django.utils.text import format_lazy
from django.utils.translation import gettext_lazy

from .conf import memory_settings
from .models import IdempotencyKey

# Below this module: the store raises and catches these too, so they live in
# it and the store never imports from here (tests/test_import_graph.py).
from .store.errors import AlreadyCommitted, UnknownUser

HEADER = "Idempotency-Key"
# Set on every answer given from a stored result instead of a new run.
REPLAYED_HEADER = "Idempotent-Replayed"
MAX_KEY_LENGTH = 255
# Visible ASCII but the quote, the comma and the backslash; bare, or as a quoted sf-string.
_KEY_CHAR = r"[\x21\x23-\x2B\x2D-\x5B\x5D-\x7E]"
KEY_PATTERN = rf'^(?:{_KEY_CHAR}{{1,{MAX_KEY_LENGTH}}}|"{_KEY_CHAR}{{1,{MAX_KEY_LENGTH}}}")$'
_KEY = re.compile(KEY_PATTERN)
# How long a retry is asked to wait while the first request runs (seconds, at most).
RETRY_AFTER_SECONDS = 2
CLAIM_ATTEMPTS = 3
EXPIRE_BATCH = 1000

INVALID_KEY = "invalid_idempotency_key"
KEY_REUSED = "idempotency_key_reused"
KEY_IN_USE = "idempotency_key_in_use"

# In the request's language: each exception reads its sentence when it is raised (`message`).
INVALID_KEY_MESSAGE = format_lazy(gettext_lazy(
    "The {header} header must be 1 to {length} visible ASCII characters (letters, digits or "
    "punctuation; no spaces, commas, quotes or backslashes), sent once, bare or in double quotes. "
    "A random UUID is a good key."), header=HEADER, length=MAX_KEY_LENGTH)
KEY_REUSED_MESSAGE = format_lazy(gettext_lazy(
    "This {header} was already used for a different request. Send a new key with each new request, "
    "and the same key only to retry the same request."), header=HEADER)
KEY_IN_USE_MESSAGE = format_lazy(gettext_lazy(
    "The first request with this {header} is still running. Retry in a moment to get its result."), header=HEADER)


class InvalidKey(ValueError):
    """The header is not a key this server accepts (400)."""

    code = INVALID_KEY

    def __init__(self) -> None:
        self.message = str(INVALID_KEY_MESSAGE)
        super().__init__(self.message)


class KeyReused(Exception):
    """The key was used before by this person for a different request (422)."""

    code = KEY_REUSED

    def __init__(self) -> None:
        self.message = str(KEY_REUSED_MESSAGE)
        super().__init__(self.message)


class InProgress(Exception):
    """The first request with this key is still running (409, Retry-After)."""

    code = KEY_IN_USE

    def __init__(self, retry_after: int = RETRY_AFTER_SECONDS) -> None:
        self.message = str(KEY_IN_USE_MESSAGE)
        super().__init__(self.message)
        self.retry_after = retry_after


@dataclass(frozen=True)
class Claim:
    """This attempt holds the key: run the request, then `finish` or `release` it."""

    user_id: object
    key_digest: str
    record_id: int
    token: str
    taken_over: bool = False  # a crashed attempt's lease ended and this one took the key


@dataclass(frozen=True)
class Replay:
    """The first request with this key finished: answer `status` and `body` again."""

    status: int
    body: dict
    conversation_id: int | None = None


# --- the key and the request -------------------------------------------------------


def parse_key(value: str | None) -> str | None:
    """Return the key the header carries (unquoted), None when there is no header; raise InvalidKey."""
    if value is None:
        return None
    value = value.strip(" \t")
    if not _KEY.match(value):
        raise InvalidKey()
    return value[1:-1] if value.startswith('"') else value


def key_digest(key: str) -> str:
    """Return what the record keeps of a key: its SHA-256, in hex."""
    return hashlib.sha256(key.encode("ascii")).hexdigest()


def fingerprint(*parts) -> str:
    """Return the SHA-256 of `parts` as canonical JSON (sorted keys, no spaces): e.g. method, path, body.

    Two bodies that decode to the same JSON have the same fingerprint, however
    they were spaced or ordered. Only the hash is kept, never the parts.
    """
    canonical = json.dumps(list(parts), sort_keys=True, separators=(",", ":"), ensure_ascii=True, default=str)
    return hashlib.sha256(canonical.encode("ascii")).hexdigest()


def window() -> timedelta:
    return timedelta(hours=memory_settings().idempotency_window_hours)


# --- claiming and settling a key ------------------------------------------------------


def claim(*, user_id, key: str, fingerprint: str, lease_seconds: float) -> Claim | Replay:
    """Take the person's key for one attempt of a request, or say why not.

    Return a Claim (run the request; then `finish` or `release` it) or a
    Replay (the first request finished: answer its result). Raise KeyReused
    when the key came with a different request, InProgress while the first
    attempt runs within its lease (`lease_seconds`, the longest the request
    can take). Call it outside any transaction: each step commits at once,
    so other processes see the claim before the request runs.
    """
    digest = key_digest(key)
    lease = timedelta(seconds=lease_seconds)
    for _ in range(CLAIM_ATTEMPTS):
        now = timezone.now()
        # The person's expired records count for nothing: drop them (this key's too, to claim it afresh).
        IdempotencyKey.objects.filter(user_id=user_id, expires_at__lte=now).delete()
        token = uuid.uuid4().hex
        row: IdempotencyKey | None
        try:
            with transaction.atomic():
                row = IdempotencyKey.objects.create(
                    user_id=user_id, key_digest=digest, fingerprint=fingerprint, state=IdempotencyKey.State.RUNNING,
                    token=token, created_at=now, locked_until=now + lease, expires_at=now + window(),
                )
            return Claim(user_id=user_id, key_digest=digest, record_id=row.pk, token=token)
        except IntegrityError:
            pass  # the key is taken (or the account is gone): look at what holds it
        row = IdempotencyKey.objects.filter(user_id=user_id, key_digest=digest).first()
        if row is None:
            if not get_user_model()._default_manager.filter(pk=user_id).exists():
                raise UnknownUser("No account has this id; memory belongs only to existing accounts.")
            continue  # released or erased meanwhile: try again
        if row.expires_at <= now:
            continue  # expired meanwhile: the next round deletes it
        if row.fingerprint != fingerprint:
            raise KeyReused()
        if row.state == IdempotencyKey.State.DONE:
            return Replay(status=row.status_code or 200, body=dict(row.response or {}),
                          conversation_id=row.conversation_id)
        if row.locked_until is not None and row.locked_until > now:
            raise InProgress(retry_after=_retry_after(row.locked_until - now))
        # The attempt that held it is gone (its lease ended): take it over, one retry only.
        taken = IdempotencyKey.objects.filter(
            pk=row.pk, state=IdempotencyKey.State.RUNNING, token=row.token,
        ).update(token=token, locked_until=now + lease)
        if taken:
            return Claim(user_id=user_id, key_digest=digest, record_id=row.pk, token=token, taken_over=True)
    raise InProgress(retry_after=1)


def finish(claimed: Claim, *, status: int, body: Mapping, conversation_id: int | None = None) -> bool:
    """Store the request's final result; return False when the claim no longer holds the key.

    `body` must be content-free apart from what the person can read
    elsewhere (see the module docstring); it is answered again to a retry.
    """
    return bool(IdempotencyKey.objects.filter(
        pk=claimed.record_id, token=claimed.token, state=IdempotencyKey.State.RUNNING,
    ).update(state=IdempotencyKey.State.DONE, status_code=status, response=dict(body),
             conversation_id=conversation_id, locked_until=None))


def release(claimed: Claim) -> None:
    """Give the key back after a failure that committed nothing, so a retry runs afresh.

    If a commit under the key stands all the same (the guard recorded it),
    the record stays, open to the next retry at once, which replays that
    commit's outcome instead of committing again.
    """
    mine = IdempotencyKey.objects.filter(pk=claimed.record_id, token=claimed.token,
                                         state=IdempotencyKey.State.RUNNING)
    deleted, _ = mine.filter(outcome__isnull=True).delete()
    if not deleted:
        mine.update(locked_until=timezone.now())


def _retry_after(remaining: timedelta) -> int:
    return max(1, min(RETRY_AFTER_SECONDS, math.ceil(remaining.total_seconds())))


def key_parameter(description: str):
    """The header as an OpenAPI parameter of a route that takes it (drf-spectacular): what a retry gets
    there (`description`), then the key's form."""
    from drf_spectacular.utils import OpenApiParameter

    schema = {"type": "string", "minLength": 1, "maxLength": MAX_KEY_LENGTH + 2, "pattern": KEY_PATTERN}
    form = (f" 1 to {MAX_KEY_LENGTH} visible ASCII characters (no spaces, commas, quotes or backslashes), bare or "
            "in double quotes.")
    return OpenApiParameter(HEADER, schema, OpenApiParameter.HEADER, description=description + form)


# --- the commit under a key -------------------------------------------------------------


def first_outcome(*, user_id, key: str) -> dict | None:
    """Return the memory outcome of the commit made under this key in the window, or None."""
    return (IdempotencyKey.objects.filter(user_id=user_id, key_digest=key_digest(key), expires_at__gt=timezone.now(),
                                          outcome__isnull=False)
            .values_list("outcome", flat=True).first())


class CommitGuard:
    """Makes a memory commit (or a proposal) under an idempotency key happen at most once.

    The writer calls `check()` right after it took the person's lock, and
    `record(**facts)` before its transaction ends; both run in that
    transaction, so the outcome is stored if and only if the commit is.
    Every writer of the person queues on that lock, so two commits under one
    key cannot both pass `check()`. `describe(**facts)` turns what the
    writer knows (for a commit: snapshot, changed, outcome, limits; for a
    proposal: proposal_id) into the outcome to store, without content.
    """

    def __init__(self, *, user_id, key: str, describe: Callable[..., Mapping]) -> None:
        self.user_id = user_id
        self.key_digest = key_digest(key)
        self.describe = describe

    def check(self) -> None:
        """Raise AlreadyCommitted when a commit under this key stands (in the window)."""
        stored = (IdempotencyKey.objects.filter(user_id=self.user_id, key_digest=self.key_digest,
                                                expires_at__gt=timezone.now(), outcome__isnull=False)
                  .values_list("outcome", flat=True).first())
        if stored is not None:
            raise AlreadyCommitted(stored)

    def record(self, **facts) -> dict:
        """Store this commit's outcome under the key; return it."""
        outcome = dict(self.describe(**facts))
        for _ in range(2):
            now = timezone.now()
            mine = IdempotencyKey.objects.filter(user_id=self.user_id, key_digest=self.key_digest)
            if mine.filter(expires_at__gt=now).update(outcome=outcome):
                return outcome
            # No request claimed the key (a host loop's commit alone), or its record expired.
            mine.filter(expires_at__lte=now).delete()
            try:
                with transaction.atomic():
                    IdempotencyKey.objects.create(
                        user_id=self.user_id, key_digest=self.key_digest, fingerprint="",
                        state=IdempotencyKey.State.DONE, outcome=outcome, created_at=now, expires_at=now + window(),
                    )
                return outcome
            except IntegrityError:
                continue  # a request claimed the key meanwhile: store the outcome on its record
        raise IntegrityError("the idempotency record could not be written")


# --- retention and erasure ----------------------------------------------------------------


def expire(*, now: datetime | None = None) -> int:
    """Delete every record past its window, in batches; return how many went (safe to repeat)."""
    now = now or timezone.now()
    total = 0
    while True:
        ids = list(IdempotencyKey.objects.filter(expires_at__lte=now).values_list("pk", flat=True)[:EXPIRE_BATCH])
        if not ids:
            return total
        deleted, _ = IdempotencyKey.objects.filter(pk__in=ids, expires_at__lte=now).delete()
        total += deleted


def forget_conversations(*, user_id, conversation_ids: Iterable[int]) -> int:
    """Delete the person's records that refer to these (deleted) conversations; return how many."""
    deleted, _ = IdempotencyKey.objects.filter(user_id=user_id, conversation_id__in=list(conversation_ids)).delete()
    return deleted
