"""Conversation search bench: is one person's search fast among a million messages?

It owns one question. `conversation_search` reads a person's matches through
one GIN index over (user_id, document), so its cost should depend on how
much that person wrote and matched, not on everyone else. The bench fills a
scratch PostgreSQL database (never the shared one) with 10,000 people and
1,000,000 messages (100,000 conversations of 10 messages, synthetic words),
one person with 10,000 messages and one with 100, and a planted fact for
2,000 people ("... bicycle lock combination ...": the same words for many
people). It then times `chat.search.search_conversations` (the ranked
query, the headlines, the hits and their neighbours: what one tool call
runs) for random people, and for the two measured people in alternating
rounds, and prints the plan of the ranked query.

Targets (issue 16): p50 <= 15 ms, p99 <= 60 ms, and the ratio of the medians
of the 10,000-message person to the 100-message person <= 3.

Run: `.venv/bin/python bench/search.py [--json]` with DATABASE_URL naming a
PostgreSQL server (default postgres://postgres@127.0.0.1:5432/test). The
text is synthetic; no query result is printed, only counts and timings.
"""
from __future__ import annotations

import argparse
import importlib
import json
import random
import sys
import time

import _setup

DATABASE_NAME = "agentmemory_bench_search"
PEOPLE = 10_000
CONVERSATIONS = 100_000
MESSAGES_PER_CONVERSATION = 10
HEAVY_CONVERSATIONS = 1_000  # 10,000 messages
LIGHT_CONVERSATIONS = 10  # 100 messages
PLANTED_PEOPLE = 2_000
VOCABULARY = 5_000
WORDS_PER_MESSAGE = 12
TARGET_P50_MS, TARGET_P99_MS, TARGET_RATIO = 15.0, 60.0, 3.0
FACT_QUERY = "bicycle lock combination"


def vocabulary(size: int, seed: int = 16) -> list[str]:
    """Pronounceable pseudo-words: real stemming and parsing, no real text."""
    rng = random.Random(seed)
    syllables = [c + v for c in "bdfgklmnprstvz" for v in "aeiou"]
    words: set[str] = set()
    while len(words) < size:
        words.add("".join(rng.choice(syllables) for _ in range(rng.randint(2, 4))))
    return sorted(words, key=lambda w: (len(w), w))


def fill(words: list[str]) -> dict[str, int]:
    """Fill the scratch database server-side; return the measured people's ids."""
    from django.db import connection

    migration = importlib.import_module("chat.migrations.0002_message_search")
    from chat.search import postgres_refresh_sql, search_language

    others = PEOPLE - 2
    # Conversations of the others: 9 or 10 each, so the total is exactly CONVERSATIONS.
    rest = CONVERSATIONS - HEAVY_CONVERSATIONS - LIGHT_CONVERSATIONS
    nines = others * 10 - rest
    with connection.cursor() as cursor:
        cursor.execute(
            """
            INSERT INTO auth_user (password, is_superuser, username, first_name, last_name,
                                   email, is_staff, is_active, date_joined)
            SELECT '!', false, 'search-' || g, '', '', '', false, true, now()
            FROM generate_series(1, %s) AS g
            """,
            [PEOPLE],
        )
        cursor.execute("SELECT min(id) FROM auth_user WHERE username LIKE 'search-%%'")
        first = cursor.fetchone()[0]
        heavy, light = first, first + 1
        cursor.execute(
            """
            INSERT INTO chat_conversation (user_id, title, created_at, updated_at)
            SELECT u.id, 'Chat ' || g, now(), now()
            FROM (SELECT id, CASE WHEN id = %(heavy)s THEN %(hc)s WHEN id = %(light)s THEN %(lc)s
                                  WHEN id - %(first)s - 2 < %(nines)s THEN 9 ELSE 10 END AS n
                  FROM auth_user WHERE username LIKE 'search-%%') AS u
            CROSS JOIN LATERAL generate_series(1, u.n) AS g
            """,
            {"heavy": heavy, "light": light, "first": first, "nines": nines,
             "hc": HEAVY_CONVERSATIONS, "lc": LIGHT_CONVERSATIONS},
        )
        # The index is filled after the bulk load (the same statements the migration runs).
        cursor.execute("ALTER TABLE chat_message DISABLE TRIGGER chat_message_search_write")
        cursor.execute("DROP INDEX chat_messagesearch_user_document")
        cursor.execute("SELECT setseed(0.16)")
        cursor.execute(
            """
            INSERT INTO chat_message (conversation_id, role, content, memory_outcome, turn_id, metadata, created_at)
            SELECT c.id, CASE WHEN g %% 2 = 1 THEN 'user' ELSE 'assistant' END,
                   (SELECT string_agg(v.words[1 + floor(%(n)s * power(random(), 2))::int + 0 * k], ' ')
                    FROM generate_series(1, %(per)s) AS k WHERE k > 0 * g * c.id),
                   '', '', '{}', now() - random() * interval '365 days'
            FROM chat_conversation AS c CROSS JOIN generate_series(1, %(m)s) AS g,
                 (SELECT %(words)s::text[] AS words) AS v
            """,
            {"n": len(words), "per": WORDS_PER_MESSAGE, "m": MESSAGES_PER_CONVERSATION, "words": words},
        )
        # The same fact, in the same words, for many people (and both measured people).
        cursor.execute(
            """
            UPDATE chat_message SET content = 'My bicycle lock combination is ' || (1000 + m.id %% 9000)
            FROM (SELECT DISTINCT ON (c.user_id) msg.id
                  FROM chat_message msg JOIN chat_conversation c ON c.id = msg.conversation_id
                  WHERE c.user_id IN (SELECT id FROM auth_user WHERE username LIKE 'search-%%'
                                      ORDER BY (id IN (%s, %s)) DESC, id DESC LIMIT %s)
                  ORDER BY c.user_id, msg.id) AS m
            WHERE chat_message.id = m.id
            """,
            [heavy, light, PLANTED_PEOPLE],
        )
        cursor.execute("ALTER TABLE chat_message ENABLE TRIGGER chat_message_search_write")
        cursor.execute(postgres_refresh_sql(search_language()))
        cursor.execute(migration.POSTGRES_TRIGGERS[0])
        for table in ("auth_user", "chat_conversation", "chat_message", "chat_messagesearch"):
            cursor.execute(f"VACUUM ANALYZE {table}")
        cursor.execute("SELECT count(*) FROM chat_message")
        messages = cursor.fetchone()[0]
        cursor.execute("SELECT count(*) FROM chat_messagesearch")
        indexed = cursor.fetchone()[0]
    return {"heavy": heavy, "light": light, "first": first, "messages": messages, "indexed": indexed}


def queries(words: list[str]) -> list[str]:
    # A planted fact (AND matches), a common word (many matches to rank), two
    # mid-frequency words (usually no message has both: the any-word retry).
    return [FACT_QUERY, words[3], f"{words[40]} {words[300]}", words[12], f"lock {words[150]}"]


def timed(user_id: int, query: str) -> tuple[int, int]:
    from chat.search import search_conversations

    started = time.perf_counter_ns()
    hits = search_conversations(user_id=user_id, query=query, limit=5)
    return time.perf_counter_ns() - started, len(hits)


def explain(user_id: int) -> str:
    from django.contrib.postgres.search import SearchQuery

    from chat.search.query import _Where, postgres_ranked, search_language

    search = SearchQuery(FACT_QUERY, config=search_language(), search_type="websearch")
    where = _Where(user_id=user_id, exclude=None, after=None, before=None)
    return postgres_ranked(where, search)[:5].explain(analyze=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", action="store_true", help="print the figures as JSON")
    parser.add_argument("--rounds", type=int, default=60, help="rounds of the query mix per person kind")
    parser.add_argument("--smoke", action="store_true", help="CI's smoke run: a few searches, a second or two, to prove the bench still runs; no figure is judged"
                             " (100 people, 10,000 messages)")
    args = parser.parse_args(argv)
    if args.smoke:
        global PEOPLE, CONVERSATIONS, HEAVY_CONVERSATIONS, PLANTED_PEOPLE
        PEOPLE, CONVERSATIONS, HEAVY_CONVERSATIONS, PLANTED_PEOPLE = 100, 1_000, 100, 20
        args.rounds = 1
    words = vocabulary(VOCABULARY)
    with _setup.bench_database(name=DATABASE_NAME):
        started = time.monotonic()
        facts = fill(words)
        fill_seconds = round(time.monotonic() - started, 1)
        mix = queries(words)
        rng = random.Random(16)
        for query in mix:  # warm the caches once
            timed(facts["heavy"], query)
            timed(facts["light"], query)
        anyone, heavy, light, found = [], [], [], {"anyone": 0, "heavy": 0, "light": 0}
        for _ in range(args.rounds):
            for query in mix:
                person = facts["first"] + rng.randrange(PEOPLE)
                for bucket, name, user_id in ((anyone, "anyone", person), (heavy, "heavy", facts["heavy"]),
                                              (light, "light", facts["light"])):
                    elapsed, count = timed(user_id, query)
                    bucket.append(elapsed)
                    found[name] += count
        plan = explain(facts["heavy"])
    figures = {
        "people": PEOPLE, "messages": facts["messages"], "indexed_messages": facts["indexed"],
        "fill_seconds": fill_seconds, "queries_per_kind": len(anyone),
        "anyone": _setup.latency_figures(anyone),
        "person_10000_messages": _setup.latency_figures(heavy),
        "person_100_messages": _setup.latency_figures(light),
        "results_returned": found,
    }
    figures["ratio_10000_to_100"] = round(
        figures["person_10000_messages"]["median_ms"] / figures["person_100_messages"]["median_ms"], 2)
    worst_p50 = max(figures[k]["median_ms"] for k in ("anyone", "person_10000_messages", "person_100_messages"))
    worst_p99 = max(figures[k]["p99_ms"] for k in ("anyone", "person_10000_messages", "person_100_messages"))
    figures["meets_targets"] = (worst_p50 <= TARGET_P50_MS and worst_p99 <= TARGET_P99_MS
                                and figures["ratio_10000_to_100"] <= TARGET_RATIO)
    figures["index_used"] = "chat_messagesearch_user_document" in plan
    if args.json:
        print(json.dumps({**figures, "plan": plan}, indent=2))
        return 0
    print(f"conversation search: {PEOPLE:,} people, {facts['messages']:,} messages "
          f"({facts['indexed']:,} indexed), filled in {fill_seconds} s")
    print(f"query mix of {len(mix)} (a planted fact, common words, two-word queries), limit 5, "
          f"{len(anyone)} searches per row; search_conversations end to end (ranked ids, headlines, hits, neighbours)")
    for label, key in (("random person (about 100 messages)", "anyone"),
                       ("person with 10,000 messages", "person_10000_messages"),
                       ("person with 100 messages", "person_100_messages")):
        row = figures[key]
        print(f"  {label:<38} p50 {row['median_ms']:7.3f} ms   p99 {row['p99_ms']:7.3f} ms")
    print(f"  ratio of medians, 10,000 / 100 messages: {figures['ratio_10000_to_100']} (target <= {TARGET_RATIO})")
    print(f"  targets p50 <= {TARGET_P50_MS} ms, p99 <= {TARGET_P99_MS} ms, ratio <= {TARGET_RATIO}: "
          f"{'met' if figures['meets_targets'] else 'NOT met'}")
    print("plan of the ranked query (person with 10,000 messages, the planted fact):")
    for line in plan.splitlines():
        print("  " + line)
    return 0


if __name__ == "__main__":
    sys.exit(main())
