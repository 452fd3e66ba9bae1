"""Environment defaults for tests; loaded with `-p` before Django is set up."""
import os

os.environ.setdefault("SECRET_KEY", "test-only-secret-key")
os.environ.setdefault("AGENTMEMORY_ENABLED", "1")
os.environ.setdefault("DEMO_MODEL_DELAY_MS", "0")
os.environ.setdefault("SECURE_COOKIES", "0")
# Worker threads would keep PostgreSQL connections open past a test and block
# dropping the test database; tests/test_connections.py turns them on itself.
os.environ.setdefault("CONN_MAX_AGE", "0")
# The API's schema and docs for everyone, as with DEBUG on (its default is DEBUG);
# tests of the production default turn it off, and tests/multiprocess's servers
# do not inherit it (the browser tests' server does: one opens the docs page).
os.environ.setdefault("API_DOCS_PUBLIC", "1")
