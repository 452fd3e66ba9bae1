"""Rebuild the conversation search index from the messages.

PostgreSQL: recreate the trigger function with CHAT_SEARCH_LANGUAGE and
rewrite every message's document (run it after changing the language).
SQLite: rebuild the FTS5 table from the messages. Prints counts only.
"""
from django.core.management.base import BaseCommand
from django.db import connection, transaction

from chat.search import postgres_function_sql, postgres_refresh_sql, search_language


class Command(BaseCommand):
    help = "Rebuild the conversation search index (after changing CHAT_SEARCH_LANGUAGE)."

    def handle(self, *args, **options):
        with transaction.atomic(), connection.cursor() as cursor:
            if connection.vendor == "postgresql":
                language = search_language()
                cursor.execute(postgres_function_sql(language))
                cursor.execute(postgres_refresh_sql(language))
                cursor.execute("SELECT count(*) FROM chat_messagesearch")
            elif connection.vendor == "sqlite":
                cursor.execute("INSERT INTO chat_message_fts(chat_message_fts) VALUES ('rebuild')")
                cursor.execute("SELECT count(*) FROM chat_message WHERE content <> ''")
            else:
                self.stdout.write("No search index on this database: the search matches substrings.")
                return
            count = cursor.fetchone()[0]
        self.stdout.write(f"Conversation search index rebuilt: {count} messages.")
