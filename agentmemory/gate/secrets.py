"""Values the turn presented as secrets, and whether an entry holds one, however spelled, or points at one.

The gate's one language-free promise: a value a message of the turn (the
person's, pasted text, or any tool result: a conversation_search hit, a
host's own tool) gave as a secret never reaches memory, whole or in part,
in any spelling (`threats.spellings`: case, separators, reversed, hex,
base64, URL-encoding, digits spelled out). A secret is what the scan's
credential readers find (labelled and unlabelled credentials, sensitive
identifiers, PINs, codes, combinations and security answers in seven
languages) plus a looser English reading of a labelled value. This module
collects those values (`turn_secrets`), matches an entry against them
(`secret_in`, `notes_credential`), and holds the one check every offer of
trusted code passes too (`withheld`): the unsaved-statement question, an
import and Tidy up offer nothing the model may not store.
"""
from __future__ import annotations

import hashlib
import json
import re
import threading
from collections import OrderedDict
from collections.abc import Callable, Iterable, Iterator, Mapping
from functools import partial
from typing import TYPE_CHECKING

from ..threats import SECRET, scan_entry
from ..threats.credentials import secret_values
from ..threats.spellings import MIN_CANONICAL

if TYPE_CHECKING:
    from .sources import TurnSources

# What a message presents as a secret, read more loosely than the scan reads an entry (a wrong value
# here only refuses an entry holding it): a label, up to six words, then "is" / ":" / "=" and a value
# with a digit or a symbol ("The password for the staging admin panel is Plum-Orbit-4471-Vex").
_LOOSE_SECRET = re.compile(
    r"\b(?:pass(?:word|phrase|code)s?|pwd|pin|passkey|api[ _-]?key|secret|token|credentials?)\b"
    r"(?:[ \t]+[^\s:=]+){0,6}?[ \t]*(?:\bis\b|\bwas\b|:|=)[ \t]*[\"'`“]?(?P<value>[^\s\"'`”,;]{6,80})",
    re.IGNORECASE,
)


def _loose_secrets(text: str) -> list[str]:
    values = []
    for match in _LOOSE_SECRET.finditer(text or ""):
        value = match.group("value").rstrip(".!?)")
        if len(value) >= 6 and any(c.isdigit() for c in value) and any(c.isalpha() for c in value):
            values.append(value)
    return values


# A value shorter than this (letters and digits, `spellings.canonical`) is not collected: it would refuse
# ordinary entries.
MIN_FRAGMENT = MIN_CANONICAL
# Roles whose messages are sources of secrets: the person's, and every tool result.
SOURCE_ROLES = frozenset({"user", "tool", "function"})
# Items without a role that are tool results (the Responses API's, as the OpenAI Agents SDK passes them).
TOOL_RESULT_TYPES = frozenset({"function_call_output", "tool_result"})


def _strings(value: object) -> Iterator[str]:
    if isinstance(value, str):
        yield value
    elif isinstance(value, Mapping):
        for item in value.values():
            yield from _strings(item)
    elif isinstance(value, list):
        for item in value:
            yield from _strings(item)


# Where a message's parts hold text: a text part, a tool result block (Anthropic's `tool_result`), a
# Responses API `function_call_output`.
_TEXT_KEYS = ("text", "content", "output")


def _part_texts(content: object) -> Iterator[str]:
    if isinstance(content, str):
        yield content
    elif isinstance(content, list):
        for part in content:
            if isinstance(part, Mapping):
                for key in _TEXT_KEYS:
                    yield from _part_texts(part.get(key))


def is_source(message: Mapping) -> bool:
    """True for a message whose text may give a secret: the person's, and every tool result."""
    return str(message.get("role") or "") in SOURCE_ROLES or message.get("type") in TOOL_RESULT_TYPES


def source_text(message: Mapping) -> str:
    """A message's text as a source of secrets: its text parts and tool results, JSON read as its strings."""
    content = message.get("content") if "content" in message else message.get("output")
    texts = []
    for text in _part_texts(content):
        if text[:1] in ("{", "[") and str(message.get("role") or "") != "user":
            try:
                text = "\n".join(_strings(json.loads(text)))
            except ValueError:
                pass
        texts.append(text)
    return "\n".join(texts)


def text_secrets(text: str) -> tuple[str, ...]:
    """The values one message's text presents as secrets (long enough to be looked for)."""
    return tuple(value for value in (*secret_values(text), *_loose_secrets(text))
                 if sum(c.isalnum() for c in value) >= MIN_FRAGMENT)


class _ReadMessages:
    """What each message read lately presented as secrets, by a digest of its text.

    A long chat hands every turn its whole history, and the newest message is
    the only one not read before: reading the rest again cost about 0.1 ms a
    message (the scan's credential readers). Bounded (least recently used
    first out), per process; it keeps a digest and the values, which the
    chat's stored history holds anyway, never the text.
    """

    def __init__(self, size: int) -> None:
        self.size = size
        self._read: OrderedDict[bytes, tuple[str, ...]] = OrderedDict()
        self._lock = threading.Lock()

    def secrets(self, text: str, read: Callable[[], str] | None = None) -> tuple[str, ...]:
        """The values `text` presents as secrets; `read` (on a miss only) gives the text to read when `text`
        is the raw content it comes from (a tool result's JSON is decoded only when first read)."""
        key = hashlib.blake2b(text.encode("utf-8", "surrogatepass"), digest_size=16).digest()
        with self._lock:
            found = self._read.get(key)
            if found is not None:
                self._read.move_to_end(key)
                return found
        found = text_secrets(text if read is None else read())
        with self._lock:
            self._read[key] = found
            if len(self._read) > self.size:
                self._read.popitem(last=False)
        return found


READ_MESSAGES = _ReadMessages(4096)


def turn_secrets(messages: Iterable[Mapping]) -> tuple[str, ...]:
    """Every value a message the person wrote or a tool result presented as a secret, oldest first."""
    secrets: dict[str, None] = {}  # ordered, without repeats
    for message in messages:
        role = message.get("role")
        if role not in SOURCE_ROLES and message.get("type") not in TOOL_RESULT_TYPES:
            continue
        content = message.get("content")
        if isinstance(content, str):  # most messages: known by their raw text (and whether JSON is decoded)
            raw = content if role == "user" else "\0" + content
            found = READ_MESSAGES.secrets(raw, partial(source_text, message))
        else:
            found = READ_MESSAGES.secrets(source_text(message))
        for value in found:
            secrets.setdefault(value)
    return tuple(secrets)


def secret_in(entry: str, sources: TurnSources) -> bool:
    """True when the entry holds a value the turn presented as a secret, whole or in part, however spelled.

    The values' spellings are computed once a turn (`TurnSources.spellings`);
    a part is a run of half a value's letters and digits inside one word.
    """
    return bool(entry) and bool(sources.secrets) and sources.spellings.found_in(entry)


def withheld(entry: str, sources: TurnSources | None = None) -> bool:
    """True when memory may not keep `entry`, whoever offers it: it holds a secret of its own (the scan's
    credential family: a credential, a sensitive identifier, a PIN, code, combination or security answer)
    or, with `sources`, a value the turn gave as a secret, however spelled.

    The model's writes meet both in staging (the scan in `rules`, `secret_in` in `verdicts.refusal`);
    trusted code's own offers call this: the unsaved-statement question, an import, Tidy up.
    """
    if not entry:
        return False
    finding = scan_entry(entry)
    if finding is not None and finding.category == SECRET:
        return True
    return sources is not None and secret_in(entry, sources)


def _words(pattern: str) -> re.Pattern[str]:
    return re.compile(pattern, re.IGNORECASE)


# Words that name a credential, and the places that keep credentials (a note of where they are kept may stay),
# in the seven languages the gate reads.
_CREDENTIAL = _words(
    r"\b(?:passwords?|passphrases?|passcodes?|tokens?|api[ -]?keys?|access[ -]?keys?|secret[ -]?keys?"
    r"|private[ -]?keys?|ssh[ -]?keys?|credentials?|secrets?|logins?|pins?|pin codes?|combinations?"
    r"|security answers?|passw[oö]rter|passwort|kennw[oö]rter|kennwort|geheimzahl|zugangsdaten|pin-?code"
    r"|mots? de passe|identifiants|contrase[ñn]as?|claves?|credenciales|senhas?|credenciais|wachtwoord(?:en)?"
    r"|inloggegevens|pincode|codice pin|credenziali)\b"
)
_KEPT_IN = _words(
    r"\b(?:password[ -]?managers?|vaults?|keychains?|1password|bitwarden|lastpass|keepass\w*|secrets?[ -]?managers?"
    r"|passwort-?manager|gestionnaire de mots de passe|gestor de contrase[ñn]as|gestore (?:di|delle) password"
    r"|gestor de senhas|wachtwoordmanager)\b"
)


def notes_credential(entry: str, sources: TurnSources) -> bool:
    """True when the turn gave a secret and the entry names a credential, not where credentials are kept.

    "Staging admin panel password." after "the password for the staging admin
    panel is …": the value is not in it, but it records that a secret exists
    and what it opens. "Uses a password manager for the staging admin" stays.
    """
    return bool(sources.secrets) and bool(_CREDENTIAL.search(entry)) and not _KEPT_IN.search(entry)
