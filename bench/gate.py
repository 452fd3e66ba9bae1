"""The gate's cost per turn in a long chat: 50 messages of history, then the person's latest.

    .venv/bin/python bench/gate.py

For every message of bench/_language_messages.py (English, German, the
other shipped languages and three the gate has no rules for) as the
person's latest, after a history of 50 messages (the person and the
assistant taking turns, a tool result among them, in several languages):
what trusted code reads on a memory-on turn, of two kinds: the model
staged two adds, or it made no memory call. Both read `gate.asks_memory`
on the latest message and `TurnSources.from_messages` over all 51
messages (the secrets of every message the person wrote and every tool
result, the intent, the statements, the language, the threat scan of the
latest message); then `refusal` and `reason` for both adds (the secret
match in every spelling included), or `unsaved_statements` (the person's
words offered, each through one scan that also finds its secrets). The
language detector's cache is cleared before each turn, so every turn pays
for detecting its message. Prints p50, p95 and p99 in milliseconds, of the
thread's CPU time (what the gate costs; steady on a shared, loaded machine)
and of wall time (which other processes' load inflates), with the load
average at the start.
Needs no database; Django settings are configured bare (gettext only).
"""
from __future__ import annotations

import os
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from django.conf import settings  # noqa: E402

settings.configure(USE_I18N=False)

from _language_messages import MESSAGES  # noqa: E402

from agentmemory import gate  # noqa: E402
from agentmemory.gate import language  # noqa: E402
from agentmemory.rules import Operation, Snapshot  # noqa: E402

HISTORY = 50
ROUNDS = 20
START = Snapshot(user=("Prefers Python for data work and Go for services",), memory=("The API is written in Go",))
ANSWER = ("Here is one way to do it: use a generator so the whole file is never held in memory, then "
          "batch the rows by a thousand and write each batch in one transaction. ```python\nfor row in rows:\n"
          "    handle(row)\n``` That keeps memory flat and the commit count low.")
TOOL = '{"results": [{"conversation": "Deploys", "text": "We deploy on Thursdays from main."}]}'


def history() -> list[dict]:
    said = [message for messages in MESSAGES.values() for message in messages]
    turns: list[dict] = []
    for index in range(HISTORY):
        if index % 10 == 5:
            turns.append({"role": "tool", "content": TOOL})
        elif index % 2 == 0:
            turns.append({"role": "user", "content": said[(index * 7) % len(said)]})
        else:
            turns.append({"role": "assistant", "content": ANSWER})
    return turns


def one_turn(messages: list[dict], latest: str, called: bool) -> None:
    gate.asks_memory(latest)
    sources = gate.TurnSources.from_messages(messages)
    if not called:
        gate.unsaved_statements(sources)
        return
    for entry in ("Prefers short answers", "Finished the parser; next is the lexer."):
        operation = Operation(target="user", action="add", content=entry)
        gate.refusal(operation, sources) or gate.reason(operation, start=START, sources=sources)


def main() -> None:
    past = history()
    latest_messages = [message for messages in MESSAGES.values() for message in messages]
    cpu: list[float] = []
    wall: list[float] = []
    kinds: dict[bool, list[float]] = {True: [], False: []}
    load = os.getloadavg()[0]
    for round_ in range(ROUNDS):
        for latest in latest_messages:
            messages = [*past, {"role": "user", "content": latest}]
            language.detect.cache_clear()
            start, start_cpu = time.perf_counter(), time.thread_time()
            one_turn(messages, latest, called=round_ % 2 == 0)
            cpu.append((time.thread_time() - start_cpu) * 1000)
            kinds[round_ % 2 == 0].append(cpu[-1])
            wall.append((time.perf_counter() - start) * 1000)
    for name, timings in (("CPU", cpu), ("wall", wall)):
        timings.sort()
        p95 = timings[int(len(timings) * 0.95)]
        p99 = timings[int(len(timings) * 0.99)]
        print(f"gate per turn ({name}), {HISTORY} messages of history, {len(timings)} turns, load {load:.1f}: "
              f"p50 {statistics.median(timings):.3f} ms, p95 {p95:.3f} ms, p99 {p99:.3f} ms")
    for called, timings in kinds.items():
        timings.sort()
        print(f"  CPU, {'the model staged two adds' if called else 'no memory call (the offer read)'}: "
              f"p50 {statistics.median(timings):.3f} ms, p95 {timings[int(len(timings) * 0.95)]:.3f} ms")


if __name__ == "__main__":
    main()
