"""Where a plain turn's server CPU goes: cProfile over bench/turns.py's workload (docs/benchmarks.md, issue 42).

Not run by `make bench` (a profiled server is four times slower; its shares,
not its milliseconds, are the finding). For each of the memory-off chat server
and the floor (bench/_floor_asgi.py), in turn (`--servers off,on,floor` adds the memory-on server): a scratch database with
--clients people (bench/turns.py's), one daphne under bench/_profiled_daphne.py,
one warm-up turn per client, then --turns plain turns per client (at most 29:
CHAT_TURN_RATE is 30/min), the profile written to .cache/profile/<server>.prof.
Then it prints each one's CPU by package and our own code's pieces.

    DATABASE_URL=postgres://postgres@127.0.0.1:5432/test .venv/bin/python bench/_profile_turn.py [--clients 16] [--turns 25]
"""
from __future__ import annotations

import argparse
import asyncio
import collections
import os
import pstats
import signal
import subprocess
import sys
import time
from pathlib import Path

import _setup
import turns

OUT = _setup.ROOT / ".cache" / "profile"
IDLE = "<method 'get' of '_queue.SimpleQueue' objects>"  # a worker thread waiting for work, not CPU


def profile(server: str, *, server_url: str, clients: int, count: int) -> tuple[Path, float]:
    out = OUT / f"{server}.prof"
    with _setup.bench_database(name="agentmemory_bench_profile", database_url=server_url) as url:
        cookies = turns.prepare_people(clients)
        from django.db import connections

        connections.close_all()
        port = turns.free_port()
        env = {**os.environ, "DATABASE_URL": url, "AGENTMEMORY_ENABLED": "1" if server == "on" else "0",
               "DEMO_MODEL_DELAY_MS": "0",
               "OPENAI_API_KEY": "", "DEBUG": "0", "SECRET_KEY": "bench-only-secret-key",
               "ALLOWED_HOSTS": "127.0.0.1", "LOG_LEVEL": "WARNING", "PROFILE_OUT": str(out)}
        env.pop("REDIS_URL", None)
        with open(OUT / f"{server}.log", "w") as log:
            process = subprocess.Popen(
                [sys.executable, str(Path(__file__).with_name("_profiled_daphne.py")), "-b", "127.0.0.1",
                 "-p", str(port), turns.APPS[server]], cwd=_setup.ROOT, env=env, stdout=log, stderr=log)
            try:
                turns.wait_listening(process, port, "daphne")
                figures = turns.RunFigures(memory=server)
                process.send_signal(signal.SIGUSR1)
                asyncio.run(turns.drive(port=port, cookies=cookies, turns=count, warmup=1, writes_every=0,
                                        figures=figures, pid=process.pid))
                process.send_signal(signal.SIGUSR2)
                time.sleep(3)
            finally:
                turns.stop_server(process)
        if figures.failed or figures.turns != clients * count:
            raise SystemExit(f"{server}: {figures.failed} turns failed")
    return out, figures.cpu_seconds * 1000 / figures.measured_turns


PACKAGES = ("openai", "httpx2", "httpx", "httpcore", "django", "channels", "daphne", "twisted", "autobahn",
            "psycopg", "asgiref", "opentelemetry", "click")


def bucket(filename: str) -> str:
    relative = filename.replace(str(_setup.ROOT) + "/", "")
    if "site-packages/" in relative:
        return relative.split("site-packages/")[1].split("/")[0]
    if relative.startswith(("chat/", "agentmemory/", "config/", "bench/")):
        return relative
    return "python (stdlib, builtins)"


def report(path: Path, turns_measured: int) -> None:
    stats = pstats.Stats(str(path))
    by = collections.Counter()
    total = 0.0
    for (filename, _, name), (_, _, self_time, _, _) in stats.stats.items():
        if name == IDLE:
            continue
        by[bucket(filename)] += self_time
        total += self_time
    print(f"{path.name}: {total * 1000 / turns_measured:.2f} ms of profiled CPU per turn")
    for key, value in by.most_common(25):
        print(f"  {key:45s} {value * 1000 / turns_measured:6.2f} ms  {100 * value / total:5.1f} %")
    print("  our entry points, cumulative (ms per turn):")
    wanted = {("chat/agent.py", "_stream_round"), ("chat/llm.py", "stream_chat"), ("chat/text_calls.py", "feed"),
              ("chat/repetition.py", "feed"), ("chat/turns.py", "_bounded"), ("chat/turns.py", "_attempts"),
              ("agentmemory/turn.py", "heard"), ("chat/turns.py", "_complete"), ("chat/demo_model.py", "events"),
              ("chat/demo_model.py", "handle"), ("chat/credentials.py", "session_valid"), ("chat/budget.py", "admit_turn"),
              ("openai/_streaming.py", "__aiter__"), ("agentmemory/telemetry/spans.py", "memory_span")}
    for (filename, line, name), (_, _, _, cumulative, _) in sorted(stats.stats.items()):
        if any(filename.endswith(f) and name == n for f, n in wanted):
            print(f"    {filename.split('site-packages/')[-1].replace(str(_setup.ROOT) + '/', '')}:{line} {name:18s}"
                  f" {cumulative * 1000 / turns_measured:6.2f}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--clients", type=int, default=16)
    parser.add_argument("--turns", type=int, default=25, help="measured turns per client (at most 29)")
    parser.add_argument("--servers", default="off,floor", help="which of off, on (memory on) and floor, in order")
    args = parser.parse_args(argv)
    OUT.mkdir(parents=True, exist_ok=True)
    server_url = _setup.server_url()  # bench_database points DATABASE_URL at its scratch database
    for server in args.servers.split(","):
        path, cpu_ms = profile(server, server_url=server_url, clients=args.clients, count=args.turns)
        print(f"{server}: {cpu_ms:.2f} ms of server CPU per turn under the profiler")
        report(path, args.clients * (args.turns + 1))
        print()
    return 0


if __name__ == "__main__":
    sys.exit(main())
