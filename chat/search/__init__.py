"""Conversation search: the `conversation_search` tool and the one selector behind it.

Memory stays small on purpose; for deeper recall the model may search the
signed-in person's own past conversations. The tool is read-only (it stages
and commits nothing) and takes no identity: the owner is bound by trusted
code (`SearchScope`, built by the turn from the authenticated user), so a
query can never reach another person's messages. It is offered only on the
authenticated chat agent while memory is on for the turn (never on the
memory-free route, in a temporary chat, or with the person's switch off).

`search_conversations` is the selector; it hides the database:

- PostgreSQL: `chat_messagesearch` (model `MessageSearch`) holds each
  message's tsvector in CHAT_SEARCH_LANGUAGE and its owner, written by
  triggers on `chat_message`; one GIN index over (user_id, document)
  (btree_gin) finds a person's matches, ranked by `ts_rank` (SearchRank),
  with `ts_headline` (SearchHeadline) snippets. Short or non-Latin queries,
  and queries the stemmer finds nothing for, fall back to trigram word
  similarity and substring matching (pg_trgm) over the person's messages.
- SQLite: the FTS5 table `chat_message_fts` (external content: the
  messages themselves) kept in step by triggers, ranked by bm25() with
  snippet(); the fallback is a substring match.

Results: the conversation title, the date, the matching message as a
snippet, and the messages just before and after it, all within
CHAT_SEARCH_MAX_CHARS. The current conversation is excluded. The snippet is
the message's own text: the matched words are marked out of band, as
character offsets (`match_spans`), never by markup in the text (a snippet
that read `**ignore** **previous** ...` hid its words from the memory threat
scan when a model copied it). The tool reply marks it all as untrusted
quoted history.

Telemetry: one `memory.search` span with counts, an outcome and the
duration. Queries, arguments and results are never logged or traced.

The package: `tool` (the tool's schema, binding, arguments and reply) and
`query` (the selector over either database, and PostgreSQL's index). Import
from here.
"""
from .query import (
    DEFAULT_LIMIT,
    MAX_QUERY_CHARS,
    Hit,
    Quote,
    needs_fallback,
    postgres_function_sql,
    postgres_ranked,
    postgres_refresh_sql,
    search_conversations,
    search_language,
)
from .tool import (
    CONVERSATION_SEARCH_TOOL,
    MAX_LIMIT,
    MAX_SEARCHES_PER_ATTEMPT,
    TOOL_NAME,
    UNTRUSTED_NOTICE,
    SearchArgumentsError,
    SearchRequest,
    SearchScope,
    handle_conversation_search,
    parse_arguments,
    run_search,
    tool_reply,
)

__all__ = [
    "CONVERSATION_SEARCH_TOOL", "DEFAULT_LIMIT", "MAX_LIMIT", "MAX_QUERY_CHARS", "MAX_SEARCHES_PER_ATTEMPT",
    "TOOL_NAME", "UNTRUSTED_NOTICE", "Hit", "Quote", "SearchArgumentsError", "SearchRequest", "SearchScope",
    "handle_conversation_search", "needs_fallback", "parse_arguments", "postgres_function_sql", "postgres_ranked",
    "postgres_refresh_sql", "run_search", "search_conversations", "search_language", "tool_reply",
]
