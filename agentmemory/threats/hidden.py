"""Hidden carriers: HTML comments and markdown comments that hold directives, and invisible elements.

Read on the text as written (after NFKC), before it is rendered: rendering
would drop exactly what this looks for.
"""
from __future__ import annotations

import re

# Words that make an HTML comment an instruction rather than a marker. Tool
# pragmas such as `prettier-ignore` or `eslint-disable` are removed first.
_COMMENT_DIRECTIVE_WORDS = frozenset(
    "ignore disregard override overrides system secret hidden hide instruction instructions prompt "
    "assistant obey exfiltrate jailbreak pretend ai llm agent remember always never must forward "
    "send reveal you your".split()
)
_PRAGMA = re.compile(
    r"(?:prettier|eslint|markdownlint|textlint|cspell|stylelint|biome|dprint|vale|rome|htmlhint|jshint"
    r"|tslint|istanbul|c8|lint|spell)[\w:-]*", re.IGNORECASE)
_COMMENT_WORD = re.compile(r"[a-z]+")
_MARKDOWN_COMMENT = re.compile(r"(?im)^[ \t]{0,20}\[(?://|#|comment|hidden|_|note)\]:\s*(?:#|<>)\s*(.{0,500})")
_HIDDEN_ELEMENT = re.compile(
    r"<[a-z][a-z0-9]*\b[^<>]{0,500}?\bstyle\s*=\s*[\"']?[^\"'<>]{0,500}?"
    r"(?:display\s*:\s*none|visibility\s*:\s*hidden|font-size\s*:\s*0(?:px|pt|em|rem|%)?\s*(?:[;\"'>]|!)"
    r"|opacity\s*:\s*0(?:\.0+)?\s*(?:[;\"'>]|!)|(?:height|width)\s*:\s*0(?:px)?\s*;\s*overflow\s*:\s*hidden)",
    re.IGNORECASE,
)


def has_hidden_markup(text: str) -> bool:
    if _HIDDEN_ELEMENT.search(text):
        return True
    for match in _MARKDOWN_COMMENT.finditer(text):
        if _directive_comment(match.group(1)):
            return True
    start = text.find("<!--")
    while start != -1:
        end = text.find("-->", start + 4)
        body = text[start + 4:] if end == -1 else text[start + 4:end]
        if _directive_comment(body):
            return True
        if end == -1:
            break
        start = text.find("<!--", end + 3)
    return False


def _directive_comment(body: str) -> bool:
    words = _COMMENT_WORD.findall(_PRAGMA.sub(" ", body).lower())
    return any(word in _COMMENT_DIRECTIVE_WORDS for word in words)
