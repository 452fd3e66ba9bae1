"""The selector: a person's matching messages from the database, with their neighbours.

`search_conversations` hides the database (the package docstring,
`chat.search`, says how each engine finds and ranks); the trigger function
and the refresh statement that keep PostgreSQL's index in step are here too.
"""
from __future__ import annotations

import functools
import operator
import re
import unicodedata
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import date, datetime, time
from typing import Any

from django.conf import settings
from django.contrib.postgres.search import SearchHeadline, SearchQuery, SearchRank, TrigramWordSimilarity
from django.db import connection
from django.db.models import Case, F, Q, When
from django.db.models.functions import Length
from django.utils import timezone

from ..models import Message, MessageSearch

MAX_QUERY_CHARS = 200
DEFAULT_LIMIT = 5
# The database marks matches with these two private-use characters; `_unmark`
# turns them into offsets and removes them, so no marker reaches the model.
START_MARK, STOP_MARK = "\U000F0001", "\U000F0002"
SNIPPET_CHARS = 320
NEIGHBOUR_CHARS = 200
# Below this many characters a query goes to the trigram / substring path.
SHORT_QUERY_CHARS = 3
TRIGRAM_THRESHOLD = 0.5
_LANGUAGE = re.compile(r"^[a-z_]{1,63}$")
_WORDS = re.compile(r"\w+", re.UNICODE)


# --- results ------------------------------------------------------------------------


@dataclass(frozen=True)
class Quote:
    role: str
    text: str


@dataclass(frozen=True)
class Hit:
    message_id: int
    conversation_id: int
    title: str
    created_at: datetime
    role: str
    snippet: str  # the message's own words, no markers
    before: Quote | None = None
    after: Quote | None = None
    spans: tuple[tuple[int, int], ...] = ()  # where the matched words are in `snippet`: [start, end)


def search_conversations(
    *,
    user_id: int,
    query: str,
    limit: int = DEFAULT_LIMIT,
    exclude_conversation_id: int | None = None,
    after: date | None = None,
    before: date | None = None,
) -> list[Hit]:
    """Return the best matches of `query` in `user_id`'s conversations, newest first on ties.

    The owner comes from the caller (trusted code); only their conversations
    are ever read. Each hit carries a marked snippet and its neighbours.
    """
    query = " ".join(query.split())[:MAX_QUERY_CHARS]
    if not query:
        return []
    where = _Where(user_id=user_id, exclude=exclude_conversation_id,
                   after=_day_start(after), before=_day_start(before))
    postgres = connection.vendor == "postgresql"
    full_text = {"postgresql": _postgres_full_text, "sqlite": _sqlite_full_text}.get(connection.vendor)
    ids_and_snippets: list[tuple[int, str]] = []
    words = _WORDS.findall(query)
    if full_text is not None and not needs_fallback(query):
        ids_and_snippets = full_text(where, query, words, limit, any_word=False)
        if not ids_and_snippets and len(words) > 1:
            ids_and_snippets = full_text(where, query, words, limit, any_word=True)
    if not ids_and_snippets:
        ids_and_snippets = _substring(where, query, limit, trigram=postgres)
    return _hits(ids_and_snippets)


def needs_fallback(query: str) -> bool:
    """True for a query full-text search serves badly: very short, or not in Latin script."""
    if len(query.strip()) < SHORT_QUERY_CHARS or not _WORDS.search(query):
        return True
    for char in query:
        if char.isalpha() and not unicodedata.name(char, "").startswith("LATIN"):
            return True
    return False


@dataclass(frozen=True)
class _Where:
    user_id: int
    exclude: int | None
    after: datetime | None
    before: datetime | None


def _day_start(day: date | None) -> datetime | None:
    if day is None:
        return None
    return timezone.make_aware(datetime.combine(day, time.min), timezone.get_current_timezone())


def search_language() -> str:
    """The text-search configuration (PostgreSQL) from CHAT_SEARCH_LANGUAGE."""
    language = getattr(settings, "CHAT_SEARCH_LANGUAGE", "english")
    if not _LANGUAGE.match(language):
        raise ValueError("CHAT_SEARCH_LANGUAGE must name a text search configuration, such as 'english'")
    return language


# PostgreSQL ---------------------------------------------------------------------------


def _postgres_full_text(where: _Where, query: str, words: Sequence[str], limit: int, *, any_word: bool):
    config = search_language()
    if any_word:
        search = functools.reduce(operator.or_, (SearchQuery(word, config=config) for word in words))
    else:
        search = SearchQuery(query, config=config, search_type="websearch")
    ids = list(postgres_ranked(where, search)[:limit])
    if not ids:
        return []
    # Headlines only for the few hits: ts_headline re-parses each message. A short
    # message is quoted whole; a long one by up to two fragments around the match.
    marks: dict[str, Any] = {"config": config, "start_sel": START_MARK, "stop_sel": STOP_MARK}
    snippet = Case(
        When(content_length__lte=SNIPPET_CHARS, then=SearchHeadline("content", search, highlight_all=True, **marks)),
        default=SearchHeadline("content", search, max_words=30, min_words=12, max_fragments=2,
                               fragment_delimiter=" … ", **marks),
    )
    snippets = dict(
        Message.objects.filter(pk__in=ids).annotate(content_length=Length("content"), snippet=snippet)
        .values_list("pk", "snippet")
    )
    return [(pk, snippets.get(pk, "")) for pk in ids]


def postgres_ranked(where: _Where, search):
    """The ids of a person's matching messages, best first (the query bench/search.py explains)."""
    rows = MessageSearch.objects.filter(user_id=where.user_id, document=search)
    if where.exclude is not None:
        rows = rows.exclude(message__conversation_id=where.exclude)
    if where.after is not None:
        rows = rows.filter(message__created_at__gte=where.after)
    if where.before is not None:
        rows = rows.filter(message__created_at__lt=where.before)
    return (rows.annotate(rank=SearchRank(F("document"), search))
            .order_by("-rank", "-message_id").values_list("message_id", flat=True))


# SQLite -------------------------------------------------------------------------------


def _fts5_query(words: Sequence[str], *, any_word: bool) -> str:
    # Every word a quoted string: nothing the model writes is FTS5 syntax.
    quoted = ['"' + word.replace('"', '""') + '"' for word in words]
    return (" OR " if any_word else " AND ").join(quoted)


def _sqlite_full_text(where: _Where, query: str, words: Sequence[str], limit: int, *, any_word: bool):
    if not words:
        return []
    match = _fts5_query(words, any_word=any_word)
    sql = [
        "SELECT m.id FROM chat_message_fts f JOIN chat_message m ON m.id = f.rowid",
        "JOIN chat_conversation c ON c.id = m.conversation_id",
        "WHERE chat_message_fts MATCH %s AND c.user_id = %s",
    ]
    params: list = [match, where.user_id]
    sql, params = _sqlite_filters(sql, params, where)
    sql.append("ORDER BY bm25(chat_message_fts), m.id DESC LIMIT %s")
    params.append(limit)
    with connection.cursor() as cursor:
        cursor.execute(" ".join(sql), params)
        ids = [row[0] for row in cursor.fetchall()]
        if not ids:
            return []
        marks = ", ".join(["%s"] * len(ids))
        cursor.execute(
            f"SELECT rowid, snippet(chat_message_fts, 0, %s, %s, %s, 24) FROM chat_message_fts "
            f"WHERE chat_message_fts MATCH %s AND rowid IN ({marks})",
            [START_MARK, STOP_MARK, "…", match, *ids],
        )
        snippets = dict(cursor.fetchall())
    return [(pk, snippets.get(pk, "")) for pk in ids]


def _sqlite_filters(sql: list[str], params: list, where: _Where) -> tuple[list[str], list]:
    if where.exclude is not None:
        sql.append("AND m.conversation_id <> %s")
        params.append(where.exclude)
    if where.after is not None:
        sql.append("AND m.created_at >= %s")
        params.append(connection.ops.adapt_datetimefield_value(where.after))
    if where.before is not None:
        sql.append("AND m.created_at < %s")
        params.append(connection.ops.adapt_datetimefield_value(where.before))
    return sql, params


# The fallback on both ---------------------------------------------------------------------


def _substring(where: _Where, query: str, limit: int, *, trigram: bool) -> list[tuple[int, str]]:
    """Match the query as a substring (and, on PostgreSQL, by trigram word similarity)."""
    rows = Message.objects.filter(conversation__user_id=where.user_id).exclude(content="")
    if where.exclude is not None:
        rows = rows.exclude(conversation_id=where.exclude)
    if where.after is not None:
        rows = rows.filter(created_at__gte=where.after)
    if where.before is not None:
        rows = rows.filter(created_at__lt=where.before)
    if trigram and len(query) >= SHORT_QUERY_CHARS:
        rows = (
            rows.annotate(similarity=TrigramWordSimilarity(query, "content"))
            .filter(Q(content__icontains=query) | Q(similarity__gte=TRIGRAM_THRESHOLD))
            .order_by("-similarity", "-id")
        )
    else:
        rows = rows.filter(content__icontains=query).order_by("-id")
    found = list(rows.values_list("pk", "content")[:limit])
    return [(pk, _marked_excerpt(content, query)) for pk, content in found]


def _marked_excerpt(content: str, query: str) -> str:
    at = content.casefold().find(query.casefold())
    if at < 0 or len(content.casefold()) != len(content):
        return clip(content, SNIPPET_CHARS)
    side = max(20, (SNIPPET_CHARS - len(query)) // 2)
    start, end = max(0, at - side), min(len(content), at + len(query) + side)
    head = ("…" if start else "") + content[start:at]
    tail = content[at + len(query):end] + ("…" if end < len(content) else "")
    return f"{head}{START_MARK}{content[at:at + len(query)]}{STOP_MARK}{tail}"


def clip(text: str, limit: int) -> str:
    """`text` on one line, within `limit` characters (an ellipsis where it was cut)."""
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: max(0, limit - 1)].rstrip() + "…"


def _unmark(marked: str) -> tuple[str, tuple[tuple[int, int], ...]]:
    """Return a marked snippet's text without markers, and where the marked words were.

    A marker without its partner (a message that itself holds one) is dropped.
    """
    if START_MARK not in marked and STOP_MARK not in marked:
        return marked, ()
    text: list[str] = []
    spans: list[tuple[int, int]] = []
    start: int | None = None
    length = 0
    for char in marked:
        if char == START_MARK:
            start = length
        elif char == STOP_MARK:
            if start is not None and length > start:
                spans.append((start, length))
            start = None
        else:
            text.append(char)
            length += 1
    return "".join(text), tuple(spans)


# Hits with their neighbours ------------------------------------------------------------


def _hits(ids_and_snippets: Sequence[tuple[int, str]]) -> list[Hit]:
    if not ids_and_snippets:
        return []
    ids = [pk for pk, _ in ids_and_snippets]
    rows = {
        row["pk"]: row
        for row in Message.objects.filter(pk__in=ids).values(
            "pk", "conversation_id", "role", "created_at", title=F("conversation__title"))
    }
    neighbours = _neighbours([(pk, rows[pk]["conversation_id"]) for pk in ids if pk in rows])
    hits = []
    for pk, snippet in ids_and_snippets:
        row = rows.get(pk)
        if row is None:  # deleted between the two queries
            continue
        text, spans = _unmark(snippet)
        hits.append(Hit(
            message_id=pk, conversation_id=row["conversation_id"], title=row["title"] or "",
            created_at=row["created_at"], role=row["role"], snippet=text, spans=spans,
            before=neighbours.get((pk, -1)), after=neighbours.get((pk, 1)),
        ))
    return hits


def _neighbours(hits: Sequence[tuple[int, int]]) -> dict[tuple[int, int], Quote]:
    """Return the message just before and just after each hit in its conversation (one query)."""
    if not hits:
        return {}
    parts: list[str] = []
    params: list[Any] = []
    for pk, conversation_id in hits:
        for side, compare, order in ((-1, "<", "DESC"), (1, ">", "ASC")):
            parts.append(
                f"SELECT * FROM (SELECT %s AS hit, %s AS side, role, substr(content, 1, %s) AS text "
                f"FROM chat_message WHERE conversation_id = %s AND id {compare} %s AND content <> '' "
                f"ORDER BY id {order} LIMIT 1) AS n{len(parts)}"
            )
            params += [pk, side, NEIGHBOUR_CHARS + 1, conversation_id, pk]
    with connection.cursor() as cursor:
        cursor.execute(" UNION ALL ".join(parts), params)
        return {(hit, side): Quote(role=role, text=text) for hit, side, role, text in cursor.fetchall()}


# --- the index (used by migration 0002 and `manage.py search_reindex`) -------------------------


def postgres_function_sql(language: str) -> str:
    """The trigger function that keeps `chat_messagesearch` in step with `chat_message`."""
    if not _LANGUAGE.match(language):
        raise ValueError("not a text search configuration name")
    return f"""
CREATE OR REPLACE FUNCTION chat_message_search_sync() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'DELETE' THEN
        DELETE FROM chat_messagesearch WHERE message_id = OLD.id;
        RETURN OLD;
    END IF;
    IF coalesce(NEW.content, '') = '' THEN
        DELETE FROM chat_messagesearch WHERE message_id = NEW.id;
        RETURN NEW;
    END IF;
    INSERT INTO chat_messagesearch (message_id, user_id, document)
    SELECT NEW.id, c.user_id, to_tsvector('{language}'::regconfig, NEW.content)
    FROM chat_conversation c WHERE c.id = NEW.conversation_id
    ON CONFLICT (message_id) DO UPDATE SET user_id = EXCLUDED.user_id, document = EXCLUDED.document;
    RETURN NEW;
END
$$;
"""


def postgres_refresh_sql(language: str) -> str:
    """Rewrite every message's document (after the language changed, or to backfill)."""
    if not _LANGUAGE.match(language):
        raise ValueError("not a text search configuration name")
    return f"""
INSERT INTO chat_messagesearch (message_id, user_id, document)
SELECT m.id, c.user_id, to_tsvector('{language}'::regconfig, m.content)
FROM chat_message m JOIN chat_conversation c ON c.id = m.conversation_id
WHERE m.content <> ''
ON CONFLICT (message_id) DO UPDATE SET user_id = EXCLUDED.user_id, document = EXCLUDED.document;
"""
