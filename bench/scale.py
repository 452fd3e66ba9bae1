"""Scale bench: two daphne workers, one PostgreSQL, one Redis, 500 open sockets.

It owns one question: with the deployment's shape (stateless workers behind
any balancer, one PostgreSQL primary, Redis carrying the channel layer and
the shared throttles), do turns stay correct and prompt when many people
chat at once, and how long does a memory change take to reach a person's
page on the other worker?

- 250 people, each with two open chat sockets: one on worker A, one on
  worker B (500 sockets in all), all opened before the clock starts.
- Turns are sent at a steady rate (open loop, --rate per second for
  --seconds), round-robin over the people: most are plain messages; one in
  five ticks is a write *pair* (the person's two sockets each send a
  `remember:` at the same moment, so two workers commit to one person
  concurrently), and one in five a single `remember:` on one socket.
- Reported: p50/p99 turn latency (send -> turn_completed), errors
  (turn_failed, error frames, timeouts, closed sockets), memory outcomes,
  lost updates (a note whose turn said committed but is not in the
  person's stored memory at the end; must be 0), and the Redis fan-out
  delay: for each single write, when `memory_changed` reached the
  person's socket on the *other* worker, relative to `turn_completed` on
  the socket that sent it (the commit's broadcast is sent before
  `turn_completed`, so small or negative values mean the other page knew
  as soon as the sender did), plus workers' CPU per turn.

The demo model answers at zero delay, so latency is our stack's. The
bench creates and drops its own database on DATABASE_URL's server and uses
Redis database 13 of BENCH_REDIS_URL (default redis://127.0.0.1:6379/13),
which it empties first. It prints figures only, never memory content.

    DATABASE_URL=postgres://postgres@127.0.0.1:5432/test .venv/bin/python bench/scale.py [--rate 15] [--seconds 30]
"""
from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import tempfile
import time
from dataclasses import dataclass, field

import _setup
from turns import cpu_seconds, free_port, start_server, stop_server

DATABASE_NAME = "agentmemory_bench_scale"
DEFAULT_REDIS = "redis://127.0.0.1:6379/13"
TURN_TIMEOUT = 60
# A memory_changed not seen on the other worker within this many seconds counts as missing.
FANOUT_WAIT = 30


@dataclass
class Figures:
    latencies_ns: list[int] = field(default_factory=list)
    errors: dict[str, int] = field(default_factory=dict)
    outcomes: dict[str, int] = field(default_factory=dict)
    expected: dict[int, set[str]] = field(default_factory=dict)  # person -> notes a turn said were saved
    fanout_ms: list[float] = field(default_factory=list)
    fanout_missing: int = 0
    sent: int = 0
    skipped_busy: int = 0

    def error(self, kind: str) -> None:
        self.errors[kind] = self.errors.get(kind, 0) + 1


class Socket:
    """One open chat socket: a reader task routes frames to the running turn."""

    def __init__(self, websocket, person: int, worker: str) -> None:
        self.websocket = websocket
        self.person = person
        self.worker = worker
        self.conversation_id = None
        self.pending: asyncio.Future | None = None
        self.memory_changed: list[float] = []
        self.closed = False
        self.reader = asyncio.create_task(self._read())

    async def _read(self) -> None:
        try:
            async for raw in self.websocket:
                frame = json.loads(raw)
                kind = frame.get("type")
                if kind == "memory_changed":
                    self.memory_changed.append(time.perf_counter())
                elif kind == "turn_started":
                    self.conversation_id = frame.get("conversation_id")
                elif kind in ("turn_completed", "turn_failed", "error"):
                    if self.pending is not None and not self.pending.done():
                        self.pending.set_result((frame, time.perf_counter()))
        except Exception:
            pass
        finally:
            self.closed = True
            if self.pending is not None and not self.pending.done():
                self.pending.set_result(({"type": "closed"}, time.perf_counter()))

    @property
    def busy(self) -> bool:
        return self.pending is not None and not self.pending.done()

    async def turn(self, content: str) -> tuple[dict, float, float]:
        self.pending = asyncio.get_running_loop().create_future()
        sent = time.perf_counter()
        await self.websocket.send(json.dumps({"type": "user_message", "content": content,
                                              "conversation_id": self.conversation_id}))
        frame, arrived = await asyncio.wait_for(asyncio.shield(self.pending), TURN_TIMEOUT)
        return frame, sent, arrived


async def open_sockets(ports: dict[str, int], cookies: list[str]) -> list[tuple[Socket, Socket]]:
    from websockets.asyncio.client import connect

    async def one(person: int, worker: str) -> Socket:
        # Each worker's own origin, port included (config/origins.py refuses any other).
        websocket = await connect(f"ws://127.0.0.1:{ports[worker]}/ws/chat/", origin=f"http://127.0.0.1:{ports[worker]}",
                                  additional_headers={"Cookie": f"sessionid={cookies[person]}"},
                                  compression=None, max_size=None, open_timeout=60)
        return Socket(websocket, person, worker)

    pairs = []
    batch = 50  # open in batches: a burst of 500 handshakes is not what is measured
    for start in range(0, len(cookies), batch):
        people = range(start, min(start + batch, len(cookies)))
        opened = await asyncio.gather(*[one(p, w) for p in people for w in ("a", "b")])
        pairs += [(opened[i], opened[i + 1]) for i in range(0, len(opened), 2)]
    return pairs


async def run_turn(socket: Socket, content: str, note: str | None, figures: Figures,
                   completions: dict | None = None) -> None:
    figures.sent += 1
    try:
        frame, sent, arrived = await socket.turn(content)
    except asyncio.TimeoutError:
        figures.error("timeout")
        return
    except Exception as exc:
        figures.error(type(exc).__name__)
        return
    if frame["type"] != "turn_completed":
        figures.error(frame.get("code") or frame["type"])
        return
    figures.latencies_ns.append(int((arrived - sent) * 1e9))
    memory = frame.get("memory") or {}
    status = memory.get("status", "?") + (f"/{memory['code']}" if memory.get("code") else "")
    figures.outcomes[status] = figures.outcomes.get(status, 0) + 1
    if note is not None and memory.get("status") == "committed" and "memory" in (memory.get("changed") or ()):
        figures.expected.setdefault(socket.person, set()).add(note)
        if completions is not None:
            completions["arrived"] = arrived


async def fanout_sample(sender: Socket, other: Socket, content: str, note: str, figures: Figures) -> None:
    before = len(other.memory_changed)
    completion: dict = {}
    await run_turn(sender, content, note, figures, completion)
    if "arrived" not in completion:
        return
    deadline = time.perf_counter() + FANOUT_WAIT
    while len(other.memory_changed) <= before and time.perf_counter() < deadline:
        await asyncio.sleep(0.005)
    if len(other.memory_changed) <= before:
        figures.fanout_missing += 1
        return
    figures.fanout_ms.append((other.memory_changed[before] - completion["arrived"]) * 1000)


async def drive(pairs, *, rate: float, seconds: float, figures: Figures) -> float:
    tasks = []
    interval = 1 / rate
    started = time.perf_counter()
    ticks = int(rate * seconds)
    for tick in range(ticks):
        delay = started + tick * interval - time.perf_counter()
        if delay > 0:
            await asyncio.sleep(delay)
        person = tick % len(pairs)
        a, b = pairs[person]
        round_number = tick // len(pairs)
        kind = tick % 5
        if kind == 0:  # a write pair: both workers commit to this person at once
            if a.busy or b.busy:
                figures.skipped_busy += 1
                continue
            notes = [f"scale note {person}-{tick}-a", f"scale note {person}-{tick}-b"]
            tasks += [asyncio.create_task(run_turn(s, f"remember: {n}", n, figures)) for s, n in zip((a, b), notes)]
        elif kind == 2:  # a single write: the other worker's socket must hear of it
            sender, other = (a, b) if round_number % 2 == 0 else (b, a)
            if sender.busy:
                figures.skipped_busy += 1
                continue
            note = f"scale note {person}-{tick}"
            tasks.append(asyncio.create_task(fanout_sample(sender, other, f"remember: {note}", note, figures)))
        else:
            sender = a if round_number % 2 == 0 else b
            if sender.busy:
                figures.skipped_busy += 1
                continue
            tasks.append(asyncio.create_task(run_turn(sender, "what do you know?", None, figures)))
    await asyncio.gather(*tasks)
    return time.perf_counter() - started


def lost_updates(people: list[int], figures: Figures) -> tuple[int, int]:
    from agentmemory import store

    lost = checked = 0
    for index, notes in figures.expected.items():
        stored = set(store.load_snapshot(user_id=people[index]).memory)
        checked += len(notes)
        lost += len(notes - stored)
    return lost, checked


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--people", type=int, default=250)
    parser.add_argument("--rate", type=float, default=15.0, help="turns started per second (default 15)")
    parser.add_argument("--seconds", type=float, default=30.0, help="how long turns are sent (default 30)")
    parser.add_argument("--json", action="store_true", help="print the figures as JSON")
    parser.add_argument("--smoke", action="store_true", help="CI's smoke run: a few turns, a second or two, to prove the bench still runs; no figure is judged")
    args = parser.parse_args(argv)
    if args.smoke:
        args.people, args.rate, args.seconds = 5, 10.0, 1.5
    redis_url = os.environ.get("BENCH_REDIS_URL", DEFAULT_REDIS)

    import redis

    try:
        redis.Redis.from_url(redis_url).flushdb()
    except redis.RedisError as exc:
        raise SystemExit(f"Redis is not reachable at {redis_url} ({type(exc).__name__}); set BENCH_REDIS_URL.")

    figures = Figures()
    with _setup.bench_database(name=DATABASE_NAME) as database_url:
        from django.contrib.auth import get_user_model
        from django.db import connections

        from turns import prepare_people

        cookies = prepare_people(args.people)
        people = list(get_user_model().objects.order_by("pk").values_list("pk", flat=True))
        connections.close_all()
        os.environ["REDIS_URL"] = redis_url
        ports = {"a": free_port(), "b": free_port()}
        logs = {w: tempfile.TemporaryFile(mode="w+") for w in ports}
        servers = {}
        try:
            for worker, port in ports.items():
                servers[worker] = start_server(database_url=database_url, memory=True, port=port, log=logs[worker],
                                               env={"REDIS_URL": redis_url})
            cpu_before = {}

            async def go():
                pairs = await open_sockets(ports, cookies)
                opened = time.perf_counter()
                cpu_before.update({w: cpu_seconds(p.pid) for w, p in servers.items()})  # turns only
                seconds = await drive(pairs, rate=args.rate, seconds=args.seconds, figures=figures)
                closed = sum(s.closed for pair in pairs for s in pair)
                for pair in pairs:
                    for socket in pair:
                        await socket.websocket.close()
                return len(pairs) * 2, seconds, closed, opened

            sockets, seconds, closed_early, _ = asyncio.run(go())
            cpu = sum(cpu_seconds(p.pid) - cpu_before[w] for w, p in servers.items())
        finally:
            for process in servers.values():
                stop_server(process)
            for log in logs.values():
                log.close()
        lost, checked = lost_updates(people, figures)

    latency = _setup.latency_figures(figures.latencies_ns) if figures.latencies_ns else {"n": 0}
    fanout = sorted(figures.fanout_ms)

    def pct(values, q):
        return round(values[max(0, -(-q * len(values) // 100) - 1)], 2) if values else None

    completed = len(figures.latencies_ns)
    result = {
        "workers": 2, "people": args.people, "sockets": sockets, "rate_per_second": args.rate,
        "seconds": round(seconds, 1), "turns_sent": figures.sent, "turns_completed": completed,
        "turns_per_second": round(completed / seconds, 1), "skipped_busy": figures.skipped_busy,
        "latency_ms": latency, "errors": figures.errors, "sockets_closed_early": closed_early,
        "memory_outcomes": figures.outcomes, "saved_notes_checked": checked, "lost_updates": lost,
        "fanout_ms": {"n": len(fanout), "p50": pct(fanout, 50), "p99": pct(fanout, 99), "max": pct(fanout, 100),
                      "missing": figures.fanout_missing},
        "workers_cpu_ms_per_turn": round(cpu * 1000 / max(1, figures.sent), 2),
    }
    if args.json:
        print(json.dumps(result, indent=2))
    else:
        print(f"Scale bench: 2 daphne workers, PostgreSQL, Redis; {result['people']} people with "
              f"{result['sockets']} open sockets (one per worker each), demo model at zero delay")
        print(f"turns at a steady {args.rate:g}/s for {result['seconds']} s: {result['turns_sent']} sent, "
              f"{completed} completed ({result['turns_per_second']}/s), {figures.skipped_busy} skipped (socket busy)")
        print(f"turn latency: p50 {latency.get('median_ms')} ms, p99 {latency.get('p99_ms')} ms (n={latency['n']})")
        print(f"errors: {sum(figures.errors.values())} {figures.errors or ''}(must be 0); "
              f"sockets closed early: {closed_early} (must be 0)")
        print(f"memory outcomes: {dict(sorted(figures.outcomes.items()))}")
        print(f"lost updates: {lost} of {checked} saved notes (must be 0)")
        f = result["fanout_ms"]
        print(f"Redis fan-out, memory_changed on the other worker's socket relative to turn_completed on the "
              f"sender's: p50 {f['p50']} ms, p99 {f['p99']} ms, max {f['max']} ms (n={f['n']}; "
              f"missing {f['missing']}, must be 0)")
        print(f"workers' CPU per turn: {result['workers_cpu_ms_per_turn']} ms")
    broken = lost or figures.errors or closed_early or figures.fanout_missing or not completed
    return 1 if broken else 0


if __name__ == "__main__":
    sys.exit(main())
