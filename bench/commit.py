"""Benchmark of the locked commit: what the store's safety costs, and whether
it holds under contention.

1. Latency of `store.commit_operations` for a 2-operation batch (replace a
   counter entry, then add or remove a scratch entry, alternating so every
   batch applies and the document stays the same size), against a
   hand-written psycopg transaction doing the same locked read-modify-write
   (SELECT ... FOR UPDATE on the user row, SELECT the memory rows, the same
   pure rules, UPDATE/INSERT/DELETE of the changed rows, and the event
   INSERT). Both run in the same process against the same server, one
   commit each in strict rotation, so that other load on the machine falls
   on both alike. The ratio of medians is the store's cost; the target is
   at most 1.5. Two more variants explain the gap: the same psycopg
   transaction with client-side binding (how Django sends SQL by default,
   without prepared statements), and the store on a Django connection with
   OPTIONS server_side_binding=True, prepare_threshold=5.
2. Eight threads, each with its own connection, commit 100 batches each to
   ONE person. Each thread replaces its own counter entry, matching the
   exact previous value. A commit that overwrote another with stale content
   would undo that thread's increment (lost updates: committed increments
   missing from the final counters) and make its next replace miss
   (overwritten values found). Both must be 0.

Everything runs in a scratch database (`agentmemory_bench_commit`) that is
created, migrated and dropped by bench/_setup.py; the people it creates are
deleted before that. It prints figures only, never memory content.

    DATABASE_URL=postgres://postgres@127.0.0.1:5432/test .venv/bin/python bench/commit.py [--json]
"""
from __future__ import annotations

import argparse
import json
import sys
import threading
import time

import _setup

DATABASE_NAME = "agentmemory_bench_commit"
TARGET_RATIO = 1.5


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=10, help="rounds of --per-round timed commits")
    parser.add_argument("--per-round", type=int, default=100, help="timed commits of each variant per round")
    parser.add_argument("--warmup", type=int, default=50, help="untimed commits of each variant first")
    parser.add_argument("--threads", type=int, default=8)
    parser.add_argument("--commits", type=int, default=100, help="commits per thread")
    parser.add_argument("--json", action="store_true", help="print one JSON object instead of text")
    args = parser.parse_args(argv)

    with _setup.bench_database(name=DATABASE_NAME) as url:
        figures = run(url, args)

    if args.json:
        print(json.dumps(figures, indent=2))
    else:
        print_figures(figures)
    contention = figures["contention"]
    # A slow commit is a finding; a lost update or a failed writer is a bug.
    broken = contention["lost_updates"] or contention["overwritten_values_found"] or contention["errors"]
    return 1 if broken else 0


def run(url: str, args) -> dict:
    import psycopg
    from django.contrib.auth import get_user_model
    from django.db import connection

    from agentmemory import store
    from agentmemory.conf import memory_settings

    names = ("store", "psycopg", "psycopg_client", "store_prepared", "psycopg_2")
    people = {name: get_user_model().objects.create_user(username=f"bench-commit-{name}", password=None) for name in names}
    shared = get_user_model().objects.create_user(username="bench-commit-shared", password=None)
    limits = dict(memory_settings().limits)
    dsn = url.replace("postgres://", "postgresql://", 1)
    try:
        for person in people.values():
            store.commit_operations(user_id=person.pk, operations=seed_batch())

        def store_commit(name):
            return lambda batch: store.commit_operations(user_id=people[name].pk, operations=batch)

        def raw_commit(conn, name):
            return lambda batch: raw_transaction(conn, user_id=people[name].pk, operations=batch, limits=limits)

        with psycopg.connect(dsn, autocommit=False) as raw, psycopg.connect(
            dsn, autocommit=False, cursor_factory=psycopg.ClientCursor
        ) as raw_client:
            # Django's defaults: client-side binding, no prepared statements.
            latency = compare(
                {
                    "store": store_commit("store"),
                    "psycopg": raw_commit(raw, "psycopg"),
                    "psycopg_client": raw_commit(raw_client, "psycopg_client"),
                },
                args,
            )
            # The same store on a connection with server-side binding and
            # psycopg's prepared statements (a deployment choice, see print).
            with django_options(connection, server_side_binding=True, prepare_threshold=5):
                prepared = compare(
                    {"store_prepared": store_commit("store_prepared"), "psycopg_2": raw_commit(raw, "psycopg_2")},
                    args,
                )
        latency.update(prepared)
        first = store.load_snapshot(user_id=people["store"].pk)
        if any(store.load_snapshot(user_id=person.pk) != first for person in people.values()):
            raise SystemExit("The variants disagree on the resulting memory; the comparison is void.")

        contention = contend(store, shared.pk, threads=args.threads, commits=args.commits)
    finally:
        for person in (*people.values(), shared):
            person.delete()  # cascades to its memory rows and events

    base = latency["psycopg"]["median_ms"]
    return {
        "latency": latency,
        "ratios": {
            "store/psycopg": round(latency["store"]["median_ms"] / base, 2),
            "store/psycopg_client": round(latency["store"]["median_ms"] / latency["psycopg_client"]["median_ms"], 2),
            "psycopg_client/psycopg": round(latency["psycopg_client"]["median_ms"] / base, 2),
            "store_prepared/psycopg": round(
                latency["store_prepared"]["median_ms"] / latency["psycopg_2"]["median_ms"], 2
            ),
        },
        "contention": contention,
        "target_ratio": TARGET_RATIO,
    }


class django_options:
    """Reconnect Django's default connection with extra OPTIONS, then restore."""

    def __init__(self, connection, **options):
        self.connection = connection
        self.options = options

    def __enter__(self):
        self.saved = dict(self.connection.settings_dict["OPTIONS"])
        self.connection.close()
        self.connection.settings_dict["OPTIONS"].update(self.options)
        self.connection.ensure_connection()

    def __exit__(self, *exc):
        self.connection.close()
        self.connection.settings_dict["OPTIONS"].clear()
        self.connection.settings_dict["OPTIONS"].update(self.saved)
        self.connection.ensure_connection()


# --- the workload ------------------------------------------------------------


def seed_batch():
    """A realistic starting point: a few hundred characters in each document."""
    from agentmemory.rules import Operation

    facts = [
        ("user", "Prefers short answers with one code example."),
        ("user", "Works mostly in Python and SQL; reads Go."),
        ("user", "Time zone: Europe/Berlin."),
        ("memory", "counter: 000000"),
        ("memory", "The project deploys with GitHub Actions to a single VM."),
        ("memory", "PostgreSQL 15 in production, SQLite for local runs."),
        ("memory", "Migrations must be reversible; review them in pairs."),
    ]
    return [Operation(target=t, action="add", content=c) for t, c in facts]


def batch_for(step: int):
    """Two operations that always apply: replace the counter, toggle a scratch entry."""
    from agentmemory.rules import Operation

    scratch = "Scratch note used by the benchmark."
    second = (
        Operation("memory", "add", content=scratch)
        if step % 2 == 0
        else Operation("memory", "remove", match="Scratch note used by")
    )
    return [Operation("memory", "replace", match="counter: ", content=f"counter: {step + 1:06d}"), second]


def compare(variants: dict, args) -> dict:
    """Time the variants in strict rotation, one commit each, so that other
    load on the machine falls on all of them alike; the starting variant
    rotates too. Each variant writes its own person's memory."""
    samples: dict[str, list[int]] = {name: [] for name in variants}
    order = list(variants)
    for step in range(args.warmup + args.rounds * args.per_round):
        shift = step % len(order)
        for name in order[shift:] + order[:shift]:
            batch = batch_for(step)
            started = time.perf_counter_ns()
            variants[name](batch)
            elapsed = time.perf_counter_ns() - started
            if step >= args.warmup:
                samples[name].append(elapsed)
    return {name: _setup.latency_figures(values) for name, values in samples.items()}


def raw_transaction(conn, *, user_id, operations, limits) -> None:
    """The same locked read-modify-write, by hand: one transaction, five statements."""
    from agentmemory.rules import (
        Snapshot,
        apply_operations,
        changed_targets,
        document_length,
        parse_document,
        render_document,
        summarize,
    )

    started = time.monotonic()
    with conn.transaction(), conn.cursor() as cursor:
        cursor.execute("SELECT id FROM auth_user WHERE id = %s FOR UPDATE", (user_id,))
        if cursor.fetchone() is None:
            raise LookupError("no such account")
        cursor.execute(
            "SELECT memory_type, content, schema_version FROM agentmemory_document WHERE user_id = %s",
            (user_id,),
        )
        documents = {"user": (), "memory": ()}
        for memory_type, content, schema_version in cursor.fetchall():
            if schema_version != 1:
                raise ValueError("unknown schema_version")
            documents[memory_type] = parse_document(content)
        current = Snapshot(**documents)
        updated = apply_operations(current, operations, limits)
        for target in changed_targets(current, updated):
            entries = updated.entries(target)
            if not entries:
                cursor.execute(
                    "DELETE FROM agentmemory_document WHERE user_id = %s AND memory_type = %s", (user_id, target)
                )
            elif not current.entries(target):
                cursor.execute(
                    "INSERT INTO agentmemory_document (user_id, memory_type, content, schema_version, created_at, "
                    "updated_at) VALUES (%s, %s, %s, 1, now(), now())",
                    (user_id, target, render_document(entries)),
                )
            else:
                cursor.execute(
                    "UPDATE agentmemory_document SET content = %s, schema_version = 1, updated_at = now() "
                    "WHERE user_id = %s AND memory_type = %s",
                    (render_document(entries), user_id, target),
                )
        summary = summarize(operations)
        cursor.execute(
            "INSERT INTO agentmemory_event (user_id, actor, outcome, operation_count, targets, actions, "
            "user_characters, memory_characters, retry_count, duration_ms, error_code, created_at) "
            "VALUES (%s, 'agent', %s, %s, %s, %s, %s, %s, 0, %s, '', now())",
            (
                user_id,
                "committed" if changed_targets(current, updated) else "unchanged",
                summary.operation_count,
                json.dumps(summary.targets),
                json.dumps(summary.actions),
                document_length(updated.user),
                document_length(updated.memory),
                int((time.monotonic() - started) * 1000),
            ),
        )


# --- contention --------------------------------------------------------------


def contend(store, user_id: int, *, threads: int, commits: int) -> dict:
    from django.db import connection

    from agentmemory.rules import MemoryValidationError, Operation

    def entry(writer: int, count: int) -> str:
        return f"writer {writer:02d}: count {count:06d}"

    store.commit_operations(
        user_id=user_id, operations=[Operation("memory", "add", content=entry(w, 0)) for w in range(threads)]
    )
    barrier = threading.Barrier(threads + 1)
    done = [0] * threads
    missed = [0] * threads
    retries = [0] * threads
    errors: list[str] = []
    latencies: list[int] = []
    lock = threading.Lock()

    def writer(index: int) -> None:
        expected = 0
        mine: list[int] = []
        try:
            barrier.wait()
            while done[index] < commits:
                batch = [Operation("memory", "replace", match=entry(index, expected), content=entry(index, expected + 1))]
                started = time.perf_counter_ns()
                try:
                    result = store.commit_operations(user_id=user_id, operations=batch)
                except MemoryValidationError:
                    # Our own last value is gone: a stale write undid it.
                    # Count it, and carry on from what is stored now.
                    missed[index] += 1
                    current = store.load_snapshot(user_id=user_id)
                    (value,) = [e for e in current.memory if e.startswith(f"writer {index:02d}: ")]
                    expected = int(value.rsplit(" ", 1)[1])
                    continue
                mine.append(time.perf_counter_ns() - started)
                retries[index] += result.retry_count
                done[index] += 1
                expected += 1
        except Exception as exc:  # reported by type only
            errors.append(type(exc).__name__)
        finally:
            with lock:
                latencies.extend(mine)
            connection.close()

    workers = [threading.Thread(target=writer, args=(i,)) for i in range(threads)]
    for worker in workers:
        worker.start()
    barrier.wait()
    started = time.monotonic()
    for worker in workers:
        worker.join()
    seconds = time.monotonic() - started

    final = store.load_snapshot(user_id=user_id)
    counts = {int(e.split(":")[0].split()[1]): int(e.rsplit(" ", 1)[1]) for e in final.memory}
    committed = sum(done)
    # Each committed increment must survive; one that an overwrite undid is lost.
    lost = sum(done[w] - counts.get(w, 0) for w in range(threads))
    return {
        "threads": threads,
        "commits_per_thread": commits,
        "committed": committed,
        "seconds": round(seconds, 2),
        "commits_per_second": round(committed / seconds, 1),
        "lost_updates": lost,
        "overwritten_values_found": sum(missed),
        "retries": sum(retries),
        "errors": errors,
        "latency": _setup.latency_figures(latencies) if latencies else None,
    }


# --- output ------------------------------------------------------------------


def print_figures(figures: dict) -> None:
    latency, ratios = figures["latency"], figures["ratios"]
    contention = figures["contention"]

    def line(label, name):
        f = latency[name]
        return f"  {label:<46} n={f['n']:<5} median {f['median_ms']:7.3f} ms   p99 {f['p99_ms']:7.3f} ms"

    verdict = "within" if ratios["store/psycopg"] <= figures["target_ratio"] else "ABOVE"
    print("Commit latency: 2-operation batch (replace + add/remove), one person, sequential,")
    print("variants interleaved one commit at a time against the same server")
    print(line("store.commit_operations (Django defaults)", "store"))
    print(line("hand-written psycopg transaction", "psycopg"))
    print(f"  ratio store / psycopg (median)                 {ratios['store/psycopg']:.2f}"
          f"   target <= {figures['target_ratio']}: {verdict}")
    print()
    print("Where the difference comes from")
    print(line("same psycopg transaction, client-side binding", "psycopg_client"))
    print(f"  ratio client-side binding / psycopg default    {ratios['psycopg_client/psycopg']:.2f}"
          "   (Django binds client-side and disables prepared statements by default)")
    print(f"  ratio store / psycopg with client-side binding {ratios['store/psycopg_client']:.2f}"
          "   (the store's own overhead)")
    print(line("store, OPTIONS server_side_binding+prepare", "store_prepared"))
    print(line("hand-written psycopg transaction (same phase)", "psycopg_2"))
    print(f"  ratio store with prepared statements / psycopg {ratios['store_prepared/psycopg']:.2f}")
    print()
    print(f"Contention: {contention['threads']} threads x {contention['commits_per_thread']} commits on one person")
    print(f"  committed                   {contention['committed']}")
    print(f"  wall time                   {contention['seconds']:.2f} s")
    print(f"  commits per second          {contention['commits_per_second']:.1f}")
    if contention["latency"]:
        print(f"  commit latency              median {contention['latency']['median_ms']:.3f} ms"
              f"   p99 {contention['latency']['p99_ms']:.3f} ms")
    print(f"  deadlock/serialization retries {contention['retries']}")
    print(f"  lost updates                {contention['lost_updates']} (must be 0)")
    print(f"  overwritten values found    {contention['overwritten_values_found']} (must be 0)")
    if contention["errors"]:
        print(f"  writer errors               {', '.join(contention['errors'])}")


if __name__ == "__main__":
    sys.exit(main())
