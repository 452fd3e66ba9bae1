"""Unlabelled random tokens (keys, access tokens), scored with detect-secrets.

A key pasted without a label ("Staging deploys with Zx81kQp0Lm2v…",
`wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY`) has no word to match, only its
randomness. That is measured with Yelp's detect-secrets
(https://github.com/Yelp/detect-secrets, pinned in requirements.txt and a
dependency of the wheel), a maintained, widely used secret scanner, rather
than with one more hand-written pattern: its `Base64HighEntropyString`
plugin finds the runs of base64 / base62 / URL-safe characters in a token
(its charset: letters, digits, `+/-_=`) and scores each with its Shannon
entropy (`calculate_shannon_entropy`); `HexHighEntropyString` does the same
for hexadecimal.

How it is used, read from the plugin's source (detect-secrets 1.5):

- The plugin only looks inside quotes by default (its `regex` is
  `(['"])([charset]+)\1`); for ad-hoc strings it swaps in the unquoted form
  `([charset]+)` inside the `non_quoted_string_regex` context manager, which
  rebinds the regex of the shared instance. A scan runs in many threads at
  once, so `_UnquotedBase64` sets that same unquoted form once, at
  construction, and nothing is swapped afterwards. Only `analyze_string`
  (the runs) and `calculate_shannon_entropy` are called: pure functions, no
  settings, no verification requests, no logging.
- Its default limit (4.5 bits per character for base64) assumes long
  strings: a run of n characters cannot exceed log2(n) bits per character,
  so a random 20-character key scores about 4.0. Runs are held to
  `ENTROPY_SHARE` of that maximum, and to the plugin's own limit once the
  maximum exceeds it (from about 40 characters).
- Importing detect-secrets has two process-wide side effects (its
  `core/log.py`): it turns on `logging.captureWarnings` and gives its
  `detect-secrets` logger a stderr handler without the redaction filter
  every handler of this project carries (agentmemory/telemetry/logs.py).
  Both are undone right after the import; its logger then propagates to the
  project's filtered handlers like any library's.

Randomness alone also flags identifiers (`EVP_PKEY_get1_RSA`,
`DjangoJSONEncoder`), so a run must also read like a random draw rather than
something a person typed:

- upper and lower case inside one segment (between `-_/+=`), and a digit or
  a `+`/`/`: `SENTINEL-9d41-basalt`, GitHub advisory ids and lowercase names
  pass;
- `MIN_TRANSITIONS`: at least a quarter of neighbouring characters change
  class (lower to upper, letter to digit; a capital starting a word does not
  count). Random base62 changes about 45 % of the time; camelCase and
  snake_case names about 10-20 % (`TokenAuthentication2`: 2 of 19);
- `MAX_WORDINESS`: at most 60 % of the run inside pronounceable words (three
  or more letters, a fifth of them vowels), so `x0eLogRecordFlags` passes;
- hexadecimal runs up to 40 characters pass (commit ids, short hashes,
  UUIDs, request ids); a longer one (`openssl rand -hex 32`) is a key when
  `HexHighEntropyString` scores it above its own limit, unless a digest
  label sits in front of it (`sha256:…`).

A key with slashes (an AWS secret access key) is judged like any run, or,
when the plugin scores it at or above its own default limit and no segment
between the slashes is a plain word (`config`, `Lib`), as a key even if it
reads less random: `…/bPxRfiCYEXAMPLEKEY` holds a word. Paths
(`config/keys/SigningKey2024/main`, `feature/JIRA-123-short-description`)
pass.

Calibration (measured once while tuning; tests/test_secret_values.py keeps
checking the catch rate by length and the benign corpus): on random base62
tokens this catches about 88 % at 16 characters, 93 % at 20, 95 % at 24,
97 % at 32 and 98 % at 40 (the hand-written scorer it replaced: 54, 71, 87,
94 and 97 %); of 44,141 code identifiers of 16 characters or more from the
installed packages' sources it flags 2 (`MLKEM768X25519SHA256Mixin`,
`_toPrivateOpenSSH_v1`; the scorer it replaced flagged 16), and none of
7,666 file paths of those packages.
"""
from __future__ import annotations

import logging
import math
import re
import warnings
from collections.abc import Iterator


def _import_plugins():
    """Import detect-secrets' entropy plugins, undoing its logging side effects."""
    logger = logging.getLogger("detect-secrets")
    handlers, level = list(logger.handlers), logger.level
    showwarning = warnings.showwarning
    try:
        from detect_secrets.plugins.high_entropy_strings import Base64HighEntropyString, HexHighEntropyString
    finally:
        if warnings.showwarning is not showwarning:
            logging.captureWarnings(False)  # it was off before the import
        for handler in logger.handlers:
            if handler not in handlers:
                logger.removeHandler(handler)
        logger.setLevel(level)
    return Base64HighEntropyString, HexHighEntropyString


_Base64HighEntropyString, _HexHighEntropyString = _import_plugins()


class _UnquotedBase64(_Base64HighEntropyString):  # type: ignore[misc,valid-type]  # imported at run time, quietly
    """The base64 plugin with its unquoted regex set once (see the module docstring)."""

    def __init__(self) -> None:
        super().__init__()  # the plugin's default limit, 4.5
        self.regex = re.compile(r"([{}]+)".format(re.escape(self.charset)))


BASE64 = _UnquotedBase64()
HEX = _HexHighEntropyString()  # default limit 3.0

MIN_RUN = 16  # characters; shorter keys are caught when a label names them
ENTROPY_SHARE = 0.85  # of log2(length), capped at the plugin's limit
MIN_TRANSITIONS = 0.25
MAX_WORDINESS = 0.6
MAX_PLAIN_HEX = 40  # a SHA-1 commit id

_SEGMENTS = re.compile(r"[-_/+=]+")
_INNER_EQUALS = re.compile(r"(?:[^=]|=+$)+|=+")
_HEX_RUN = re.compile(r"^[0-9a-fA-F_-]+$")
_PURE_HEX = re.compile(r"^[0-9a-fA-F]+$")
_DIGEST_LABEL = re.compile(r"(?:sha|md|blake|xxh|crc)[-_]?\d*[:=@-]?$", re.IGNORECASE)
_WORDLIKE = re.compile(r"[A-Z][a-z]{2,}|[a-z]{3,}|[A-Z]{3,}(?![a-z])")
_VOWELS = frozenset("aeiouyAEIOUY")
_PLAIN_WORD = re.compile(r"^(?:[A-Z]?[a-z]{2,}|[a-z]+(?:-[a-z]+)+)$")


_CLASSES = str.maketrans(
    {**{c: "l" for c in "abcdefghijklmnopqrstuvwxyz"}, **{c: "u" for c in "ABCDEFGHIJKLMNOPQRSTUVWXYZ"},
     **{c: "d" for c in "0123456789"}}
)
# A change of class between neighbours, except a capital followed by lower case (a word's start).
_CHANGE = re.compile(r"(?<=l)[ud]|(?<=u)d|(?<=d)[lu]")


def transitions(run: str) -> float:
    """The share of neighbours (inside segments) that change class; a capital then lower case does not count."""
    changes = pairs = 0
    for segment in _SEGMENTS.split(run):
        if len(segment) > 1:
            pairs += len(segment) - 1
            changes += len(_CHANGE.findall(segment.translate(_CLASSES)))
    return changes / pairs if pairs else 0.0


def wordiness(run: str) -> float:
    """The share of the run inside pronounceable words (3+ letters, a fifth of them vowels)."""
    inside = 0
    for word in _WORDLIKE.findall(run):
        if sum(char in _VOWELS for char in word) * 5 >= len(word):
            inside += len(word)
    return inside / len(run)


def entropy_limit(length: int) -> float:
    """The entropy a run of `length` characters must reach: a share of its maximum, at most the plugin's limit."""
    return min(BASE64.entropy_limit, ENTROPY_SHARE * math.log2(length))


def is_random(run: str, before: str = "") -> bool:
    """True when `run` (base64/base62 characters) reads as a randomly drawn key; `before` is what precedes it."""
    run = run.strip("=_-")
    if len(run) < MIN_RUN:
        return False
    if _HEX_RUN.match(run):
        return (
            len(run) > MAX_PLAIN_HEX
            and bool(_PURE_HEX.match(run))
            and not _DIGEST_LABEL.search(before)
            and HEX.calculate_shannon_entropy(run) > HEX.entropy_limit
        )
    segments = [segment for segment in _SEGMENTS.split(run) if segment]
    if not any(any(c.islower() for c in s) and any(c.isupper() for c in s) for s in segments):
        return False
    symbols = "+" in run or "/" in run
    if not symbols and not any(c.isdigit() for c in run):
        return False
    if transitions(run) >= MIN_TRANSITIONS and wordiness(run) <= MAX_WORDINESS:
        return BASE64.calculate_shannon_entropy(run) >= entropy_limit(len(run))
    # A key with slashes that holds a word or two: the plugin's own limit, and no plain word between slashes.
    return (
        "/" in run
        and any(c.isdigit() for c in run)
        and not any(_PLAIN_WORD.match(segment) for segment in run.split("/"))
        and BASE64.calculate_shannon_entropy(run) >= BASE64.entropy_limit
    )


def random_runs(token: str) -> Iterator[tuple[int, str]]:
    """Yield (offset, run) for each random-looking run of base64 characters in one token (no whitespace)."""
    if len(token) < MIN_RUN:
        return
    cursor = 0
    for found in BASE64.analyze_string(token):
        start = token.find(found, cursor)
        cursor = start + len(found)
        # `name=value` inside a run is two runs: base64 pads only at the end.
        for part in _INNER_EQUALS.finditer(found):
            run, offset = part.group(), start + part.start()
            if len(run) >= MIN_RUN and is_random(run, token[max(0, offset - 16):offset]):
                stripped = run.strip("=_-")
                yield offset + run.index(stripped), stripped
