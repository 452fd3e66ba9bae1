"""Secret matching bench: what the gate's secret rules cost a turn with a long chat.

It owns one question (issue 52): with 50 messages of history, what does a
turn pay to know the values its messages gave as secrets and to match each
staged entry against every spelling of them? A turn reads the secrets of its
messages (`gate.turn_secrets`: each message the worker read lately is not
read again, so one new message), computes the spellings once
(`threats.spellings.Spellings`) and matches 4 entries. Also timed: the same
read when no message was read before (a fresh worker). Pure: no database, no
Django settings; the texts are synthetic and nothing of them is printed.

Target: the gate's cost per turn under 1 ms at the 95th percentile.

Run: `.venv/bin/python bench/secret_matching.py [--turns N] [--json] [--smoke]`. Times are the
thread's CPU time (`time.thread_time`), so other processes on the machine do
not count against it.
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from agentmemory.gate.secrets import turn_secrets  # noqa: E402  (after the path)
from agentmemory.threats.spellings import Spellings  # noqa: E402

PERSON = [
    "I'm a backend dev who mostly writes Go and some Python.", "How do I reverse a list in Python?",
    "Our API is versioned under /v2 and we deploy on Thursdays.", "Can you explain Django signals with an example?",
    "The staging database password is Tr0ub4dor&3xyz, remember it please.", "Thanks, that helped a lot.",
    "We use pytest everywhere; the CI image is Debian bookworm.",
    "Write a function that parses ISO dates and returns a datetime in UTC, with tests.",
    "My bank PIN is 4821 by the way.", "Why does my query take 3 seconds on PostgreSQL 16 with 2 million rows?",
]
ASSISTANT = ("Here is one way to do it: use a list comprehension, or the built-in reversed() which returns an "
             "iterator. For example, `items[::-1]` makes a reversed copy, while `items.reverse()` reverses in place. ")
SEARCH_RESULT = '{"status": "found", "untrusted_quoted_history": [{"match": "Home wifi password is swordfish99"}]}'
ENTRIES = ("Prefers terse replies.", "Uses pytest everywhere; CI image is Debian bookworm.", "Home wifi: swordfish99",
           "Deploys on Thursdays; API versioned under /v2.")
HISTORY = 50


def history(turn: int, *, fresh: bool = False) -> list[dict]:
    messages = []
    for index in range(HISTORY // 2 - 1):
        said = PERSON[index % len(PERSON)]
        messages += [{"role": "user", "content": f"{said} ({turn})" if fresh else said},
                     {"role": "assistant", "content": ASSISTANT * 3}]
    messages.append({"role": "tool", "content": SEARCH_RESULT})
    said = f"Turn {turn}: I prefer terse replies; my locker code is {1000 + turn}."
    messages.append({"role": "user", "content": said})
    return messages


def percentiles(samples: list[float]) -> dict[str, float]:
    ordered = sorted(samples)
    return {"median_ms": round(ordered[len(ordered) // 2] * 1e3, 3),
            "p95_ms": round(ordered[-(-95 * len(ordered) // 100) - 1] * 1e3, 3)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--turns", type=int, default=400)
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--smoke", action="store_true", help="a few turns, to show the bench runs (CI)")
    args = parser.parse_args()
    if args.smoke:
        args.turns = 20
    clock = time.thread_time
    turn_secrets(history(-1))  # the history the worker has read before
    per_turn, cold = [], []
    for turn in range(args.turns):
        messages = history(turn)
        start = clock()
        spellings = Spellings.of(turn_secrets(messages))
        refused = [spellings.found_in(entry) for entry in ENTRIES]
        per_turn.append(clock() - start)
        assert refused == [False, False, True, False]
    for turn in range(args.turns // 4):
        messages = history(turn, fresh=True)
        start = clock()
        turn_secrets(messages)
        cold.append(clock() - start)
    figures = {"messages": HISTORY, "entries": len(ENTRIES), "turns": args.turns,
               "per_turn": percentiles(per_turn), "read_when_none_was_read_before": percentiles(cold)}
    if args.json:
        print(json.dumps(figures))
    else:
        print(f"{HISTORY} messages, {len(ENTRIES)} entries, {args.turns} turns (thread CPU time)")
        print("  per turn (secrets, spellings, matching):  median {median_ms} ms  p95 {p95_ms} ms".format(
            **figures["per_turn"]))
        print("  reading 50 messages none read before:     median {median_ms} ms  p95 {p95_ms} ms".format(
            **figures["read_when_none_was_read_before"]))


if __name__ == "__main__":
    main()
