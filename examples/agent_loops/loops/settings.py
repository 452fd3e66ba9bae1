"""A Django project whose agents run on agent frameworks, through agentmemory's adapters.

Installed from the wheel with the `agents`, `pydantic-ai` and `anthropic`
extras (tests/test_packaging.py in the first project); none of the first
project's code. What it needs from agentmemory is what docs/integration.md
lists: the app, the REST framework, one throttle rate, the redaction filter
on its log handlers, and the URLs.
"""
import os
from pathlib import Path
from urllib.parse import unquote, urlsplit

BASE_DIR = Path(__file__).resolve().parent.parent

DEBUG = False
SECRET_KEY = os.environ.get("SECRET_KEY", "agent-loops-test-only")
ALLOWED_HOSTS = ["testserver", "127.0.0.1", "localhost"]

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "rest_framework",
    "agentmemory",
    "loops",
]

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
]

ROOT_URLCONF = "loops.urls"
TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [],
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


def database_from_url(url: str) -> dict:
    """postgres://user:password@host:port/name, or SQLite without a URL."""
    if not url:
        return {"ENGINE": "django.db.backends.sqlite3", "NAME": BASE_DIR / "loops.sqlite3"}
    parts = urlsplit(url)
    return {
        "ENGINE": "django.db.backends.postgresql",
        "NAME": parts.path.lstrip("/"),
        "USER": unquote(parts.username or ""),
        "PASSWORD": unquote(parts.password or ""),
        "HOST": parts.hostname or "",
        "PORT": str(parts.port or ""),
    }


DATABASES = {"default": database_from_url(os.environ.get("DATABASE_URL", ""))}
# A unique test database per run, so runs on one server never collide; on
# SQLite a file, so agentmemory's worker threads share it with the test.
_test_name = os.environ.get("TEST_DB_NAME", "loops_test")
if DATABASES["default"]["ENGINE"].endswith("sqlite3"):
    DATABASES["default"]["TEST"] = {"NAME": str(Path(os.environ.get("TEST_DB_DIR", BASE_DIR)) / f"{_test_name}.sqlite3")}
    DATABASES["default"]["OPTIONS"] = {"transaction_mode": "IMMEDIATE", "timeout": 20}
else:
    DATABASES["default"]["TEST"] = {"NAME": _test_name}
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

LOGIN_URL = "/admin/login/"
STATIC_URL = "static/"
USE_TZ = True

REST_FRAMEWORK = {
    "DEFAULT_AUTHENTICATION_CLASSES": ["rest_framework.authentication.SessionAuthentication"],
    "DEFAULT_PERMISSION_CLASSES": ["rest_framework.permissions.IsAuthenticated"],
    # agentmemory's memory API and page spend this budget on every change.
    "DEFAULT_THROTTLE_RATES": {"memory_writes": "60/min"},
}

AGENTMEMORY = {"ENABLED": True}

# Every handler carries agentmemory's redaction filter (its check agentmemory.W002).
LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "filters": {"redact": {"()": "agentmemory.telemetry.RedactionFilter"}},
    "handlers": {"console": {"class": "logging.StreamHandler", "filters": ["redact"]}},
    "root": {"handlers": ["console"], "level": "WARNING"},
    "loggers": {"django": {"handlers": [], "propagate": True}},
}
