"""The conversation log's writes of a turn (chat/log.py), on SQLite (the ORM) and
PostgreSQL (one fixed statement each): same rows, same answers, nothing half-written."""
import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from chat import log
from chat.models import Conversation, Message
from chat.search import search_conversations


def statements_for(call):
    with CaptureQueriesContext(connection) as queries:
        result = call()
    return result, len(queries.captured_queries)


def one_statement_on_postgres(count: int) -> bool:
    return count == 1 if connection.vendor == "postgresql" else count >= 1


def test_a_new_conversation_and_its_first_message(user):
    (conversation_id, message_id), count = statements_for(
        lambda: log.start_new(user_id=user.pk, title="Trip plans", content="Plan a trip to Lisbon"))
    assert one_statement_on_postgres(count)
    conversation = Conversation.objects.get(pk=conversation_id)
    assert conversation.user_id == user.pk and conversation.title == "Trip plans"
    assert conversation.updated_at >= conversation.created_at
    message = Message.objects.get(pk=message_id)
    assert (message.conversation_id, message.role) == (conversation_id, "user")
    as_written = message.content == "Plan a trip to Lisbon"
    assert as_written
    assert (message.memory_outcome, message.turn_id, message.metadata) == ("", "", {})
    # The search index saw the message, with the conversation made in the same statement.
    assert [hit.conversation_id for hit in search_conversations(user_id=user.pk, query="Lisbon")] == [conversation_id]


def test_continuing_reads_the_messages_before_it_newest_first(user):
    conversation_id, first_id = log.start_new(user_id=user.pk, title="t", content="first")
    log.store_reply(conversation_id=conversation_id, user_message_id=first_id, turn_id="a" * 32,
                    content="first reply", outcome="disabled", metadata={"tools": []})
    Message.objects.create(conversation_id=conversation_id, role="assistant", content="")  # a reply that said nothing
    before = Conversation.objects.get(pk=conversation_id).updated_at

    (message_id, earlier), count = statements_for(lambda: log.continue_conversation(
        user_id=user.pk, conversation_id=conversation_id, content="second", history=20))
    assert one_statement_on_postgres(count)
    # Booleans: a failure never prints what people wrote.
    newest_first = earlier == [("assistant", "first reply"), ("user", "first")]  # not the new one, not the empty one
    stored = Message.objects.get(pk=message_id).content == "second"
    assert newest_first and stored
    assert Conversation.objects.get(pk=conversation_id).updated_at > before  # moved to the top of their list

    _, earlier = log.continue_conversation(user_id=user.pk, conversation_id=conversation_id, content="third",
                                           history=2)
    limited = earlier == [("user", "second"), ("assistant", "first reply")]
    assert limited


def test_the_first_message_after_an_empty_history(user):
    conversation = Conversation.objects.create(user=user, title="empty")
    message_id, earlier = log.continue_conversation(user_id=user.pk, conversation_id=conversation.pk,
                                                    content="hello", history=20)
    assert len(earlier) == 0
    assert Message.objects.get(pk=message_id).conversation_id == conversation.pk


def test_someone_elses_conversation_is_refused_and_nothing_is_written(user, other_user):
    conversation_id, _ = log.start_new(user_id=other_user.pk, title="theirs", content="private")
    before = Conversation.objects.get(pk=conversation_id).updated_at
    messages = Message.objects.count()
    for target in (conversation_id, conversation_id + 1000):
        with pytest.raises(log.NotTheirs):
            log.continue_conversation(user_id=user.pk, conversation_id=target, content="intruding", history=20)
    assert Message.objects.count() == messages
    assert Conversation.objects.get(pk=conversation_id).updated_at == before


def test_the_reply_marks_the_persons_message_with_the_turn(user):
    conversation_id, message_id = log.start_new(user_id=user.pk, title="t", content="remember I like tea")
    (reply_id, created_at), count = statements_for(lambda: log.store_reply(
        conversation_id=conversation_id, user_message_id=message_id, turn_id="b" * 32, content="Noted.",
        outcome="committed", metadata={"tools": [{"tool": "memory_update", "status": "ok"}], "model": "demo"}))
    assert one_statement_on_postgres(count)
    reply = Message.objects.get(pk=reply_id)
    assert (reply.role, reply.memory_outcome, reply.turn_id) == ("assistant", "committed", "b" * 32)
    same_reply = reply.content == "Noted."
    assert same_reply
    assert reply.metadata == {"tools": [{"tool": "memory_update", "status": "ok"}], "model": "demo"}
    assert reply.created_at == created_at
    mine = Message.objects.get(pk=message_id)
    assert (mine.memory_outcome, mine.turn_id) == ("committed", "b" * 32)
