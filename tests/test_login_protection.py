"""Sign-in protection (django-axes) and the client address (config/client_ip.py).

Repeated wrong passwords lock out the address and the username, on the
login page and the admin's, with a clear 429; the address comes only from
NUM_PROXIES trusted proxies, so a forged X-Forwarded-For neither escapes a
lock-out nor a throttle.
"""
import pytest
from axes.utils import reset
from django.test import Client, RequestFactory, override_settings
from rest_framework.test import APIClient
from rest_framework.throttling import ScopedRateThrottle

from config.client_ip import client_address

pytestmark = pytest.mark.django_db

LIMIT = 5


@pytest.fixture(autouse=True)
def no_attempts():
    reset()
    yield
    reset()


def sign_in(path: str, username: str, password: str, *, address: str = "10.0.0.1", forwarded: str | None = None):
    extra = {"REMOTE_ADDR": address}
    if forwarded is not None:
        extra["HTTP_X_FORWARDED_FOR"] = forwarded
    return Client().post(path, {"username": username, "password": password}, **extra)


@pytest.mark.parametrize("path", ["/accounts/login/", "/admin/login/"])
def test_wrong_passwords_lock_out_then_even_the_right_one_is_refused(make_user, path):
    make_user("carol", "right-password-123", is_staff=True)
    answers = [sign_in(path, "carol", f"wrong-{i}").status_code for i in range(LIMIT + 1)]
    assert answers[:LIMIT - 1] == [200] * (LIMIT - 1)  # the form again, with its error
    assert answers[-1] == 429
    locked = sign_in(path, "carol", "right-password-123")
    assert locked.status_code == 429
    assert b"Too many failed sign-ins" in locked.content
    assert "_auth_user_id" not in locked.wsgi_request.session


def test_the_username_is_locked_from_another_address_too(make_user):
    make_user("carol", "right-password-123")
    for i in range(LIMIT):
        sign_in("/accounts/login/", "carol", f"wrong-{i}", address="10.0.0.1")
    assert sign_in("/accounts/login/", "carol", "right-password-123", address="10.9.9.9").status_code == 429


def test_the_address_is_locked_for_other_usernames_too(make_user):
    make_user("dave", "right-password-456")
    for i in range(LIMIT):
        sign_in("/accounts/login/", f"nobody-{i}", "guess", address="10.0.0.2")
    assert sign_in("/accounts/login/", "dave", "right-password-456", address="10.0.0.2").status_code == 429
    assert sign_in("/accounts/login/", "dave", "right-password-456", address="10.0.0.3").status_code == 302


def test_a_forged_forwarded_for_does_not_escape_the_lock_out(make_user):
    make_user("erin", "right-password-789")
    for i in range(LIMIT):
        sign_in("/accounts/login/", f"nobody-{i}", "guess", address="10.0.0.4", forwarded=f"192.0.2.{i}")
    assert sign_in("/accounts/login/", "erin", "right-password-789", address="10.0.0.4",
                   forwarded="198.51.100.7").status_code == 429


def test_a_success_before_the_limit_resets_the_count(make_user):
    make_user("frank", "right-password-000")
    for i in range(LIMIT - 1):
        sign_in("/accounts/login/", "frank", f"wrong-{i}")
    assert sign_in("/accounts/login/", "frank", "right-password-000").status_code == 302
    for i in range(LIMIT - 1):
        assert sign_in("/accounts/login/", "frank", f"wrong-again-{i}").status_code == 200


def test_client_address_trusts_exactly_num_proxies():
    factory = RequestFactory()
    request = factory.get("/", REMOTE_ADDR="127.0.0.1", HTTP_X_FORWARDED_FOR="6.6.6.6, 203.0.113.9")
    with override_settings(NUM_PROXIES=0):
        assert client_address(request) == "127.0.0.1"  # no proxy trusted: the header is the client's own words
    with override_settings(NUM_PROXIES=1):
        assert client_address(request) == "203.0.113.9"  # the entry nginx appended
    with override_settings(NUM_PROXIES=2):
        assert client_address(request) == "6.6.6.6"
    with override_settings(NUM_PROXIES=1):
        assert client_address(factory.get("/", REMOTE_ADDR="127.0.0.1")) == "127.0.0.1"


def test_the_eval_throttle_is_not_bypassed_with_a_new_forwarded_for_each_time(settings, monkeypatch):
    settings.EVAL_SERVICE_TOKEN = "right-token"
    monkeypatch.setattr(ScopedRateThrottle, "THROTTLE_RATES", {"chat_turns": "3/min"})
    client = APIClient()
    statuses = [client.post("/api/eval/turns/", {"content": "hi"}, format="json", REMOTE_ADDR="10.1.1.1",
                            HTTP_X_FORWARDED_FOR=f"192.0.2.{i}", HTTP_AUTHORIZATION="Bearer wrong").status_code
                for i in range(5)]
    assert statuses == [403, 403, 403, 429, 429]
