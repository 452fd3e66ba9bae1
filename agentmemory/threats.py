"""Threat scanning of memory entries: the security layer after structure.

Every entry a person or the model wants to store, and every stored entry that
is about to enter a prompt, passes `scan_entry`. It looks for text that reads
like an attack on a later turn — instructions to the assistant, a change of
role, exfiltration, persistence, hard-coded secrets, and invisible or
direction-changing characters — and returns a content-free finding: a
category and advice, never the matched text, so the finding can reach logs,
spans and API responses. Pure: no Django, no database, no network.

Scanning is pattern-based and only catches known shapes; it is a tripwire,
not a proof that stored text is safe (docs/threat-model.md).
"""
from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass
from functools import lru_cache

# Entries are short (the largest document holds 2,200 characters); text longer
# than this cannot be scanned in bounded time, so it cannot be stored either.
MAX_SCAN_CHARS = 20_000

PROMPT_INJECTION = "prompt_injection"
ROLE_HIJACK = "role_hijack"
EXFILTRATION = "exfiltration"
PERSISTENCE = "persistence"
SECRET = "secret"
INVISIBLE_UNICODE = "invisible_unicode"
OVERSIZED = "oversized"

ADVICE = {
    PROMPT_INJECTION: "it reads like an instruction to the assistant, not a fact. Memory holds facts "
    "about the person and their work; rephrase it as a plain fact or leave it out.",
    ROLE_HIJACK: "it tries to change who the assistant is or to speak as the system. Store the "
    "person's preference as a plain fact instead.",
    EXFILTRATION: "it asks to send or read out conversations, memory or credentials. Leave it out.",
    PERSISTENCE: "it asks to change login keys, shell start-up files or agent configuration, or "
    "to protect itself from removal. Leave it out.",
    SECRET: "it looks like a password, token, API key or private key. Never store credentials; "
    "store where the person keeps them (for example 'uses a password manager') instead.",
    INVISIBLE_UNICODE: "it contains invisible or text-direction characters. Retype the entry as "
    "plain visible text.",
    OVERSIZED: f"it is longer than {MAX_SCAN_CHARS:,} characters and cannot be checked. Memory "
    "entries are short facts; shorten it.",
}


@dataclass(frozen=True)
class ThreatFinding:
    """What kind of threat an entry matched; never the matched text."""

    category: str

    @property
    def message(self) -> str:
        return f"content was refused by the threat scan ({self.category}): {ADVICE[self.category]}"


def scan_entry(text: str) -> ThreatFinding | None:
    """Return the first finding for `text`, or None when it may be stored."""
    if len(text) > MAX_SCAN_CHARS:
        return ThreatFinding(OVERSIZED)
    # Checked on the raw text and again after NFKC, so that compatibility
    # folding can neither hide nor introduce an invisible character.
    if _has_invisible(text):
        return ThreatFinding(INVISIBLE_UNICODE)
    compatible = unicodedata.normalize("NFKC", text)
    if _has_invisible(compatible):
        return ThreatFinding(INVISIBLE_UNICODE)
    for category, pattern in _SECRET_SHAPES:
        if pattern.search(compatible):
            return ThreatFinding(category)
    folded = _fold(compatible)
    for category, pattern in _PHRASES:
        if pattern.search(folded):
            return ThreatFinding(category)
    if _has_secret_assignment(folded):
        return ThreatFinding(SECRET)
    return None


# Every stored entry is re-scanned on every turn that renders it (~100 us an
# entry: NFKC plus all the patterns), yet the scan is pure and the entries
# rarely change, so the verdict is cached per entry text. Bounded: at most
# this many stored entries (each within a document's limit, a few KB), least
# recently used out first. Patterns only change with a deploy, which restarts
# the process and so empties the cache.
BLOCKED_CACHE_SIZE = 4096


@lru_cache(maxsize=BLOCKED_CACHE_SIZE)
def is_blocked(entry: str) -> str | None:
    """Return the category a stored entry now matches, or None.

    Patterns change after entries were stored; a match keeps the entry out of
    the prompt while the person still sees it and can remove it.
    """
    finding = scan_entry(entry)
    return finding.category if finding else None


# --- invisible and direction-changing characters -----------------------------

_ZWNJ, _ZWJ = "\u200c", "\u200d"
_DIRECTION_MARKS = frozenset("\u200e\u200f\u061c")  # LRM, RLM, ALM
# Format characters that are visible or required in their scripts
# (Arabic/Syriac number signs and the like).
_ALLOWED_FORMAT = frozenset("\u0600\u0601\u0602\u0603\u0604\u0605\u06dd\u070f\u08e2\U000110bd\U000110cd")
# Invisible characters that Unicode does not class as format characters.
_INVISIBLE_OTHER = frozenset("\u034f\u115f\u1160\u3164\uffa0\u2028\u2029\u180e")
_EMOJI_TAG_SEQUENCE = re.compile("\U0001f3f4[\U000e0030-\U000e0039\U000e0061-\U000e007a]{1,6}\U000e007f")
_VARIATION_SELECTOR = re.compile("[\ufe00-\ufe0f\U000e0100-\U000e01ef]")


def _has_invisible(text: str) -> bool:
    # Subdivision flags (England, Scotland, Wales) are built from tag
    # characters; they are the only legitimate use of those characters.
    text = _EMOJI_TAG_SEQUENCE.sub("\U0001f3f4", text)
    rtl = None
    previous_selector = False
    for index, char in enumerate(text):
        selector = bool(_VARIATION_SELECTOR.match(char))
        # One selector picks an emoji or glyph variant; a run of them can
        # smuggle hidden bytes.
        if selector and (previous_selector or index == 0):
            return True
        previous_selector = selector
        if char in _INVISIBLE_OTHER:
            return True
        if unicodedata.category(char) != "Cf" or char in _ALLOWED_FORMAT:
            continue
        if char in (_ZWJ, _ZWNJ) and _joiner_in_context(text, index):
            continue
        if char in _DIRECTION_MARKS:
            if rtl is None:
                rtl = any(
                    unicodedata.bidirectional(c) in ("R", "AL") for c in text if c not in _DIRECTION_MARKS
                )
            if rtl:
                continue
        return True
    return False


def _joiner_in_context(text: str, index: int) -> bool:
    """Return True for a joiner inside an emoji sequence or a non-Latin word.

    ZWJ builds emoji such as a family or a rainbow flag; ZWJ and ZWNJ shape
    words in Persian and Indic scripts. Between ASCII letters they only hide
    a word from a scanner.
    """
    if index == 0 or index == len(text) - 1:
        return False
    before, after = text[index - 1], text[index + 1]
    if text[index] == _ZWJ and _is_emoji_part(before) and _is_emoji_part(after):
        return True
    return _is_script_letter(before) and _is_script_letter(after)


def _is_emoji_part(char: str) -> bool:
    code = ord(char)
    return (
        0x1F000 <= code <= 0x1FAFF
        or 0x2190 <= code <= 0x2BFF
        or code in (0xFE0F, 0x00A9, 0x00AE, 0x203C, 0x2049, 0x2122, 0x2139)
    )


def _is_script_letter(char: str) -> bool:
    return ord(char) > 0x7F and unicodedata.category(char)[0] in ("L", "M")


# --- patterns ----------------------------------------------------------------


def _fold(text: str) -> str:
    """Return case-folded text with joiners removed and whitespace collapsed."""
    text = text.replace(_ZWJ, "").replace(_ZWNJ, "")
    return " ".join(text.casefold().split())


def _words(*alternatives: str) -> str:
    return "(?:" + "|".join(alternatives) + ")"


_INSTRUCTIONS = _words(
    r"instructions?", r"prompts?", r"rules", r"directions", r"guidelines", r"guardrails",
    r"constraints", r"directives", r"programming", r"policies", r"orders",
)

_PHRASES: tuple[tuple[str, re.Pattern[str]], ...] = tuple(
    (category, re.compile(pattern))
    for category, pattern in (
        # --- instructions aimed at the assistant --------------------------
        (PROMPT_INJECTION,
         r"\b" + _words("ignore", "disregard", "forget", "override", "bypass", "overrule", "skip")
         + r"(?:\s+(?:all|any|of|the|my|these|those|every)){0,3}\s+"
         + _words("previous", "prior", "above", "earlier", "preceding", "your", "system", "developer",
                  "safety", "original", "initial", "former", "old", "existing")
         + r"(?:\s+\S+){0,2}?\s+" + _INSTRUCTIONS + r"\b"),
        (PROMPT_INJECTION,
         r"\b(?:ignore|disregard|forget) (?:everything|anything|all) (?:above|before|previously|"
         r"you were told|you have been told|said before|prior)\b"),
        (PROMPT_INJECTION, r"\bsystem prompt\s*(?:override|overwrite|replacement|injection)\b"),
        (PROMPT_INJECTION, r"\b(?:new|updated|real|true|hidden|secret) system prompt\b"),
        (PROMPT_INJECTION,
         r"\b(?:override|replace|overwrite|change|rewrite) (?:the |your )?system (?:prompt|message|instructions)\b"),
        (PROMPT_INJECTION,
         r"\b(?:reveal|print|show|repeat|output|leak|dump) (?:\S+ ){0,2}?"
         r"(?:system prompt|system message|hidden instructions|initial instructions)\b"),
        (PROMPT_INJECTION,
         r"\b(?:do not|don'?t|never|without) (?:ever )?(?:tell|telling|inform|informing|notify|notifying"
         r"|let|letting|mention|mentioning|reveal|revealing|show|showing|warn|warning|alert|alerting)"
         r" (?:it to |this to |that to |anything to )?the (?:user|person|human|owner)\b"),
        (PROMPT_INJECTION,
         r"\b(?:hide|conceal|keep) (?:this|it|these|that) (?:secret )?from the (?:user|person|human|owner)\b"),
        (PROMPT_INJECTION,
         r"\bact as (?:if|though) you (?:have no|had no|are not bound by|were not bound by|don'?t have) "
         r"(?:\S+ ){0,2}?(?:restrictions|limits|rules|guidelines|filters)\b"),
        (PROMPT_INJECTION, r"\b(?:jailbreak|jailbroken|do anything now)\b"),
        # --- speaking as someone else -------------------------------------
        (ROLE_HIJACK,
         r"\byou are now (?:a|an|the|my|no longer|acting|operating|called|named|known as|dan|"
         r"jailbroken|unrestricted|unfiltered|free)\b"),
        (ROLE_HIJACK, r"\byou are now in (?:developer|god|admin|debug|dan|jailbreak|unrestricted) mode\b"),
        (ROLE_HIJACK,
         r"\bfrom now on,? you (?:are|will|must|shall|act|respond|answer|behave|obey|only)\b"),
        (ROLE_HIJACK, r"\b(?:enter|switch to|enable|activate) (?:developer|god|dan|jailbreak|unrestricted) mode\b"),
        (ROLE_HIJACK,
         r"<\|?(?:im_start|im_end|system|assistant|endoftext|start_header_id|end_header_id|eot_id)\|?>"
         r"|\[/?inst\]|<</?sys>>"),
        # --- getting data out ---------------------------------------------
        (EXFILTRATION,
         r"\b(?:curl|wget|invoke-webrequest|iwr|httpie|nc|ncat|netcat)\b[^\n]{0,200}?"
         r"(?:\$\{?\w*(?:key|token|secret|passw(?:or)?d|credential|api)|"
         r"\.env\b|credentials|id_rsa|id_ed25519|\.netrc|\.pgpass|\.aws/)"),
        (EXFILTRATION,
         r"\b(?:cat|type|less|more|head|tail|base64|xxd|scp|rsync|printenv)\b[^\n]{0,80}?"
         r"(?:id_rsa|id_ed25519|id_ecdsa|\.pem\b|/\.env\b|~/\.env\b|\.netrc|\.pgpass|\.aws/credentials"
         r"|\.npmrc|\.pypirc|\.git-credentials|/etc/shadow)"),
        (EXFILTRATION,
         r"\b(?:send|post|upload|forward|transmit|exfiltrate|leak|share|email|e-mail|copy|beacon)\b"
         r"[^\n]{0,80}?\b(?:conversations?|chats?|chat history|messages|transcripts?|memory|memories"
         r"|system prompt|instructions|passwords?|secrets?|credentials?|tokens?|api keys?|cookies"
         r"|session|every (?:message|reply|response|answer))\b[^\n]{0,80}?\b(?:to|into|via|at)\b"
         r"[^\n]{0,20}?(?:https?://|ftp://|webhook|[\w.+-]+@[\w-]+\.)"),
        (EXFILTRATION,
         r"\b(?:include|append|embed|attach|add|put|encode|insert)\b (?:\S+ ){0,2}?"
         r"(?:conversation|chat history|chat log|full chat|message history|transcript|system prompt"
         r"|previous messages|user'?s messages|memory contents?) (?:\S+ ){0,2}?"
         r"(?:in|into|to|inside) (?:\S+ ){0,2}?(?:reply|replies|response|responses|answer|answers|urls?"
         r"|links?|requests?|images?|markdown|query string)\b"),
        (EXFILTRATION,
         r"\binclude (?:the|this|our|all) (?:whole |full |entire )?(?:conversation|chat history)\b"
         r"(?! ?(?:ids?|titles?|numbers?|names?|links?|dates?)\b)"),
        (EXFILTRATION, r"!\[[^\]\n]*\]\(\s*https?://[^)\s]*(?:\{|\$|%7b|<)"),
        # --- surviving beyond the conversation ------------------------------
        (PERSISTENCE, r"\bauthorized_keys2?\b"),
        (PERSISTENCE,
         r"\b(?:add|append|write|echo|insert|put|copy|cp|install|modify|edit|update|overwrite|tee|"
         r"change|create)\b[^\n]{0,80}?(?:~/\.ssh/|\$home/\.ssh/|/\.ssh/|\.bashrc|\.zshrc|\.bash_profile"
         r"|\.profile\b|\.zprofile|\.config/autostart|launchagents|launchdaemons|crontab|/etc/cron"
         r"|systemd/system|agents\.md|claude\.md|\.cursorrules|copilot-instructions\.md|soul\.md"
         r"|user\.md|memory\.md|\.hermes/)"),
        (PERSISTENCE, r"\bcrontab -[el]?\s*(?:\S+ ){0,3}?@reboot\b|@reboot\b[^\n]{0,80}?(?:curl|wget|nc|bash|sh)\b"),
        (PERSISTENCE,
         r"\b(?:never|do not|don'?t) (?:remove|delete|erase|forget|drop|replace) (?:this|these|the "
         r"following|that) (?:entry|entries|memory|memories|note|notes|instruction|instructions|fact|rule)\b"),
        (PERSISTENCE,
         r"\b(?:re-?add|restore|recreate|re-?save|re-?insert|re-?create|put back|save again)\b[^\n]{0,60}?"
         r"\b(?:if|when|whenever|after|once)\b[^\n]{0,40}?\b(?:removed|deleted|erased|forgotten|missing|cleared)\b"),
    )
)

# Shapes of well-known credentials, matched case-sensitively on NFKC text.
_SECRET_SHAPES: tuple[tuple[str, re.Pattern[str]], ...] = tuple(
    (SECRET, re.compile(pattern))
    for pattern in (
        r"-----BEGIN (?:[A-Z0-9]+ )*PRIVATE KEY(?: BLOCK)?-----",
        r"\bsk-[A-Za-z0-9_-]*[A-Za-z0-9]{20}",  # OpenAI, Anthropic (sk-ant-...)
        r"\b(?:AKIA|ASIA|ABIA|ACCA|AGPA|AIDA|AROA|ANPA|ANVA|APKA)[A-Z0-9]{16}\b",  # AWS key ids
        r"\b(?:ghp|gho|ghu|ghs|ghr)_[A-Za-z0-9]{30,}",  # GitHub tokens
        r"\bgithub_pat_[A-Za-z0-9_]{22,}",
        r"\bglpat-[A-Za-z0-9_-]{20,}",  # GitLab
        r"\bxox[abposr]-[A-Za-z0-9-]{10,}",  # Slack
        r"\bAIza[0-9A-Za-z_-]{35}",  # Google API keys
        r"\b[rsp]k_(?:live|test)_[A-Za-z0-9]{16,}",  # Stripe
        r"\bhf_[A-Za-z0-9]{30,}",  # Hugging Face
        r"\bnpm_[A-Za-z0-9]{36}\b",
        r"\beyJ[A-Za-z0-9_-]{8,}\.eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}",  # JWT
        r"\b[a-z][a-z0-9+.-]{1,20}://[^\s/:@]+:[^\s/@]{3,}@",  # credentials in a URL
        r"(?i)\bauthorization\s*:\s*(?:bearer|basic|token)\s+[A-Za-z0-9._~+/=-]{12,}",
        r"(?i)\bbearer\s+[A-Za-z0-9._~+/-]{20,}=*",
    )
)

# `api_key = ...`, `password: ...`, `"token": "..."` with a value that looks real.
_ASSIGNMENT = re.compile(
    r"[\"']?\b(?P<name>(?:[a-z0-9]+[_-])*(?:api[_-]?key|apikey|access[_-]?key|secret[_-]?key|secret"
    r"|client[_-]?secret|auth[_-]?token|access[_-]?token|refresh[_-]?token|bot[_-]?token|token"
    r"|password|passwd|passphrase|private[_-]?key))[\"']?\s*(?::=|=|:)\s*"
    r"[\"']?(?P<value>[^\s\"',;]{6,})"
)
_PLACEHOLDER = re.compile(
    r"^(?:<.*>|\{.*\}|\$.*|%.*%|\*+|x{3,}.*|\.{3,}|(?:your|my|the)[_-].*|none|null|nil|true|false"
    r"|required|optional|redacted|changeme|change-me|example.*|placeholder.*|os\.environ.*|os\.getenv.*"
    r"|env\(.*|getenv.*|process\.env.*|settings\..*|config\..*|secrets\..*|vault.*|\[.*\]?)$"
)


def _has_secret_assignment(folded: str) -> bool:
    for match in _ASSIGNMENT.finditer(folded):
        value = match.group("value")
        if _PLACEHOLDER.match(value):
            continue
        has_digit = any(c.isdigit() for c in value)
        has_alpha = any(c.isalpha() for c in value)
        has_symbol = any(not c.isalnum() for c in value)
        if len(value) >= 16 or (len(value) >= 8 and has_alpha and (has_digit or has_symbol)):
            return True
    return False
