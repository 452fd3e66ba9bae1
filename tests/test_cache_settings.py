"""CACHES follows REDIS_URL: Django's Redis cache shared by every worker, or local memory for one process."""
import json
import os
import subprocess
import sys

import pytest
from django.conf import settings

PRINT_CACHES = "import django, json; django.setup(); from django.conf import settings; print(json.dumps(settings.CACHES))"


def caches_with(**env) -> dict:
    environment = {**os.environ, "DJANGO_SETTINGS_MODULE": "config.settings", "SECRET_KEY": "x", **env}
    out = subprocess.run([sys.executable, "-c", PRINT_CACHES], env=environment, cwd=settings.BASE_DIR,
                         capture_output=True, text=True, check=True).stdout
    return json.loads(out)["default"]


@pytest.mark.parametrize("redis_url", ["redis://127.0.0.1:6379/3", "redis://:secret@cache.internal:6380/0"])
def test_redis_url_selects_djangos_redis_cache(redis_url):
    cache = caches_with(REDIS_URL=redis_url)
    assert cache["BACKEND"] == "django.core.cache.backends.redis.RedisCache"
    assert cache["LOCATION"] == redis_url


def test_without_redis_url_the_cache_is_local_memory():
    assert caches_with(REDIS_URL="")["BACKEND"] == "django.core.cache.backends.locmem.LocMemCache"
