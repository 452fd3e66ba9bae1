"""The conversation log's writes of a turn: one at its start, one at its end.

Every turn stores the person's message (in a new conversation, or in one of
theirs, which it moves to the top of their list and whose last messages it
reads as context) and, when it completes, the reply with the turn's memory
outcome on both messages. These run on every turn, so on PostgreSQL each is
one fixed statement (data-modifying WITH queries: one round trip, atomic as
any single statement, and no ORM query to build); on other databases, or
when a model's columns are not the ones these statements name, the ORM does
the same work in a transaction. Plain functions: the turn runs them in a
worker thread.
"""
from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from django.conf import settings
from django.db import connection, transaction
from django.utils import timezone

from .models import Conversation, Message


class NotTheirs(Exception):
    """The conversation does not exist or belongs to someone else."""


def start_new(*, user_id, title: str, content: str) -> tuple[int, int]:
    """Create a conversation with the person's first message; return (conversation_id, message_id)."""
    sql = _statements()
    if sql is None:
        with transaction.atomic():
            conversation_id = Conversation.objects.create(user_id=user_id, title=title).pk
            message = Message.objects.create(conversation_id=conversation_id, role=Message.Role.USER, content=content)
        return conversation_id, message.pk
    now = timezone.now()
    with connection.cursor() as cursor:
        cursor.execute(sql.start_new, [user_id, title, now, now, content, now])
        conversation_id, message_id = cursor.fetchone()
    return conversation_id, message_id


def continue_conversation(*, user_id, conversation_id: int, content: str,
                          history: int) -> tuple[int, list[tuple[str, str]]]:
    """Store the person's message in their conversation and move it to the top of their list.

    Return the message's id and the conversation's last `history` non-empty
    messages before it as (role, content), newest first. Raise NotTheirs
    (nothing written) when the conversation is not the person's.
    """
    sql = _statements()
    if sql is None:
        # One statement checks the conversation is theirs and moves it to the top of their
        # list (it gets a message now); the one write after it needs no transaction.
        touched = Conversation.objects.filter(pk=conversation_id, user_id=user_id).update(updated_at=timezone.now())
        if not touched:
            raise NotTheirs()
        earlier = list(
            Message.objects.filter(conversation_id=conversation_id).exclude(content="")
            .order_by("-created_at", "-id").values_list("role", "content")[:history]
        )
        message = Message.objects.create(conversation_id=conversation_id, role=Message.Role.USER, content=content)
        return message.pk, earlier
    now = timezone.now()
    with connection.cursor() as cursor:
        cursor.execute(sql.continue_conversation, [now, conversation_id, user_id, history, content, now])
        rows = cursor.fetchall()
    if not rows:
        raise NotTheirs()
    # One row per earlier message (newest first) beside the new message's id; one row of
    # NULLs beside it when there is none.
    return rows[0][0], [(role, text) for _, role, text in rows if role is not None]


def store_reply(*, conversation_id: int, user_message_id: int, turn_id: str, content: str, outcome: str,
                metadata: dict) -> tuple[int, datetime]:
    """Store the reply and mark the person's message with the turn; return the reply's id and time."""
    sql = _statements()
    if sql is None:
        with transaction.atomic():
            message = Message.objects.create(
                conversation_id=conversation_id, role=Message.Role.ASSISTANT, content=content,
                memory_outcome=outcome, turn_id=turn_id, metadata=metadata,
            )
            Message.objects.filter(pk=user_message_id).update(memory_outcome=outcome, turn_id=turn_id)
        return message.pk, message.created_at
    stored_metadata = _METADATA.get_db_prep_save(metadata, connection)
    with connection.cursor() as cursor:
        cursor.execute(sql.store_reply, [outcome, turn_id, user_message_id, conversation_id, content, outcome,
                                         turn_id, stored_metadata, timezone.now()])
        message_id, created_at = cursor.fetchone()
    return message_id, created_at


# --- the statements ----------------------------------------------------------------

_METADATA = Message._meta.get_field("metadata")
# The columns the statements write; a model change that adds a column (with a
# default the database does not know) falls back to the ORM until they follow it.
_MESSAGE_COLUMNS = ("id", "conversation", "role", "content", "memory_outcome", "turn_id", "metadata", "created_at")
_CONVERSATION_COLUMNS = ("id", "user", "title", "created_at", "updated_at")


@dataclass(frozen=True)
class _Statements:
    start_new: str
    continue_conversation: str
    store_reply: str


_BUILT: dict[str, _Statements | None] = {}


def _statements() -> _Statements | None:
    """The fixed statements for PostgreSQL, built once; None elsewhere (the ORM does the work)."""
    vendor = connection.vendor
    if vendor not in _BUILT:
        _BUILT[vendor] = _build() if vendor == "postgresql" and settings.USE_TZ and _columns_known() else None
    return _BUILT[vendor]


def _columns_known() -> bool:
    def names(model):
        return sorted(field.name for field in model._meta.concrete_fields)

    return names(Message) == sorted(_MESSAGE_COLUMNS) and names(Conversation) == sorted(_CONVERSATION_COLUMNS)


def _build() -> _Statements:
    quote = connection.ops.quote_name

    def column(model, name):
        return quote(model._meta.get_field(name).column)

    conversations, messages = quote(Conversation._meta.db_table), quote(Message._meta.db_table)
    c_id, c_user, c_title, c_created, c_updated = (
        column(Conversation, name) for name in ("id", "user", "title", "created_at", "updated_at"))
    m_id, m_conversation, m_role, m_content, m_outcome, m_turn, m_metadata, m_created = (
        column(Message, name) for name in _MESSAGE_COLUMNS)
    insert_message = (f"INSERT INTO {messages} ({m_conversation}, {m_role}, {m_content}, {m_outcome}, {m_turn}, "
                      f"{m_metadata}, {m_created})")
    user_role, assistant_role = Message.Role.USER.value, Message.Role.ASSISTANT.value
    return _Statements(
        # The conversation and its first message, in one statement.
        start_new=(
            f"WITH conversation AS (INSERT INTO {conversations} ({c_user}, {c_title}, {c_created}, {c_updated}) "
            f"VALUES (%s, %s, %s, %s) RETURNING {c_id}) "
            f"{insert_message} SELECT {c_id}, '{user_role}', %s, '', '', '{{}}'::jsonb, %s FROM conversation "
            f"RETURNING {m_conversation}, {m_id}"
        ),
        # Touch the conversation only if it is theirs; read the messages before this one
        # (every part of one statement sees the same snapshot, so not the one it inserts);
        # insert the new one only if the touch found the conversation.
        continue_conversation=(
            f"WITH touched AS (UPDATE {conversations} SET {c_updated} = %s "
            f"WHERE {c_id} = %s AND {c_user} = %s RETURNING {c_id}), "
            f"earlier AS (SELECT {m_role} AS role, {m_content} AS content, {m_created} AS created, {m_id} AS id "
            f"FROM {messages} WHERE {m_conversation} = (SELECT {c_id} FROM touched) AND {m_content} <> '' "
            f"ORDER BY {m_created} DESC, {m_id} DESC LIMIT %s), "
            f"inserted AS ({insert_message} SELECT {c_id}, '{user_role}', %s, '', '', '{{}}'::jsonb, %s "
            f"FROM touched RETURNING {m_id} AS id) "
            f"SELECT inserted.id, earlier.role, earlier.content FROM inserted LEFT JOIN earlier ON true "
            f"ORDER BY earlier.created DESC, earlier.id DESC"
        ),
        # The person's message gets the turn's outcome as the reply is stored: one statement.
        store_reply=(
            f"WITH answered AS (UPDATE {messages} SET {m_outcome} = %s, {m_turn} = %s WHERE {m_id} = %s) "
            f"{insert_message} VALUES (%s, '{assistant_role}', %s, %s, %s, %s, %s) RETURNING {m_id}, {m_created}"
        ),
    )
