"""Environment defaults for tests; loaded with `-p` before Django is set up."""
import os

os.environ.setdefault("SECRET_KEY", "test-only-secret-key")
os.environ.setdefault("AGENTMEMORY_ENABLED", "1")
os.environ.setdefault("DEMO_MODEL_DELAY_MS", "0")
os.environ.setdefault("SECURE_COOKIES", "0")
