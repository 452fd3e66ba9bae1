"""Every API route answers its JSON error shape, whatever goes wrong (issue 53, finding 4).

An error nobody planned for (a bug of ours) is a JSON 500 with `code` and
`detail` (`config.parsers.unexpected_error`), never Django's HTML page, and
its log line carries no content. The operations route is fuzzed with expiry
phrases written in every kind of Unicode digit (Hypothesis, bounded), and the
staff review form with odd fields: no 5xx.
"""
import pytest
from django.core.cache import cache
from django.test import Client
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from rest_framework.authentication import TokenAuthentication
from rest_framework.authtoken.models import Token
from rest_framework.test import APIClient

from agentmemory import expiry
from agentmemory.models import WriteReview

from .test_api_database_errors import ROUTES, call
from .test_staff_privacy import staff_client
from .test_write_review import CONTENT, QUEUE, REVIEW, agent_saves

pytestmark = pytest.mark.django_db

LEAK = "Plover-4471 lives at 12 Secret Lane"


def token_client(user) -> APIClient:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {Token.objects.create(user=user).key}")
    return client


@pytest.mark.parametrize("method,path,body", ROUTES)
def test_an_unexpected_error_on_any_route_is_a_json_500_and_its_log_holds_no_content(user, monkeypatch, caplog,
                                                                                      method, path, body):
    def bug(self, key):
        raise RuntimeError(LEAK)

    monkeypatch.setattr(TokenAuthentication, "authenticate_credentials", bug)
    response = call(token_client(user), method, path, body)
    assert response.status_code == 500
    assert response["Content-Type"].startswith("application/json")
    answer = response.json()
    assert answer["code"] == "server_error" and "nothing was changed" in answer["detail"]
    if path.startswith("/api/memory/"):
        assert answer["position"] is None  # the memory routes' one shape
    assert "RuntimeError" in caplog.text and "Plover" not in caplog.text


def test_an_unexpected_error_inside_the_operations_view_writes_nothing(user, monkeypatch, caplog):
    def bug(raw, today):
        raise ValueError(LEAK)

    monkeypatch.setattr(expiry, "resolve_operations", bug)
    client = APIClient()
    client.force_authenticate(user)
    response = client.post("/api/memory/operations/", {"operations": [
        {"target": "memory", "action": "add", "content": "Likes tea", "expires": "for a week"}]}, format="json")
    assert response.status_code == 500 and response.json()["code"] == "server_error"
    assert "Plover" not in caplog.text
    assert client.get("/api/memory/").json()["documents"]["memory"]["entries"] == []


# Every character Unicode calls a digit or a number: decimal digits of every script (Nd),
# superscripts, circled and fraction-like numbers (No), Roman numerals and the like (Nl).
DIGITS = st.characters(categories=["Nd", "No", "Nl"])
NUMBERS = st.one_of(st.text(DIGITS, min_size=1, max_size=6),
                    st.integers(1, 6000).map(lambda length: "9" * length),
                    st.integers(0, 10_000).map(str))
PHRASES = st.one_of(
    st.builds("for {} {}".format, NUMBERS, st.sampled_from(["days", "day", "weeks", "months", "years", "fortnight"])),
    st.builds("in {} weeks".format, NUMBERS),
    st.builds("{} dec {}".format, NUMBERS, NUMBERS),
    st.builds("until {} {}".format, st.sampled_from(["dec", "Friday", "december"]), NUMBERS),
    st.builds("{}-{}-{}".format, NUMBERS, NUMBERS, NUMBERS),
    st.text(st.one_of(DIGITS, st.sampled_from(" -/.,abcdefjnorstuvwy")), max_size=40),
)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture,
                                                                 HealthCheck.too_slow])
@given(phrase=PHRASES)
def test_fuzzed_expiry_phrases_are_a_date_or_a_400_never_a_500(user, phrase):
    cache.clear()  # the write budget: every example is one write
    client = APIClient()
    client.force_authenticate(user)
    response = client.post("/api/memory/operations/", {"operations": [
        {"target": "user", "action": "add", "content": "Is on a trip", "expires": phrase}]}, format="json")
    assert response.status_code in (200, 400), response.status_code
    answer = response.json()
    if response.status_code == 400:
        assert set(answer) == {"code", "position", "detail"} and answer["detail"]
    else:
        stored = answer["documents"]["user"]["expires"]
        assert all(value is None or expiry._ISO.match(value) for value in stored)
        client.post("/api/memory/operations/", {"operations": [
            {"target": "user", "action": "remove", "match": "Is on a trip"}]}, format="json")


FIELD = st.one_of(st.text(max_size=30), st.text(DIGITS, min_size=1, max_size=8),
                  st.integers(-10, 10 ** 30).map(str), st.sampled_from(["keep", "sensitive", "", "0", "²"]))


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture,
                                                                 HealthCheck.too_slow])
@given(form=st.fixed_dictionaries({}, optional={"change": FIELD, "verdict": FIELD, "week": FIELD}),
       week=FIELD)
def test_fuzzed_review_forms_are_answered_without_a_5xx(make_user, django_user_model, form, week):
    if not django_user_model.objects.filter(username="judge").exists():
        agent_saves(make_user("alice"), "Works in Lisbon")
        staff_client(make_user, "judge", REVIEW, CONTENT)
    judge = django_user_model.objects.get(username="judge")
    client = Client()
    client.force_login(judge)
    assert client.get(QUEUE, {"week": week}).status_code == 200
    verdicts = WriteReview.objects.count()
    answer = client.post(QUEUE, form)
    assert answer.status_code in (302, 400, 403, 404, 409), answer.status_code
    # A verdict is recorded exactly when the answer says so.
    assert WriteReview.objects.count() == verdicts + (answer.status_code == 302)
