"""Settings for the whole project, read from the environment.

Every variable is documented in `.env.example`. Defaults are safe for
production (memory off, DEBUG off) except where a local default cannot hurt:
SQLite when no DATABASE_URL is set and an in-memory channel layer when no
REDIS_URL is set.
"""
from datetime import timedelta
from pathlib import Path

import environ
from csp.constants import NONE, SELF
from django.core.exceptions import ImproperlyConfigured
from django.utils.translation import gettext_lazy as _

from config import redis_sentinel
from config.origins import derive_origins

BASE_DIR = Path(__file__).resolve().parent.parent

env = environ.Env()
environ.Env.read_env(BASE_DIR / ".env", overwrite=False)

DEBUG = env.bool("DEBUG", default=False)
SECRET_KEY = env.str(
    "SECRET_KEY",
    default="insecure-local-development-key-change-me" if DEBUG else environ.Env.NOTSET,
)
# A key anyone can read (.env.example's, the development default above, Django's generated
# "django-insecure-" ones) would let anyone forge sessions and signed values: outside DEBUG it
# stops every start-up (runserver, daphne, manage.py), not only `check --deploy`.
PLACEHOLDER_SECRET_KEYS = frozenset({"", "change-me", "insecure-local-development-key-change-me"})
if not DEBUG and (SECRET_KEY.strip() in PLACEHOLDER_SECRET_KEYS or SECRET_KEY.startswith("django-insecure-")):
    raise ImproperlyConfigured(
        "SECRET_KEY is a placeholder anyone can read (empty, 'change-me' from .env.example, or a development "
        "key). Set it to a long random value, e.g. the output of "
        "python -c 'import secrets; print(secrets.token_urlsafe(50))', or set DEBUG=1 on a development machine.")
ALLOWED_HOSTS = env.list("ALLOWED_HOSTS", default=["127.0.0.1", "localhost"])
CSRF_TRUSTED_ORIGINS = env.list("CSRF_TRUSTED_ORIGINS", default=[])
# Origins (scheme://host[:port], exact) allowed to open the chat socket, beside
# the socket's own origin; config/origins.py says how the default is derived.
CHAT_ALLOWED_ORIGINS = [origin for origin in env.list("CHAT_ALLOWED_ORIGINS", default=[]) if origin] or derive_origins(
    CSRF_TRUSTED_ORIGINS)

INSTALLED_APPS = [
    "daphne",
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "rest_framework",
    "rest_framework.authtoken",
    "axes",
    "csp",
    "drf_spectacular",
    "drf_spectacular_sidecar",
    "channels",
    "servestatic",
    "agentmemory",
    "chat",
]

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    "csp.middleware.CSPMiddleware",
    "servestatic.middleware.ServeStaticMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    # The language of each response: the one the person chose on the account
    # page (set_language's cookie), else the browser's Accept-Language, else
    # LANGUAGE_CODE. URLs carry no language prefix.
    "django.middleware.locale.LocaleMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    # Last, as django-axes requires: answers a locked-out sign-in with 429.
    "axes.middleware.AxesMiddleware",
]

ROOT_URLCONF = "config.urls"
WSGI_APPLICATION = "config.wsgi.application"
ASGI_APPLICATION = "config.asgi.application"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
            ],
        },
    },
]

DATABASES = {
    "default": env.db("DATABASE_URL", default=f"sqlite:///{BASE_DIR / 'db.sqlite3'}"),
}
if DATABASES["default"]["ENGINE"] == "django.db.backends.sqlite3":
    # IMMEDIATE takes SQLite's single write lock when a transaction begins, so
    # two memory commits queue instead of failing on a read-to-write upgrade.
    DATABASES["default"].setdefault("OPTIONS", {})
    DATABASES["default"]["OPTIONS"].setdefault("transaction_mode", "IMMEDIATE")
    DATABASES["default"]["OPTIONS"].setdefault("timeout", 20)
    DATABASES["default"].setdefault("TEST", {})
    # A file, not :memory:, so threads and the live server share one database.
    DATABASES["default"]["TEST"].setdefault("NAME", str(BASE_DIR / "test-db.sqlite3"))
else:
    # Persistent connections: each thread that touches the database (the
    # worker's thread pool, ASGI_THREADS, default min(32, CPUs + 4), plus
    # Django's one thread-sensitive thread) keeps one open for up to
    # CONN_MAX_AGE seconds, so a turn's log write and memory commit reuse it
    # instead of connecting (about 3 ms each). Size max_connections for
    # workers x (pool threads + 1). The health check (one SELECT 1 when a
    # request or worker call first uses a kept connection) replaces one the
    # server or a network device dropped, before the turn's query fails.
    DATABASES["default"].setdefault("CONN_MAX_AGE", env.int("CONN_MAX_AGE", default=60))
    DATABASES["default"].setdefault("CONN_HEALTH_CHECKS", env.bool("CONN_HEALTH_CHECKS", default=True))
    # An unreachable server fails a connection in seconds, not minutes, so a
    # turn's fail-open memory read and its conversation log stay bounded.
    DATABASES["default"].setdefault("OPTIONS", {})
    DATABASES["default"]["OPTIONS"].setdefault("connect_timeout", env.int("DATABASE_CONNECT_TIMEOUT", default=3))
    # Prepared statements for the memory commit's fixed statements
    # (agentmemory/store/statements.py binds them server-side; the ORM keeps Django's
    # client-side binding): psycopg prepares a statement after it ran this
    # many times on a connection. "off" turns them off, as PgBouncer in
    # transaction pooling mode needs (before 1.21, or without
    # max_prepared_statements): its server connections change under the
    # client (the commit's statements then bind server-side as unnamed
    # statements, which it serves). Port 6432, PgBouncer's default, turns
    # them off unless set; a server that still refuses a prepared statement
    # turns them off for the process (logged once, the commit retried).
    _pgbouncer_port = str(DATABASES["default"].get("PORT") or "") == "6432"
    _threshold = env.str("DATABASE_PREPARE_THRESHOLD", default="off" if _pgbouncer_port else "5").strip().lower()
    DATABASES["default"]["OPTIONS"].setdefault(
        "prepare_threshold", None if _threshold in ("", "off", "none", "no", "false") else int(_threshold)
    )
    if env.bool("DATABASE_SERVER_SIDE_BINDING", default=False):
        # Server-side binding for every ORM query too (so the threshold above
        # applies to them as well); Django leaves it off by default.
        DATABASES["default"]["OPTIONS"]["server_side_binding"] = True
if env.str("TEST_DB_NAME", default=""):
    # Lets several test runs share one PostgreSQL server without colliding.
    name = env.str("TEST_DB_NAME")
    is_sqlite = DATABASES["default"]["ENGINE"] == "django.db.backends.sqlite3"
    DATABASES["default"].setdefault("TEST", {})["NAME"] = (
        str(BASE_DIR / f"{name}.sqlite3") if is_sqlite else name
    )

DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

REDIS_URL = env.str("REDIS_URL", default="")
# Redis under Sentinel (config/redis_sentinel.py): with REDIS_SENTINELS set,
# the channel layer and the cache ask these sentinels for the master of
# REDIS_SENTINEL_MASTER on every new connection, so a promotion needs no
# restart; REDIS_URL then gives only the database number and credentials.
REDIS_SENTINELS = redis_sentinel.parse_sentinels(env.str("REDIS_SENTINELS", default=""))
REDIS_SENTINEL_MASTER = env.str("REDIS_SENTINEL_MASTER", default="mymaster")
# The sentinels' own password (their requirepass), when they ask for one.
REDIS_SENTINEL_PASSWORD = env.str("REDIS_SENTINEL_PASSWORD", default="")
# A socket waits for its next message with a 5-second BZPOPMIN
# (channels_redis); redis-py gives up on a read after 5 seconds unless told
# otherwise, so every idle socket failed its wait with TimeoutError (logged
# as a channel layer error) every few seconds. Reads here may take longer
# than that wait.
_LAYER_SOCKET_TIMEOUT = 10
if REDIS_SENTINELS:
    CHANNEL_LAYERS = {
        "default": {
            "BACKEND": "channels_redis.core.RedisChannelLayer",
            "CONFIG": {"hosts": [redis_sentinel.channel_layer_host(
                REDIS_SENTINELS, REDIS_SENTINEL_MASTER, REDIS_URL, sentinel_password=REDIS_SENTINEL_PASSWORD,
                socket_timeout=_LAYER_SOCKET_TIMEOUT)]},
        }
    }
elif REDIS_URL:
    CHANNEL_LAYERS = {
        "default": {
            "BACKEND": "channels_redis.core.RedisChannelLayer",
            "CONFIG": {"hosts": [{"address": REDIS_URL, "socket_timeout": _LAYER_SOCKET_TIMEOUT}]},
        }
    }
else:
    CHANNEL_LAYERS = {"default": {"BACKEND": "channels.layers.InMemoryChannelLayer"}}

# The cache holds the throttles and the per-person turn budget (chat/budget.py):
# shared by every worker through Redis when REDIS_URL (or REDIS_SENTINELS) is
# set; without it, the process's own memory (one process, as `make run`).
# A Redis that does not answer fails a cache call in seconds; the budget then
# lets turns through (and says so in the log).
_CACHE_TIMEOUTS = {"socket_connect_timeout": 2, "socket_timeout": 2}
if REDIS_SENTINELS:
    CACHES = {
        "default": {
            "BACKEND": "django.core.cache.backends.redis.RedisCache",
            # Only the database number and credentials of REDIS_URL are used.
            "LOCATION": REDIS_URL or "sentinel",
            "KEY_PREFIX": "chat",
            "OPTIONS": redis_sentinel.cache_options(REDIS_SENTINELS, REDIS_SENTINEL_MASTER,
                                                    sentinel_password=REDIS_SENTINEL_PASSWORD, **_CACHE_TIMEOUTS),
        }
    }
elif REDIS_URL:
    CACHES = {
        "default": {
            "BACKEND": "django.core.cache.backends.redis.RedisCache",
            "LOCATION": REDIS_URL,
            "KEY_PREFIX": "chat",
            "OPTIONS": dict(_CACHE_TIMEOUTS),
        }
    }
else:
    CACHES = {"default": {"BACKEND": "django.core.cache.backends.locmem.LocMemCache"}}

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.UserAttributeSimilarityValidator"},
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
    {"NAME": "django.contrib.auth.password_validation.NumericPasswordValidator"},
]

# --- Sign-in protection (django-axes) ------------------------------------------
# AxesStandaloneBackend refuses a locked-out address before the password is
# checked; ModelBackend then signs people in as before. The lock falls on the
# address that sent the wrong passwords, never on the account alone, so no one
# can lock a person out from elsewhere (config/login_protection.py).
AUTHENTICATION_BACKENDS = [
    "axes.backends.AxesStandaloneBackend",
    "django.contrib.auth.backends.ModelBackend",
]
# Reverse proxies in front of daphne whose X-Forwarded-For entry is trusted
# (config/client_ip.py): 0 = none, use the peer address; 1 = nginx as documented.
NUM_PROXIES = env.int("NUM_PROXIES", default=0)
# The client address, an IPv6 one as its /64 (one subscriber's block).
AXES_CLIENT_IP_CALLABLE = "config.client_ip.sign_in_source"
AXES_HANDLER = "config.login_protection.AttackerLockout"
# Failed sign-ins (login page and admin) from one address for one account
# before that address is locked out of that account; and from one address in
# all before it is locked out of every account; for how long. A success
# resets its own address-and-account count.
AXES_LOCKOUT_PARAMETERS = [["ip_address", "username"], "ip_address"]
AXES_FAILURE_LIMIT = env.int("LOGIN_FAILURE_LIMIT", default=5)
LOGIN_ADDRESS_FAILURE_LIMIT = env.int("LOGIN_ADDRESS_FAILURE_LIMIT", default=20)
AXES_COOLOFF_TIME = timedelta(minutes=env.float("LOGIN_LOCKOUT_MINUTES", default=15))
AXES_RESET_ON_SUCCESS = True
AXES_COOLOFF_MESSAGE = _("Too many failed sign-ins from this address. Try again later.")
# No row per successful sign-in (who signed in from where is not this app's business).
AXES_DISABLE_ACCESS_LOG = True

LOGIN_URL = "login"
LOGIN_REDIRECT_URL = "chat:index"
LOGOUT_REDIRECT_URL = "login"

# English by default (and for a browser that asks for neither language);
# German as the second, complete language (locale/de, agentmemory/locale/de).
# The .mo files are compiled by `make run` and `make test` (compilemessages),
# never committed. What the model reads stays English in every language.
LANGUAGE_CODE = "en-us"
LANGUAGES = [("en", "English"), ("de", "Deutsch")]
LOCALE_PATHS = [BASE_DIR / "locale"]
TIME_ZONE = "UTC"
USE_I18N = True
USE_TZ = True

STATIC_URL = "static/"
STATICFILES_DIRS = [BASE_DIR / "static"]
STATIC_ROOT = Path(env.str("STATIC_ROOT", default="") or BASE_DIR / "staticfiles")
# ServeStatic (WhiteNoise's ASGI-native successor) serves the static files from
# daphne. `collectstatic`, run once per release in the documented deployment,
# writes content-hashed, gzip-compressed copies and a manifest to STATIC_ROOT;
# with DEBUG off and that manifest present they are what is served (hashed
# names cached for a year). Without it (`make run`, the tests, a server started
# before the release step) the files come from the app and project static
# directories under their plain names (config/staticfiles.py), STATIC_ROOT is
# not read, and nothing warns about a missing staticfiles/ directory.
STORAGES = {
    "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
    "staticfiles": {"BACKEND": "config.staticfiles.StaticStorage"},
}
STATIC_COLLECTED = not DEBUG and (STATIC_ROOT / "staticfiles.json").is_file()
SERVESTATIC_USE_MANIFEST = STATIC_COLLECTED
SERVESTATIC_USE_FINDERS = not STATIC_COLLECTED

# The largest request body, in bytes: refused before it is read by daphne's
# request and at the ASGI edge (config/parsers.py), and again by the API's JSON parser.
DATA_UPLOAD_MAX_MEMORY_SIZE = env.int("DATA_UPLOAD_MAX_MEMORY_SIZE", default=1024 * 1024)

# --- HTTPS behind a proxy (the README's nginx) -----------------------------------
# TRUST_PROXY_HEADERS=1: nginx sets X-Forwarded-Proto, so Django knows a request
# came over HTTPS (secure redirects, CSRF, is_secure()). Only behind a proxy that
# always sets it: otherwise a client could claim HTTPS.
if env.bool("TRUST_PROXY_HEADERS", default=False):
    SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")
SECURE_SSL_REDIRECT = env.bool("SECURE_SSL_REDIRECT", default=False)
# The probes answer over plain HTTP on the worker's own port.
SECURE_REDIRECT_EXEMPT = [r"^healthz$", r"^readyz$"]
SECURE_HSTS_SECONDS = env.int("SECURE_HSTS_SECONDS", default=0)
SECURE_HSTS_INCLUDE_SUBDOMAINS = env.bool("SECURE_HSTS_INCLUDE_SUBDOMAINS", default=False)
SECURE_HSTS_PRELOAD = env.bool("SECURE_HSTS_PRELOAD", default=False)
# Content-Security-Policy (django-csp) on every page: our own scripts, styles
# and sockets only, no inline code, no framing. The API docs page relaxes
# style-src for Swagger UI's one inline <style> (chat/urls.py).
CONTENT_SECURITY_POLICY = {
    "DIRECTIVES": {
        "default-src": [SELF],
        "script-src": [SELF],
        "style-src": [SELF],
        "img-src": [SELF, "data:"],
        "font-src": [SELF],
        "connect-src": [SELF],  # CSP3 'self' includes ws(s):// to this host and port
        "object-src": [NONE],
        "base-uri": [SELF],
        "form-action": [SELF],
        "frame-ancestors": [NONE],
    }
}
# Credentials inside URLs (REDIS_URL...) are masked in error reports (config/debug.py).
DEFAULT_EXCEPTION_REPORTER_FILTER = "config.debug.MaskedCredentialsFilter"

SESSION_COOKIE_HTTPONLY = True
SESSION_COOKIE_SECURE = env.bool("SECURE_COOKIES", default=not DEBUG)
CSRF_COOKIE_SECURE = SESSION_COOKIE_SECURE

REST_FRAMEWORK = {
    "DEFAULT_AUTHENTICATION_CLASSES": [
        "rest_framework.authentication.SessionAuthentication",
        "rest_framework.authentication.TokenAuthentication",
    ],
    "DEFAULT_PERMISSION_CLASSES": ["rest_framework.permissions.IsAuthenticated"],
    "DEFAULT_SCHEMA_CLASS": "drf_spectacular.openapi.AutoSchema",
    # JSON bounded in size and depth, the parser the memory routes use too
    # (agentmemory/parsers.py); parse errors answer 400 with a code (config/parsers.py).
    "DEFAULT_PARSER_CLASSES": [
        "agentmemory.parsers.BoundedJSONParser",
        "rest_framework.parsers.FormParser",
        "rest_framework.parsers.MultiPartParser",
    ],
    "EXCEPTION_HANDLER": "config.parsers.api_exception_handler",
    # The eval route's throttle keys on the client address: trust only our own proxies.
    "NUM_PROXIES": NUM_PROXIES,
    "DEFAULT_THROTTLE_RATES": {
        "chat_turns": env.str("CHAT_TURN_RATE", default="30/min"),
        "memory_writes": env.str("MEMORY_WRITE_RATE", default="60/min"),
    },
}

# The API's schema and docs page: to everyone, or only to staff (config/api_docs.py).
API_DOCS_PUBLIC = env.bool("API_DOCS_PUBLIC", default=DEBUG)

SPECTACULAR_SETTINGS = {
    "TITLE": "Agent memory API",
    "DESCRIPTION": "Chat turns with bounded, per-user agent memory.",
    "VERSION": "1.0.0",
    "SERVE_INCLUDE_SCHEMA": False,
    "SERVE_PERMISSIONS": ["config.api_docs.ApiDocsReaders"],
    "COMPONENT_SPLIT_REQUEST": True,
    # The docs page loads Swagger UI from our own static files, never a CDN.
    "SWAGGER_UI_DIST": "SIDECAR",
    "SWAGGER_UI_FAVICON_HREF": "SIDECAR",
    "REDOC_DIST": "SIDECAR",
    # One name for the one choice set of documents (a memory operation's target, a turn's "changed").
    "ENUM_NAME_OVERRIDES": {"MemoryTargetEnum": "agentmemory.rules.TARGETS"},
}

# --- The agent's memory (agentmemory/conf.py reads these) -------------------
AGENTMEMORY = {
    "ENABLED": env.bool("AGENTMEMORY_ENABLED", default=False),
    "USER_LIMIT": env.int("AGENTMEMORY_USER_LIMIT", default=1375),
    "MEMORY_LIMIT": env.int("AGENTMEMORY_MEMORY_LIMIT", default=2200),
    "CAPTURE_CONTENT": env.bool("AGENTMEMORY_CAPTURE_CONTENT", default=False),
    "READ_TIMEOUT_SECONDS": env.float("AGENTMEMORY_READ_TIMEOUT_SECONDS", default=1.0),
    "COMMIT_LOCK_TIMEOUT_SECONDS": env.float("AGENTMEMORY_COMMIT_LOCK_TIMEOUT_SECONDS", default=3.0),
    "COMMIT_CONFIRM_SECONDS": env.float("AGENTMEMORY_COMMIT_CONFIRM_SECONDS", default=10.0),
    "POLICY_VERSION": env.str("AGENTMEMORY_POLICY_VERSION", default="v3"),
    "DEFAULT_SAVE_MODE": env.str("AGENTMEMORY_DEFAULT_SAVE_MODE", default="auto"),
    "PROPOSAL_TTL_DAYS": env.float("AGENTMEMORY_PROPOSAL_TTL_DAYS", default=7),
    "VERSIONS_KEPT": env.int("AGENTMEMORY_VERSIONS_KEPT", default=50),
    "VERSION_RETENTION_DAYS": env.float("AGENTMEMORY_VERSION_RETENTION_DAYS", default=30),
    "IDEMPOTENCY_WINDOW_HOURS": env.float("AGENTMEMORY_IDEMPOTENCY_WINDOW_HOURS", default=24),
    "GATE": env.bool("AGENTMEMORY_GATE", default=True),
    # The memory page links each entry to the chat it came from.
    "SOURCE_LINKS": "chat.sources.conversation_links",
    # "Erase memory and chats" deletes the person's conversations too.
    "ERASE_CHATS": "chat.retention.erase_chats",
    # "Tidy up" on the memory page: one request to the chat's model proposes a consolidated document.
    "TIDY_MODEL": "chat.tidy.ask_model",
}

# --- The chat and its models ------------------------------------------------
OPENAI_API_KEY = env.str("OPENAI_API_KEY", default="")
OPENAI_BASE_URL = env.str("OPENAI_BASE_URL", default="")
OPENAI_MODEL = env.str("OPENAI_MODEL", default="gpt-4o-mini")
OPENAI_FALLBACK_MODEL = env.str("OPENAI_FALLBACK_MODEL", default="")
OPENAI_TIMEOUT = env.float("OPENAI_TIMEOUT", default=60.0)
OPENAI_MAX_RETRIES = env.int("OPENAI_MAX_RETRIES", default=2)
# The most tokens one model request may write: every request carries the cap,
# so a model that never stops is cut off ("finish_reason": "length").
OPENAI_MAX_TOKENS = env.int("OPENAI_MAX_TOKENS", default=1024)
# Which request field carries it: "max_tokens" (Ollama, vLLM, llama.cpp, Azure's
# older deployments), "max_completion_tokens" (OpenAI's API, which refuses
# max_tokens for its reasoning models), or "auto": the latter for OpenAI's own
# endpoint (OPENAI_BASE_URL empty or api.openai.com), the former elsewhere.
OPENAI_MAX_TOKENS_FIELD = env.str("OPENAI_MAX_TOKENS_FIELD", default="auto")
DEMO_MODEL_DELAY_MS = env.int("DEMO_MODEL_DELAY_MS", default=30)
CHAT_MAX_MESSAGE_CHARS = env.int("CHAT_MAX_MESSAGE_CHARS", default=8000)
# The longest reply a turn keeps, whatever the model server does with the
# token cap: past it the stream is closed and the answer is cut off, as at
# the token cap ("finish_reason": "length": incomplete, nothing saved).
CHAT_MAX_REPLY_CHARS = env.int("CHAT_MAX_REPLY_CHARS", default=500000)
# The longest one event of the model's stream may be (chat/sse.py): a server that never ends an event
# is cut off here rather than growing the worker's memory (the SDK's HTTP client caps it at 1 MiB too).
CHAT_MAX_SSE_EVENT_BYTES = env.int("CHAT_MAX_SSE_EVENT_BYTES", default=1_048_576)
# One deadline for a whole turn's model work: every round, the client's retries
# and a fallback model. Past it the model's stream is closed, nothing is saved,
# and the person's turn slot is free at once.
CHAT_TURN_TIMEOUT_SECONDS = env.float("CHAT_TURN_TIMEOUT_SECONDS", default=120.0)
EVAL_SERVICE_TOKEN = env.str("EVAL_SERVICE_TOKEN", default="")
# One person's turns running at once, over every socket, REST call and worker.
CHAT_MAX_CONCURRENT_TURNS = env.int("CHAT_MAX_CONCURRENT_TURNS", default=2)
# One person's open chat sockets; a new one past the cap closes their oldest.
CHAT_MAX_SOCKETS_PER_PERSON = env.int("CHAT_MAX_SOCKETS_PER_PERSON", default=10)
# conversation_search: the most characters of quoted history one search returns to the model.
CHAT_SEARCH_MAX_CHARS = env.int("CHAT_SEARCH_MAX_CHARS", default=4000)
# PostgreSQL text search configuration of the conversation index (read by migration 0002;
# `manage.py search_reindex` applies a change).
CHAT_SEARCH_LANGUAGE = env.str("CHAT_SEARCH_LANGUAGE", default="english")
# Conversations not updated for this many days are deleted, with their messages
# and search index rows, by `manage.py chat_expire_conversations` (cron); 0: kept
# until the person deletes them.
CHAT_RETENTION_DAYS = env.int("CHAT_RETENTION_DAYS", default=0)

LOG_LEVEL = env.str("LOG_LEVEL", default="INFO")
LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    # Every handler carries the redaction filter (agentmemory/telemetry.py):
    # at any level, no handler may emit memory content, prompts or tool
    # arguments. A handler added here must list "redact" too.
    "filters": {"redact": {"()": "agentmemory.telemetry.RedactionFilter"}},
    "formatters": {"plain": {"format": "%(asctime)s %(levelname)s %(name)s %(message)s"}},
    "handlers": {
        "console": {"class": "logging.StreamHandler", "formatter": "plain", "filters": ["redact"]},
    },
    "root": {"handlers": ["console"], "level": LOG_LEVEL},
    # Django's default handlers (its console and the mail_admins handler, which
    # mails tracebacks with local values) have no filter: replace them, so
    # Django's records reach the filtered root handler only.
    "loggers": {
        "django": {"handlers": [], "propagate": True},
        "django.server": {"handlers": [], "propagate": True},
        # The model client's HTTP library logs one INFO line per model request
        # ("HTTP Request: POST <url> 200 OK"): on every turn, and no use to an
        # operator (failures reach our own logger). Kept out unless asked for.
        "httpx2": {"level": env.str("HTTP_CLIENT_LOG_LEVEL", default="WARNING")},
    },
}
