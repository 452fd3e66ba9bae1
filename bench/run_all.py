"""Run every benchmark in bench/ and write docs/benchmarks.md.

It owns the report, not the measurements: each bench is a script that
prints its own figures (median and p99, and its ratios) and exits 0; this
runner starts each one in its own process, shows its output as it comes,
and records the machine, the date, each output verbatim and how to
reproduce it. A missing bench is reported as missing; a failing one as
failed, with the end of its error output, and the runner then exits 1.
`make bench` runs it through scripts/bench.sh.

`--smoke` (CI, after `make test`: `bash scripts/bench.sh --smoke`) runs every
bench with its own `--smoke` flag instead: a few turns or commits each, to
prove that each one still runs to the end; no figure is judged and the report
is not written. Any bench that fails (or none found) makes it exit 1.
"""
from __future__ import annotations

import argparse
import os
import platform
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

import _setup

BENCH_DIR = Path(__file__).resolve().parent
ROOT = BENCH_DIR.parent
REPORT = ROOT / "docs" / "benchmarks.md"
# The issue names these three; any other bench/*.py script runs after them.
KNOWN = ("commit.py", "turns.py", "growth.py", "scale.py")
# drills.py is not a bench of this machine's figures: it drives `make cluster`
# (`make drills`), and CI runs it in the cluster smoke.
NOT_BENCHES = {"run_all.py", "drills.py"}
TIMEOUT_SECONDS = 1800
SMOKE_TIMEOUT_SECONDS = 120
ERROR_TAIL_LINES = 20


@dataclass
class BenchRun:
    name: str
    status: str  # "passed", "failed", "missing"
    output: str = ""
    error_tail: str = ""
    seconds: float = 0.0


def discover() -> list[str]:
    extra = sorted(
        path.name
        for path in BENCH_DIR.glob("*.py")
        if not path.name.startswith("_") and path.name not in NOT_BENCHES and path.name not in KNOWN
    )
    return [*KNOWN, *extra]


def run_bench(name: str, *, python: str, env: dict[str, str], smoke: bool = False) -> BenchRun:
    """Run one bench; its output is shown as it comes, or at its end with smoke (they run two at a time)."""
    show = (lambda text: None) if smoke else (lambda text: print(text, end="", flush=True))
    path = BENCH_DIR / name
    if not path.exists():
        print(f"== {name}: not present in bench/, skipped ==", flush=True)
        return BenchRun(name=name, status="missing")
    show(f"== {name} ==\n")
    timeout = SMOKE_TIMEOUT_SECONDS if smoke else TIMEOUT_SECONDS
    started = time.monotonic()
    lines: list[str] = []
    with tempfile.TemporaryFile(mode="w+") as errors:
        process = subprocess.Popen(
            [python, str(path), *(["--smoke"] if smoke else [])], cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=errors, text=True,
        )
        try:
            assert process.stdout is not None
            for line in process.stdout:
                show(line)
                lines.append(line)
            code = process.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
            code = -1
            lines.append(f"(stopped after {timeout} s)\n")
        errors.seek(0)
        error_text = errors.read()
    seconds = round(time.monotonic() - started, 1)
    if smoke:
        print(f"== {name} --smoke (exit {code}, {seconds} s) ==\n{''.join(lines)}", end="", flush=True)
    if code == 0:
        return BenchRun(name=name, status="passed", output="".join(lines).rstrip(), seconds=seconds)
    tail = "\n".join(error_text.rstrip().splitlines()[-ERROR_TAIL_LINES:])
    print(f"== {name} FAILED (exit {code}) ==\n{tail}", file=sys.stderr, flush=True)
    return BenchRun(name=name, status="failed", output="".join(lines).rstrip(), error_tail=tail, seconds=seconds)


# --- the machine -------------------------------------------------------------


def cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def memory_total() -> str:
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                kib = int(line.split()[1])
                return f"{kib / 1024 / 1024:.1f} GiB"
    except (OSError, ValueError, IndexError):
        pass
    return "unknown"


def git_revision() -> str:
    try:
        out = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True, check=True
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "status", "--porcelain", "--", "agentmemory", "chat", "config", "bench"],
            cwd=ROOT, capture_output=True, text=True, check=True,
        ).stdout.strip()
        return out + (" (with uncommitted changes)" if dirty else "")
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


def machine(database_url: str) -> dict[str, str]:
    try:
        cpus = str(len(os.sched_getaffinity(0)))
    except AttributeError:
        cpus = str(os.cpu_count())
    return {
        "CPUs (nproc)": cpus,
        "CPU model": cpu_model(),
        "Memory": memory_total(),
        "OS": f"{platform.system()} {platform.release()}",
        "PostgreSQL": _setup.server_version(database_url),
        "Python": platform.python_version(),
        "Git revision": git_revision(),
    }


# --- the report --------------------------------------------------------------


# Everything after this line in the existing report is kept when it is rewritten:
# notes written by people about a run (what was compared by hand, caveats).
NOTES_MARKER = "<!-- notes below are written by hand and kept by bench/run_all.py -->"
VERDICT_WORDS = ("meets", "MISSES", "must be 0", "within", "ABOVE")
TARGETS_TEXT = [
    "## Targets and how they are measured",
    "",
    "Issue 14's targets for this machine, and how each bench measures them:",
    "",
    "- Commit (`commit.py`): `store.commit_operations` <= 1.35x a hand-written psycopg transaction",
    "  doing the same SQL without prepared statements (the issue's \"Django's default binding\" line:",
    "  the store with `DATABASE_PREPARE_THRESHOLD=off`, whose statements now bind server-side, never",
    "  prepared), <= 1.10x with prepared statements (median wall time; client CPU per commit beside",
    "  it). The hand-written transaction (psycopg's defaults: prepared after 5 runs) sends the store's",
    "  SQL of today (the lock query with its lock timeout and the account and switch checks, the",
    "  entries' sources); issue 14's first SQL, without those, is printed as a reference line.",
    "  One commit of each variant per step, in a newly",
    "  shuffled order every step, same process and server. A commit inside a turn never reconnects:",
    "  `tests/test_connections.py` counts connection opens across turns that commit (none after the",
    "  first).",
    "- Turn (`turns.py`): server CPU per plain turn <= 6.5 ms and <= 1.5x the like-for-like floor",
    "  (`bench/_floor_asgi.py`: same socket, auth, budget, log SQL and frames, no model SDK);",
    "  throughput at 32 clients >= 2x the 66 turns/s measured before (132); memory on/off p50 <= 1.05",
    "  and CPU per turn <= 1.05. Off, on and floor servers run in a new shuffled order each round;",
    "  CPU, time and turns count from a barrier after every client's warm-up turns.",
    "- Growth (`growth.py`): 1k -> 100k people <= 1.2 for load and commit.",
    "- Scale (`scale.py`): 0 lost updates, 0 errors, p99 recorded, with two workers, PostgreSQL and",
    "  Redis, 500 open sockets of 250 people.",
    "",
    "The machine has 2 cores shared with other people's test runs (see the load averages above):",
    "absolute milliseconds and CPU times move with that load (CPU time grows too, through cache and",
    "scheduler contention), so compare the ratios, which come from interleaved runs.",
    "",
]


def load_average() -> str:
    try:
        return " / ".join(f"{value:.2f}" for value in os.getloadavg()) + " (1 / 5 / 15 min)"
    except OSError:
        return "unknown"


def render(*, runs: list[BenchRun], facts: dict[str, str], date: str) -> str:
    out = [
        "# Benchmarks",
        "",
        "Generated by `make bench` (scripts/bench.sh, then bench/run_all.py); do not edit by hand,",
        "run it again. Latencies are in milliseconds, as median and p99 (nearest rank).",
        "",
        f"Date: {date}",
        "",
        "## Machine",
        "",
        "| | |",
        "|---|---|",
        *[f"| {key} | {value} |" for key, value in facts.items()],
        "",
        "## Summary",
        "",
        "| bench | status | seconds |",
        "|---|---|---|",
        *[f"| `bench/{run.name}` | {run.status} | {run.seconds if run.status != 'missing' else ''} |" for run in runs],
        "",
        *TARGETS_TEXT,
        "Verdicts printed by the benches in this run:",
        "",
        *[f"- `{run.name}`: {line.strip()}" for run in runs for line in run.output.splitlines()
          if any(word in line for word in VERDICT_WORDS)],
        "",
    ]
    for run in runs:
        out += [f"## bench/{run.name}", ""]
        if run.status == "missing":
            out += ["Not run: the script does not exist yet.", ""]
            continue
        if run.status == "failed":
            out += ["**Failed.** End of its error output:", "", "```", run.error_tail or "(none)", "```", ""]
        if run.output:
            out += ["```", run.output, "```", ""]
    out += [
        "## How to reproduce",
        "",
        "```sh",
        "make bench                      # all of them; writes this file",
        "bash scripts/bench.sh --smoke   # CI: each with --smoke (a few turns or commits), nothing written",
        "# or one at a time (each takes --help and --json):",
        *[
            f"DATABASE_URL={_setup.DEFAULT_DATABASE_URL} .venv/bin/python bench/{run.name}"
            for run in runs
            if run.status != "missing"
        ],
        "```",
        "",
        "Every bench needs a reachable PostgreSQL server (DATABASE_URL, or BENCH_DATABASE_URL",
        f"for make bench; default `{_setup.DEFAULT_DATABASE_URL}`). Each bench creates its own",
        "scratch databases (`agentmemory_bench_*`) on that server, migrates them, and drops",
        "them at the end, so the database named in the URL is never written. Figures vary with",
        "the machine and with other load on it (the ratios come from alternating rounds, so",
        "load moves them less); compare ratios rather than absolute milliseconds.",
        "",
    ]
    return "\n".join(out)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--report", type=Path, default=REPORT, help="where to write the markdown")
    parser.add_argument("--smoke", action="store_true",
                        help="run every bench with --smoke (a few turns or commits each); judge no figure, "
                             "write no report; exit 1 if any bench fails")
    args = parser.parse_args(argv)
    if args.smoke:
        return smoke()

    database_url = _setup.server_url()
    facts = machine(database_url)  # also proves the server answers, before any bench starts
    date = datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    env = {**os.environ, "DATABASE_URL": database_url, "PYTHONUNBUFFERED": "1"}
    facts["Load average at start"] = load_average()
    runs = [run_bench(name, python=sys.executable, env=env) for name in discover()]
    facts["Load average at end"] = load_average()

    args.report.parent.mkdir(parents=True, exist_ok=True)
    previous = args.report.read_text() if args.report.exists() else ""
    notes = previous[previous.index(NOTES_MARKER):] if NOTES_MARKER in previous else ""
    args.report.write_text(render(runs=runs, facts=facts, date=date) + ("\n" + notes if notes else ""))
    print(f"\nWrote {args.report.relative_to(ROOT) if args.report.is_relative_to(ROOT) else args.report}")
    for run in runs:
        print(f"  {run.name}: {run.status}")
    return 1 if any(run.status == "failed" for run in runs) else 0


def smoke() -> int:
    """Run each bench's --smoke; exit 1 if any fails. Nothing is written."""
    database_url = _setup.server_url()
    _setup.server_version(database_url)  # proves the server answers, before any bench starts
    env = {**os.environ, "DATABASE_URL": database_url, "PYTHONUNBUFFERED": "1"}
    started = time.monotonic()
    # One migrated database that every bench's scratch databases copy (bench/_setup.py):
    # migrating each of them would cost about 25 s of CPU, most of the smoke run.
    template = f"agentmemory_bench_template_{os.getpid()}"
    setup = [sys.executable, str(BENCH_DIR / "_setup.py")]
    subprocess.run([*setup, "template", template], cwd=ROOT, env=env, check=True)
    env[_setup.TEMPLATE_ENV] = template
    # Two at a time: each has its own scratch database, nothing is judged, and
    # most of a smoke run is waiting (daphne starting, migrations, fsync).
    with ThreadPoolExecutor(max_workers=2) as pool:
        try:
            # The longest first (daphne processes to start), so the two lanes end together.
            names = sorted(discover(), key=lambda name: name not in ("turns.py", "scale.py", "residue.py"))
            runs = list(pool.map(lambda name: run_bench(name, python=sys.executable, env=env, smoke=True), names))
        finally:
            subprocess.run([*setup, "drop", template], cwd=ROOT, env=env, check=False)
    print(f"\nBench smoke runs ({time.monotonic() - started:.0f} s; figures not judged):")
    for run in runs:
        print(f"  {run.name}: {run.status} ({run.seconds} s)")
    bad = [run.name for run in runs if run.status != "passed"]
    if bad or not runs:
        print(f"Bench smoke FAILED: {', '.join(bad) or 'no bench found'}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
