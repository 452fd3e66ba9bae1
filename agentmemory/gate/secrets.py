"""Values the turn presented as secrets, and whether an entry holds one or points at one.

The gate's one language-free promise: a value a message of the turn (the
person's, or a tool result) gave as a secret never reaches memory, whole or
in part. This module collects those values (`turn_secrets`) and matches an
entry against them (`secret_in`, `notes_credential`); the rest of the gate
calls only these names.
"""
from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING

from ..threats.credentials import secret_values
from .features import message_text

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


# Fragments of a secret shorter than this are not looked for (a 4-character
# PIN is matched whole); longer secrets are matched by any run of half their length.
MIN_FRAGMENT = 4


def _words(pattern: str) -> re.Pattern[str]:
    return re.compile(pattern, re.IGNORECASE)


def turn_secrets(messages: Iterable[Mapping]) -> tuple[str, ...]:
    """Every value a message the person wrote or a tool result presented as a secret, oldest first."""
    secrets: list[str] = []
    for message in messages:
        role = str(message.get("role") or "")
        if role in ("user", "tool", "function"):
            text = message_text(message.get("content"))
            for value in (*secret_values(text), *_loose_secrets(text)):
                if len(value) >= MIN_FRAGMENT and value not in secrets:
                    secrets.append(value)
    return tuple(secrets)


def secret_in(entry: str, sources: TurnSources) -> bool:
    """True when the entry holds a value the turn presented as a secret, whole or in part.

    Whole values match in any case; a part is any run of at least half the
    value (and MIN_FRAGMENT characters), matched exactly.
    """
    if not entry or not sources.secrets:
        return False
    lowered = entry.lower()
    for value in sources.secrets:
        if value.lower() in lowered:
            return True
        size = max(MIN_FRAGMENT, (len(value) + 1) // 2)
        if len(value) > size and any(value[i:i + size] in entry for i in range(len(value) - size + 1)):
            return True
    return False


# Words that name a credential, and the places that keep credentials (a note of where they are kept may stay).
_CREDENTIAL = _words(
    r"\b(?:passwords?|passphrases?|passcodes?|tokens?|api[ -]?keys?|access[ -]?keys?|secret[ -]?keys?"
    r"|private[ -]?keys?|ssh[ -]?keys?|credentials?|secrets?|logins?)\b"
)
_KEPT_IN = _words(
    r"\b(?:password[ -]?managers?|vaults?|keychains?|1password|bitwarden|lastpass|keepass\w*|secrets?[ -]?managers?)\b"
)


def notes_credential(entry: str, sources: TurnSources) -> bool:
    """True when the turn gave a secret and the entry names a credential, not where credentials are kept.

    "Staging admin panel password." after "the password for the staging admin
    panel is …": the value is not in it, but it records that a secret exists
    and what it opens. "Uses a password manager for the staging admin" stays.
    """
    return bool(sources.secrets) and bool(_CREDENTIAL.search(entry)) and not _KEPT_IN.search(entry)

