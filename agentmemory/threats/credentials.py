"""Credentials: well-known key shapes, labelled and unlabelled secrets, card numbers, seed phrases.

Matched on NFKC text, not folded (case matters in a key). Unlabelled values
are scored (shape, entropy, wordiness) rather than matched by prefix.
"""
from __future__ import annotations

import math
import re
from collections import Counter

# Shapes of well-known credentials, matched case-sensitively on NFKC text.
_SECRET_SHAPES: tuple[re.Pattern[str], ...] = tuple(
    re.compile(pattern)
    for pattern in (
        r"-----BEGIN (?:[A-Z0-9]+ )*PRIVATE KEY(?: BLOCK)?-----",
        r"\bsk-[A-Za-z0-9_-]{0,100}?[A-Za-z0-9]{20}",  # OpenAI, Anthropic (sk-ant-...)
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
    r"[\"']?\b(?P<name>(?:[a-z0-9]{1,30}[_-]){0,6}(?:api[_-]?key|apikey|access[_-]?key|secret[_-]?key|secret"
    r"|client[_-]?secret|auth[_-]?token|access[_-]?token|refresh[_-]?token|bot[_-]?token|token"
    r"|password|passwd|passphrase|private[_-]?key))[\"']?\s*(?::=|=|:)\s*"
    r"[\"']?(?P<value>[^\s\"',;]{6,})",
    re.IGNORECASE,
)
_PLACEHOLDER = re.compile(
    r"^(?:<.*>|\{.*\}|\$.*|%.*%|\*+|x{3,}.*|\.{3,}|(?:your|my|the)[_-].*|none|null|nil|true|false"
    r"|required|optional|redacted|changeme|change-me|example.*|placeholder.*|os\.environ.*|os\.getenv.*"
    r"|env\(.*|getenv.*|process\.env.*|settings\..*|config\..*|secrets\..*|vault.*|\[.*\]?)$"
)
# A value that names another variable (`ENV_PASSWORD = "MYPLUGIN_APP_PASSWORD"`)
# points at where the secret lives; it is not the secret.
_VARIABLE_NAME = re.compile(r"^[A-Z][A-Z0-9]*(?:_[A-Z0-9]+)+$")


def _has_secret_assignment(text: str) -> bool:
    for match in _ASSIGNMENT.finditer(text):
        value = match.group("value")
        if (
            _PLACEHOLDER.match(value.lower())
            or _VARIABLE_NAME.match(value.strip("\"'`."))
            or _EXPRESSION.match(value)
        ):
            continue
        has_digit = any(c.isdigit() for c in value)
        has_alpha = any(c.isalpha() for c in value)
        has_symbol = any(not c.isalnum() for c in value)
        if len(value) >= 16 or (len(value) >= 8 and has_alpha and (has_digit or has_symbol)):
            return True
    return False


# Credentials in prose: "my password is ...", "the PIN is 4821", "use token ...",
# in the languages people write their notes in.
_PASSWORD_LABELS = (
    r"pass(?:word|phrase|code|wort)s?|passwd|pwd|kennwort|mot de passe|contraseña|contrasena|clave|senha"
    r"|wachtwoord|hasło|haslo|parola|пароль|κωδικός|şifre|sifre|mật khẩu|kata sandi|wi-?fi key|wpa key"
)
_PIN_LABELS = (
    r"pin(?: code| number)?|cvv2?|cvc|security code|(?:door|gate|alarm|safe|garage|lock|locker|entry|access"
    r"|unlock) code"
)
_TOKEN_LABELS = (
    r"(?:aws|gcp|azure|openai|anthropic|github|gitlab|stripe|slack|twilio|sendgrid|heroku)[ _-]?(?:secret[ _-]?)?"
    r"(?:access[ _-]?)?key|secret access key|(?:api|access|secret|private|license|licence|encryption|signing|master|deploy)[ _-]?key|secret"
    r"|(?:access|auth|bearer|refresh|session|api|personal access|bot) token|token|otp|one[- ]time (?:code|password)"
    r"|(?:2fa|mfa|totp|otp) (?:code|secret|seed|key)|recovery (?:code|key)s?|backup codes?|credentials?"
)
_CJK_PASSWORD_LABELS = r"パスワード|暗証番号|密码|密碼|口令|비밀번호|암호|كلمة المرور|كلمة السر|סיסמה|סיסמא|पासवर्ड|รหัสผ่าน"
_PROSE_SECRET = re.compile(
    r"(?:(?<![\w-])(?:(?P<password>" + _PASSWORD_LABELS + r")|(?P<pin>" + _PIN_LABELS + r")|(?P<token>"
    + _TOKEN_LABELS + r"))(?![\w-])|(?P<cjk>" + _CJK_PASSWORD_LABELS + r"))"
    r"(?P<qualifier>\s+(?:for|of|to|on|at)\s+(?:the |my |our |his |her |their |this |that )?[^\s:=]{1,30})?"
    r"(?P<connector>\s*(?:is|was|will be|are|equals|is set to|set to|ist|lautet|est|es|é|è|är|er|jest|это|هي"
    r"|הוא|है|=|:|：|->|=>|是|为|為|は|が|은|는|이|가)(?![\w])|\s*[:=：]|\s+[-–—](?=\s))?\s*"
    r"[\"'`“‘«]?(?P<value>[^\s\"'`”’»,;]{3,80})",
    re.IGNORECASE,
)
# Words that follow "password is" in descriptions rather than in disclosures.
_DESCRIPTIVE = frozenset(
    "stored kept saved managed handled hidden masked encrypted hashed salted redacted rotated changed reset "
    "expired required optional needed necessary missing empty blank unset set wrong right correct incorrect "
    "invalid valid weak strong secure insecure long short simple complex random unique shared private personal "
    "secret known unknown forgotten lost compromised leaked generated provided available configured enabled "
    "disabled locked unlocked same different default temporary permanent case-sensitive sent emailed texted "
    "synced there here elsewhere inside outside somewhere nowhere written noted listed printed below above "
    "attached included pinned ready fine good bad ok okay better worse easy hard obvious new old".split()
)
_PATH_OR_NAME = re.compile(
    r"[/\\]|://|^[\w-]+\.(?:py|js|ts|md|txt|json|ya?ml|toml|cfg|ini|env|html|css|rb|go|rs|java|sh|kdbx|gpg)$",
    re.IGNORECASE,
)
_PIN_VALUE = re.compile(r"^\d{3,8}#?$")
_VERSION = re.compile(r"^(?:v\d+(?:\.\d+)*|\d+(?:\.\d+)+[a-z]?)$", re.IGNORECASE)
_CODE_GROUPS = re.compile(r"^[A-Za-z0-9]{4,}(?:-[A-Za-z0-9]{4,})+$")
# A value that is code rather than data: a call or a dotted attribute path.
_EXPRESSION = re.compile(r"^[A-Za-z_][\w.]*\(|^[a-z_]\w*(?:\.[a-z_]\w*)+$")
_TRAILING = "\"'`.,;:!?)]}»”’"
_TERMINAL_AFTER = re.compile(r"^[\"'”’`]?(?:$|[.!?,;)]| and\b| but\b| -)")


# A labelled value of 16+ base64 characters with slashes and no dot: a key, not a path or a URL.
_KEY_WITH_SLASHES = re.compile(r"^(?=[^/]*/)(?=.*[a-z])(?=.*[A-Z])(?=.*\d)[A-Za-z0-9+/]{16,}={0,2}$")
# The label after the value: "hunter2-x7 is the staging admin password".
_PROSE_SECRET_AFTER = re.compile(
    r"(?<![^\s\"'`(])[\"'`]?(?P<value>[^\s\"'`,;]{6,80}?)[\"'`]? (?:is|was) (?:the |my |our |his |her |their |a )?"
    r"(?:(?!(?:behind|for|of|to|in|on|at|with|by|from|under|like|than)\b)[\w-]+ ){0,3}?(?:" + _PASSWORD_LABELS + r"|(?:api|access|secret|private) key|(?:access|auth|api) token)\b",
    re.IGNORECASE,
)


def _has_prose_secret(text: str) -> bool:
    for match in _PROSE_SECRET_AFTER.finditer(text):
        value = match.group("value").rstrip(_TRAILING)
        if not _PATH_OR_NAME.search(value) and not _VARIABLE_NAME.match(value) and _looks_like_credential(value):
            return True
    for match in _PROSE_SECRET.finditer(text):
        raw = match.group("value")
        value = raw.rstrip(_TRAILING)
        if _KEY_WITH_SLASHES.match(value) and match.group("pin") is None:
            return True  # a key in base64 with slashes (an AWS secret access key), not a path
        if "/" in value and value.count("/") == 1 and value[0] not in "/~.":
            value = value.split("/")[1]  # "admin/hunter2": the part after the user name
        if (
            len(value) < 3
            or _PLACEHOLDER.match(value.lower())
            or _PATH_OR_NAME.search(value)
            or _VARIABLE_NAME.match(value)
            or _EXPRESSION.match(value)
            or (match.group("qualifier") and not match.group("connector"))
        ):
            continue
        if match.group("pin") is not None:
            if _PIN_VALUE.match(value):
                return True
            continue
        if _VERSION.match(value):
            continue
        if _looks_like_credential(value):
            return True
        if match.group("password") is None and match.group("cjk") is None:
            if _CODE_GROUPS.match(value) and any(c.isdigit() for c in value):
                return True  # recovery and backup codes
            continue
        if value.isdigit() and len(value) >= 4:
            return True
        # "My password is swordfish." — a single word that ends the clause.
        terminal = raw != value or _TERMINAL_AFTER.match(text[match.end("value"):match.end("value") + 6])
        if (
            terminal
            and match.group("connector")
            and len(value) >= 4
            and value.replace("-", "").replace("_", "").isalpha()
            and value.lower() not in _DESCRIPTIVE
        ):
            return True
    return False


def _looks_like_credential(value: str) -> bool:
    has_lower = any(c.islower() for c in value)
    has_upper = any(c.isupper() for c in value)
    has_digit = any(c.isdigit() for c in value)
    has_symbol = any(not c.isalnum() for c in value)
    if has_digit and (has_lower or has_upper) and len(value) >= 6:
        return True
    return len(value) >= 8 and has_lower + has_upper + has_digit + has_symbol >= 3


# Card numbers: 15 or 16 digits that pass the Luhn check.
_CARD = re.compile(r"(?<![\w-])(?<!\d[ -])[3-6]\d{3}(?:[ -]?\d{4}){2}[ -]?\d{3,4}(?![ -]?\d)")
# Wallet recovery phrases: a label and twelve or more short words.
_SEED_PHRASE = re.compile(
    r"(?i)\b(?:seed|recovery|mnemonic|secret|backup|wallet)[ -](?:phrase|words?)\b(?:\s*(?:is|are|=|:|-)){0,2}\s*"
    r"[\"']?(?:[a-z]{3,8}[ ,]+){11,23}[a-z]{3,8}\b"
)


def _has_card_number(text: str) -> bool:
    for match in _CARD.finditer(text):
        digits = [int(c) for c in match.group() if c.isdigit()]
        if len(digits) not in (15, 16):
            continue
        total = 0
        for index, digit in enumerate(reversed(digits)):
            if index % 2:
                digit *= 2
                if digit > 9:
                    digit -= 9
            total += digit
        if total % 10 == 0:
            return True
    return False


# Unlabelled credentials are scored, not matched by prefix:
# - password-shaped: 8-64 characters mixing lower case, upper case, digits and
#   a symbol inside the word ("Secure99!Hunter2");
# - random tokens: a run of 16 or more base64/base62 characters with all three
#   letter-and-digit classes, high Shannon entropy and few dictionary-like
#   word runs (so identifiers such as `TokenAuthentication2` stay storable).
_TOKEN = re.compile(r"\S{8,}")
_WRAPPERS = "\"'`([{<«“‘)]}>»”’.,;:!?*"
_PASSWORD_SYMBOLS = frozenset("!#$%&*+=?@^~")
_KEY_COMBO = re.compile(r"^(?:[A-Z][a-z]*|F\d{1,2}|\d|[a-z])(?:[+-](?:[A-Z][a-z]*|F\d{1,2}|\d|[a-z]))+$")
_QUERY = re.compile(r"[?&]\w+=")
_USER_AT_HOST = re.compile(r"^[a-z_][a-z0-9_.-]{1,31}@[A-Za-z0-9.-]+$")
_IDENTIFIER_ASSIGNMENT = re.compile(r"^[A-Za-z_][\w.-]*=(.*)$")
_RANDOM_RUN = re.compile(r"[A-Za-z0-9+/=_-]{16,}")
_WORDISH = re.compile(r"[A-Z][a-z]{2,}|[a-z]{3,}|[A-Z]{3,}(?![a-z])")
# `Bob-Marigold-8812`, `SENTINEL-9d41-basalt`: segments that are each a word or
# a number were made by a person, not drawn at random.
_MADE_SEGMENT = re.compile(r"^(?:[A-Z]?[a-z]+|[A-Z]+|\d+|[0-9a-f]{1,8})$")
_HEX = re.compile(r"^[0-9a-fA-F_-]+$")
# Calibrated on random base62 tokens (caught: ~60 % at 16 characters, ~80 %
# at 20, ~90 % at 24, ~97 % at 32) against identifiers and word-built values
# such as `zq8Gecko9914Teal` (wordiness 0.56 and more), which must pass.
# Shorter tokens are caught when a label ("token", "key", "password") names them.
LONG_TOKEN = 24
SHORT_TOKEN_ENTROPY = 3.6  # bits per character
SHORT_TOKEN_WORDINESS = 0.5  # share of the token inside word-like runs
LONG_TOKEN_ENTROPY = 3.9
LONG_TOKEN_WORDINESS = 0.65


def _has_unlabelled_secret(text: str) -> bool:
    for match in _TOKEN.finditer(text):
        token = match.group().strip(_WRAPPERS)
        if len(token) < 8 or "://" in token or token[0] in "$%~/\\-@#":
            continue
        if _password_shaped(token):
            return True
        for run in _RANDOM_RUN.findall(token):
            if _random_shaped(run):
                return True
    return False


def _password_shaped(token: str) -> bool:
    assigned = _IDENTIFIER_ASSIGNMENT.match(token)
    if assigned:
        token = assigned.group(1).strip(_WRAPPERS)
    if not 8 <= len(token) <= 64 or "/" in token or "\\" in token or "(" in token or "::" in token:
        return False
    if not any(c in _PASSWORD_SYMBOLS for c in token[1:-1]):
        return False
    if not (any(c.islower() for c in token) and any(c.isupper() for c in token) and any(c.isdigit() for c in token)):
        return False
    if _KEY_COMBO.match(token) or _QUERY.search(token) or _USER_AT_HOST.match(token):
        return False
    if "@" in token and "." in token.split("@", 1)[1]:
        return False  # an e-mail address
    return True


def _random_shaped(run: str) -> bool:
    run = run.strip("=_-")
    if len(run) < 16 or _HEX.match(run):
        return False
    segments = re.split(r"[-_]", run)
    if len(segments) > 1 and all(_MADE_SEGMENT.match(segment) for segment in segments if segment):
        return False
    if not (any(c.islower() for c in run) and any(c.isupper() for c in run)):
        return False
    if sum(c.isdigit() for c in run) < 2:
        return False
    wordiness = sum(len(word) for word in _WORDISH.findall(run)) / len(run)
    if len(run) < LONG_TOKEN:
        return wordiness <= SHORT_TOKEN_WORDINESS and _entropy(run) >= SHORT_TOKEN_ENTROPY
    return wordiness <= LONG_TOKEN_WORDINESS and _entropy(run) >= LONG_TOKEN_ENTROPY


def _entropy(text: str) -> float:
    counts = Counter(text)
    total = len(text)
    return -sum(n / total * math.log2(n / total) for n in counts.values())


def _has_secret(compatible: str) -> bool:
    return (
        _has_secret_assignment(compatible)
        or _has_prose_secret(compatible)
        or bool(_SEED_PHRASE.search(compatible))
        or _has_card_number(compatible)
        or _has_unlabelled_secret(compatible)
    )
