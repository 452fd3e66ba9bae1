"""Why an adapter's turn ended without a final answer (so nothing was committed).

Messages are content-free: they name the reason, never the model's text.
"""
from __future__ import annotations


class TurnNotCompleted(Exception):
    """The run ended without a complete final answer; what it staged was discarded."""


class IncompleteAnswer(TurnNotCompleted):
    """The final answer was cut off (an output limit, a refusal): nothing is committed from it."""

    def __init__(self, reason: str) -> None:
        super().__init__(f"The answer did not finish ({reason[:40]}); nothing was saved to memory.")
        self.reason = reason[:40]


class TooManyRounds(TurnNotCompleted):
    """The model was still calling tools after the last round the loop allows."""

    def __init__(self, rounds: int) -> None:
        super().__init__(f"No final answer within {rounds} model rounds; nothing was saved to memory.")
        self.rounds = rounds
