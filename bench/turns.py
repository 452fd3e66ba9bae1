"""Turn bench: what does memory add to a chat turn, end to end?

It owns one question. N concurrent WebSocket clients (default 32), each
signed in as its own person with a session cookie, send turns to a real
daphne process serving `config.asgi:application`, with the offline demo
model at zero delay, so the figures are our own overhead: the socket, the
turn service, the model client, the conversation log, and (memory on) the
snapshot read, the prompt block, staging and the locked commit. By default
the demo runs inside the chat server (as `make run` serves it), so its own
CPU counts as the server's; `--model http` runs it in a process of its own
(bench/_model_server.py), reached over HTTP through the chat's real
`openai` client as a deployed model is: the server then pays the real HTTP
transport and not the model's work, but on this 2-core machine the model
process competes with the server for CPU. The same workload runs
against a server with memory off and one with memory on, alternating
`--rounds` times, and the bench prints turns per second, the median (p50)
and p99 latency of a turn (send -> turn_completed), the server's CPU time
per turn (robust when other work shares the machine), and on/off ratios.
Every figure covers the measured turns only: the clients connect and send
their `--warmup` turns first, then meet at a barrier, and the server's CPU
and the clock are read there, so a server's one-off work (first imports,
pooled connections, prepared statements) is not counted as per-turn cost.

In the same run, interleaved with those, a third server runs the
like-for-like floor (bench/_floor_asgi.py): the same socket, auth, budget
and conversation-log SQL and the same frames, but no model SDK, agent loop
or memory. Its CPU per turn is what a plain turn cannot go below without
changing what it stores or sends; the bench prints the ratio to it.

Targets (issue 14, this 2-core machine): server CPU per plain turn (memory
off) <= 6.5 ms and <= 1.5x the floor; throughput at 32 clients >= 2x the
66 turns/s measured before (132); memory on/off p50 <= 1.05 and CPU per
turn <= 1.05. Server modes run in a new shuffled order every round.

Two workloads, each measured off and on: "read", plain messages only (every
memory-on turn still reads the snapshot, compiles the block and offers the
tool), and "mixed", where every 10th turn is a `remember:` and five turns
later the matching `forget:` (memory stays within its limits for any run
length). With memory off those two are ordinary one-round replies; with
memory on they take a tool round and a commit, which is the cost a person
actually sees when the agent writes.

Run: `.venv/bin/python bench/turns.py [--clients 32] [--turns 20] [--rounds 2] [--workload both] [--json]`
with DATABASE_URL naming a PostgreSQL server (default
postgres://postgres@127.0.0.1:5432/test); the bench creates and drops its
own database there. No memory content is printed. Each server's shutdown is
checked too: the log must say the chat agents were disposed.
"""
from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import signal
import socket
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

import _setup

DATABASE_NAME = "agentmemory_bench_turns"
TARGET_RATIO = 1.05
TARGET_CPU_MS = 6.5
TARGET_FLOOR_RATIO = 1.5
TARGET_TURNS_PER_SECOND = 132.0  # 2x the 66 turns/s of issue 14's profile
APPS = {"off": "config.asgi:application", "on": "config.asgi:application", "floor": "bench._floor_asgi:application"}
TURN_TIMEOUT = 60


# A remember/forget pair every N turns per client (0: plain turns only).
WORKLOADS = {"read": 0, "mixed": 10}
WORKLOAD_TEXT = {
    "read": "plain turns only (memory on: read, prompt block and tool offered on every turn)",
    "mixed": "a remember and a forget in every 10 turns (memory on: 2 model rounds and a commit in those)",
}


@dataclass
class RunFigures:
    memory: str
    turns: int = 0
    failed: int = 0
    seconds: float = 0.0
    samples_ns: list[int] = field(default_factory=list)
    cpu_seconds: float = 0.0
    measured_turns: int = 0  # sent after the warm-up barrier, failed or not
    disposed: list[bool] = field(default_factory=list)
    frames: int = 0
    round_cpu_ms: list[float] = field(default_factory=list)  # server CPU per measured turn, each round alone


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def prepare_people(count: int) -> list[str]:
    """Create `count` people with a little memory; return their session cookies.

    The memory is worded so the demo model's plain reply with memory on ("here
    is what I remember: ...") has as many words, so as many streamed chunks
    and frames, as its reply with memory off: the on/off ratios then compare
    memory's own work (read, prompt block, tool schema), not a longer answer.
    `bench/turns.py` checks the frame counts are equal.
    """
    from django.contrib.auth import get_user_model
    from django.test import Client

    from agentmemory import store
    from agentmemory.models import Actor
    from agentmemory.rules import Operation

    cookies = []
    for index in range(count):
        user = get_user_model().objects.create_user(username=f"bench-{index}", password=None)
        store.commit_operations(
            user_id=user.pk,
            operations=[
                Operation("user", "add", content=f"Bench person {index} prefers short answers."),
                Operation("memory", "add", content="The bench uses PostgreSQL."),
            ],
            actor=Actor.SYSTEM,
        )
        client = Client()
        client.force_login(user)
        cookies.append(client.cookies["sessionid"].value)
    return cookies


def start_server(*, database_url: str, memory: bool, port: int, log,
                 app: str = "config.asgi:application", env: dict | None = None) -> subprocess.Popen:
    extra = env or {}
    env = {
        **os.environ,
        "DATABASE_URL": database_url,
        "AGENTMEMORY_ENABLED": "1" if memory else "0",
        "DEMO_MODEL_DELAY_MS": "0",
        "OPENAI_API_KEY": "",
        "DEBUG": "0",
        "SECRET_KEY": "bench-only-secret-key",
        "ALLOWED_HOSTS": "127.0.0.1",
        "LOG_LEVEL": "INFO",
    }
    env.pop("REDIS_URL", None)  # one process: the in-memory channel layer (bench/scale.py passes Redis)
    env.update(extra)
    process = subprocess.Popen(
        [sys.executable, "-m", "daphne", "-b", "127.0.0.1", "-p", str(port), app],
        cwd=_setup.ROOT, env=env, stdout=log, stderr=log,
    )
    wait_listening(process, port, "daphne")
    return process


def stop_server(process: subprocess.Popen) -> None:
    process.send_signal(signal.SIGTERM)
    try:
        process.wait(timeout=20)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()


def message_for(client: int, turn: int, writes_every: int) -> str:
    """Return turn `turn`'s message: mostly plain, with a remember/forget pair every `writes_every`."""
    if writes_every:
        step = turn % writes_every
        if step == 1:
            return f"remember: bench note {client}-{turn}"
        if step == 1 + writes_every // 2:
            return f"forget: bench note {client}-{turn - writes_every // 2}"
    return "what do you know?"


async def run_client(*, url: str, origin: str, cookie: str, client: int, turns: int, warmup: int, writes_every: int,
                     figures: RunFigures, warm: asyncio.Barrier) -> None:
    from websockets.asyncio.client import connect

    async with connect(url, origin=origin, additional_headers={"Cookie": f"sessionid={cookie}"},
                       compression=None, max_size=None) as websocket:
        conversation_id = None
        for turn in range(warmup + turns):
            if turn == warmup:
                # Every client has connected and finished its warm-up turns: the
                # measured phase (CPU, time, turns) starts for all of them at once.
                await warm.wait()
            content = message_for(client, turn, writes_every)
            started = time.perf_counter_ns()
            await websocket.send(json.dumps({"type": "user_message", "content": content,
                                             "conversation_id": conversation_id}))
            frames = 0
            while True:
                frame = json.loads(await asyncio.wait_for(websocket.recv(), TURN_TIMEOUT))
                frames += 1
                if frame["type"] == "turn_started":
                    conversation_id = frame["conversation_id"]
                if frame["type"] in ("turn_completed", "turn_failed", "error"):
                    break
            elapsed = time.perf_counter_ns() - started
            if turn < warmup:
                continue
            if frame["type"] != "turn_completed":
                figures.failed += 1
                continue
            figures.turns += 1
            figures.frames += frames
            figures.samples_ns.append(elapsed)


async def drive(*, port: int, cookies: list[str], turns: int, warmup: int, writes_every: int,
                figures: RunFigures, pid: int) -> None:
    """Run the clients; count the server's CPU and the time of the measured turns only.

    Connecting, signing in and the warm-up turns (the server's first-use
    work: imports, prepared statements, pooled connections) happen before
    every client meets at a barrier, and are not part of the figures.
    """
    url = f"ws://127.0.0.1:{port}/ws/chat/"
    # The page's own origin, port included: config/origins.py refuses any other
    # (http://127.0.0.1 alone means port 80, another server).
    origin = f"http://127.0.0.1:{port}"
    warm = asyncio.Barrier(len(cookies) + 1)
    clients = [
        asyncio.ensure_future(run_client(url=url, origin=origin, cookie=cookie, client=index, turns=turns, warmup=warmup,
                                         writes_every=writes_every, figures=figures, warm=warm))
        for index, cookie in enumerate(cookies)
    ]
    waiting = asyncio.ensure_future(warm.wait())
    await asyncio.wait([waiting, *clients], return_when=asyncio.FIRST_COMPLETED)
    if not waiting.done():  # a client failed before the measured phase: release the others
        await warm.abort()
        await asyncio.gather(*clients, waiting, return_exceptions=True)
        for client in clients:
            if client.exception() is not None and not isinstance(client.exception(), asyncio.BrokenBarrierError):
                raise client.exception()
        raise RuntimeError("a client finished before the warm-up barrier")
    before = cpu_seconds(pid)
    started = time.perf_counter()
    await asyncio.gather(*clients)
    figures.seconds += time.perf_counter() - started
    spent = cpu_seconds(pid) - before
    figures.cpu_seconds += spent
    figures.measured_turns += len(cookies) * turns
    figures.round_cpu_ms.append(spent * 1000 / (len(cookies) * turns))


def cpu_seconds(pid: int) -> float:
    """Return the user+system CPU time a process has used (Linux /proc)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def measure(*, database_url: str, memory: bool, cookies: list[str], turns: int, warmup: int, writes_every: int,
            figures: RunFigures, app: str = "config.asgi:application", env: dict | None = None) -> None:
    port = free_port()
    with tempfile.TemporaryFile(mode="w+") as log:
        process = start_server(database_url=database_url, memory=memory, port=port, log=log, app=app, env=env)
        try:
            asyncio.run(drive(port=port, cookies=cookies, turns=turns, warmup=warmup, writes_every=writes_every,
                              figures=figures, pid=process.pid))
        except Exception:
            stop_server(process)
            log.seek(0)
            tail = "\n".join(log.read().splitlines()[-30:])
            print(f"(memory {figures.memory}: the run failed; end of the server log:)\n{tail}", file=sys.stderr)
            raise
        finally:
            if process.poll() is None:
                stop_server(process)
        log.seek(0)
        text = log.read()
    figures.disposed.append("chat agents disposed" in text or app != APPS["off"])
    if figures.failed:
        tail = "\n".join(text.splitlines()[-20:])
        print(f"(memory {figures.memory}: {figures.failed} turns failed; end of the server log:)\n{tail}",
              file=sys.stderr)


def wait_listening(process: subprocess.Popen, port: int, what: str) -> None:
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise SystemExit(f"{what} exited with {process.returncode} before listening; see its log above.")
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            return
        except OSError:
            time.sleep(0.1)
    process.kill()
    raise SystemExit(f"{what} did not start listening within 30 s.")


def start_model_server(log) -> tuple[subprocess.Popen, dict]:
    """Start the demo model in its own process (bench/_model_server.py); return it and
    the environment that points a chat server at it, as at a real model."""
    port = free_port()
    process = subprocess.Popen([sys.executable, str(Path(__file__).with_name("_model_server.py")), str(port)],
                               cwd=_setup.ROOT, stdout=log, stderr=log)
    wait_listening(process, port, "the model server")
    return process, {"OPENAI_API_KEY": "bench-only-key", "OPENAI_BASE_URL": f"http://127.0.0.1:{port}/v1",
                     "OPENAI_MODEL": "demo", "OPENAI_FALLBACK_MODEL": "", "OPENAI_MAX_RETRIES": "0"}


def summarize(run: RunFigures) -> dict:
    latency = _setup.latency_figures(run.samples_ns)
    return {
        "turns": run.turns,
        "failed": run.failed,
        "turns_per_second": round(run.turns / run.seconds, 1) if run.seconds else 0.0,
        "p50_ms": latency["median_ms"],
        "p99_ms": latency["p99_ms"],
        "server_cpu_ms_per_turn": (round(run.cpu_seconds * 1000 / run.measured_turns, 2)
                                   if run.measured_turns else 0.0),
        "frames_per_turn": round(run.frames / run.turns, 1) if run.turns else 0.0,
        "round_cpu_ms_per_turn": [round(value, 2) for value in run.round_cpu_ms],
    }


def round_spread(mine: dict, theirs: dict) -> list[float]:
    """The lowest and highest ratio of CPU per turn between two servers, round by round
    (the servers of one round ran back to back)."""
    ratios = [a / b for a, b in zip(mine["round_cpu_ms_per_turn"], theirs["round_cpu_ms_per_turn"]) if b]
    return [round(min(ratios), 2), round(max(ratios), 2)] if ratios else []


def print_figures(args, result: dict) -> None:
    # A smoke run's few turns prove the bench runs; its figures are not held against the targets.
    judged = not getattr(args, "smoke", False)

    def meets(value, target):
        return ("meets" if value <= target else "MISSES") if judged else "not judged"

    def reaches(value, target):
        return ("meets" if value >= target else "MISSES") if judged else "not judged"

    def rounds(spread):
        return f", rounds {spread[0]:.2f}-{spread[1]:.2f}" if spread else ""

    where = "in its own process, over HTTP" if args.model == "http" else "inside the chat server"
    print(f"Turn bench: {args.clients} WebSocket clients against one daphne process, demo model at zero delay "
          f"{where}; "
          f"{args.turns} measured turns per client per run, {args.rounds} rounds, modes in a shuffled order each round")
    if not judged:
        print("Smoke run: too few turns to judge; no figure below is held against its target.")
    for workload, figures in result["workloads"].items():
        print(f"\nworkload {workload}: {WORKLOAD_TEXT[workload]}")
        print(f"{'server':<14}{'turns':>7}{'failed':>8}{'turns/s':>10}{'p50 ms':>10}{'p99 ms':>10}"
              f"{'CPU ms/turn':>13}{'frames':>8}")
        for mode, label in (("off", "memory off"), ("on", "memory on"), ("floor", "floor")):
            f = figures.get(f"memory_{mode}") or (figures.get("floor") if mode == "floor" else None)
            if f is None:
                continue
            print(f"{label:<14}{f['turns']:>7}{f['failed']:>8}{f['turns_per_second']:>10}{f['p50_ms']:>10}"
                  f"{f['p99_ms']:>10}{f['server_cpu_ms_per_turn']:>13}{f['frames_per_turn']:>8}")
        print(f"on/off: p50 {figures['p50_ratio_on_off']:.3f}x ({meets(figures['p50_ratio_on_off'], TARGET_RATIO)} "
              f"<= {TARGET_RATIO:.2f}), CPU per turn {figures['cpu_ratio_on_off']:.3f}x "
              f"({meets(figures['cpu_ratio_on_off'], TARGET_RATIO)} <= {TARGET_RATIO:.2f}"
              f"{rounds(figures['cpu_ratio_on_off_rounds'])}), "
              f"p99 {figures['p99_ratio_on_off']:.3f}x, throughput {figures['throughput_ratio_on_off']:.3f}x")
        if "floor" in figures:
            off = figures["memory_off"]
            print(f"plain turn (memory off): CPU {off['server_cpu_ms_per_turn']:.2f} ms "
                  f"({meets(off['server_cpu_ms_per_turn'], TARGET_CPU_MS)} <= {TARGET_CPU_MS}), "
                  f"{figures['cpu_ratio_off_floor']:.2f}x the floor "
                  f"({meets(figures['cpu_ratio_off_floor'], TARGET_FLOOR_RATIO)} <= {TARGET_FLOOR_RATIO}"
                  f"{rounds(figures['cpu_ratio_off_floor_rounds'])}); "
                  f"memory on {figures['cpu_ratio_on_floor']:.2f}x the floor; "
                  f"throughput {off['turns_per_second']} turns/s "
                  f"({reaches(off['turns_per_second'], TARGET_TURNS_PER_SECOND)} "
                  f">= {TARGET_TURNS_PER_SECOND:.0f})")
    print(f"\ndaphne shutdown disposed the chat agents: {'yes' if result['shutdown_disposed_agents'] else 'NO'}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--clients", type=int, default=32, help="concurrent WebSocket clients (default 32)")
    parser.add_argument("--turns", type=int, default=15, help="measured turns per client per round (default 15)")
    parser.add_argument("--warmup", type=int, default=2, help="unmeasured turns per client first (default 2)")
    parser.add_argument("--rounds", type=int, default=3, help="off/on alternations per workload (default 3)")
    parser.add_argument("--workload", choices=[*WORKLOADS, "both"], default="both",
                        help="read: plain turns only; mixed: a remember/forget pair every 10 turns (default both)")
    parser.add_argument("--no-floor", action="store_true", help="skip the like-for-like floor server")
    parser.add_argument("--seed", type=int, default=14, help="seed of the shuffled server order")
    parser.add_argument("--model", choices=("in-process", "http"), default="in-process",
                        help="in-process: the offline demo inside each chat server, as make run serves it "
                             "(default); http: the demo in its own process, reached over HTTP as a real model is")
    parser.add_argument("--json", action="store_true", help="print the figures as JSON")
    parser.add_argument("--smoke", action="store_true", help="CI's smoke run: a few turns, a second or two, to prove the bench still runs; no figure is judged"
                             " (plain turns against the off, on and floor servers, 2 clients, one round)")
    args = parser.parse_args(argv)
    if args.smoke:
        args.clients, args.turns, args.warmup, args.rounds, args.workload = 2, 2, 1, 1, "read"
    workloads = list(WORKLOADS) if args.workload == "both" else [args.workload]

    modes = {w: ("off", "on", "floor") if w == "read" and not args.no_floor else ("off", "on") for w in workloads}
    runs = {(w, mode): RunFigures(memory=mode) for w in workloads for mode in modes[w]}
    rng = random.Random(args.seed)
    with tempfile.TemporaryFile(mode="w+") as model_log, _setup.bench_database(name=DATABASE_NAME) as database_url:
        model, model_env = start_model_server(model_log) if args.model == "http" else (None, {})
        try:
            cookies = prepare_people(args.clients)
            from django.db import connections

            connections.close_all()
            for workload in workloads:
                # The modes alternate in a new shuffled order each round, so a change in
                # the machine's load (other people's tests) hits all of them alike.
                for _ in range(args.rounds):
                    order = list(modes[workload])
                    rng.shuffle(order)
                    for mode in order:
                        measure(database_url=database_url, memory=mode == "on", cookies=cookies, turns=args.turns,
                                warmup=args.warmup, writes_every=WORKLOADS[workload],
                                figures=runs[(workload, mode)], app=APPS[mode], env=model_env)
        finally:
            if model is not None:
                stop_server(model)

    result: dict = {"clients": args.clients, "turns_per_client_per_round": args.turns, "rounds": args.rounds,
                    "model": args.model,
                    "targets": {"p50_ratio_on_off": TARGET_RATIO, "cpu_ratio_on_off": TARGET_RATIO,
                                "server_cpu_ms_per_plain_turn": TARGET_CPU_MS, "cpu_ratio_to_floor": TARGET_FLOOR_RATIO,
                                "turns_per_second": TARGET_TURNS_PER_SECOND},
                    "workloads": {}}
    for workload in workloads:
        off, on = summarize(runs[(workload, "off")]), summarize(runs[(workload, "on")])
        figures = {
            "memory_off": off,
            "memory_on": on,
            "p50_ratio_on_off": round(on["p50_ms"] / off["p50_ms"], 3),
            "p99_ratio_on_off": round(on["p99_ms"] / off["p99_ms"], 3),
            "throughput_ratio_on_off": round(on["turns_per_second"] / off["turns_per_second"], 3),
            "cpu_ratio_on_off": round(on["server_cpu_ms_per_turn"] / off["server_cpu_ms_per_turn"], 3),
            "cpu_ratio_on_off_rounds": round_spread(on, off),
            # Plain turns stream replies of the same length on and off (see prepare_people).
            "same_frames_on_off": on["frames_per_turn"] == off["frames_per_turn"],
        }
        if (workload, "floor") in runs:
            floor = figures["floor"] = summarize(runs[(workload, "floor")])
            figures["cpu_ratio_off_floor"] = round(off["server_cpu_ms_per_turn"] / floor["server_cpu_ms_per_turn"], 3)
            figures["cpu_ratio_off_floor_rounds"] = round_spread(off, floor)
            figures["cpu_ratio_on_floor"] = round(on["server_cpu_ms_per_turn"] / floor["server_cpu_ms_per_turn"], 3)
        result["workloads"][workload] = figures
    result["shutdown_disposed_agents"] = all(all(run.disposed) for run in runs.values())

    if args.json:
        print(json.dumps(result, indent=2))
    else:
        print_figures(args, result)
    failed = sum(run.failed for run in runs.values())
    unequal = "read" in result["workloads"] and not result["workloads"]["read"]["same_frames_on_off"]
    if unequal:
        print("plain turns streamed a different number of frames with memory on and off: "
              "the on/off ratios compare different replies", file=sys.stderr)
    return 1 if failed or unequal or not result["shutdown_disposed_agents"] else 0


if __name__ == "__main__":
    sys.exit(main())
