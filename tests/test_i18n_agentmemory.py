"""agentmemory in German: every string a person reads is translated; what the model reads stays English.

The memory page, its History, the erase confirmation and the admin's memory
pages are rendered in German (`Accept-Language: de` and
`translation.override("de")`, so this holds with or without the project's
LocaleMiddleware) and their visible text is compared with agentmemory's own
catalogue: no English msgid of it may appear. The catalogue itself has no
empty or fuzzy entry. The model's tool reply stays English in German.
"""
from __future__ import annotations

import json
import re
from html.parser import HTMLParser
from pathlib import Path

import pytest
from django.contrib.auth.models import Permission
from django.core.management import call_command
from django.test import Client
from django.utils import translation

import agentmemory
from agentmemory import store, words
from agentmemory.models import Actor, MemoryDocument
from agentmemory.rules import MemoryValidationError, Operation, Snapshot, apply_operations

from .memory_helpers import fresh_throttle, seed  # noqa: F401  (fresh_throttle is autouse)

LOCALE = Path(agentmemory.__file__).resolve().parent / "locale" / "de" / "LC_MESSAGES"
PLACEHOLDER = re.compile(r"%\(\w+\)s|%%|<[^>]+>")


def _unquote(text: str) -> str:
    return json.loads(text)


def read_po(path: Path) -> list[dict]:
    """The entries of a .po file: msgctxt, msgid, msgid_plural, msgstr (a list), flags."""
    entries, current, key = [], None, None
    for line in [*path.read_text(encoding="utf-8").splitlines(), ""]:
        if not line.strip():
            if current and "msgid" in current:
                entries.append(current)
            current, key = None, None
            continue
        current = current if current is not None else {"flags": [], "msgstr": {}}
        if line.startswith("#,"):
            current["flags"] += [flag.strip() for flag in line[2:].split(",")]
        elif line.startswith("#"):
            continue
        elif line.startswith("msgstr["):
            index = int(line[7:line.index("]")])
            key = ("msgstr", index)
            current["msgstr"][index] = _unquote(line[line.index("]") + 1:].strip())
        elif line.startswith('"'):
            if isinstance(key, tuple):
                current["msgstr"][key[1]] += _unquote(line)
            else:
                current[key] += _unquote(line)
        else:
            key, _, value = line.partition(" ")
            if key == "msgstr":
                key = ("msgstr", 0)
                current["msgstr"][0] = _unquote(value)
            else:
                current[key] = _unquote(value)
    return [entry for entry in entries if entry["msgid"]]


CATALOGUES = [LOCALE / "django.po", LOCALE / "djangojs.po"]


def english_fragments() -> tuple[set[str], set[str]]:
    """What would betray an untranslated string: whole short msgids, and literal runs of two or more words.

    A msgid whose German is the same word (e.g. "Person") cannot betray anything and is left out, and so
    are date formats.
    """
    whole, runs = set(), set()
    for entry in read_po(LOCALE / "django.po"):
        ids = [entry["msgid"], entry.get("msgid_plural", "")]
        if entry["msgid"] in entry["msgstr"].values() or "date format" in entry.get("msgctxt", ""):
            continue
        for msgid in filter(None, ids):
            if re.fullmatch(r"[jMYHisT ,:.]+", msgid):
                continue
            pieces = [piece.strip(" ,.;:()“”") for piece in PLACEHOLDER.split(msgid)]
            for piece in pieces:
                if len(piece.split()) >= 2:
                    runs.add(piece)
            if len(pieces) == 1 and pieces[0]:
                whole.add(pieces[0])
    return whole, runs


class VisibleText(HTMLParser):
    """Text a person reads or hears: text nodes (not scripts or styles), labels and button values."""

    def __init__(self, *, within: str | None = None) -> None:
        super().__init__()
        self.within = within
        self.depth = 0 if within else 1
        self.skip = 0
        self.texts: list[str] = []

    def handle_starttag(self, tag, attrs):
        attributes = dict(attrs)
        if self.within and tag == self.within:
            self.depth += 1
        if tag in ("script", "style"):
            self.skip += 1
        if self.depth and not self.skip:
            for name in ("aria-label", "title", "placeholder", "alt"):
                if attributes.get(name):
                    self.texts.append(attributes[name])
            if tag == "input" and attributes.get("type") in ("submit", "button") and attributes.get("value"):
                self.texts.append(attributes["value"])

    def handle_endtag(self, tag):
        if tag in ("script", "style") and self.skip:
            self.skip -= 1
        if self.within and tag == self.within and self.depth:
            self.depth -= 1

    def handle_data(self, data):
        if self.depth and not self.skip and data.strip():
            self.texts.append(" ".join(data.split()))


def untranslated(html: str, *, within: str | None = None) -> list[str]:
    parser = VisibleText(within=within)
    parser.feed(html)
    whole, runs = english_fragments()
    found = []
    text = "\n".join(parser.texts)
    for node in parser.texts:
        if node.strip(" :.…") in whole:
            found.append(node)
    for run in runs:
        if re.search(r"(?<!\w)" + re.escape(run) + r"(?!\w)", text):
            found.append(run)
    return found


@pytest.fixture(scope="module", autouse=True)
def compiled(django_db_blocker):
    """The .mo files are built, not committed: compile agentmemory's catalogues for these tests."""
    with django_db_blocker.unblock():
        call_command("compilemessages", locale=["de"], verbosity=0)


@pytest.fixture
def german():
    with translation.override("de"):
        yield


def german_client(user) -> Client:
    client = Client(HTTP_ACCEPT_LANGUAGE="de")
    client.force_login(user)
    return client


# German-looking entries, so a memory entry never reads as an English msgid.
ENTRIES = {"user_entries": ["Trinkt morgens Tee."], "memory_entries": ["Projekt läuft auf Postgres."]}


def test_the_catalogues_are_complete_without_fuzzy_or_empty_entries():
    for path in CATALOGUES:
        entries = read_po(path)
        assert entries, path
        for entry in entries:
            assert "fuzzy" not in entry["flags"], entry["msgid"]
            assert all(text.strip() for text in entry["msgstr"].values()), entry["msgid"]
            assert len(entry["msgstr"]) == (2 if "msgid_plural" in entry else 1), entry["msgid"]


def test_the_wheel_ships_the_catalogues_and_their_compiled_files():
    """pyproject's package-data takes the .po and the .mo (the .mo is compiled, not committed)."""
    import tomllib

    pyproject = tomllib.loads((Path(agentmemory.__file__).resolve().parent.parent / "pyproject.toml").read_text())
    data = pyproject["tool"]["setuptools"]["package-data"]["agentmemory"]
    assert "locale/*/LC_MESSAGES/*.po" in data and "locale/*/LC_MESSAGES/*.mo" in data


def test_the_memory_page_and_its_history_are_german(user, german):
    seed(user, **ENTRIES)
    client = german_client(user)
    client.post("/memory/add/", {"target": "memory", "content": "Neue Notiz über Builds."})
    html = client.get("/memory/").content.decode()
    assert "Verlauf" in html and "Hinzugefügt." in html  # the page's words and the saved post's message
    assert "Zu Ihren Notizen: 1 Eintrag hinzugefügt" in html  # a History row, from words.py
    assert untranslated(html, within="main") == []
    assert "/jsi18n/" in html


def test_the_import_review_is_german_and_names_its_source_in_the_dative(user, german):
    client = german_client(user)
    review = client.post("/memory/import/", {"text": "- Trinkt morgens Tee.\n- Projekt läuft auf Postgres.\n"})
    assert review.status_code == 302
    html = client.get(review["Location"]).content.decode()
    assert "Gelesen aus einer Liste." in html  # "a list" is dative, as after "Importiert aus"
    assert "Gelesen als" not in html
    assert untranslated(html, within="main") == []


def test_the_erase_confirmation_is_german(user, german):
    seed(user, **ENTRIES)
    html = german_client(user).get("/memory/erase/").content.decode()
    assert "Ihr Gedächtnis löschen?" in html
    assert untranslated(html, within="main") == []


def test_the_memory_page_scripts_catalogue_is_german(user, german):
    catalogue = german_client(user).get("/jsi18n/").content.decode()
    assert "Der Assistent speichert eine Ged" in catalogue  # JSON-escaped umlauts follow


def test_the_admins_memory_pages_are_german(make_user, user, german):
    seed(user, **ENTRIES)
    staff = make_user("staff", "pw-staff-123", is_staff=True)
    staff.user_permissions.add(*Permission.objects.filter(content_type__app_label="agentmemory"))
    client = Client(HTTP_ACCEPT_LANGUAGE="de")
    client.force_login(staff)
    document = MemoryDocument.objects.filter(user=user).first()
    pages = ["/admin/agentmemory/memorydocument/", f"/admin/agentmemory/memorydocument/{document.pk}/change/",
             "/admin/agentmemory/memoryevent/", "/admin/agentmemory/memoryversion/",
             "/admin/agentmemory/memoryproposal/", "/admin/agentmemory/writereview/",
             "/admin/agentmemory/writereview/dashboard/"]
    # The review queue (issue 40) with a change the assistant saved on it.
    store.commit_operations(user_id=user.pk, operations=[Operation(target="memory", action="add", content="Uses vim")],
                            actor=Actor.AGENT, origin={"model": "m"})
    queue = client.get("/admin/agentmemory/writereview/queue/").content.decode()
    assert "Ihr Urteil" in queue and untranslated(queue) == []
    for url in pages:
        response = client.get(url)
        assert response.status_code == 200, url
        assert untranslated(response.content.decode()) == [], url
    erase = client.post("/admin/agentmemory/memorydocument/",
                        {"action": "erase_people", "_selected_action": [document.pk]})
    assert "Gedächtnis dieser Personen löschen?" in erase.content.decode()
    assert untranslated(erase.content.decode()) == []


def test_words_speak_german(german):
    assert words.describe_changes({"add": 1, "remove": 2}, {"user": 1, "memory": 1}) == (
        "In Ihrem Profil und Ihren Notizen: 1 Eintrag hinzugefügt und 2 Einträge entfernt")
    assert words.erase_summary({"profile_entries": 2, "conversations": 1200}) == (
        "Gelöscht: 2 Profileinträge und 1.200 Unterhaltungen.")
    assert isinstance(words.outcome_name("committed"), str)


def test_english_stays_the_default():
    assert words.describe_changes({"add": 1}, {"memory": 1}) == "Added 1 entry to your notes"


def test_what_the_model_reads_stays_english_in_german(german):
    with pytest.raises(MemoryValidationError) as refused:
        apply_operations(Snapshot(user=(), memory=()), [Operation(target="memory", action="remove", match="x")])
    assert not re.search(r"[äöüß]|Eintrag|Gedächtnis", refused.value.message)
    from agentmemory import tool
    reply = tool.handle_memory_update({"operations": [{"target": "memory", "action": "remove", "match": "x"}]})
    assert not re.search(r"[äöüß]|Eintrag|Gedächtnis|nicht", json.dumps(reply, ensure_ascii=False))
