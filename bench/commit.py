"""Benchmark of the locked commit: what the store's safety costs, and whether
it holds under contention.

1. Latency and client CPU of `store.commit_operations` for a 2-operation
   batch (replace a counter entry, then add or remove a scratch entry,
   alternating so every batch applies and the document stays the same
   size), against a hand-written psycopg transaction doing the same locked
   read-modify-write with the store's SQL (the lock query on the user row,
   which also sets the lock timeout and reads the account's is_active and
   the memory switch; SELECT the memory rows with their sources; the same
   pure rules and source carrying; UPDATE/INSERT/DELETE of the changed rows
   with their sources; the event INSERT; since issue 25 each changed document's
   version and the prune of the person's oldest) on a psycopg connection with its defaults
   (server-side binding, statements prepared after 5 runs). All variants run
   in the same process against the same server, one commit each per step in
   a freshly shuffled order (a fixed rotation favoured some variants by
   about 0.2 of the ratio), so other load on the machine falls on all alike:
   - the store with prepared statements off (`DATABASE_PREPARE_THRESHOLD=off`,
     as behind PgBouncer in transaction mode): its statements bind
     server-side as unnamed statements, never prepared,
   - the store with the project's default settings (its commit statements
     prepared, `prepare_threshold` 5),
   - the hand-written transaction; the same never prepared (the like-for-like
     of the first store line); and the same with client-side binding, how
     Django binds the ORM's SQL by default and how the store bound its
     statements with prepared statements off until issue 14's third round,
   - and, as a reference line, the SQL issue 14 first measured against
     (FOR UPDATE, no lock timeout, switch or sources: those came later).
   Targets (issue 14): store / hand-written <= 1.35 without prepared
   statements (the issue's "Django's default binding" line: the store as
   it ran with the threshold off), <= 1.10 with prepared statements, by
   median wall time; the client CPU per commit (time.process_time) is
   printed beside it.
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

One file of about 500 lines on purpose: a bench is run as a script and read
top to bottom next to the figures it prints (docs/benchmarks.md); the
hand-written transaction it compares against has to sit beside the
measurement to be checked line by line against the store's SQL.
"""
from __future__ import annotations

import argparse
import datetime
import json
import random
import statistics
import sys
import threading
import time

import _setup

DATABASE_NAME = "agentmemory_bench_commit"
TARGET_DEFAULT = 1.35
TARGET_PREPARED = 1.10


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=10, help="rounds of --per-round timed commits")
    parser.add_argument("--per-round", type=int, default=100, help="timed commits of each variant per round")
    parser.add_argument("--warmup", type=int, default=50, help="untimed commits of each variant first")
    parser.add_argument("--threads", type=int, default=8)
    parser.add_argument("--commits", type=int, default=100, help="commits per thread")
    parser.add_argument("--seed", type=int, default=14, help="seed of the shuffled variant order")
    parser.add_argument("--json", action="store_true", help="print one JSON object instead of text")
    parser.add_argument("--smoke", action="store_true", help="CI's smoke run: a few commits, a second or two, to prove the bench still runs; no figure is judged")
    args = parser.parse_args(argv)
    if args.smoke:
        args.rounds, args.per_round, args.warmup, args.threads, args.commits = 1, 5, 2, 2, 5

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

    names = ("store", "store_prepared", "psycopg", "psycopg_unprepared", "psycopg_client", "psycopg_bare")
    people = {name: get_user_model().objects.create_user(username=f"bench-commit-{name}", password=None) for name in names}
    shared = get_user_model().objects.create_user(username="bench-commit-shared", password=None)
    limits = dict(memory_settings().limits)
    dsn = url.replace("postgres://", "postgresql://", 1)
    connection.ensure_connection()
    threshold = connection.connection.prepare_threshold or 5
    try:
        for person in people.values():
            store.commit_operations(user_id=person.pk, operations=seed_batch())

        def store_commit(name, prepare_threshold):
            def commit(batch):
                # The same Django connection; the threshold decides which cursor the
                # store uses (agentmemory.store.statements.commit_cursor), as the setting would.
                connection.connection.prepare_threshold = prepare_threshold
                return store.commit_operations(user_id=people[name].pk, operations=batch)
            return commit

        lock_timeout = f"{max(1, int(memory_settings().commit_lock_timeout * 1000))}ms"
        policy_version = memory_settings().policy_version[:16]

        def raw_commit(conn, name, bare=False):
            return lambda batch: raw_transaction(conn, user_id=people[name].pk, operations=batch, limits=limits,
                                                 lock_timeout=lock_timeout, policy_version=policy_version, bare=bare)

        with psycopg.connect(dsn, autocommit=False) as raw, psycopg.connect(
            dsn, autocommit=False, cursor_factory=psycopg.ClientCursor
        ) as raw_client, psycopg.connect(dsn, autocommit=False, prepare_threshold=None) as raw_unprepared:
            latency = compare(
                {
                    "store": store_commit("store", None),
                    "store_prepared": store_commit("store_prepared", threshold),
                    "psycopg": raw_commit(raw, "psycopg"),
                    "psycopg_unprepared": raw_commit(raw_unprepared, "psycopg_unprepared"),
                    "psycopg_client": raw_commit(raw_client, "psycopg_client"),
                    "psycopg_bare": raw_commit(raw, "psycopg_bare", bare=True),
                },
                args,
            )
        connection.connection.prepare_threshold = threshold
        first = store.load_snapshot(user_id=people["store"].pk)
        if any(store.load_snapshot(user_id=person.pk) != first for person in people.values()):
            raise SystemExit("The variants disagree on the resulting memory; the comparison is void.")
        # Like for like also in what is written beside the memory: the last change's event and version rows.
        written = {name: last_change(people[name].pk) for name in ("store", "store_prepared", "psycopg",
                                                                   "psycopg_unprepared", "psycopg_client")}
        if len({repr(rows) for rows in written.values()}) != 1:
            raise SystemExit("The hand-written transaction no longer writes the event and version rows the store "
                             "writes; the comparison is void (update raw_transaction).")

        contention = contend(store, shared.pk, threads=args.threads, commits=args.commits)
    finally:
        for person in (*people.values(), shared):
            person.delete()  # cascades to its memory rows and events

    def ratio(name, base="psycopg", key="median_ms"):
        return round(latency[name][key] / latency[base][key], 2)

    return {
        "latency": latency,
        "prepare_threshold": threshold,
        "ratios": {
            "store/psycopg": ratio("store"),
            "store_prepared/psycopg": ratio("store_prepared"),
            "psycopg_client/psycopg": ratio("psycopg_client"),
            "psycopg_unprepared/psycopg": ratio("psycopg_unprepared"),
            "store/psycopg_unprepared": ratio("store", "psycopg_unprepared"),
            "store_prepared/psycopg_bare": ratio("store_prepared", "psycopg_bare"),
            "psycopg/psycopg_bare": ratio("psycopg", "psycopg_bare"),
            "cpu store/psycopg": ratio("store", key="cpu_us_mean"),
            "cpu store_prepared/psycopg": ratio("store_prepared", key="cpu_us_mean"),
        },
        # Per round of --per-round commits: how far the two target ratios move between rounds of one run.
        "round_spread": {
            "store/psycopg": round_spread(latency, "store", "psycopg"),
            "store_prepared/psycopg": round_spread(latency, "store_prepared", "psycopg"),
        },
        "contention": contention,
        "targets": {"store/psycopg": TARGET_DEFAULT, "store_prepared/psycopg": TARGET_PREPARED},
        "seed": args.seed,
    }


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
    """Time the variants one commit each per step, in a newly shuffled order
    every step, so that other load on the machine and the position in the
    step fall on all of them alike. Each variant writes its own person's memory."""
    rng = random.Random(args.seed)
    samples: dict[str, list[int]] = {name: [] for name in variants}
    cpu: dict[str, list[int]] = {name: [] for name in variants}
    order = list(variants)
    for step in range(args.warmup + args.rounds * args.per_round):
        rng.shuffle(order)
        batch = batch_for(step)
        for name in order:
            cpu_started = time.process_time_ns()
            started = time.perf_counter_ns()
            variants[name](batch)
            elapsed = time.perf_counter_ns() - started
            spent = time.process_time_ns() - cpu_started
            if step >= args.warmup:
                samples[name].append(elapsed)
                cpu[name].append(spent)
    figures = {}
    for name, values in samples.items():
        figures[name] = _setup.latency_figures(values)
        figures[name]["cpu_us_mean"] = round(sum(cpu[name]) / len(cpu[name]) / 1000, 1)
        # Each round's median on its own, so a ratio's round-to-round spread can be told apart from a gap.
        figures[name]["round_medians_ms"] = [
            round(statistics.median(values[start:start + args.per_round]) / 1e6, 4)
            for start in range(0, len(values), args.per_round)
        ]
    return figures


def round_spread(latency: dict, name: str, base: str) -> tuple[float, float]:
    """Return the lowest and highest per-round ratio of two variants' medians (the same rounds)."""
    ratios = [mine / theirs for mine, theirs in zip(latency[name]["round_medians_ms"], latency[base]["round_medians_ms"])]
    return round(min(ratios), 2), round(max(ratios), 2)


def last_change(user_id) -> tuple:
    """The person's latest event and version rows, without ids, times and each source's moment."""
    from agentmemory.models import MemoryEvent, MemoryVersion

    def plain(row: dict) -> dict:
        kept = {key: value for key, value in row.items()
                if key not in {"id", "user_id", "event_id", "created_at", "duration_ms"}}
        for key in ("before_provenance", "after_provenance"):
            if kept.get(key):
                kept[key] = [{k: v for k, v in item.items() if k != "at"} if item else item for item in kept[key]]
        return kept

    event = MemoryEvent.objects.filter(user_id=user_id).order_by("-id").values().first()
    versions = MemoryVersion.objects.filter(event_id=event["id"]).order_by("memory_type").values()
    return plain(event), [plain(version) for version in versions]


def raw_transaction(conn, *, user_id, operations, limits, lock_timeout: str = "", policy_version: str = "",
                    bare: bool = False) -> None:
    """The same locked read-modify-write, by hand: one transaction, the store's SQL.

    What the store sends today: the lock query that also sets the lock
    timeout and reads the account's `is_active`, the memory switch (the
    agent's commit is refused for a closed account or memory off) and the
    erase count, the rows with their sources (`provenance`, carried by the
    same pure function), the changed rows with their sources, the event row
    with every column the store writes (the model, `policy_version` and the
    source message's intent among them), and each changed document's
    version with its sources before and after. With `bare`, the SQL
    issue 14 first measured against (FOR UPDATE of the user row, no lock
    timeout, switch or sources), kept as a reference line.
    """
    from django.utils import timezone
    from psycopg.types.json import Jsonb

    from agentmemory import provenance
    from agentmemory.rules import (
        Snapshot,
        apply_operations,
        changed_targets,
        parse_document,
        render_document,
        rendered_length,
        summarize,
    )

    started = time.monotonic()
    with conn.transaction(), conn.cursor() as cursor:
        if bare:
            cursor.execute("SELECT id FROM auth_user WHERE id = %s FOR UPDATE", (user_id,))
            if cursor.fetchone() is None:
                raise LookupError("no such account")
            cursor.execute(
                "SELECT id, memory_type, content, schema_version FROM agentmemory_document WHERE user_id = %s",
                (user_id,),
            )
        else:
            cursor.execute(
                "SELECT auth_user.is_active, agentmemory_preference.use_memory, agentmemory_preference.erasures "
                "FROM (SELECT set_config('lock_timeout', %s, true)) AS lock_wait, auth_user "
                "LEFT JOIN agentmemory_preference ON agentmemory_preference.user_id = auth_user.id "
                "WHERE auth_user.id = %s FOR NO KEY UPDATE OF auth_user",
                (lock_timeout, user_id),
            )
            account = cursor.fetchone()
            if account is None or not account[0] or account[1] is False:
                raise LookupError("no such account, closed, or memory off")
            cursor.execute(
                "SELECT id, memory_type, content, schema_version, provenance FROM agentmemory_document "
                "WHERE user_id = %s",
                (user_id,),
            )
        documents = {"user": (), "memory": ()}
        sources = {"user": (), "memory": ()}
        ids = {}
        for row in cursor.fetchall():
            pk, memory_type, content, schema_version = row[:4]
            if schema_version != 1:
                raise ValueError("unknown schema_version")
            ids[memory_type] = pk
            documents[memory_type] = parse_document(content)
            if not bare:
                sources[memory_type] = provenance.aligned(documents[memory_type], row[4])
        current = Snapshot(**documents)
        updated = apply_operations(current, operations, limits)
        changed = changed_targets(current, updated)
        now = timezone.now()
        carried = {} if bare else provenance.carry(current, sources, updated, provenance.source(provenance.AGENT, now))
        for target in changed:
            entries = updated.entries(target)
            if not entries:
                cursor.execute("DELETE FROM agentmemory_document WHERE id = %s", (ids[target],))
            elif bare and target not in ids:
                cursor.execute(
                    "INSERT INTO agentmemory_document (user_id, memory_type, content, schema_version, provenance, "
                    "created_at, updated_at) VALUES (%s, %s, %s, 1, '[]', now(), now())",
                    (user_id, target, render_document(entries)),
                )
            elif bare:
                cursor.execute(
                    "UPDATE agentmemory_document SET content = %s, schema_version = 1, updated_at = now() "
                    "WHERE id = %s",
                    (render_document(entries), ids[target]),
                )
            elif target not in ids:
                cursor.execute(
                    "INSERT INTO agentmemory_document (user_id, memory_type, content, schema_version, provenance, "
                    "created_at, updated_at) VALUES (%s, %s, %s, 1, %s, %s, %s)",
                    (user_id, target, render_document(entries), Jsonb(provenance.to_json(carried[target])), now, now),
                )
            else:
                cursor.execute(
                    "UPDATE agentmemory_document SET content = %s, schema_version = 1, provenance = %s, "
                    "updated_at = %s WHERE id = %s",
                    (render_document(entries), Jsonb(provenance.to_json(carried[target])), now, ids[target]),
                )
        summary = summarize(operations)
        if bare:
            cursor.execute(
                "INSERT INTO agentmemory_event (user_id, actor, outcome, operation_count, targets, actions, "
                "user_characters, memory_characters, retry_count, duration_ms, error_code, created_at) "
                "VALUES (%s, 'agent', %s, %s, %s, %s, %s, %s, 0, %s, '', now())",
                (user_id, "committed" if changed else "unchanged", summary.operation_count,
                 json.dumps(summary.targets), json.dumps(summary.actions), rendered_length(updated, "user"),
                 rendered_length(updated, "memory"), int((time.monotonic() - started) * 1000)),
            )
            return
        # Today's event row: also the staff columns (empty for the assistant), the model, the memory
        # policy's version and the source message's intent (issue 40), as the store writes them.
        cursor.execute(
            "INSERT INTO agentmemory_event (user_id, actor, outcome, operation_count, targets, actions, "
            "user_characters, memory_characters, retry_count, duration_ms, error_code, staff_id, staff_username, "
            "viewed, model, policy_version, source_intent, created_at) "
            "VALUES (%s, 'agent', %s, %s, %s, %s, %s, %s, 0, %s, '', NULL, '', '', '', %s, '', %s) RETURNING id",
            (
                user_id,
                "committed" if changed else "unchanged",
                summary.operation_count,
                Jsonb(summary.targets),
                Jsonb(summary.actions),
                rendered_length(updated, "user"),
                rendered_length(updated, "memory"),
                int((time.monotonic() - started) * 1000),
                policy_version,
                now,
            ),
        )
        if not changed:
            return
        # Issue 25: each changed document's version, then the person's versions past the kept ones.
        event_id = cursor.fetchone()[0]
        for target in changed:
            after = updated.entries(target)
            cursor.execute(
                "INSERT INTO agentmemory_version (user_id, event_id, memory_type, before, before_provenance, after, "
                "after_provenance, kind, by, conversation_id, turn_id, schema_version, created_at) "
                "VALUES (%s, %s, %s, %s, %s, %s, %s, 'change', 'agent', NULL, '', 1, %s)",
                (user_id, event_id, target, render_document(current.entries(target)),
                 Jsonb(provenance.to_json(sources[target])), render_document(after),
                 Jsonb(provenance.to_json(carried[target])) if after else None, now),
            )
        cursor.execute(
            "DELETE FROM agentmemory_version WHERE user_id = %s AND (created_at < %s OR event_id <= "
            "(SELECT DISTINCT event_id FROM agentmemory_version WHERE user_id = %s ORDER BY event_id DESC "
            "LIMIT 1 OFFSET %s))",
            (user_id, now - datetime.timedelta(days=30), user_id, 50),
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
    latency, ratios, targets = figures["latency"], figures["ratios"], figures["targets"]
    contention = figures["contention"]

    def line(label, name):
        f = latency[name]
        return (f"  {label:<44} n={f['n']:<5} median {f['median_ms']:7.3f} ms   p99 {f['p99_ms']:7.3f} ms"
                f"   client CPU {f['cpu_us_mean']:6.1f} us")

    spread = figures["round_spread"]

    def verdict(key):
        low, high = spread[key]
        rounds = f"rounds {low:.2f}-{high:.2f}"
        if ratios[key] <= targets[key]:
            return f"meets; {rounds}"
        if low <= targets[key]:
            return f"MISSES; {rounds}, the target inside that spread"
        return f"MISSES; {rounds}, every round above the target"

    print("Commit latency: 2-operation batch (replace + add/remove), one person per variant, sequential;")
    print("one commit of each variant per step, in a new shuffled order every step (seed "
          f"{figures['seed']}), against the same server")
    print(line("store, prepared statements off", "store"))
    print(line(f"store, prepared statements (threshold {figures['prepare_threshold']})", "store_prepared"))
    print(line("hand-written psycopg transaction", "psycopg"))
    print(line("hand-written, never prepared", "psycopg_unprepared"))
    print(line("hand-written, client-side binding", "psycopg_client"))
    print(line("hand-written, issue 14's first SQL (reference)", "psycopg_bare"))
    print()
    print("                                  median wall   client CPU   target")
    print(f"  store unprepared / psycopg        {ratios['store/psycopg']:8.2f}    {ratios['cpu store/psycopg']:9.2f}"
          f"    <= {targets['store/psycopg']:.2f} ({verdict('store/psycopg')})")
    print(f"  store prepared / psycopg          {ratios['store_prepared/psycopg']:8.2f}    "
          f"{ratios['cpu store_prepared/psycopg']:9.2f}    <= {targets['store_prepared/psycopg']:.2f} "
          f"({verdict('store_prepared/psycopg')})")
    alone = ratios["psycopg_unprepared/psycopg"]
    print(f"  no prepared statements alone      {alone:8.2f}"
          "                 (the same hand-written SQL, never prepared"
          + (f": above the {targets['store/psycopg']:.2f} target by itself)" if alone > targets["store/psycopg"] else ")"))
    print(f"  client-side binding alone         {ratios['psycopg_client/psycopg']:8.2f}"
          "                 (the same hand-written SQL bound as Django binds it)")
    print(f"  store unprepared / hand-written never prepared {ratios['store/psycopg_unprepared']:.2f}"
          "   (the store's own overhead, like for like)")
    print(f"  today's SQL / issue 14's first SQL {ratios['psycopg/psycopg_bare']:.2f}   (lock timeout, switch and "
          "sources, added since, by hand)")
    print(f"  store prepared / issue 14's first SQL {ratios['store_prepared/psycopg_bare']:.2f}")
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
