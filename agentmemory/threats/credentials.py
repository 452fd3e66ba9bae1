"""Credentials: well-known key shapes, labelled and unlabelled secrets, card numbers, seed phrases.

Matched on NFKC text, not folded (case matters in a key). Each family is a
generator of (offset, value) pairs, so one set of patterns serves two
callers: the scan (`has_secret`: does any family yield?) and
`secret_values` (what does each yield?), which the turn's gate uses to keep
a value a person presented as a secret out of every entry of that turn.

Unlabelled values are scored rather than matched by a prefix: a
password-shaped token by its mix of character classes (here), a random key
or token by its randomness, with Yelp's detect-secrets entropy plugins
(`entropy.py` says which and why: a maintained detector instead of more
hand-written patterns).
"""
from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterator

from .entropy import random_runs
from .folding import rendered_text
from .identifiers import has_identifier, identifier_values
from .labelled import has_labelled, labelled_values

# Shapes of well-known credentials, matched case-sensitively on NFKC text.
# Where only part of a match is the secret (a URL's password, a header's
# value), that part is the `value` group; otherwise the whole match is.
SECRET_SHAPES: tuple[re.Pattern[str], ...] = tuple(
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
        r"\b[a-z][a-z0-9+.-]{1,20}://[^\s/:@]*:(?P<value>[^\s/@]{3,})@",  # credentials in a URL
        r"(?i)\bauthorization\s*:\s*(?:bearer|basic|token)\s+(?P<value>[A-Za-z0-9._~+/=-]{12,})",
        r"(?i)\bbearer\s+(?P<value>[A-Za-z0-9._~+/-]{20,}=*)",
    )
)
_PRIVATE_KEY_BLOCK = SECRET_SHAPES[0]
# The body of a private key block: its base64 lines, up to the END line.
_KEY_BODY_LINE = re.compile(r"^[ \t]*([A-Za-z0-9+/=]{4,})[ \t]*$", re.MULTILINE)
_KEY_BLOCK_END = re.compile(r"-----END [A-Z0-9 ]*-----")
_KEY_TAIL = re.compile(r"[A-Za-z0-9_-]*")


def _shape_values(text: str) -> Iterator[tuple[int, str]]:
    for pattern in SECRET_SHAPES:
        for match in pattern.finditer(text):
            if pattern is _PRIVATE_KEY_BLOCK:
                yield match.start(), match.group()
                end = _KEY_BLOCK_END.search(text, match.end())
                for line in _KEY_BODY_LINE.finditer(text, match.end(), end.start() if end else len(text)):
                    yield line.start(1), line.group(1)
            elif "value" in pattern.groupindex:
                yield match.start("value"), match.group("value")
            else:  # the whole key, where a pattern stops at its shortest match (`sk-...`)
                yield match.start(), match.group() + _KEY_TAIL.match(text, match.end()).group()  # type: ignore[union-attr]  # `*`: always matches


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
# A pasted configuration line (.env, INI, YAML, JSON): the name starts the
# line, or follows `export`, a YAML dash, or a `{` or `,` of an inline object.
_CONFIG_PREFIX = re.compile(r"[ \t]*(?:export[ \t]+|set[ \t]+|-[ \t]+)?")
_INLINE_OBJECT = re.compile(r"[{,][ \t]*$")
_LOOK_BACK = 200  # characters: how far back a line's start or a quote's end is looked for
# Type names and words that describe a field rather than fill it.
_FIELD_WORDS = frozenset(
    "string str text bytes integer int number boolean bool secret secrets password passwords token tokens key "
    "keys value values any object sample dummy".split()
)
_MAX_QUOTED_WORDS = 6  # a passphrase; more words are a description


def _is_reference(value: str) -> bool:
    """A placeholder, another variable's name or a code expression: where a secret lives, not the secret."""
    return bool(
        _PLACEHOLDER.match(value.lower()) or _VARIABLE_NAME.match(value.strip("\"'`.")) or _EXPRESSION.match(value)
    )


def _assignment_values(text: str, *, configuration: bool = False) -> Iterator[tuple[int, str]]:
    """Assigned values that look real; with `configuration`, also any plain value on a pasted config line."""
    for match in _ASSIGNMENT.finditer(text):
        value, start = match.group("value"), match.start("value")
        if _is_reference(value):
            continue
        if configuration and "\n" in text[match.end("name"):start]:
            continue  # `API_KEY=` left empty: the next line is another setting, not its value
        has_digit = any(c.isdigit() for c in value)
        has_alpha = any(c.isalpha() for c in value)
        has_symbol = any(not c.isalnum() for c in value)
        if len(value) >= 16 or (len(value) >= 8 and has_alpha and (has_digit or has_symbol)):
            yield start, value
        elif configuration and _on_config_line(text, match.start()):
            quoted = _quoted(text, start)
            value = quoted or value
            name = match.group("name").lower()
            plain = value.rstrip(_TRAILING).lower()
            if (
                plain not in _FIELD_WORDS
                and plain not in _DESCRIPTIVE
                and name not in plain
                and plain not in name  # `POSTGRES_PASSWORD: postgres`, a default
                and not plain.startswith("!")  # a YAML tag (`!vault`, `!ENV`)
                and not _is_reference(value)
                and not any(c in value for c in "([{<>}])")
            ):
                yield start, value


def _on_config_line(text: str, start: int) -> bool:
    begin = max(0, start - _LOOK_BACK)
    newline = max(text.rfind("\n", begin, start), text.rfind("\r", begin, start))
    if _INLINE_OBJECT.search(text, begin, start):
        return True
    if newline < 0 and begin > 0:
        return False  # a long line: not a configuration line's start
    return _CONFIG_PREFIX.fullmatch(text, newline + 1, start) is not None


def _quoted(text: str, start: int) -> str | None:
    """The whole quoted value that starts at `start` (it may hold spaces), or None."""
    quote = text[start - 1:start]
    if quote not in ("'", '"'):
        return None
    close = text.find(quote, start, start + _LOOK_BACK)
    line_end = text.find("\n", start, start + _LOOK_BACK)
    if close < 0 or (0 <= line_end < close):
        return None
    value = text[start:close]
    return value if len(value.split()) <= _MAX_QUOTED_WORDS else None


def _has_secret_assignment(text: str) -> bool:
    return next(_assignment_values(text), None) is not None


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
    r"(?:access[ _-]?)?key|secret access key|(?:api|access|secret|private|license|licence|encryption|signing|master|deploy)[ _-]?key|secret"  # noqa: E501 (one regex alternation)
    r"|(?:access|auth|bearer|refresh|session|api|personal access|bot) token|token|otp|one[- ]time (?:code|password)"
    r"|(?:2fa|mfa|totp|otp) (?:code|secret|seed|key)|recovery (?:code|key)s?|backup codes?|credentials?|key"
)
_CJK_PASSWORD_LABELS = r"パスワード|暗証番号|密码|密碼|口令|비밀번호|암호|كلمة المرور|كلمة السر|סיסמה|סיסמא|पासवर्ड|รหัสผ่าน"  # noqa: E501 (one regex alternation)
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
# A value that is code rather than data: a call, a dotted attribute path, or a
# subscript cut at its quote (`form.cleaned_data["password"]`).
_EXPRESSION = re.compile(r"^[A-Za-z_][\w.]*\(|^[a-z_]\w*(?:\.[a-z_]\w*)+$|^[A-Za-z_][\w.]*\[$")
_NEXT_SETTING = re.compile(r"^[A-Za-z_][\w.-]*[=:]")
_TRAILING = "\"'`.,;:!?)]}»”’"
_TERMINAL_AFTER = re.compile(r"^[\"'”’`]?(?:$|[.!?,;)]| and\b| but\b| -)")
# The codes after the first in a list ("recovery codes: 4821-9932, 1184-2290").
_MORE_CODES = re.compile(r"[ \t]*[,;/][ \t]*(?:and[ \t]+)?([A-Za-z0-9]{4,}(?:-[A-Za-z0-9]{4,})+)")


# The key type in front of an SSH public key's base64 blob (which starts with "AAAA").
_SSH_KEY_TYPE = re.compile(r"(?:ssh-(?:rsa|dss|ed25519)|ecdsa-sha2-nistp\d+|sk-[\w-]+@openssh\.com)")
_SSH_KEY_BEFORE = re.compile(_SSH_KEY_TYPE.pattern + r"[ \t]+$")
# A labelled value of 16+ base64 characters with slashes and no dot: a key, not a path or a URL.
_KEY_WITH_SLASHES = re.compile(r"^(?=[^/]*/)(?=.*[a-z])(?=.*[A-Z])(?=.*\d)[A-Za-z0-9+/]{16,}={0,2}$")
# The label after the value: "hunter2-x7 is the staging admin password".
_PROSE_SECRET_AFTER = re.compile(
    r"(?<![^\s\"'`(])[\"'`]?(?P<value>[^\s\"'`,;]{6,80}?)[\"'`]? (?:is|was) (?:the |my |our |his |her |their |a )?"
    r"(?:(?!(?:behind|for|of|to|in|on|at|with|by|from|under|like|than)\b)[\w-]+ ){0,3}?(?:" + _PASSWORD_LABELS + r"|(?:api|access|secret|private) key|(?:access|auth|api) token)\b",  # noqa: E501 (one regex alternation)
    re.IGNORECASE,
)


def _prose_values(text: str) -> Iterator[tuple[int, str]]:
    for match in _PROSE_SECRET_AFTER.finditer(text):
        value = match.group("value").rstrip(_TRAILING)
        if not _PATH_OR_NAME.search(value) and not _VARIABLE_NAME.match(value) and _looks_like_credential(value):
            yield match.start("value"), value
    for match in _PROSE_SECRET.finditer(text):
        start = match.start("value")
        raw = match.group("value")
        value = raw.rstrip(_TRAILING)
        if _KEY_WITH_SLASHES.match(value) and match.group("pin") is None:
            yield start, value  # a key in base64 with slashes (an AWS secret access key), not a path
            continue
        if "/" in value and value.count("/") == 1 and value[0] not in "/~.":
            start += value.index("/") + 1
            value = value.split("/")[1]  # "admin/hunter2": the part after the user name
        if "\n" in text[match.start():start] and _NEXT_SETTING.match(value):
            continue  # `API_KEY=` left empty, and the next line's setting
        if (
            len(value) < 3
            or _PLACEHOLDER.match(value.lower())
            or _PATH_OR_NAME.search(value)
            or _VARIABLE_NAME.match(value)
            or _EXPRESSION.match(value)
            or _SSH_KEY_TYPE.fullmatch(value)  # "deploy key: ssh-ed25519 AAAA…", a public key
            or (match.group("qualifier") and not match.group("connector"))
        ):
            continue
        if match.group("pin") is not None:
            if _PIN_VALUE.match(value):
                yield start, value.rstrip("#")
            continue
        if _VERSION.match(value):
            continue
        if _looks_like_credential(value):
            yield start, value
            continue
        if match.group("password") is None and match.group("cjk") is None:
            if _CODE_GROUPS.match(value) and any(c.isdigit() for c in value):
                yield start, value  # recovery and backup codes
                position = match.end("value") - (len(raw) - len(value))
                while (more := _MORE_CODES.match(text, position)) is not None:
                    yield more.start(1), more.group(1)
                    position = more.end()
            continue
        if value.isdigit() and len(value) >= 4:
            yield start, value
            continue
        # "My password is swordfish." — a single word that ends the clause.
        terminal = raw != value or _TERMINAL_AFTER.match(text[match.end("value"):match.end("value") + 6])
        if (
            terminal
            and match.group("connector")
            and len(value) >= 4
            and value.replace("-", "").replace("_", "").isalpha()
            and value.lower() not in _DESCRIPTIVE
            and value.lower() not in _FIELD_WORDS  # "password: string" documents a field
        ):
            yield start, value


def _has_prose_secret(text: str) -> bool:
    return next(_prose_values(text), None) is not None


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
    r"[\"']?(?P<words>(?:[a-z]{3,8}[ ,]+){11,23}[a-z]{3,8})\b"
)


def _card_values(text: str) -> Iterator[tuple[int, str]]:
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
            yield match.start(), match.group()
            yield match.start(), "".join(map(str, digits))  # as a model may copy it


def _has_card_number(text: str) -> bool:
    return next(_card_values(text), None) is not None


def _seed_values(text: str) -> Iterator[tuple[int, str]]:
    for match in _SEED_PHRASE.finditer(text):
        yield match.start("words"), match.group("words")


# Unlabelled credentials are scored, not matched by prefix:
# - password-shaped: 8-64 characters mixing lower case, upper case, digits and
#   a symbol inside the word ("Secure99!Hunter2");
# - random keys and tokens: runs of base64/base62 characters that
#   detect-secrets' entropy plugin scores as random and that do not read as
#   identifiers, paths or hashes (entropy.py).
_TOKEN = re.compile(r"\S{8,}")
_WRAPPERS = "\"'`([{<«“‘)]}>»”’.,;:!?*"
_PASSWORD_SYMBOLS = frozenset("!#$%&*+=?@^~")
_KEY_COMBO = re.compile(r"^(?:[A-Z][a-z]*|F\d{1,2}|\d|[a-z])(?:[+-](?:[A-Z][a-z]*|F\d{1,2}|\d|[a-z]))+$")
_QUERY = re.compile(r"[?&]\w+=")
_USER_AT_HOST = re.compile(r"^[a-z_][a-z0-9_.-]{1,31}@[A-Za-z0-9.-]+$")
_IDENTIFIER_ASSIGNMENT = re.compile(r"^[A-Za-z_][\w.-]*=(.*)$")


def _unlabelled_values(text: str) -> Iterator[tuple[int, str]]:
    for match in _TOKEN.finditer(text):
        raw = match.group()
        token = raw.strip(_WRAPPERS)
        if len(token) < 8 or "://" in token or token[0] in "$%~\\-@#":
            continue
        if token.startswith("AAAA") and _SSH_KEY_BEFORE.search(text, max(0, match.start() - 64), match.start()):
            continue  # an SSH public key: shared on purpose
        start = match.start() + raw.index(token)
        password = _password_shaped(token)
        if password is not None:
            yield start + token.index(password), password
            continue
        for offset, run in random_runs(token):
            yield start + offset, run


def _has_unlabelled_secret(text: str) -> bool:
    return next(_unlabelled_values(text), None) is not None


def _password_shaped(token: str) -> str | None:
    """The password in `token` (the value of a `name=value` token), or None when it is not password-shaped."""
    assigned = _IDENTIFIER_ASSIGNMENT.match(token)
    if assigned:
        token = assigned.group(1).strip(_WRAPPERS)
    if not 8 <= len(token) <= 64 or "/" in token or "\\" in token or "(" in token or "::" in token:
        return None
    if not any(c in _PASSWORD_SYMBOLS for c in token[1:-1]):
        return None
    if not (any(c.islower() for c in token) and any(c.isupper() for c in token) and any(c.isdigit() for c in token)):
        return None
    if _KEY_COMBO.match(token) or _QUERY.search(token) or _USER_AT_HOST.match(token):
        return None
    if "@" in token and "." in token.split("@", 1)[1]:
        return None  # an e-mail address
    return token


def has_secret(compatible: str) -> bool:
    return (
        _has_secret_assignment(compatible)
        or _has_prose_secret(compatible)
        or bool(_SEED_PHRASE.search(compatible))
        or _has_card_number(compatible)
        or has_identifier(compatible)
        or has_labelled(compatible)
        or _has_unlabelled_secret(compatible)
    )


# --- secret_values: what a message presents as a secret ---------------------------

MIN_SECRET_VALUE = 4  # characters; shorter values are not returned


def secret_values(text: str) -> tuple[str, ...]:
    """Return the values `text` presents as secrets, in order of appearance, without repeats.

    `text` is what a person or a tool wrote (a chat message, a pasted .env,
    YAML, JSON or INI file, a tool result). A value is: a labelled value in
    prose ("my password is …", "the PIN is 4821", "token: …", in the languages
    the scan knows), an assigned value (`api_key = "…"`, `DB_PASSWORD=…`; on
    a pasted configuration line any value that is not a placeholder, a type
    name or a reference), a connection string's password, an `Authorization`
    header's value, a well-known key shape (the whole match; a private key
    block also gives its base64 lines), a card number (as written and as
    digits), a recovery phrase's words, and unlabelled password-shaped or
    random tokens. Placeholders (`<your-key>`, `changeme`, `${VAR}`,
    `os.environ[...]`), variable names and bare words not presented as
    secrets are not values; values shorter than `MIN_SECRET_VALUE`
    characters are dropped. Trailing punctuation is left off ("hunter2x!"
    at the end of a sentence gives `hunter2x`).

    Pure and content-free: nothing is logged. Read on the NFKC text, and
    again as markdown renders it, like the scan.
    """
    compatible = unicodedata.normalize("NFKC", text)
    rendered = rendered_text(compatible)
    found: list[tuple[int, str]] = []
    for view in (compatible,) if rendered is None else (compatible, rendered):
        pairs = [
            *_shape_values(view),
            *_assignment_values(view, configuration=True),
            *_prose_values(view),
            *_seed_values(view),
            *_card_values(view),
            *identifier_values(view),
            *labelled_values(view),
            *_unlabelled_values(view),
        ]
        found.extend(sorted(pairs, key=lambda pair: pair[0]))
    values: dict[str, None] = {}  # ordered, without repeats
    for _, value in found:
        value = value.strip().rstrip(_TRAILING)
        if len(value) >= MIN_SECRET_VALUE:
            values.setdefault(value)
    return tuple(values)
