"""Running the scenarios through the real chat turn, with throwaway people, and observing what happened.

The only part that touches the database, the model and `chat.turns`: it
creates each scenario's people, seeds their memory, runs the turns, records
observations (which hold content, in memory only) and deletes the people.
The prompt size is measured on the wire, by a request hook on the chat
agent's HTTP client.
"""
from __future__ import annotations

import asyncio
import contextvars
import json
import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from django.contrib.auth import get_user_model
from django.db import connection

from agentmemory import store
from agentmemory.models import Actor
from agentmemory.rules import Operation, Snapshot

from .judging import ScenarioObservation, ScenarioResult, TurnObservation, judge, snapshot_entries
from .scenarios import CONSOLIDATION_KIND, Scenario, Turn

USER_PREFIX = "curation-"


@dataclass
class _RequestTally:
    requests: int = 0
    prompt_chars: int | None = None


_TALLY: contextvars.ContextVar[_RequestTally | None] = contextvars.ContextVar("curation_tally", default=None)


def prompt_chars(body: bytes | str) -> int | None:
    """Characters of the system prompt(s) plus the tool schema in one Chat Completions request body."""
    try:
        data = json.loads(body)
    except (TypeError, ValueError):
        return None
    system = 0
    for message in data.get("messages") or ():
        if message.get("role") not in ("system", "developer"):
            continue
        content = message.get("content") or ""
        if isinstance(content, list):  # content parts
            system += sum(len(part.get("text") or "") for part in content if isinstance(part, dict))
        else:
            system += len(content)
    tools = data.get("tools")
    return system + (len(json.dumps(tools, ensure_ascii=False)) if tools else 0)


class RequestProbe:
    """Counts the model requests of each turn and measures the first one, on the wire.

    A request hook on the chat agent's HTTP client reads the request body and
    keeps two numbers for the turn that made it (a context variable tells
    turns apart, also when two people chat at once). If the client cannot be
    reached, nothing is measured and the figures say so.
    """

    def __init__(self) -> None:
        self._http: Any = None

    @property
    def available(self) -> bool:
        return self._http is not None

    async def install(self) -> None:
        from ..agents import chat_agent

        try:
            agent = await chat_agent()
            http = agent.llm.client._client  # the openai SDK's httpx client
            http.event_hooks["request"].append(self._hook)
        except Exception:  # another client shape: report the prompt size as missing
            self._http = None
            return
        self._http = http

    def remove(self) -> None:
        if self._http is not None:
            hooks = self._http.event_hooks["request"]
            if self._hook in hooks:
                hooks.remove(self._hook)
            self._http = None

    async def _hook(self, request) -> None:
        tally = _TALLY.get()
        if tally is None:
            return
        tally.requests += 1
        if tally.prompt_chars is None:
            try:
                tally.prompt_chars = prompt_chars(request.content)
            except Exception:
                pass


async def _db(function: Callable, /, *args, **kwargs):
    """Run ORM work in a worker thread and close that thread's connection afterwards."""

    def call():
        try:
            return function(*args, **kwargs)
        finally:
            connection.close()

    return await asyncio.to_thread(call)


def _create_user():
    model = get_user_model()
    return model.objects.create_user(**{model.USERNAME_FIELD: f"{USER_PREFIX}{uuid.uuid4().hex}"})


def _seed(user_id, snapshot: Snapshot) -> None:
    operations = [Operation(target=target, action="add", content=entry) for target, entry in snapshot_entries(snapshot)]  # type: ignore[arg-type]
    if operations:
        store.commit_operations(user_id=user_id, operations=operations, actor=Actor.SYSTEM)


def _pending(user_id) -> list:
    from agentmemory import proposals

    return proposals.pending(user_id=user_id)


def accept_pending(user_id) -> tuple[int, list[str]]:
    """Save every pending proposal of a person, oldest first, as the person would; return (saved, failure codes).

    A proposal that no longer applies (or is gone) is left as it is and its
    code is returned; content never leaves this function.
    """
    from agentmemory import proposals
    from agentmemory.rules import MemoryValidationError

    saved, codes = 0, []
    for proposal in reversed(proposals.pending(user_id=user_id)):  # pending() lists the newest first
        try:
            proposals.save(user_id=user_id, proposal_id=proposal.id)
        except MemoryValidationError as exc:
            codes.append(str(getattr(exc, "code", "") or "rejected")[:40])
        except proposals.ProposalGone:
            codes.append("proposal_gone")
        else:
            saved += 1
    return saved, codes


def delete_users(user_ids: Sequence) -> None:
    if user_ids:
        get_user_model().objects.filter(pk__in=list(user_ids)).delete()


class Runner:
    """Runs scenarios one after another (the people of one scenario at once)."""

    def __init__(self, *, probe: RequestProbe | None = None) -> None:
        self.probe = probe
        self.live_users: set = set()  # created and not yet deleted: the command's last-resort cleanup

    async def run_scenario(self, scenario: Scenario, run: int = 1) -> ScenarioObservation:
        users: dict = {}
        try:
            try:
                for person in scenario.people:
                    users[person] = await _db(_create_user)
                    self.live_users.add(users[person].pk)
                for person, snapshot in scenario.seed.items():
                    await _db(_seed, users[person].pk, snapshot)
                seeded = {p: await _db(store.load_snapshot, user_id=u.pk) for p, u in users.items()}
            except Exception as exc:
                return ScenarioObservation(scenario=scenario, run=run, setup_error=type(exc).__name__)
            conversations = await asyncio.gather(*(
                self._converse(users[person], [t for t in scenario.turns if t.person == person], seeded[person],
                               indexes=[i for i, t in enumerate(scenario.turns) if t.person == person])
                for person in users
            ), return_exceptions=True)
            for outcome in conversations:
                if isinstance(outcome, BaseException):
                    if not isinstance(outcome, Exception):
                        raise outcome
                    # The harness itself failed (e.g. memory could not be read back): no verdict.
                    error = f"harness:{type(outcome).__name__}"
                    return ScenarioObservation(scenario=scenario, run=run, setup_error=error)
            turns = tuple(sorted((t for c in conversations for t in c), key=lambda t: t.index))  # type: ignore[union-attr]  # raised above
            accepted, saves, codes = {}, 0, []
            if scenario.kind == CONSOLIDATION_KIND:
                # The person accepts the question: save what was offered, then read memory again.
                try:
                    for person, user in users.items():
                        saved, failed = await _db(accept_pending, user.pk)
                        saves += saved
                        codes += failed
                        accepted[person] = await _db(store.load_snapshot, user_id=user.pk)
                except Exception as exc:
                    return ScenarioObservation(scenario=scenario, run=run, setup_error=f"harness:{type(exc).__name__}")
            return ScenarioObservation(scenario=scenario, run=run, turns=turns, seeded=seeded, accepted=accepted,
                                       accepted_saves=saves, accept_codes=tuple(codes))
        finally:
            ids = [user.pk for user in users.values()]
            await asyncio.shield(_db(delete_users, ids))
            self.live_users.difference_update(ids)

    async def _converse(self, user, turns: Sequence[Turn], before: Snapshot, *, indexes) -> list[TurnObservation]:
        from ..turns import TurnFailed, run_turn

        observed = []
        conversation_id = None
        seen_proposals = {proposal.id for proposal in await _db(_pending, user.pk)}
        for index, turn in zip(indexes, turns):
            tally = _RequestTally()
            token = _TALLY.set(tally)
            started = time.perf_counter()
            reply, code, events, status, memory = None, "", (), "", None
            try:
                result = await run_turn(user=user, content=turn.text, conversation_id=conversation_id)
            except TurnFailed as exc:
                code = exc.code or "turn_failed"
                memory = getattr(exc, "memory", None)
                status = _status(memory)
                events = tuple(getattr(exc, "tool_events", ()) or ())
                conversation_id = getattr(exc, "conversation_id", None) or conversation_id
            except Exception as exc:  # any other error of the turn: a code, never its message
                code = f"error:{getattr(exc, 'code', '') or type(exc).__name__}"
            else:
                reply, events = result.reply or "", tuple(result.tool_events)  # type: ignore[assignment]
                memory = getattr(result, "memory", None)
                status = _status(memory)
                conversation_id = result.conversation_id or conversation_id
            finally:
                latency = (time.perf_counter() - started) * 1000
                _TALLY.reset(token)
            after = await _db(store.load_snapshot, user_id=user.pk)
            pending = await _db(_pending, user.pk)
            new_proposals = tuple(proposal for proposal in pending if proposal.id not in seen_proposals)
            seen_proposals |= {proposal.id for proposal in pending}
            measured = self.probe is not None and self.probe.available
            observed.append(TurnObservation(
                person=turn.person, index=index, role=turn.role, reply=reply, code=code, latency_ms=latency,
                tool_events=events, before=before, after=after,
                prompt_chars=tally.prompt_chars if measured else None,
                requests=tally.requests if measured else None, memory_status=status,
                memory_code=str(getattr(memory, "code", "") or "")[:40],
                proposal_id=getattr(memory, "proposal_id", None), proposals=new_proposals,
                room=str(getattr(memory, "room", "") or "")[:40],
            ))
            before = after
        return observed


def _status(outcome) -> str:
    return str(getattr(outcome, "status", "") or "")[:40]


async def run_suite(
    scenarios: Sequence[Scenario],
    *,
    runs: int = 1,
    on_result: Callable[[ScenarioResult], None] | None = None,
    runner: Runner | None = None,
) -> list[ScenarioResult]:
    """Run every scenario `runs` times through run_turn; return the judged results."""
    probe = RequestProbe()
    await probe.install()
    runner = runner or Runner()
    runner.probe = probe
    results = []
    try:
        for run in range(1, runs + 1):
            for scenario in scenarios:
                result = judge(await runner.run_scenario(scenario, run))
                results.append(result)
                if on_result is not None:
                    on_result(result)
    finally:
        probe.remove()
    return results
