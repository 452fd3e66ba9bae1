"""Threat scanning of memory entries: the security layer after structure.

Every entry a person or the model wants to store, and every stored entry that
is about to enter a prompt, passes `scan_entry`. It looks for text that reads
like an attack on a later turn — instructions to the assistant, a change of
role, remote control ("promptware"), hidden markup, exfiltration,
persistence, credentials, and invisible or direction-changing characters —
and returns a content-free finding: a category and advice, never the matched
text, so the finding can reach logs, spans and API responses. Pure: no
Django, no database, no network.

Scanning is pattern-based and only catches known shapes; it is a tripwire,
not a proof that stored text is safe (docs/threat-model.md). Every pattern is
precompiled, every gap between key words is bounded, and text longer than
`MAX_SCAN_CHARS` is refused rather than scanned, so a scan takes time linear
in the entry's length.

Import from here (`from agentmemory.threats import scan_entry, is_blocked`).
`scan_batch(entries, new)` reads neighbouring entries of one document
together, for an injection split between two of them (`batch.py`).
`secret_values(text)` is the other public function: the values a message
(or a pasted file, or a tool result) presents as secrets, read with the same
credential patterns, for a caller that keeps them out of what is stored.
The modules:

- `findings.py`: the categories, their advice, `ThreatFinding`, `MAX_SCAN_CHARS`.
- `scan.py`: `scan_entry` and `is_blocked`: which checks run, on which views, in which order.
- `batch.py`: `scan_batch`: a phrase split between two neighbouring entries.
- `folding.py`: the text as a model reads it (folded, rendered, de-obfuscated, decoded).
- The families: `invisible.py` (characters), `hidden.py` (markup carriers),
  `phrases.py` (instructions, roles, remote control, persistence,
  exfiltration), `credentials.py` (secrets, and `secret_values`), with
  `entropy.py` (unlabelled random keys, scored with detect-secrets),
  `identifiers.py` (national identity and tax numbers, IBANs and accounts,
  checked with python-stdnum) and `labelled.py` (PINs, codes, combinations,
  security answers and passwords after their labels, in seven languages).
- `spellings.py`: every spelling of a secret value (canonical, reversed,
  hex, base64, URL-encoded, digits spelled out), for the gate's matching.
"""
from .batch import SplitFinding, pair_category, scan_batch
from .credentials import MIN_SECRET_VALUE, secret_values
from .findings import (
    ADVICE,
    CATEGORIES,
    COMMAND_AND_CONTROL,
    EXFILTRATION,
    HIDDEN_CONTENT,
    INVISIBLE_UNICODE,
    MAX_SCAN_CHARS,
    OVERSIZED,
    PERSISTENCE,
    PROMPT_INJECTION,
    ROLE_HIJACK,
    SECRET,
    Threat,
    ThreatFinding,
)
from .scan import BLOCKED_CACHE_SIZE, is_blocked, scan_entry

__all__ = [
    "ADVICE",
    "BLOCKED_CACHE_SIZE",
    "CATEGORIES",
    "COMMAND_AND_CONTROL",
    "EXFILTRATION",
    "HIDDEN_CONTENT",
    "INVISIBLE_UNICODE",
    "MAX_SCAN_CHARS",
    "MIN_SECRET_VALUE",
    "OVERSIZED",
    "PERSISTENCE",
    "PROMPT_INJECTION",
    "ROLE_HIJACK",
    "SECRET",
    "SplitFinding",
    "Threat",
    "ThreatFinding",
    "is_blocked",
    "pair_category",
    "scan_batch",
    "scan_entry",
    "secret_values",
]
