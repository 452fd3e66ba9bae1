"""What the gate reads without knowing the language: text, pasted blocks, paths, overlap of words.

Nothing here depends on the words of a language: a message's text from its
content parts, fenced and long pasted blocks, one-off paths, whether an
entry copies pasted text or takes its words from the person's message, and
whether the threat scan reads a message as an attack.
"""
from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

from ..rules import folded
from ..threats import OVERSIZED, SECRET, scan_entry
from .words import en

if TYPE_CHECKING:
    from .sources import TurnSources

ONE_OFF_PATH = re.compile(
    r"(?:^|[\s`'\"(])(?:/tmp/|/var/tmp/|/var/folders/|/private/var/|~/Downloads/|[A-Za-z]:\\Users\\[^\\\s]+"
    r"\\AppData\\Local\\Temp\\)|\b[\w./-]+\.\w{1,5}:\d+\b|\bline \d+\b",
    re.IGNORECASE,
)
CONTENT_WORD = re.compile(r"[^\W\d_][\w'+#.-]{2,}", re.UNICODE)
FENCE = re.compile(r"```.*?(?:```|$)", re.DOTALL)
# A pasted block: a fenced block, or a run of lines this long that the person did not type as prose.
PASTED_MIN_LINES = 4
PASTED_MIN_CHARS = 200
# An entry copies pasted text when it shares a run of this many words with it.
COPY_RUN = 8


def message_text(content: object) -> str:
    """A message's text: its string, or its text parts joined."""
    if isinstance(content, str):
        return content
    if isinstance(content, Sequence):  # content parts: [{"type": "text", "text": ...}]
        return "\n".join(str(part.get("text") or "") for part in content if isinstance(part, Mapping))
    return ""



def pasted_blocks(message: str) -> tuple[str, ...]:
    """Return what the message pasted: fenced blocks, or the whole message when it is a long run of lines."""
    blocks = [block.strip("`") for block in FENCE.findall(message or "")]
    rest = FENCE.sub("\n", message or "")
    lines = [line for line in rest.splitlines() if line.strip()]
    if len(lines) >= PASTED_MIN_LINES and len(rest) >= PASTED_MIN_CHARS:
        blocks.append(rest)
    return tuple(block for block in blocks if block.strip())


def carries_attack(message: str) -> bool:
    """True when the threat scan reads the message as an attack (not merely a secret, which `secrets` holds)."""
    finding = scan_entry(message or "") if message else None
    return finding is not None and finding.category not in (SECRET, OVERSIZED)


def _content_words(text: str) -> set[str]:
    return {word.lower().strip(".'") for word in CONTENT_WORD.findall(text or "")} - en.STOP


def from_message(content: str | None, sources: TurnSources) -> bool:
    """True when the entry's words come from the person's latest message (half its content words or more)."""
    words = _content_words(content or "")
    return bool(words) and len(words & _content_words(sources.message)) * 2 >= len(words)


def copies_pasted(content: str, pasted: Sequence[str]) -> bool:
    words = folded(content).split()
    if len(words) < COPY_RUN:
        return False
    runs = {" ".join(words[i:i + COPY_RUN]) for i in range(len(words) - COPY_RUN + 1)}
    for block in pasted:
        block_words = folded(block).split()
        if any(" ".join(block_words[i:i + COPY_RUN]) in runs for i in range(len(block_words) - COPY_RUN + 1)):
            return True
    return False

