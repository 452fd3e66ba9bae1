"""What the gate knows of one turn (`TurnSources`), read once from the turn's messages."""
from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from functools import cached_property

from ..threats.spellings import Spellings
from .codes import UNKNOWN
from .features import carries_attack, message_text, pasted_blocks
from .language import detect
from .reading import intent, passing_only, states_fact
from .secrets import turn_secrets


@dataclass(frozen=True)
class TurnSources:
    """What the gate knows of one turn: the person's latest message, what they
    pasted, and every value a message of the turn presented as a secret."""

    message: str = ""
    intent: str = UNKNOWN
    states_fact: bool = True
    pasted: tuple[str, ...] = ()
    secrets: tuple[str, ...] = ()
    passing_only: bool = False
    # The person's latest message reads as an attack on the assistant (the threat scan's instruction,
    # role, remote-control, exfiltration, persistence or hidden-content families), wherever it came from.
    attack: bool = False
    # The latest message's language (`language.detect`): "en", "de", "fr", ... or "unknown".
    language: str = "en"

    @cached_property
    def spellings(self) -> Spellings:
        """Every spelling of `secrets` (`threats.spellings`), computed once a turn, when an entry is first judged."""
        return Spellings.of(self.secrets)

    @classmethod
    def unknown(cls) -> TurnSources:
        """No messages were given: judge entries by their own features only."""
        return cls()

    @classmethod
    def from_messages(cls, messages: Iterable[Mapping]) -> TurnSources:
        """Read the turn's messages (`{"role", "content"}`, oldest first).

        Secrets are collected from every message the person wrote and every
        tool result (a value given in one message and "remember it" in the
        next is caught); the intent comes from the person's latest message.
        """
        messages = list(messages)
        latest = ""
        for message in messages:
            if str(message.get("role") or "") == "user":
                latest = message_text(message.get("content"))
        return cls(message=latest, intent=intent(latest), states_fact=states_fact(latest),
                   pasted=pasted_blocks(latest), secrets=turn_secrets(messages), passing_only=passing_only(latest),
                   attack=carries_attack(latest), language=detect(latest) if latest else "en")
