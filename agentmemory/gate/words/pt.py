"""Portuguese: the words to remember and forget, negation, and the labels of secrets (no other rule yet)."""
from __future__ import annotations

import re

CODE = "pt"
FUNCTION_WORDS = frozenset(
    "eu me mim meu minha meus minhas nós nosso nossa nossos você vocês te tu teu tua ele ela eles elas o a os as "
    "um uma e ou mas que quem é são sou estou está estão era com para por em no na nos nas de do da dos das ao "
    "não nunca jamais nenhum nenhuma já muito também sempre sim obrigado obrigada isso isto como mais".split()
)
SECRET_LABELS = ("senha", "palavra-passe", "código", "pin", "código pin", "combinação", "segredo", "token",
                 "chave api", "pergunta de segurança", "resposta de segurança", "credenciais")
NEGATION = ("não", "nunca", "jamais", "nenhum", "nenhuma", "sem", "nem", "já não")
CONTRAST = ("em vez de", "ao invés de", "em lugar de", "do que", "que", "não", "nunca", "sem", "nem", "contra")
REMEMBER = re.compile(
    r"(?:\blembr(?:a|e)(?:-te|-se)?\b|\bmemoriza\b|\banota\b|\btoma nota\b|\bguarda (?:isto|na memória)\b|"
    r"\bnão (?:te )?esqueças\b|\bnão esqueça\b|\ba partir de agora\b|\bdaqui (?:para a|pra) frente\b|"
    r"\bno futuro\b)",
    re.IGNORECASE,
)
FORGET = re.compile(r"\b(?:esquece|esqueça)\b|\b(?:apaga|apague|remove|remova)\b.{0,40}\bmemória\b", re.IGNORECASE)
REMEMBER_LEAD = re.compile(
    r"^\W*(?:por favor,?\s+)?(?:lembr(?:a|e)(?:-te|-se)?(?:\s+de)?|memoriza|anota|toma nota|não (?:te )?esqueças)"
    r"\s*[:,-]?\s*(?:que\s+)?",
    re.IGNORECASE,
)
