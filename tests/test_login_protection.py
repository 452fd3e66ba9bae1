"""Sign-in protection (django-axes, config/login_protection.py) and the client address (config/client_ip.py).

Wrong passwords lock out the address that sent them, never the account: 5
for one account lock that address out of that account, 20 in all lock it out
of every account, on the login page and the admin's, with a clear 429. The
person whose account was attacked still signs in from their own address. A
success clears only its own address-and-account count. The address comes
only from NUM_PROXIES trusted proxies, so a forged X-Forwarded-For neither
escapes a lock-out nor a throttle; an IPv6 client counts by its /64.
"""
import pytest
from axes.utils import reset
from django.test import Client, RequestFactory, override_settings
from rest_framework.test import APIClient
from rest_framework.throttling import ScopedRateThrottle

from config.client_ip import client_address, sign_in_source

pytestmark = pytest.mark.django_db

LIMIT = 5  # per address and account (LOGIN_FAILURE_LIMIT)
ADDRESS_LIMIT = 20  # per address (LOGIN_ADDRESS_FAILURE_LIMIT)
LOGIN_PATHS = ["/accounts/login/", "/admin/login/"]


@pytest.fixture(autouse=True)
def no_attempts(settings):
    # A fast hasher: these tests count sign-ins, not hashing rounds.
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
    reset()
    yield
    reset()


def sign_in(path: str, username: str, password: str, *, address: str = "10.0.0.1", forwarded: str | None = None):
    extra = {"REMOTE_ADDR": address}
    if forwarded is not None:
        extra["HTTP_X_FORWARDED_FOR"] = forwarded
    return Client().post(path, {"username": username, "password": password}, **extra)


def signed_in(response) -> bool:
    return response.status_code == 302 and "_auth_user_id" in response.wsgi_request.session


@pytest.mark.parametrize("path", LOGIN_PATHS)
def test_wrong_passwords_lock_out_the_address_then_even_the_right_one_is_refused_there(make_user, path):
    make_user("carol", "right-password-123", is_staff=True)
    answers = [sign_in(path, "carol", f"wrong-{i}").status_code for i in range(LIMIT + 1)]
    assert answers[:LIMIT - 1] == [200] * (LIMIT - 1)  # the form again, with its error
    assert answers[-1] == 429
    locked = sign_in(path, "carol", "right-password-123")
    assert locked.status_code == 429
    assert b"Too many failed sign-ins from this address" in locked.content
    assert "_auth_user_id" not in locked.wsgi_request.session


@pytest.mark.parametrize("path", LOGIN_PATHS)
def test_the_person_still_signs_in_from_their_own_address_while_the_attacker_is_locked(make_user, path):
    """The victim's view: an attacker's wrong passwords, repeated, never keep the person out."""
    make_user("carol", "right-password-123", is_staff=True)
    for round_ in range(2):  # the attack goes on after its address is locked
        for i in range(LIMIT):
            sign_in(path, "carol", f"wrong-{round_}-{i}", address="203.0.113.66")
        assert sign_in(path, "carol", "right-password-123", address="203.0.113.66").status_code == 429
        assert signed_in(sign_in(path, "carol", "right-password-123", address="198.51.100.7"))


def test_an_address_locked_out_of_one_account_still_signs_in_to_another(make_user):
    """A shared address (an office, a NAT): one account's wrong passwords do not lock out the rest."""
    make_user("carol", "right-password-123")
    make_user("dave", "right-password-456")
    for i in range(LIMIT):
        sign_in("/accounts/login/", "carol", f"wrong-{i}", address="10.0.0.2")
    assert sign_in("/accounts/login/", "carol", "right-password-123", address="10.0.0.2").status_code == 429
    assert signed_in(sign_in("/accounts/login/", "dave", "right-password-456", address="10.0.0.2"))


def test_the_address_is_locked_for_every_account_after_its_own_limit(make_user):
    make_user("dave", "right-password-456")
    for i in range(ADDRESS_LIMIT):
        assert sign_in("/accounts/login/", f"nobody-{i % 5}", f"guess-{i}", address="10.0.0.2").status_code in (200, 429)
    assert sign_in("/accounts/login/", "dave", "right-password-456", address="10.0.0.2").status_code == 429
    assert signed_in(sign_in("/accounts/login/", "dave", "right-password-456", address="10.0.0.3"))


def test_signing_in_to_your_own_account_does_not_wipe_failures_against_another(make_user):
    make_user("carol", "right-password-123")
    make_user("mallory", "mallory-password-1")
    for i in range(LIMIT - 1):
        sign_in("/accounts/login/", "carol", f"wrong-{i}", address="10.6.6.6")
    assert signed_in(sign_in("/accounts/login/", "mallory", "mallory-password-1", address="10.6.6.6"))
    assert sign_in("/accounts/login/", "carol", "wrong-last", address="10.6.6.6").status_code == 429


def test_a_new_ipv6_address_in_the_same_block_does_not_reset_the_count(make_user):
    make_user("carol", "right-password-123")
    for i in range(LIMIT):
        sign_in("/accounts/login/", "carol", f"wrong-{i}", address=f"2001:db8:1:2::{i + 1:x}")
    assert sign_in("/accounts/login/", "carol", "right-password-123", address="2001:db8:1:2:ffff::9").status_code == 429
    assert signed_in(sign_in("/accounts/login/", "carol", "right-password-123", address="2001:db8:1:3::1"))


def test_a_forged_forwarded_for_does_not_escape_the_lock_out(make_user):
    make_user("erin", "right-password-789")
    for i in range(LIMIT):
        sign_in("/accounts/login/", "erin", f"guess-{i}", address="10.0.0.4", forwarded=f"192.0.2.{i}")
    assert sign_in("/accounts/login/", "erin", "right-password-789", address="10.0.0.4",
                   forwarded="198.51.100.7").status_code == 429


def test_a_success_before_the_limit_resets_the_count(make_user):
    make_user("frank", "right-password-000")
    for i in range(LIMIT - 1):
        sign_in("/accounts/login/", "frank", f"wrong-{i}")
    assert sign_in("/accounts/login/", "frank", "right-password-000").status_code == 302
    for i in range(LIMIT - 1):
        assert sign_in("/accounts/login/", "frank", f"wrong-again-{i}").status_code == 200


def test_sign_in_source_counts_an_ipv6_client_by_its_block():
    factory = RequestFactory()
    assert sign_in_source(factory.get("/", REMOTE_ADDR="2001:db8:1:2:3:4:5:6")) == "2001:db8:1:2::"
    assert sign_in_source(factory.get("/", REMOTE_ADDR="::ffff:192.0.2.8")) == "192.0.2.8"
    assert sign_in_source(factory.get("/", REMOTE_ADDR="192.0.2.8")) == "192.0.2.8"


def proxies(count: int):
    """NUM_PROXIES as settings.py hands it on: DRF's REST_FRAMEWORK["NUM_PROXIES"], the one rule's input."""
    from django.conf import settings

    return override_settings(NUM_PROXIES=count, REST_FRAMEWORK={**settings.REST_FRAMEWORK, "NUM_PROXIES": count})


def test_client_address_trusts_exactly_num_proxies():
    factory = RequestFactory()
    request = factory.get("/", REMOTE_ADDR="127.0.0.1", HTTP_X_FORWARDED_FOR="6.6.6.6, 203.0.113.9")
    with proxies(0):
        assert client_address(request) == "127.0.0.1"  # no proxy trusted: the header is the client's own words
    with proxies(1):
        assert client_address(request) == "203.0.113.9"  # the entry nginx appended
    with proxies(2):
        assert client_address(request) == "6.6.6.6"
    with proxies(1):
        assert client_address(factory.get("/", REMOTE_ADDR="127.0.0.1")) == "127.0.0.1"


def test_sign_in_and_every_throttle_name_the_same_client():
    """One rule: DRF's own get_ident counted an empty X-Forwarded-For entry ("a, ,b"); ours does not."""
    from agentmemory.api.base import MemoryWriteThrottle
    from chat.budget import ChatTurnThrottle

    factory = RequestFactory()
    forged = factory.get("/", REMOTE_ADDR="127.0.0.1", HTTP_X_FORWARDED_FOR="6.6.6.6, 203.0.113.9, , ")
    with proxies(1):
        address = client_address(forged)
        assert address == "203.0.113.9"
        assert sign_in_source(forged) == address
        for throttle in (ChatTurnThrottle(), MemoryWriteThrottle()):
            assert throttle.get_ident(forged) == address
        assert ScopedRateThrottle().get_ident(forged) == "", "DRF's own rule takes the empty entry"


def test_the_eval_throttle_is_not_bypassed_with_a_new_forwarded_for_each_time(settings, monkeypatch):
    settings.EVAL_SERVICE_TOKEN = "right-token"
    monkeypatch.setattr(ScopedRateThrottle, "THROTTLE_RATES", {"chat_turns": "3/min"})
    client = APIClient()
    statuses = [client.post("/api/eval/turns/", {"content": "hi"}, format="json", REMOTE_ADDR="10.1.1.1",
                            HTTP_X_FORWARDED_FOR=f"192.0.2.{i}", HTTP_AUTHORIZATION="Bearer wrong").status_code
                for i in range(5)]
    assert statuses == [403, 403, 403, 429, 429]
