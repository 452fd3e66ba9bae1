"""The pages in German (issue 41, translations): the project's side.

LocaleMiddleware follows the browser (Accept-Language), the account page's
switch (Django's set_language, a cookie) overrides it, and English stays what
a client that asks for nothing gets. Each page a person sees is fetched in
German and its visible text (text nodes, and the attributes people read:
aria-label, title, placeholder, alt, a button's value) is compared with the
catalogues' English: no sentence or label of the project's catalogue
(locale/de) or the reusable app's (agentmemory/locale/de) may show in
English. The catalogues themselves are complete: no empty and no fuzzy entry.

The .po files are read here with a small parser (no gettext library needed);
the .mo files Django reads are compiled by `make messages` (`make test` and
scripts/test.sh do it first). Failures name catalogue strings only, never a
page's text, so no memory content reaches a report.
"""
from __future__ import annotations

import ast
import re
from dataclasses import dataclass
from html.parser import HTMLParser
from pathlib import Path

import pytest
from django.conf import settings
from django.contrib.auth import get_user_model
from django.test import Client
from rest_framework.authtoken.models import Token

from agentmemory import proposals
from agentmemory.models import MemoryDocument
from agentmemory.rules import Operation
from chat.consumers import language_of
from chat.models import Conversation

from .memory_helpers import fresh_throttle, seed  # noqa: F401  (fresh_throttle is an autouse fixture)

BASE = Path(settings.BASE_DIR)
PROJECT_CATALOGUES = [BASE / "locale/de/LC_MESSAGES/django.po", BASE / "locale/de/LC_MESSAGES/djangojs.po"]
APP_CATALOGUES = [BASE / "agentmemory/locale/de/LC_MESSAGES/django.po",
                  BASE / "agentmemory/locale/de/LC_MESSAGES/djangojs.po"]
GERMAN = {"HTTP_ACCEPT_LANGUAGE": "de"}
PASSWORD = "pw-greta-123"
# Memory content in German, so no entry of it can pass for an untranslated catalogue string.
FACTS = ["Trinkt morgens grünen Tee", "Wohnt in Leipzig"]
NOTES = ["Das Projekt nutzt PostgreSQL 16", "Der Zug fährt donnerstags"]


# --- the catalogues --------------------------------------------------------------------


@dataclass(frozen=True)
class Entry:
    msgid: str
    plural: str | None
    strings: tuple[str, ...]
    fuzzy: bool


def _unquote(parts: list[str]) -> str:
    return "".join(ast.literal_eval(part) for part in parts)


def read_catalogue(path: Path) -> list[Entry]:
    """Every entry of a .po file but its header (msgid "")."""
    entries = []
    for block in re.split(r"\n\s*\n", path.read_text(encoding="utf-8")):
        fields: dict[str, list[str]] = {}
        current = None
        fuzzy = False
        for line in block.splitlines():
            if line.startswith("#,") and "fuzzy" in line:
                fuzzy = True
            if line.startswith("#~"):  # an obsolete entry: not compiled, not shown
                fields, current = {}, None
                break
            if line.startswith("#"):
                continue
            match = re.match(r'^(msgctxt|msgid_plural|msgid|msgstr(?:\[\d+\])?) (".*")$', line)
            if match:
                current = match.group(1)
                fields[current] = [match.group(2)]
            elif line.startswith('"') and current:
                fields[current].append(line)
        if "msgid" not in fields:
            continue
        msgid = _unquote(fields["msgid"])
        if not msgid:
            continue
        strings = tuple(_unquote(parts) for name, parts in sorted(fields.items()) if name.startswith("msgstr"))
        plural = _unquote(fields["msgid_plural"]) if "msgid_plural" in fields else None
        entries.append(Entry(msgid=msgid, plural=plural, strings=strings, fuzzy=fuzzy))
    return entries


PLACEHOLDER = re.compile(r"<[^>]+>|%\(\w+\)[sd]|%[sd]|\{\w*\}")


def english_of(paths: list[Path]) -> tuple[set[str], set[str]]:
    """The catalogues' English a German page must not show: (short labels, sentence fragments).

    Only strings whose German differs ("Chat" is "Chat" in both). A label
    counts when a whole text node or attribute is it; a sentence counts
    when one of its literal fragments (between placeholders and tags, at
    least 16 characters with a space) appears anywhere in the page's text.
    """
    labels: set[str] = set()
    fragments: set[str] = set()
    for path in paths:
        for entry in read_catalogue(path):
            for english in filter(None, (entry.msgid, entry.plural)):
                if english in entry.strings:
                    continue
                text = " ".join(english.split())
                plain = " ".join(PLACEHOLDER.sub(" ", text).split())
                if plain == text:
                    labels.add(text)
                for piece in PLACEHOLDER.split(text):
                    piece = " ".join(piece.split()).strip(" .,:;()—–-")
                    if len(piece) >= 16 and " " in piece:
                        fragments.add(piece)
    return labels, fragments


# --- the visible text of a page -------------------------------------------------------------

READ_ATTRIBUTES = ("aria-label", "title", "placeholder", "alt", "aria-description")
NOT_SHOWN = {"script", "style", "template", "noscript"}


class VisibleText(HTMLParser):
    """Collects a page's text nodes and the attributes people read (screen readers included)."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.chunks: list[str] = []
        self._skipping = 0

    def handle_starttag(self, tag, attrs) -> None:
        if tag in NOT_SHOWN:
            self._skipping += 1
            return
        values = dict(attrs)
        for name in READ_ATTRIBUTES:
            if values.get(name):
                self.chunks.append(values[name])
        if tag == "input" and values.get("type") in ("submit", "button", "reset") and values.get("value"):
            self.chunks.append(values["value"])

    def handle_endtag(self, tag) -> None:
        if tag in NOT_SHOWN and self._skipping:
            self._skipping -= 1

    def handle_data(self, data) -> None:
        if not self._skipping and data.strip():
            self.chunks.append(data)


def visible_text(html: str) -> list[str]:
    parser = VisibleText()
    parser.feed(html)
    return [" ".join(chunk.split()) for chunk in parser.chunks]


def untranslated(html: str, paths: list[Path]) -> list[str]:
    """The catalogue strings a page shows in English (catalogue text only: safe to report)."""
    labels, fragments = english_of(paths)
    chunks = visible_text(html)
    whole = " ".join(chunks)
    found = {chunk for chunk in chunks if chunk in labels or chunk.rstrip(".:") in labels}
    found |= {fragment for fragment in fragments if fragment in whole}
    return sorted(found)


def compiled(path: Path) -> bool:
    mo = path.with_suffix(".mo")
    return mo.exists() and mo.stat().st_mtime >= path.stat().st_mtime


@pytest.fixture(scope="module", autouse=True)
def compiled_catalogues():
    stale = [str(path.relative_to(BASE)) for path in PROJECT_CATALOGUES if not compiled(path)]
    if stale:
        pytest.fail(f"{', '.join(stale)}: not compiled or changed since; run `make messages` (compilemessages)")


def app_catalogues() -> list[Path]:
    missing = [str(path.relative_to(BASE)) for path in APP_CATALOGUES[:1] if not path.exists()]
    if missing:
        pytest.skip(f"{missing[0]} is missing: the reusable app's German catalogue is not there yet")
    stale = [str(path.relative_to(BASE)) for path in APP_CATALOGUES if path.exists() and not compiled(path)]
    if stale:
        pytest.fail(f"{', '.join(stale)}: not compiled or changed since; run `make messages` (compilemessages)")
    return [path for path in APP_CATALOGUES if path.exists()]


# --- a person with something on every page --------------------------------------------------


@pytest.fixture
def greta(make_user):
    return make_user("greta", PASSWORD)


@pytest.fixture
def greta_client(greta):
    seed(greta, user_entries=FACTS, memory_entries=NOTES)
    proposals.create(user_id=greta.pk, operations=[Operation(target="memory", action="add",
                                                             content="Mag Radtouren an der Elbe")])
    Conversation.objects.create(user=greta, title="Urlaubsplanung")
    Token.objects.create(user=greta)
    client = Client()
    client.force_login(greta)
    return client


@pytest.fixture
def staff_client(make_user, greta_client):
    make_user("root", "pw-root-123", is_staff=True, is_superuser=True)
    client = Client()
    client.force_login(get_user_model().objects.get(username="root"))
    return client


def get_german(client, url: str) -> str:
    response = client.get(url, **GERMAN)
    assert response.status_code == 200, url
    assert response["Content-Language"] == "de", url
    html = response.content.decode()
    assert '<html lang="de"' in html or 'lang="de"' in html[:400], url
    return html


# --- the tests ---------------------------------------------------------------------------------


def test_the_catalogues_are_complete_with_no_empty_or_fuzzy_entry():
    for path in PROJECT_CATALOGUES:
        entries = read_catalogue(path)
        assert len(entries) > 20, path
        empty = [entry.msgid for entry in entries if not all(entry.strings)]
        fuzzy = [entry.msgid for entry in entries if entry.fuzzy]
        assert empty == [], f"{path.name}: untranslated entries {empty}"
        assert fuzzy == [], f"{path.name}: fuzzy entries {fuzzy}"
        named = re.compile(r"%\(\w+\)[sd]|\{\w*\}")
        placeholders = [entry.msgid for entry in entries
                        if any(sorted(named.findall(text)) != sorted(named.findall(entry.msgid))
                               for text in entry.strings)]
        assert placeholders == [], f"{path.name}: placeholders differ in {placeholders}"
        header = path.read_text(encoding="utf-8").split("\n\n", 1)[0]
        assert "#, fuzzy" not in header and "Language: de" in header and "nplurals=2" in header


def test_a_client_that_asks_for_nothing_gets_english(client, greta):
    login = client.get("/accounts/login/")
    assert login["Content-Language"] == "en"
    assert "<h1>Sign in</h1>" in login.content.decode()
    client.force_login(greta)
    chat = client.get("/").content.decode()
    assert '<html lang="en">' in chat and ">Send</button>" in chat


@pytest.mark.parametrize("url", ["/", "/accounts/", "/accounts/login/"])
def test_the_projects_pages_show_no_english_from_its_catalogue_in_german(greta_client, client, url):
    html = get_german(client if url == "/accounts/login/" else greta_client, url)

    assert untranslated(html, PROJECT_CATALOGUES) == []


def test_the_german_pages_say_it_in_german(greta_client, client):
    chat = get_german(greta_client, "/")
    account = get_german(greta_client, "/accounts/")
    login = get_german(client, "/accounts/login/")

    assert ">Senden</button>" in chat and "Neue Unterhaltung" in chat and "Temporärer Chat" in chat
    assert "<h1>Ihr Konto</h1>" in account and "Diese Sprache verwenden" in account
    assert "<h1>Anmelden</h1>" in login and "Benutzername" in login


def test_every_page_a_person_sees_shows_no_english_from_either_catalogue(greta_client, staff_client, client):
    catalogues = PROJECT_CATALOGUES + app_catalogues()
    greta = get_user_model().objects.get(username="greta")
    document = MemoryDocument.objects.filter(user=greta).first()
    assert document is not None
    pages = {
        "chat": get_german(greta_client, "/"),
        "memory page and History": get_german(greta_client, "/memory/"),
        "History, second page": get_german(greta_client, "/memory/?page=1#history"),
        "account": get_german(greta_client, "/accounts/"),
        "login": get_german(client, "/accounts/login/"),
    }
    admin_pages = ["/admin/", "/admin/agentmemory/"]
    for model in ("memorydocument", "memoryevent", "memoryproposal", "memoryversion"):
        changelist = f"/admin/agentmemory/{model}/"
        admin_pages.append(changelist)
        listed = re.findall(rf'href="({changelist}\d+/change/)[^"]*"', get_german(staff_client, changelist))
        admin_pages.extend(sorted(set(listed))[:2])
    admin_pages.append(f"/admin/agentmemory/memorydocument/{document.pk}/history/")
    for url in admin_pages:
        pages[f"admin {url}"] = get_german(staff_client, url)
    # The erase action's confirmation page (nothing is erased until it is confirmed).
    confirmation = staff_client.post("/admin/agentmemory/memorydocument/", {
        "action": "erase_people", "_selected_action": [document.pk]}, **GERMAN)
    assert confirmation.status_code == 200
    pages["admin erase confirmation"] = confirmation.content.decode()

    found = {name: untranslated(html, catalogues) for name, html in pages.items()}

    assert {name: strings for name, strings in found.items() if strings} == {}
    assert len([url for url in admin_pages if url.endswith("/change/")]) >= 3
    assert MemoryDocument.objects.filter(user=greta).exists()  # the confirmation erased nothing


def test_the_language_switch_on_the_account_page_persists(greta_client):
    page = greta_client.get("/accounts/").content.decode()
    assert 'action="/i18n/setlang/"' in page and 'name="next" value="/accounts/"' in page
    assert '<option value="de" lang="de">Deutsch</option>' in page

    switched = greta_client.post("/i18n/setlang/", {"language": "de", "next": "/accounts/"})

    assert switched.status_code == 302 and switched["Location"] == "/accounts/"
    assert greta_client.cookies[settings.LANGUAGE_COOKIE_NAME].value == "de"
    # The choice outlasts the request and outranks the browser's language.
    for headers in ({}, {"HTTP_ACCEPT_LANGUAGE": "en-US,en;q=0.9"}):
        again = greta_client.get("/accounts/", **headers)
        assert again["Content-Language"] == "de"
        assert '<option value="de" lang="de" selected>' in again.content.decode()
    assert "Senden" in greta_client.get("/").content.decode()

    greta_client.post("/i18n/setlang/", {"language": "en", "next": "/accounts/"})
    assert greta_client.get("/accounts/", **GERMAN)["Content-Language"] == "en"


def test_a_next_of_another_site_is_not_followed(greta_client):
    switched = greta_client.post("/i18n/setlang/", {"language": "de", "next": "https://elsewhere.example/"})

    assert switched.status_code == 302 and "elsewhere" not in switched["Location"]


def test_the_chat_pages_javascript_catalogue_serves_german(client):
    german = client.get("/jsi18n/chat/", **GERMAN)
    english = client.get("/jsi18n/chat/")

    assert german.status_code == 200 and "javascript" in german["Content-Type"]
    body = german.content.decode()
    assert '"Copy": "Kopieren"' in body and '"Connected.": "Verbunden."' in body
    assert "globals.gettext" in body and "globals.interpolate" in body
    assert "Kopieren" not in english.content.decode()


def test_the_chat_page_loads_the_catalogue_before_its_scripts(greta_client):
    html = greta_client.get("/").content.decode()

    order = [html.index(marker) for marker in ('src="/jsi18n/chat/"', "chat/markdown.js", "chat/chat.js")]
    assert order == sorted(order)


def test_a_socket_speaks_the_language_of_its_handshake():
    def scope(accept=None, cookie=None):
        headers = [(b"accept-language", accept.encode())] if accept else []
        return {"headers": headers, "cookies": {settings.LANGUAGE_COOKIE_NAME: cookie} if cookie else {}}

    assert language_of(scope()) == "en"
    assert language_of(scope("de-DE,de;q=0.9,en;q=0.8")) == "de"
    assert language_of(scope("fr-FR")) == "en"
    assert language_of(scope("de-DE", cookie="en")) == "en"  # the account page's choice wins
    assert language_of(scope(cookie="de")) == "de"


def test_the_rest_turns_sentences_follow_the_request_and_codes_do_not(greta_client):
    body = {"content": "Hallo", "temporary": True}
    key = {"HTTP_IDEMPOTENCY_KEY": "0b7c4f0e-8f1e-4a53-9d55-1f0c7e2b6a11"}
    german = greta_client.post("/api/chat/turns/", body, content_type="application/json", **key, **GERMAN)
    english = greta_client.post("/api/chat/turns/", body, content_type="application/json", **key)

    assert german.status_code == english.status_code == 400
    assert german.json()["code"] == english.json()["code"] == "idempotency_key_temporary"
    assert "temporary chat keeps nothing" in english.json()["detail"]
    assert "temporärer Chat behält nichts" in german.json()["detail"]
