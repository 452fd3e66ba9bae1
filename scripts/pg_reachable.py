"""Exit 0 when a PostgreSQL server answers at the URL given, 1 otherwise."""
import sys

import psycopg

url = sys.argv[1].replace("postgres://", "postgresql://", 1)
try:
    psycopg.connect(url, connect_timeout=3).close()
except Exception:
    sys.exit(1)
