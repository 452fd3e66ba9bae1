"""Residue bench: after "Erase memory and chats", which bytes of the erased text are still on disk?

It owns one question for docs/privacy.md: the erase (`agentmemory.services.
erase_memory(..., with_chats=True)`) leaves no row behind, but what is left
below the tables, in the files the database writes, and for how long?

The bench writes a sentinel through every path that stores a person's text:
a memory commit (`store.commit_operations`, an add: the document row and
its version row), a conversation with a message (`chat.models`, ORM create:
the title, the message and, by the triggers, the search index), and a
proposal (`proposals.create`). Two people are measured: one with short
texts (kept inline in the row) and one with long ones (2.1 KB memory and
proposal, a 4 KB message: stored out of line in TOAST on PostgreSQL,
overflow pages on SQLite). Four more people, two written before and two
after them, share the pages and stay, as everyone else's rows do on a real
server (so a VACUUM cannot simply cut the pages off the end of a file),
and each text's position on its page is the same in every run. Then it erases
both measured people and, step by step, searches raw bytes for the
sentinel: every relation file of the scratch database, pages as PostgreSQL
sees them (shared buffers, through pageinspect), the WAL segment files in
pg_wal and the server log, with the dead tuples counted (pgstattuple) and
each heap or TOAST hit placed inside a tuple or in a page's free space; on
SQLite the database file (each hit attributed to the table, index or free
page that owns its page, through dbstat) and its -wal or -journal, with
secure_delete and the FTS5 'optimize' each switched off in turn, and the
app's settings in journal_mode=WAL and PERSIST (a fresh copy of one
migrated file each) to show what each step buys.

Each text holds one token "zqx" + an item letter + RUN + "0" (RUN: 12
random hex digits, new each run, so WAL or free space left by earlier runs
never counts). The bench searches for RUN and reads the item letter before
it; it prints counts and item letters, never the text. The filler around
it is random words from letters that are neither hex digits nor q, x, z
(PostgreSQL's pglz does not compress such text, checked in the output: a
compressed value would hide the sentinel from a byte search).

PostgreSQL needs a local server whose data directory this user can read
(e.g. as root) and a superuser role (CHECKPOINT, pg_switch_wal(), CREATE
EXTENSION pageinspect and pgstattuple in the scratch database). The scratch
database `agentmemory_bench_residue` is created, migrated and dropped by
bench/_setup.py (DATABASE_URL, default
postgres://postgres@127.0.0.1:5432/test). The bench runs CHECKPOINT,
pg_switch_wal() and, unless --wal-rounds 0, writes up to 16 MB of WAL per
round (pg_logical_emit_message) until no segment file holds the sentinel:
that touches the whole server's WAL (nothing else of other databases).
SQLite: temporary files, removed after.

Run: `.venv/bin/python bench/residue.py [--database postgres|sqlite]`
(default: both, each in its own process, since Django's settings pick the
database engine once).

One file of about 750 lines on purpose: a bench is run as a script
(`python bench/residue.py`) and read top to bottom next to the figures it
prints in docs/privacy.md; its steps share one scratch database and its
findings, and nothing else imports it.
"""
from __future__ import annotations

import argparse
import os
import secrets
import shutil
import subprocess
import sys
import tempfile
import time
from collections import Counter
from contextlib import suppress
from pathlib import Path

import _setup

DATABASE_NAME = "agentmemory_bench_residue"
PREFIX = "zqx"
ITEMS = {  # item letter -> what wrote it
    "m": "memory entry, short (document + version)",
    "c": "chat message, short (+ search index)",
    "t": "conversation title",
    "p": "proposal, short",
    "n": "memory entry, long 2.1 KB (document + version)",
    "d": "chat message, long 4 KB (+ search index)",
    "q": "proposal, long 2.1 KB",
}
SHORT_ITEMS, LONG_ITEMS = "mctp", "ndq"
LONG_MEMORY, LONG_MESSAGE = 2100, 4000
TABLES = ("agentmemory_document", "agentmemory_version", "agentmemory_proposal",
          "chat_conversation", "chat_message", "chat_messagesearch")
FILLER_LETTERS = "ghijklmnoprstuvwy"  # no hex digit (RUN's alphabet), no q/x/z (the prefix's)
WAL_ROUND_MB = 16


# --- the sentinel and the texts ------------------------------------------------------------------


def new_run() -> str:
    """12 random hex digits with a letter and a digit and no repeated 3-character run."""
    while True:
        run = secrets.token_hex(6)
        trigrams = [run[i:i + 3] for i in range(len(run) - 2)]
        if any(c.isdigit() for c in run) and any(c.isalpha() for c in run) and len(set(trigrams)) == len(trigrams):
            return run


class Texts:
    """The texts the bench writes: deterministic filler (fixed seed) around this run's tokens."""

    def __init__(self, run: str, seed: int = 27):
        import random

        self.run = run
        self.rng = random.Random(seed)

    def token(self, item: str) -> str:
        # Alphanumeric, ends in a digit: one word for PostgreSQL's parser ("numword", not stemmed)
        # and FTS5's unicode61 tokenizer (the porter stemmer strips no suffix after a digit).
        return f"{PREFIX}{item}{self.run}0"

    def filler(self, size: int) -> str:
        words, length = [], 0
        while length < size:
            word = "".join(self.rng.choice(FILLER_LETTERS) for _ in range(self.rng.randint(3, 9)))
            words.append(word)
            length += len(word) + 1
        return " ".join(words)[:size].rstrip()

    def text(self, item: str | None, size: int) -> str:
        """About `size` characters; the token (if any) near the start, inside the first TOAST chunk or page."""
        head = f"Keep this private {self.token(item)} " if item else "Keep this private "
        return head + self.filler(max(size - len(head), 8))


# --- writing and erasing, the same on both databases ---------------------------------------------


def write_person(username: str, texts: Texts, items: str | None, *, long: bool) -> int:
    """Create a person and write their memory entry, conversation, message and proposal; return the id."""
    from django.contrib.auth import get_user_model

    from agentmemory import proposals, store
    from agentmemory.rules import Operation
    from chat.models import Conversation, Message

    def item(letter):
        return letter if items and letter in items else None

    user = get_user_model().objects.create(username=username, password="!")
    memory_size, message_size = (LONG_MEMORY, LONG_MESSAGE) if long else (60, 60)
    memory_item, message_item, proposal_item = (item("n"), item("d"), item("q")) if long else (
        item("m"), item("c"), item("p"))
    title = f"Chat about {texts.token('t')}" if item("t") else "Chat about work"
    conversation = Conversation.objects.create(user=user, title=title)
    Message.objects.create(conversation=conversation, role=Message.Role.USER,
                           content=texts.text(message_item, message_size))
    Message.objects.create(conversation=conversation, role=Message.Role.ASSISTANT, content="Noted.")
    store.commit_operations(
        user_id=user.pk, operations=[Operation("memory", "add", content=texts.text(memory_item, memory_size))],
        origin={"conversation_id": conversation.pk, "turn_id": f"residue-{username}"})
    proposals.create(user_id=user.pk, conversation_id=conversation.pk, turn_id=f"residue-{username}",
                     operations=[Operation("memory", "add", content=texts.text(proposal_item, memory_size))])
    return user.pk


def write_everyone(texts: Texts) -> list[int]:
    """Neighbours before and after the two measured people; return the measured people's ids."""
    write_person("residue-neighbour-1", texts, None, long=False)
    write_person("residue-neighbour-2", texts, None, long=True)
    measured = [write_person("residue-short", texts, SHORT_ITEMS, long=False),
                write_person("residue-long", texts, LONG_ITEMS, long=True)]
    write_person("residue-neighbour-3", texts, None, long=False)
    write_person("residue-neighbour-4", texts, None, long=True)
    return measured


def erase_everyone(user_ids: list[int]) -> dict[str, int]:
    from agentmemory import services

    removed: Counter = Counter()
    for user_id in user_ids:
        removed.update(services.erase_memory(user_id=user_id, actor="user", with_chats=True).removed)
    return dict(removed)


def rows_holding(run: str) -> Counter:
    """Occurrences of the sentinel in the rows of TABLES (and SQLite's FTS5 vocabulary), through SQL."""
    from django.db import connection

    found: Counter = Counter()
    needle = run.encode()
    quote = connection.ops.quote_name
    with connection.cursor() as cursor:
        for table in TABLES:
            if connection.vendor == "sqlite" and table == "chat_messagesearch":
                continue  # empty on SQLite: FTS5 plays its part
            cursor.execute(f"SELECT * FROM {quote(table)}")
            for row in cursor.fetchall():
                for value in row:
                    if value is not None:
                        found.update(kinds_in(as_bytes(value), needle))
        if connection.vendor == "sqlite":
            cursor.execute("CREATE VIRTUAL TABLE IF NOT EXISTS temp.residue_vocab "
                           "USING fts5vocab(main, chat_message_fts, row)")
            cursor.execute("SELECT term FROM temp.residue_vocab WHERE term LIKE %s", [f"%{run}%"])
            for (term,) in cursor.fetchall():
                found.update(kinds_in(term.encode(), needle))
    return found


def as_bytes(value) -> bytes:
    if isinstance(value, (bytes, bytearray, memoryview)):
        return bytes(value)
    return str(value).encode("utf-8", "surrogatepass")


def hits(data: bytes, needle: bytes) -> list[tuple[int, str]]:
    """(offset, item letter) of each occurrence of `needle`; '?' when the byte before is not an item letter."""
    found = []
    at = data.find(needle)
    while at >= 0:
        letter = chr(data[at - 1]) if at > 0 else "?"
        found.append((at, letter if letter in ITEMS else "?"))
        at = data.find(needle, at + 1)
    return found


def kinds_in(data: bytes, needle: bytes) -> Counter:
    return Counter(letter for _at, letter in hits(data, needle))


def read(path: Path, offset: int = 0) -> bytes:
    try:
        with open(path, "rb") as handle:
            handle.seek(offset)
            return handle.read()
    except FileNotFoundError:
        return b""


def in_a_tuple(data: bytes, at: int, page_size: int = 8192) -> bool:
    """Whether offset `at` of a heap file lies inside a tuple (a used line pointer's item), not free space."""
    page = data[at - at % page_size:][:page_size]
    within = at % page_size
    lower = int.from_bytes(page[12:14], "little")  # PageHeaderData.pd_lower: end of the line pointers
    for n in range(max(0, (lower - 24) // 4)):
        word = int.from_bytes(page[24 + 4 * n:28 + 4 * n], "little")
        offset, flags, length = word & 0x7FFF, (word >> 15) & 3, word >> 17
        if flags == 1 and offset <= within < offset + length:  # LP_NORMAL
            return True
    return False


def scan_file(path: Path, needle: bytes, offset: int = 0) -> Counter:
    return kinds_in(read(path, offset), needle)


# --- the printed table ---------------------------------------------------------------------------


class Figures:
    """Rows (places) by columns (steps): Counters of item letters, or plain strings."""

    def __init__(self):
        self.steps: list[tuple[str, str]] = []
        self.cells: dict[str, dict[str, object]] = {}

    def step(self, key: str, what: str) -> None:
        self.steps.append((key, what))

    def put(self, place: str, step: str, value) -> None:
        self.cells.setdefault(place, {})[step] = value

    @staticmethod
    def cell(value) -> str:
        if value is None:
            return "."  # nothing there at that step (e.g. a page owner that held nothing)
        if isinstance(value, Counter):
            total = sum(value.values())
            return str(total) if total else "."
        return str(value)

    def render(self, *, always: set[str] = frozenset(), width: int = 44) -> str:
        keys = [key for key, _ in self.steps]
        widths = [max(4, len(key)) for key in keys]
        lines = ["  " + "place".ljust(width) + "items    " + " ".join(k.rjust(w) for k, w in zip(keys, widths))]
        quiet = []
        for place, by_step in self.cells.items():
            letters = Counter()
            for value in by_step.values():
                if isinstance(value, Counter):
                    letters.update(value)
            has_hits = any(isinstance(v, Counter) and sum(v.values()) for v in by_step.values()) or any(
                isinstance(v, str) and v not in ("0", ".", "-") for v in by_step.values())
            if not has_hits and place not in always:
                quiet.append(place)
                continue
            items = "".join(letter for letter in [*ITEMS, "?"] if letters[letter])
            row = " ".join(self.cell(by_step.get(key)).rjust(w) for key, w in zip(keys, widths))
            lines.append("  " + place[:width - 1].ljust(width) + items.ljust(9) + row)
        if quiet:
            groups = Counter("b-tree indexes of the tables" if " idx " in place else
                             "TOAST indexes" if place.endswith("TOAST index") else place.removeprefix("file: ")
                             for place in quiet)
            lines.append("  never holding it, scanned at every step: "
                         + "; ".join(f"{n} {g}" if n > 1 else g for g, n in groups.items()))
        return "\n".join(lines)

    def legend(self) -> str:
        return "\n".join(f"  {key:<5} {what}" for key, what in self.steps)


def items_legend() -> str:
    return "  " + "; ".join(f"{letter} {what}" for letter, what in ITEMS.items())


# --- PostgreSQL ----------------------------------------------------------------------------------


class Postgres:
    def __init__(self, run: str, rounds: int):
        from django.db import connection

        self.connection = connection
        self.run = run
        self.needle = run.encode()
        self.rounds = rounds
        self.figures = Figures()
        self.notes: list[str] = []
        self.wal_detail: list[str] = []
        with connection.cursor() as cursor:
            self.data_dir = Path(self.one(cursor, "SHOW data_directory"))
            self.db_oid = self.one(cursor, "SELECT oid FROM pg_database WHERE datname = current_database()")
            self.pageinspect = self.extension(cursor, "pageinspect")
            self.pgstattuple = self.extension(cursor, "pgstattuple")
            self.log_path = self.find_log(cursor)
        if not (self.data_dir / "PG_VERSION").is_file() or not os.access(self.data_dir / "base", os.R_OK):
            raise SystemExit(f"The data directory {self.data_dir} is not readable here: run the bench on the "
                             "database server's machine, as a user who can read it (e.g. root or postgres).")
        self.log_offset = self.log_path.stat().st_size if self.log_path else 0
        self.old_files: dict[str, Path] = {}

    @staticmethod
    def one(cursor, sql, params=None):
        cursor.execute(sql, params or [])
        return cursor.fetchone()[0]

    def extension(self, cursor, name: str) -> bool:
        try:
            cursor.execute(f"CREATE EXTENSION IF NOT EXISTS {name}")
            return True
        except Exception as exc:  # not installed or not superuser: that row is left out, and said so
            self.notes.append(f"{name} unavailable ({type(exc).__name__}): its row is not measured")
            return False

    def find_log(self, cursor) -> Path | None:
        current = self.one(cursor, "SELECT pg_current_logfile()")
        if current:
            path = Path(current) if os.path.isabs(current) else self.data_dir / current
        else:  # logging_collector off: Debian's pg_ctlcluster sends stderr to /var/log/postgresql
            cluster = self.one(cursor, "SHOW cluster_name").replace("/", "-")
            path = Path(f"/var/log/postgresql/postgresql-{cluster}.log")
        if path.is_file() and os.access(path, os.R_OK):
            return path
        self.notes.append(f"server log not found or not readable ({path}): not searched")
        return None

    def settings(self) -> list[str]:
        names = ["server_version", "data_directory", "shared_buffers", "wal_level", "full_page_writes",
                 "wal_compression", "wal_segment_size", "wal_keep_size", "min_wal_size", "max_wal_size",
                 "wal_recycle", "wal_init_zero", "max_slot_wal_keep_size", "archive_mode", "checkpoint_timeout",
                 "autovacuum", "autovacuum_naptime", "autovacuum_vacuum_threshold",
                 "autovacuum_vacuum_scale_factor", "default_toast_compression", "log_statement",
                 "log_min_duration_statement", "log_min_error_statement", "logging_collector",
                 "shared_preload_libraries", "track_activity_query_size"]
        with self.connection.cursor() as cursor:
            cursor.execute("SELECT name, setting, coalesce(unit, '') FROM pg_settings WHERE name = ANY(%s)", [names])
            values = {name: f"{setting}{' x ' + unit if unit and unit[0].isdigit() else unit}"
                      for name, setting, unit in cursor.fetchall()}
            slots = self.one(cursor, "SELECT count(*) FROM pg_replication_slots")
            pgss = self.one(cursor, "SELECT count(*) FROM pg_extension WHERE extname = 'pg_stat_statements'")
            values["replication slots"] = str(slots)
            values["pg_stat_statements installed here"] = "yes" if pgss else "no"
        return [f"{name}={values.get(name, '?')}" for name in [*names, "replication slots",
                                                               "pg_stat_statements installed here"]]

    def places(self, cursor) -> list[tuple[str, int, str]]:
        """(label, oid, relation file path) of each table of TABLES, its TOAST table and index, its indexes."""
        cursor.execute(
            """
            SELECT t.relname || ' heap', t.oid, t.relname, 0 FROM pg_class t
             WHERE t.relname = ANY(%(t)s) AND t.relkind = 'r' AND t.relnamespace = 'public'::regnamespace
            UNION ALL
            SELECT t.relname || ' TOAST', t.reltoastrelid, t.relname, 1 FROM pg_class t
             WHERE t.relname = ANY(%(t)s) AND t.relkind = 'r' AND t.reltoastrelid <> 0
               AND t.relnamespace = 'public'::regnamespace
            UNION ALL
            SELECT t.relname || ' TOAST index', i.indexrelid, t.relname, 2 FROM pg_class t
              JOIN pg_index i ON i.indrelid = t.reltoastrelid
             WHERE t.relname = ANY(%(t)s) AND t.relkind = 'r' AND t.relnamespace = 'public'::regnamespace
            UNION ALL
            SELECT t.relname || ' idx ' || x.relname, i.indexrelid, t.relname, 3 FROM pg_class t
              JOIN pg_index i ON i.indrelid = t.oid JOIN pg_class x ON x.oid = i.indexrelid
             WHERE t.relname = ANY(%(t)s) AND t.relkind = 'r' AND t.relnamespace = 'public'::regnamespace
            """,
            {"t": list(TABLES)},
        )
        rows = cursor.fetchall()
        order = {table: n for n, table in enumerate(TABLES)}
        rows.sort(key=lambda r: (order[r[2]], r[3], r[0]))
        places = []
        for label, oid, _table, _kind in rows:
            path = self.one(cursor, "SELECT pg_relation_filepath(%s::oid)", [oid])
            places.append((label.replace(" idx chat_messagesearch_user_document", " GIN index"), oid, path))
        return places

    @staticmethod
    def relation_files(base: Path) -> list[Path]:
        files = [base.with_name(base.name + suffix) for suffix in ("", "_fsm", "_vm", "_init")]
        segment = 1
        while base.with_name(f"{base.name}.{segment}").exists():
            files.append(base.with_name(f"{base.name}.{segment}"))
            segment += 1
        return [f for f in files if f.exists()]

    def measure(self, key: str, what: str) -> None:
        figures, needle = self.figures, self.needle
        figures.step(key, what)
        figures.put("SQL: rows of the 6 tables", key, rows_holding(self.run))
        covered: set[Path] = set()
        with self.connection.cursor() as cursor:
            places = self.places(cursor)
            buffers, dead, in_tuples, in_free = Counter(), 0, Counter(), Counter()
            for label, oid, path in places:
                found = Counter()
                for file in self.relation_files(self.data_dir / path):
                    covered.add(file)
                    data = read(file)
                    for at, letter in hits(data, needle):
                        found[letter] += 1
                        if label.endswith((" heap", " TOAST")) and file.name.split(".")[0].isdigit():
                            (in_tuples if in_a_tuple(data, at) else in_free)[letter] += 1
                figures.put(f"file: {label}", key, found)
                if self.pageinspect:
                    cursor.execute("SELECT get_raw_page(%s::regclass::text, 'main', b) FROM "
                                   "generate_series(0, (pg_relation_size(%s::oid) / 8192)::int - 1) AS b", [oid, oid])
                    for (page,) in cursor.fetchall():
                        buffers.update(kinds_in(bytes(page), needle))
            if self.pgstattuple:
                for label, oid, _path in places:
                    if label.endswith((" heap", " TOAST")):
                        dead += self.one(cursor, "SELECT dead_tuple_count FROM pgstattuple(%s::oid)", [oid])
            figures.put("PostgreSQL's view of those pages (buffers)", key, buffers if self.pageinspect else "n/a")
            figures.put("dead tuples in those heaps (pgstattuple)", key, str(dead) if self.pgstattuple else "n/a")
            figures.put("heap+TOAST hits inside a tuple", key, in_tuples)
            figures.put("heap+TOAST hits in free space (no tuple)", key, in_free)
            if self.old_files:
                found, sizes = Counter(), []
                for old in self.old_files.values():
                    for file in self.relation_files(old):
                        covered.add(file)
                        found.update(scan_file(file, needle))
                        sizes.append(file.stat().st_size)
                state = "gone" if not sizes else f"{sum(sizes)}B"
                figures.put(f"old files of {len(self.old_files)} rels (pre VACUUM FULL)", key,
                            found if sum(found.values()) else state)
            # Everything else in the database's directory, attributed by file node.
            others: dict[str, Counter] = {}
            for file in sorted((self.data_dir / "base" / str(self.db_oid)).iterdir()):
                if file in covered or not file.is_file():
                    continue
                found = scan_file(file, needle)
                if sum(found.values()):
                    node = file.name.split("_")[0].split(".")[0]
                    name = self.one(cursor, "SELECT pg_filenode_relation(0, %s::oid)::regclass::text",
                                    [node]) if node.isdigit() else None
                    others.setdefault(f"file: other {name or 'unattributed ' + file.name}", Counter()).update(found)
            for label, found in others.items():
                figures.put(label, key, found)
            figures.put("file: other relations of the database", key, Counter())
            current = self.one(cursor, "SELECT pg_walfile_name(pg_current_wal_lsn())")
        segments = sorted(p for p in (self.data_dir / "pg_wal").iterdir() if p.is_file() and len(p.name) == 24)
        holding, total = [], Counter()
        for segment in segments:
            found = scan_file(segment, needle)
            if sum(found.values()):
                holding.append(segment.name + (" (current)" if segment.name == current else
                                               " (future: recycled)" if segment.name > current else ""))
                total.update(found)
        figures.put("pg_wal: segment files holding it", key, f"{len(holding)}/{len(segments)}")
        figures.put("pg_wal: occurrences", key, total)
        self.wal_detail.append(f"  {key:<5} current {current}; holding it: {', '.join(holding) or 'none'}")
        if self.log_path:
            figures.put("server log (written since the start)", key, scan_file(self.log_path, needle, self.log_offset))

    def execute(self, *statements: str) -> None:
        with self.connection.cursor() as cursor:
            for statement in statements:
                cursor.execute(statement)

    def storage(self) -> list[str]:
        """How the live values are stored: size, compression, how many TOAST chunks per table."""
        lines = []
        columns = {"agentmemory_document": ["content"], "agentmemory_version": ["after"],
                   "agentmemory_proposal": ["operations"], "chat_message": ["content"],
                   "chat_messagesearch": ["document"]}
        with self.connection.cursor() as cursor:
            for table, names in columns.items():
                for column in names:
                    cursor.execute(f'SELECT max(pg_column_size("{column}")), count(*) FILTER (WHERE '
                                   f'pg_column_compression("{column}") IS NOT NULL) FROM {table}')
                    largest, compressed = cursor.fetchone()
                    toast = self.one(cursor, "SELECT reltoastrelid::regclass::text FROM pg_class WHERE relname = %s",
                                     [table])
                    chunks = self.one(cursor, f"SELECT count(*) FROM {toast}") if toast and toast != "-" else 0
                    lines.append(f"  {table}.{column}: largest value {largest} B stored, {compressed} compressed "
                                 f"values, {chunks} TOAST chunks (everyone's)")
        return lines

    def run_steps(self) -> None:
        texts = Texts(self.run)
        started = time.monotonic()
        measured = write_everyone(texts)
        self.measure("W", "written (committed), no CHECKPOINT yet: heap pages may be only in shared buffers")
        self.storage_lines = self.storage()
        self.execute("CHECKPOINT")
        self.measure("W+C", "... + CHECKPOINT: the live rows are in the files, as old data would be")
        self.removed = erase_everyone(measured)
        self.measure("E", "erase_memory(with_chats=True) committed, before any CHECKPOINT")
        self.execute("CHECKPOINT")
        self.measure("E+C", "... + CHECKPOINT: the erased rows' pages (dead tuples) flushed to the files")
        with self.connection.cursor() as cursor:
            cursor.execute("SELECT relname, last_autovacuum FROM pg_stat_user_tables WHERE relname = ANY(%s) "
                           "AND last_autovacuum IS NOT NULL", [list(TABLES)])
            autovacuumed = cursor.fetchall()
        self.notes.append("autovacuum ran on " + (", ".join(name for name, _ in autovacuumed) or "none of the tables")
                          + " during the run (pg_stat_user_tables.last_autovacuum). When autovacuum is on, it "
                          "vacuums a table once its dead tuples exceed autovacuum_vacuum_threshold + "
                          "autovacuum_vacuum_scale_factor x its rows, looking every autovacuum_naptime")
        self.execute(*(f"VACUUM {table}" for table in TABLES))
        self.measure("V", "... + plain VACUUM of the 6 tables (their TOAST tables and indexes with them)")
        self.execute("CHECKPOINT")
        self.measure("V+C", "... + CHECKPOINT")
        with self.connection.cursor() as cursor:
            self.old_files = {label: self.data_dir / path for label, _oid, path in self.places(cursor)}
        self.execute(*(f"VACUUM FULL {table}" for table in TABLES))
        self.measure("F", "... + VACUUM FULL of the 6 tables (rewritten into new files)")
        self.execute("CHECKPOINT")
        self.measure("F+C", "... + CHECKPOINT (the old files are unlinked at the checkpoint)")
        self.execute("SELECT pg_switch_wal()", "CHECKPOINT")
        self.measure("S", "... + pg_switch_wal() + CHECKPOINT: older segments removed or recycled")
        self.rollover()
        self.elapsed = time.monotonic() - started

    def rollover(self) -> None:
        """Write WAL (16 MB a round, then CHECKPOINT) until no segment file holds the sentinel."""
        if self.rounds <= 0:
            self.wal_rounds = None
            return
        self.wal_rounds = 0
        for round_ in range(1, self.rounds + 1):
            statements = [f"SELECT pg_logical_emit_message(false, 'residue-bench', repeat('w', {1024 * 1024 - 64}))"
                          ] * WAL_ROUND_MB
            self.execute(*statements, "CHECKPOINT")
            self.wal_rounds = round_
            if not self.wal_holding():
                break
        self.measure("R", f"... + {self.wal_rounds} round(s) of {WAL_ROUND_MB} MB of new WAL + CHECKPOINT")

    def wal_holding(self) -> bool:
        return any(sum(scan_file(p, self.needle).values()) for p in (self.data_dir / "pg_wal").iterdir()
                   if p.is_file() and len(p.name) == 24)

    def report(self) -> str:
        figures = self.figures
        always = {f"file: {t} heap" for t in TABLES} | {"SQL: rows of the 6 tables", "pg_wal: occurrences"}
        lines = [
            f"Residue after erase on PostgreSQL (sentinel {PREFIX}<item>{self.run}0; figures are occurrences "
            "of the sentinel, '.' none)",
            "items:", items_legend(),
            "erase receipt (both people): " + ", ".join(f"{k} {v}" for k, v in self.removed.items()),
            "server settings:",
            *("  " + "  ".join(chunk) for chunk in chunks(self.settings(), 4)),
            "live values (step W):", *self.storage_lines,
            "steps:", figures.legend(),
            figures.render(always=always),
            "pg_wal by step:", *self.wal_detail,
        ]
        if self.wal_rounds is not None:
            lines.append(f"WAL rollover: gone from every segment file after {self.wal_rounds} round(s), "
                         f"{self.wal_rounds * WAL_ROUND_MB} MB of WAL" if not self.wal_holding() else
                         f"WAL rollover: still in a segment file after {self.wal_rounds * WAL_ROUND_MB} MB of WAL")
        lines += [f"note: {note}" for note in self.notes]
        lines.append(f"(measured in {self.elapsed:.1f} s)")
        return "\n".join(lines)


def chunks(values, size):
    return [values[i:i + size] for i in range(0, len(values), size)]


def run_postgres(rounds: int) -> int:
    os.environ["AGENTMEMORY_ENABLED"] = "true"
    url = os.environ.get("DATABASE_URL", "")
    with _setup.bench_database(name=DATABASE_NAME,
                               database_url=url if url.startswith(("postgres://", "postgresql://")) else None):
        bench = Postgres(new_run(), rounds)  # its extensions go with the scratch database
        bench.run_steps()
        print(bench.report())
    return 0


# --- SQLite --------------------------------------------------------------------------------------


SQLITE_VARIANTS = (
    ("app", "the app: secure_delete ON, FTS5 optimize after the delete", True, True, "delete"),
    ("no-sd", "secure_delete OFF, FTS5 optimize", False, True, "delete"),
    ("no-opt", "secure_delete ON, no FTS5 optimize", True, False, "delete"),
    ("neither", "secure_delete OFF, no FTS5 optimize", False, False, "delete"),
    ("wal", "the app in journal_mode=WAL", True, True, "wal"),
    ("persist", "the app in journal_mode=PERSIST (the journal file is kept)", True, True, "persist"),
)


def sqlite_files(name: str) -> list[Path]:
    return [Path(name + suffix) for suffix in ("", "-journal", "-wal")]


def sqlite_pages(cursor) -> tuple[int, dict[int, str]]:
    """The page size and which b-tree (table or index, overflow pages included) owns each page."""
    cursor.execute("PRAGMA page_size")
    page_size = cursor.fetchone()[0]
    cursor.execute("SELECT pageno, name FROM dbstat")
    return page_size, dict(cursor.fetchall())


def sqlite_measure(figures: Figures, variant: str, key: str, run: str) -> None:
    from django.db import connection

    needle = run.encode()
    name = connection.settings_dict["NAME"]
    figures.put(f"{variant}: SQL rows + FTS5 vocabulary", key, rows_holding(run))
    with connection.cursor() as cursor:
        page_size, owners = sqlite_pages(cursor)
    for path in sqlite_files(name):
        label = f"{variant}: {path.name.replace(Path(name).name, 'db')}"
        if not path.exists():
            figures.put(label, key, "none")
            continue
        data = path.read_bytes()
        if path.name == Path(name).name:  # the database file: attribute each hit to its page's owner
            by_owner: dict[str, Counter] = {}
            for at, letter in hits(data, needle):
                owner = owners.get(at // page_size + 1, "free page (freelist)")
                by_owner.setdefault(owner, Counter())[letter] += 1
            figures.put(f"{variant}: db file (all pages)", key, kinds_in(data, needle))
            for owner, found in sorted(by_owner.items()):
                figures.put(f"{variant}: db file, {owner}", key, found)
        else:
            figures.put(label, key, kinds_in(data, needle))


def run_sqlite() -> int:
    import sqlite3

    os.environ["AGENTMEMORY_ENABLED"] = "true"
    workdir = Path(tempfile.mkdtemp(prefix="residue-bench-"))
    try:
        template = workdir / "template.sqlite3"
        os.environ["DATABASE_URL"] = f"sqlite:///{template}"
        _setup.setup_django()
        from unittest import mock

        from django.core.management import call_command
        from django.db import connection

        from chat import retention

        call_command("migrate", verbosity=0, interactive=False)
        connection.close()
        run = new_run()
        figures = Figures()
        figures.step("W", "written (committed)")
        figures.step("E", "erase committed (and, where on, the FTS5 optimize after it)")
        figures.step("C", "... + PRAGMA wal_checkpoint(TRUNCATE)")
        settings_lines, receipts = [], []
        raw = sqlite3.connect(":memory:")
        build_default = raw.execute("PRAGMA secure_delete").fetchone()[0]
        raw.close()
        started = time.monotonic()
        for variant, what, secure_delete, optimize, journal in SQLITE_VARIANTS:
            path = workdir / f"{variant}.sqlite3"
            shutil.copyfile(template, path)
            connection.close()
            connection.settings_dict["NAME"] = str(path)
            connection.ensure_connection()  # the app's connection_created signal sets secure_delete ON
            with connection.cursor() as cursor:
                if not secure_delete:
                    cursor.execute("PRAGMA secure_delete = OFF")
                if journal != "delete":
                    cursor.execute(f"PRAGMA journal_mode = {journal.upper()}")
                cursor.execute("PRAGMA secure_delete")
                sd = cursor.fetchone()[0]
                cursor.execute("PRAGMA journal_mode")
                jm = cursor.fetchone()[0]
                cursor.execute("PRAGMA auto_vacuum")
                av = cursor.fetchone()[0]
            settings_lines.append(f"  {variant:<8} {what}: secure_delete={sd} journal_mode={jm} auto_vacuum={av}")
            texts = Texts(run)
            measured = write_everyone(texts)
            sqlite_measure(figures, variant, "W", run)
            if optimize:
                removed = erase_everyone(measured)
            else:  # the same erase, with the compaction it schedules on commit made a no-op
                with mock.patch.object(retention, "compact_index", lambda: None):
                    removed = erase_everyone(measured)
            receipts.append(removed)
            sqlite_measure(figures, variant, "E", run)
            with connection.cursor() as cursor:
                cursor.execute("PRAGMA wal_checkpoint(TRUNCATE)")
            sqlite_measure(figures, variant, "C", run)
            connection.close()
        elapsed = time.monotonic() - started
        always = {f"{v[0]}: db file (all pages)" for v in SQLITE_VARIANTS}
        print("\n".join([
            f"Residue after erase on SQLite {sqlite3.sqlite_version} (sentinel {PREFIX}<item>{run}0; figures are "
            "occurrences of the sentinel, '.' none; 'none': no such file)",
            "items (SQLite has no search-index table row: FTS5 keeps the words in chat_message_fts_data):",
            items_legend(),
            "erase receipt (both people, each variant): " + ", ".join(f"{k} {v}" for k, v in receipts[0].items()),
            f"this build's default secure_delete: {build_default}; each variant is a fresh copy of one migrated file:",
            *settings_lines,
            "steps:", figures.legend(),
            figures.render(always=always, width=50),
            f"(measured in {elapsed:.1f} s)",
        ]))
        return 0
    finally:
        with suppress(Exception):
            from django.db import connections

            connections.close_all()
        shutil.rmtree(workdir, ignore_errors=True)


# --- main ----------------------------------------------------------------------------------------


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--database", choices=("postgres", "sqlite", "both"), default="both")
    parser.add_argument("--wal-rounds", type=int, default=10,
                        help=f"PostgreSQL: at most this many rounds of {WAL_ROUND_MB} MB of WAL to roll the "
                             "sentinel out of pg_wal (0: do not write WAL)")
    parser.add_argument("--smoke", action="store_true",
                        help="CI's smoke run: every step on both databases but no WAL written (--wal-rounds 0); "
                             "no figure is judged")
    args = parser.parse_args(argv)
    if args.smoke:
        args.wal_rounds = 0
    if args.database == "both":
        status = 0
        for database in ("postgres", "sqlite"):
            done = subprocess.run([sys.executable, __file__, "--database", database,
                                   "--wal-rounds", str(args.wal_rounds)], check=False)
            status = status or done.returncode
            sys.stdout.flush()
            if database == "postgres":
                print()
        return status
    if args.database == "postgres":
        return run_postgres(args.wal_rounds)
    return run_sqlite()


if __name__ == "__main__":
    sys.exit(main())
