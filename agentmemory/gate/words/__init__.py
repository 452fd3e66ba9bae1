"""The words the gate reads, one module per language, each of one shape (like a locale's formats).

Every module names `CODE`, `FUNCTION_WORDS` (for `language.detect`),
`REMEMBER`, `FORGET`, `REMEMBER_LEAD`, `NEGATION`, `CONTRAST` and
`SECRET_LABELS` (phrases that label a secret's value, read by the gate's
`secrets`). A full language (`FULL`: English and German) also names every
pattern of `en` (intent, statements, transient, progress, summary, the
assistant's own notes); for the others the gate knows only what a person
asks of memory, and asks before saving anything else.
"""
from __future__ import annotations

from types import ModuleType

from . import de, en, es, fr, it, nl, pt

# In the order ties are broken: the stricter rules first.
LANGUAGES: dict[str, ModuleType] = {module.CODE: module for module in (en, de, fr, es, it, pt, nl)}
FULL = frozenset({"en", "de"})


def full(code: str) -> ModuleType | None:
    """The words of a language the gate reads in full, or None."""
    return LANGUAGES[code] if code in FULL else None
