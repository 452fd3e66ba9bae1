"""Production HTTPS settings behind the documented nginx, `check --deploy`
clean for the documented settings, and credentials masked in error reports."""
import json
import os
import runpy
import secrets
import subprocess
import sys

import pytest
from django.conf import settings
from django.core.exceptions import ImproperlyConfigured
from django.test import Client, RequestFactory, override_settings
from django.views.debug import ExceptionReporter

from config.debug import MaskedCredentialsFilter, mask_url_credentials

# The README's production settings (nginx in front, TLS there).
DOCUMENTED = {
    "DEBUG": "0",
    "ALLOWED_HOSTS": "chat.example.com",
    "CSRF_TRUSTED_ORIGINS": "https://chat.example.com",
    "TRUST_PROXY_HEADERS": "1",
    "SECURE_SSL_REDIRECT": "1",
    "SECURE_HSTS_SECONDS": "31536000",
    "SECURE_HSTS_INCLUDE_SUBDOMAINS": "1",
    "SECURE_HSTS_PRELOAD": "1",
    "NUM_PROXIES": "1",
}


def run_with(env: dict, *args: str) -> subprocess.CompletedProcess:
    keep = {key: value for key, value in os.environ.items()
            if key in ("PATH", "HOME", "LANG", "TEST_DB_NAME") or key.startswith("PYTHON")}
    environment = {**keep, "DJANGO_SETTINGS_MODULE": "config.settings",
                   "SECRET_KEY": secrets.token_urlsafe(50), **env}
    return subprocess.run([sys.executable, *args], env=environment, cwd=settings.BASE_DIR,
                          capture_output=True, text=True, timeout=120)


def test_check_deploy_is_clean_for_the_documented_settings():
    result = run_with(DOCUMENTED, "manage.py", "check", "--deploy", "--fail-level", "WARNING")
    assert result.returncode == 0, result.stdout + result.stderr
    assert "System check identified no issues" in result.stdout


def test_check_deploy_names_what_is_missing_without_them():
    result = run_with({"DEBUG": "0"}, "manage.py", "check", "--deploy", "--fail-level", "WARNING")
    assert result.returncode != 0
    assert "security.W004" in result.stderr and "security.W008" in result.stderr


def test_the_proxy_ssl_header_is_trusted_only_when_asked():
    code = ("import django, json; django.setup(); from django.conf import settings; "
            "print(json.dumps(getattr(settings, 'SECURE_PROXY_SSL_HEADER', None)))")
    assert json.loads(run_with({"TRUST_PROXY_HEADERS": "1"}, "-c", code).stdout) == ["HTTP_X_FORWARDED_PROTO", "https"]
    assert json.loads(run_with({"TRUST_PROXY_HEADERS": "0"}, "-c", code).stdout) is None


def test_the_api_docs_are_staff_only_by_default_in_production():
    code = ("import django; django.setup(); from django.conf import settings; "
            "print(settings.API_DOCS_PUBLIC)")
    assert run_with(DOCUMENTED, "-c", code).stdout.strip() == "False"
    assert run_with({"DEBUG": "1"}, "-c", code).stdout.strip() == "True"  # make run
    assert run_with({**DOCUMENTED, "API_DOCS_PUBLIC": "1"}, "-c", code).stdout.strip() == "True"


def test_the_channel_layer_waits_for_redis_longer_than_its_idle_poll():
    """An idle socket's BZPOPMIN must not outlast the read timeout (a TimeoutError every few seconds)."""
    from channels_redis.core import RedisChannelLayer

    code = ("import django, json; django.setup(); from django.conf import settings; "
            "print(json.dumps(settings.CHANNEL_LAYERS['default']['CONFIG']['hosts']))")
    hosts = json.loads(run_with({"REDIS_URL": "redis://127.0.0.1:6379/0"}, "-c", code).stdout)
    assert hosts == [{"address": "redis://127.0.0.1:6379/0", "socket_timeout": hosts[0]["socket_timeout"]}]
    assert hosts[0]["socket_timeout"] >= RedisChannelLayer.brpop_timeout + 2


@pytest.mark.django_db
@override_settings(SECURE_SSL_REDIRECT=True, SECURE_HSTS_SECONDS=31536000, SECURE_HSTS_INCLUDE_SUBDOMAINS=True,
                   SECURE_PROXY_SSL_HEADER=("HTTP_X_FORWARDED_PROTO", "https"))
def test_plain_http_is_redirected_https_through_the_proxy_gets_hsts_and_the_probes_stay_plain():
    client = Client()
    plain = client.get("/accounts/login/")
    assert plain.status_code == 301 and plain["Location"].startswith("https://")
    secure = client.get("/accounts/login/", HTTP_X_FORWARDED_PROTO="https")
    assert secure.status_code == 200
    assert secure["Strict-Transport-Security"] == "max-age=31536000; includeSubDomains"
    assert client.get("/healthz").status_code == 200  # the probes are exempt


def test_url_credentials_are_masked():
    assert mask_url_credentials("redis://:hunter2@cache:6379/0") == "redis://********************@cache:6379/0"
    assert mask_url_credentials("postgres://app:s3cret@db:5432/chat") == "postgres://********************@db:5432/chat"
    assert mask_url_credentials("redis://cache:6379/0") == "redis://cache:6379/0"


# Built at run time: the debug page also shows this file's source lines around the frame.
PASSWORD = "".join(["hun", "ter", "2"])


def test_the_debug_page_shows_no_redis_password():
    layer = {"default": {"BACKEND": "channels_redis.core.RedisChannelLayer",
                         "CONFIG": {"hosts": [f"redis://:{PASSWORD}-in-layer@cache:6379/0"]}}}
    with override_settings(DEBUG=True, REDIS_URL=f"redis://:{PASSWORD}-in-redis@cache:6379/0", CHANNEL_LAYERS=layer,
                           CACHES={"default": {"BACKEND": "django.core.cache.backends.locmem.LocMemCache",
                                               "LOCATION": f"redis://:{PASSWORD}@cache:6379/0"}}):
        assert PASSWORD not in json.dumps(MaskedCredentialsFilter().get_safe_settings(), default=str)
        request = RequestFactory().get("/")
        try:
            redis_url_in_a_local = f"redis://:{PASSWORD}-in-a-local@cache:6379/0"  # noqa: F841
            raise RuntimeError("boom")
        except RuntimeError:
            html = ExceptionReporter(request, *sys.exc_info()).get_traceback_html()
    assert PASSWORD not in html
    assert "redis://********************@cache:6379/0" in html


# Issue 53, finding 10: a SECRET_KEY anyone can read stops every start-up outside DEBUG.
@pytest.mark.parametrize("key", ["change-me", "", "  ", "django-insecure-3x@mpl3k3y",
                                 "insecure-local-development-key-change-me"])
def test_a_placeholder_secret_key_is_refused_when_the_settings_load(monkeypatch, key):
    monkeypatch.setenv("DEBUG", "0")
    monkeypatch.setenv("SECRET_KEY", key)
    with pytest.raises(ImproperlyConfigured, match="SECRET_KEY is a placeholder"):
        runpy.run_path(str(settings.BASE_DIR / "config" / "settings.py"))
    monkeypatch.setenv("DEBUG", "1")  # a development machine may keep it
    assert runpy.run_path(str(settings.BASE_DIR / "config" / "settings.py"))["SECRET_KEY"] == key


def test_daphne_refuses_to_start_with_the_env_examples_key():
    daphne = os.path.join(os.path.dirname(sys.executable), "daphne")
    keep = {key: value for key, value in os.environ.items() if key in ("PATH", "HOME", "LANG")}
    result = subprocess.run([daphne, "-p", "0", "config.asgi:application"], cwd=settings.BASE_DIR,
                            env={**keep, "DJANGO_SETTINGS_MODULE": "config.settings", "DEBUG": "0",
                                 "SECRET_KEY": "change-me"}, capture_output=True, text=True, timeout=60)
    assert result.returncode != 0 and "SECRET_KEY is a placeholder" in result.stderr
