"""API tokens end with the session, and the person controls them (config/account.py, chat/signals.py).

Driven over HTTP, as a browser and an API client would:

- a password change (the admin's form, or a save) and a deactivation revoke
  the person's API tokens, no one else's;
- the account page shows the token without its key and revokes it; the API
  does the same (`/api/account/token/`);
- "Sign out everywhere" (the password asked again, wrong guesses counted by
  the sign-in lock-out) ends every session and the token; the person signs in
  again with the same password;
- a REST turn whose session or token ends while the answer is written (a
  scripted model over real HTTP ends it between the tool call and the answer)
  fails `session_ended` (403) and commits nothing.
"""
import re

import pytest
from axes.utils import reset
from django.contrib.auth import get_user_model
from django.db import connection
from django.test import Client, override_settings
from rest_framework.authtoken.models import Token
from rest_framework.test import APIClient

from agentmemory import words
from agentmemory.models import MemoryDocument, MemoryEvent, Outcome
from tests.chat_helpers import fresh_agents  # noqa: F401
from tests.scripted_model import dynamic, scripted_model, text, tool_call  # noqa: F401

pytestmark = pytest.mark.django_db(transaction=True)

PASSWORD = "pw-alice-123"
FACT = "The release train leaves on Thursdays"
CALL = {"operations": [{"target": "memory", "action": "add", "content": FACT}]}
TURNS = "/api/chat/turns/"
CODE_LIKE = re.compile(r"\b[a-z]+_[a-z_]+\b|HTTP \d{3}")


@pytest.fixture(autouse=True)
def fast_passwords(settings):
    # A fast hasher: these tests are about which credentials still work, not hashing rounds.
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
    reset()
    yield
    reset()


def token_client(key: str) -> APIClient:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {key}")
    return client


def works(key: str) -> bool:
    status = token_client(key).get("/api/conversations/").status_code
    assert status in (200, 401, 403)
    return status == 200


def browser(username: str, password: str = PASSWORD) -> Client:
    """A browser that signed in through the login page."""
    client = Client()
    response = client.post("/accounts/login/", {"username": username, "password": password})
    assert response.status_code == 302, "signed in"
    return client


def is_signed_in(client: Client) -> bool:
    return client.get("/memory/").status_code == 200


def page_text(response) -> str:
    return re.sub(r"<[^>]+>", " ", response.content.decode())


# --- what revokes a token ------------------------------------------------------------------


def change_password_in_the_admin(user) -> None:
    admin = browser(user.get_username())
    form = {"old_password": PASSWORD, "new_password1": "a-brand-new-pass-42", "new_password2": "a-brand-new-pass-42"}
    assert admin.post("/admin/password_change/", form).status_code == 302


def change_password(user) -> None:
    user.set_password("a-brand-new-pass-42")
    user.save()


def deactivate_then_reactivate(user) -> None:
    user.is_active = False
    user.save()
    user.is_active = True
    user.save()


@pytest.mark.parametrize("end", [change_password_in_the_admin, change_password, deactivate_then_reactivate],
                         ids=["admin_password_change", "password_change", "deactivation"])
def test_the_persons_tokens_stop_working_and_no_one_elses(make_user, end):
    alice = make_user("alice", PASSWORD, is_staff=True)
    bob = make_user("bob", "pw-bob-123")
    mine, theirs = Token.objects.create(user=alice).key, Token.objects.create(user=bob).key
    assert works(mine)

    end(get_user_model().objects.get(pk=alice.pk))

    assert not works(mine)
    assert not Token.objects.filter(user=alice).exists()
    assert works(theirs)


def test_an_unrelated_save_keeps_the_token(user):
    key = Token.objects.create(user=user).key
    user.first_name = "Alice"
    user.save()
    assert works(key)


# --- the account page ------------------------------------------------------------------------


def test_the_account_page_needs_a_signed_in_person(user):
    key = Token.objects.create(user=user).key
    for response in (Client().get("/accounts/"), Client().post("/accounts/token/revoke/"),
                     Client().post("/accounts/sign-out-everywhere/", {"password": PASSWORD})):
        assert response.status_code == 302 and response["Location"].startswith("/accounts/login/")
    assert works(key)


def test_the_page_shows_the_token_without_its_key_and_revokes_it(user, other_user):
    key = Token.objects.create(user=user).key
    theirs = Token.objects.create(user=other_user).key
    page = browser("alice")

    shown = page.get("/accounts/")
    assert shown.status_code == 200
    assert key not in shown.content.decode()
    assert f"ending in {key[-4:]}" in " ".join(page_text(shown).split())
    assert not CODE_LIKE.search(page_text(shown).split("Your account", 1)[1])

    revoked = page.post("/accounts/token/revoke/", follow=True)
    assert "Your API token was revoked" in page_text(revoked)
    assert "You have no API token." in page_text(revoked)
    assert not works(key)
    assert works(theirs)
    assert is_signed_in(page)  # revoking the token leaves the browser signed in


def test_sign_out_everywhere_ends_every_session_and_the_token(user, other_user):
    key = Token.objects.create(user=user).key
    here, elsewhere, bob = browser("alice"), browser("alice"), browser("bob", "pw-bob-123")

    wrong = here.post("/accounts/sign-out-everywhere/", {"password": "not-my-password"})
    assert wrong.status_code == 200
    assert "That is not your password, so nothing was changed." in page_text(wrong)
    assert is_signed_in(here) and is_signed_in(elsewhere) and works(key)

    done = here.post("/accounts/sign-out-everywhere/", {"password": PASSWORD}, follow=True)
    assert done.redirect_chain[-1][0].startswith("/accounts/login/")
    assert "You are signed out everywhere" in page_text(done)
    assert not is_signed_in(here)
    assert not is_signed_in(elsewhere)
    assert not works(key)
    assert is_signed_in(bob)
    assert is_signed_in(browser("alice"))  # the same password signs in again


def test_wrong_passwords_on_sign_out_everywhere_count_toward_the_lock_out(user, settings):
    here = browser("alice")
    answers = [here.post("/accounts/sign-out-everywhere/", {"password": f"guess-{i}"}).status_code
               for i in range(settings.AXES_FAILURE_LIMIT + 1)]
    assert answers[:settings.AXES_FAILURE_LIMIT - 1] == [200] * (settings.AXES_FAILURE_LIMIT - 1)
    assert answers[-1] == 429
    assert here.post("/accounts/sign-out-everywhere/", {"password": PASSWORD}).status_code == 429
    assert is_signed_in(here)


# --- the API ---------------------------------------------------------------------------------


def test_the_api_shows_and_revokes_the_token_it_is_called_with(user, other_user):
    key = Token.objects.create(user=user).key
    theirs = Token.objects.create(user=other_user).key
    client = token_client(key)

    shown = client.get("/api/account/token/")
    assert shown.status_code == 200
    assert shown.json()["token"]["ends_with"] == key[-4:]
    assert key not in shown.content.decode()

    assert client.delete("/api/account/token/").json() == {"revoked": 1}
    assert client.get("/api/account/token/").status_code in (401, 403)
    assert works(theirs)

    session = APIClient()
    session.force_login(user)
    assert session.get("/api/account/token/").json() == {"token": None}
    assert session.delete("/api/account/token/").json() == {"revoked": 0}


# --- a REST turn whose credential ends mid-answer --------------------------------------------


def _session_client(user) -> APIClient:
    client = APIClient()
    client.force_login(user)
    return client


def _password_changed(user, client) -> None:
    change_password(get_user_model().objects.get(pk=user.pk))


def _signed_out_everywhere(user, client) -> None:
    assert browser("alice").post("/accounts/sign-out-everywhere/", {"password": PASSWORD}).status_code == 302


def _token_revoked_on_the_page(user, client) -> None:
    assert browser("alice").post("/accounts/token/revoke/").status_code == 302


def _this_session_signed_out(user, client) -> None:
    same = Client()
    same.cookies["sessionid"] = client.cookies["sessionid"].value
    assert same.post("/accounts/logout/").status_code in (200, 302)


ENDINGS = {
    "token_password_changed": ("token", _password_changed),
    "token_signed_out_everywhere": ("token", _signed_out_everywhere),
    "token_revoked": ("token", _token_revoked_on_the_page),
    "session_signed_out_everywhere": ("session", _signed_out_everywhere),
    "session_signed_out": ("session", _this_session_signed_out),
}


@override_settings(CHAT_TURN_RATE="1000/min")
@pytest.mark.parametrize("ending", sorted(ENDINGS))
def test_a_rest_turn_whose_credential_ends_mid_answer_commits_nothing(user, scripted_model, ending):
    credential, end = ENDINGS[ending]
    client = token_client(Token.objects.create(user=user).key) if credential == "token" else _session_client(user)

    def end_then_answer(body):
        try:
            end(user, client)  # between the staged tool call and the final answer
        finally:
            connection.close()
        return text("Saved: the release train leaves on Thursdays.")

    scripted_model.push(tool_call(CALL), dynamic(end_then_answer))

    response = client.post(TURNS, {"content": "our release train leaves on Thursdays", "conversation_id": None},
                           format="json")

    assert response.status_code == 403, response.content
    body = response.json()
    assert body["code"] == "session_ended"
    assert body["memory"]["status"] == "discarded" and body["memory"]["code"] == "session_ended"
    assert "nothing was saved" in body["detail"]
    assert not MemoryDocument.objects.filter(user=user).exists()
    assert not MemoryEvent.objects.filter(user=user, outcome=Outcome.COMMITTED).exists()
    [event] = MemoryEvent.objects.filter(user=user, outcome=Outcome.DISCARDED)
    assert event.error_code == "session_ended"
    # History says why, in words.
    assert words.event_reason(event.outcome, event.error_code) == body["memory"]["message"] == (
        "You were signed out during this reply, so its memory change was not saved.")


@override_settings(CHAT_TURN_RATE="1000/min")
def test_a_rest_turn_whose_credential_holds_still_commits(user, scripted_model):
    client = token_client(Token.objects.create(user=user).key)

    def unrelated_then_answer(body):
        try:
            browser("bob", "pw-bob-123")  # someone else signs in meanwhile
        finally:
            connection.close()
        return text("Saved.")

    scripted_model.push(tool_call(CALL), dynamic(unrelated_then_answer))
    get_user_model().objects.create_user("bob", password="pw-bob-123")

    response = client.post(TURNS, {"content": "our release train leaves on Thursdays", "conversation_id": None},
                           format="json")

    assert response.status_code == 200, response.content
    assert response.json()["memory"]["status"] == "committed"
