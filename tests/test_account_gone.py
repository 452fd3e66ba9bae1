"""A write while the account is deleted answers a clear 410, never a 500 (issue 27, item 5).

The request is signed in when it begins; the account is deleted while it
runs (here: by the write budget's check, which every write path passes just
before it writes), so the write finds no account under the person's lock
(`store.UnknownUser`). Every write path of the memory page (add, correct,
remove, the switch, the save mode, a proposal's save and discard, erase)
answers 410 with the page's plain sentence, as HTML or as the page script's
JSON; every write of the memory API answers 410 `account_closed`.
"""
import pytest
from django.contrib.auth import get_user_model
from django.test import Client
from rest_framework.test import APIClient

from agentmemory import proposals, store, words
from agentmemory.api import MemoryWriteThrottle
from agentmemory.models import MemoryDocument, MemoryEvent, MemoryProposal
from agentmemory.rules import Operation

from .memory_helpers import fresh_throttle, seed  # noqa: F401  (fresh_throttle is an autouse fixture)

ENTRY = "Uses vim."
JSON = {"HTTP_ACCEPT": "application/json"}


@pytest.fixture
def deleted_mid_request(user, monkeypatch):
    """alice's account is deleted while her next write request runs; return her proposal's id."""
    seed(user, user_entries=[ENTRY])
    proposal_id = proposals.create(user_id=user.pk, operations=[Operation(target="memory", action="add",
                                                                          content="Ships on Fridays.")])

    def delete_the_account(self, request, view):
        get_user_model().objects.filter(pk=request.user.pk).delete()
        return True

    monkeypatch.setattr(MemoryWriteThrottle, "allow_request", delete_the_account)
    return proposal_id


def page_writes(proposal_id):
    return [
        ("/memory/add/", {"target": "memory", "content": "Ships weekly."}),
        ("/memory/correct/", {"target": "user", "entry": ENTRY, "content": "Uses emacs."}),
        ("/memory/remove/", {"target": "user", "entry": ENTRY}),
        ("/memory/settings/", {"use_memory": "0"}),
        ("/memory/save-mode/", {"save_mode": "ask"}),
        (f"/memory/proposals/{proposal_id}/save/", {}),
        (f"/memory/proposals/{proposal_id}/discard/", {}),
        ("/memory/erase/", {}),
    ]


WRITE_NAMES = ["add", "correct", "remove", "switch", "save-mode", "proposal-save", "proposal-discard", "erase"]


def account_is_gone(user) -> bool:
    return not (get_user_model().objects.filter(pk=user.pk).exists()
                or MemoryDocument.objects.filter(user_id=user.pk).exists()
                or MemoryEvent.objects.filter(user_id=user.pk).exists()
                or MemoryProposal.objects.filter(user_id=user.pk).exists())


@pytest.mark.parametrize("index", range(len(WRITE_NAMES)), ids=WRITE_NAMES)
def test_a_page_form_answers_a_plain_sentence(user, deleted_mid_request, index):
    path, data = page_writes(deleted_mid_request)[index]
    client = Client()
    client.force_login(user)

    response = client.post(path, data)

    assert response.status_code == 410
    html = response.content.decode()
    assert str(words.ACCOUNT_GONE) in html and "account_closed" not in html and "UnknownUser" not in html
    assert account_is_gone(user)
    assert "sessionid" not in client.cookies or not client.cookies["sessionid"].value, "the session ended"


@pytest.mark.parametrize("index", range(len(WRITE_NAMES)), ids=WRITE_NAMES)
def test_the_page_script_gets_the_sentence_as_json(user, deleted_mid_request, index):
    path, data = page_writes(deleted_mid_request)[index]
    client = Client()
    client.force_login(user)

    response = client.post(path, data, **JSON)

    assert response.status_code == 410
    assert response.json() == {"ok": False, "message": words.ACCOUNT_GONE}


API_WRITES = {
    "operations": ("post", "/api/memory/operations/",
                   {"operations": [{"target": "user", "action": "add", "content": "Ships weekly."}]}),
    "settings-switch": ("put", "/api/memory/settings/", {"use_memory": False}),
    "settings-save-mode": ("put", "/api/memory/settings/", {"save_mode": "ask"}),
    "erase": ("delete", "/api/memory/", None),
    "proposal-save": ("post", "/api/memory/proposals/{id}/save/", {}),
    "proposal-discard": ("delete", "/api/memory/proposals/{id}/", None),
}


@pytest.mark.parametrize("name", list(API_WRITES))
def test_an_api_write_answers_410_account_closed(user, deleted_mid_request, name):
    method, path, body = API_WRITES[name]
    api = APIClient()
    api.force_login(user)

    response = getattr(api, method)(path.format(id=deleted_mid_request), body, format="json")

    assert response.status_code == 410
    assert response.json()["code"] == "account_closed" and response.json()["position"] is None
    assert account_is_gone(user)


def test_a_discard_takes_the_persons_lock_first_like_a_save(user, deleted_mid_request):
    get_user_model().objects.filter(pk=user.pk).delete()

    for write in (proposals.discard, proposals.save):
        with pytest.raises(store.UnknownUser):
            write(user_id=user.pk, proposal_id=deleted_mid_request)
