"""The conversation search index, kept by the database on both vendors.

PostgreSQL: the extensions btree_gin and pg_trgm (CreateExtension skips
other vendors), the table `chat_messagesearch` (model MessageSearch), a GIN
index over (user_id, document), triggers on `chat_message` that write,
refresh and delete a message's row, and a backfill of existing messages.
The text search configuration is CHAT_SEARCH_LANGUAGE when this runs
(`manage.py search_reindex` applies a later change).

SQLite: an FTS5 table over the messages themselves (external content: it
stores the index, not a second copy of the text) and triggers that keep it
in step with every insert, update and delete, then a rebuild for existing
messages. Note: when a later migration alters `chat_message` on SQLite,
Django rebuilds the table and its triggers are lost; the test
tests/test_conversation_search.py::test_the_index_triggers_exist guards it.
"""
import django.contrib.postgres.search
import django.db.models.deletion
from django.conf import settings
from django.contrib.postgres.operations import BtreeGinExtension, TrigramExtension
from django.db import migrations, models

SQLITE_FORWARDS = (
    "CREATE VIRTUAL TABLE chat_message_fts USING fts5("
    "content, content='chat_message', content_rowid='id', tokenize='porter unicode61 remove_diacritics 2')",
    "CREATE TRIGGER chat_message_fts_insert AFTER INSERT ON chat_message BEGIN "
    "INSERT INTO chat_message_fts(rowid, content) VALUES (new.id, new.content); END",
    "CREATE TRIGGER chat_message_fts_delete AFTER DELETE ON chat_message BEGIN "
    "INSERT INTO chat_message_fts(chat_message_fts, rowid, content) VALUES ('delete', old.id, old.content); END",
    "CREATE TRIGGER chat_message_fts_update AFTER UPDATE OF content ON chat_message BEGIN "
    "INSERT INTO chat_message_fts(chat_message_fts, rowid, content) VALUES ('delete', old.id, old.content); "
    "INSERT INTO chat_message_fts(rowid, content) VALUES (new.id, new.content); END",
    "INSERT INTO chat_message_fts(chat_message_fts) VALUES ('rebuild')",
)
SQLITE_BACKWARDS = (
    "DROP TRIGGER IF EXISTS chat_message_fts_insert",
    "DROP TRIGGER IF EXISTS chat_message_fts_delete",
    "DROP TRIGGER IF EXISTS chat_message_fts_update",
    "DROP TABLE IF EXISTS chat_message_fts",
)
POSTGRES_TRIGGERS = (
    "CREATE INDEX chat_messagesearch_user_document ON chat_messagesearch USING gin (user_id, document)",
    "CREATE TRIGGER chat_message_search_write AFTER INSERT OR UPDATE OF content, conversation_id "
    "ON chat_message FOR EACH ROW EXECUTE FUNCTION chat_message_search_sync()",
    "CREATE TRIGGER chat_message_search_delete BEFORE DELETE ON chat_message "
    "FOR EACH ROW EXECUTE FUNCTION chat_message_search_sync()",
)
POSTGRES_BACKWARDS = (
    "DROP TRIGGER IF EXISTS chat_message_search_write ON chat_message",
    "DROP TRIGGER IF EXISTS chat_message_search_delete ON chat_message",
    "DROP FUNCTION IF EXISTS chat_message_search_sync()",
    "DROP INDEX IF EXISTS chat_messagesearch_user_document",
)


def forwards(apps, schema_editor):
    from chat.search import postgres_function_sql, postgres_refresh_sql, search_language

    vendor = schema_editor.connection.vendor
    if vendor == "sqlite":
        statements = SQLITE_FORWARDS
    elif vendor == "postgresql":
        language = search_language()
        statements = (postgres_function_sql(language), *POSTGRES_TRIGGERS, postgres_refresh_sql(language))
    else:
        return  # no index: the search falls back to substring matching
    for statement in statements:
        schema_editor.execute(statement)


def backwards(apps, schema_editor):
    vendor = schema_editor.connection.vendor
    statements = {"sqlite": SQLITE_BACKWARDS, "postgresql": POSTGRES_BACKWARDS}.get(vendor, ())
    for statement in statements:
        schema_editor.execute(statement)


class Migration(migrations.Migration):

    dependencies = [
        ('chat', '0001_initial'),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        BtreeGinExtension(),
        TrigramExtension(),
        migrations.CreateModel(
            name='MessageSearch',
            fields=[
                ('message', models.OneToOneField(on_delete=django.db.models.deletion.CASCADE, primary_key=True, related_name='+', serialize=False, to='chat.message')),
                ('document', django.contrib.postgres.search.SearchVectorField()),
                ('user', models.ForeignKey(db_index=False, on_delete=django.db.models.deletion.CASCADE, related_name='+', to=settings.AUTH_USER_MODEL)),
            ],
        ),
        migrations.RunPython(forwards, backwards),
    ]
