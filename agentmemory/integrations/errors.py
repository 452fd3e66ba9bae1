"""Why an adapter's turn ended without a final answer (so nothing was committed).

Messages are plain sentences a person may read, with no content of the model's; the reason's code is an attribute.
"""
from __future__ import annotations


class TurnNotCompleted(Exception):
    """The run ended without a complete final answer; what it staged was discarded."""


class IncompleteAnswer(TurnNotCompleted):
    """The final answer was cut off (an output limit, a refusal): nothing is committed from it."""

    def __init__(self, reason: str) -> None:
        super().__init__("The answer stopped before it was finished, so nothing was saved to memory.")
        self.reason = reason[:40]  # the model's stop reason, for logs and metrics (e.g. "max_tokens", "length")


class TooManyRounds(TurnNotCompleted):
    """The model was still calling tools after the last round the loop allows."""

    def __init__(self, rounds: int) -> None:
        super().__init__(f"No final answer within {rounds} model rounds; nothing was saved to memory.")
        self.rounds = rounds
