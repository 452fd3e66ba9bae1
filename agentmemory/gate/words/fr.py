"""French: the words to remember and forget, negation, and the labels of secrets (no other rule yet)."""
from __future__ import annotations

import re

CODE = "fr"
FUNCTION_WORDS = frozenset(
    "je j' me m' moi mon ma mes nous notre nos tu te toi ton ta tes vous votre vos il elle on ils elles le la les "
    "l' un une des du de d' au aux et ou mais donc que qu' qui quoi est sont suis es était avec pour dans sur par "
    "pas ne n' plus jamais aucun aucune ce cette ces ça c' très aussi toujours oui non merci bien y en".split()
)
SECRET_LABELS = ("mot de passe", "mdp", "code", "code pin", "pin", "code secret", "digicode", "combinaison",
                 "phrase secrète", "jeton", "clé api", "question secrète", "réponse secrète", "identifiants")
NEGATION = ("pas", "jamais", "aucun", "aucune", "sans", "plus", "ni", "non")
CONTRAST = ("plutôt que", "au lieu de", "que", "pas", "jamais", "aucun", "aucune", "sans", "ni", "non", "contre")
REMEMBER = re.compile(
    r"\b(?:retiens|retenez|souviens-toi|souvenez-vous|rappelle-toi|rappelez-vous|mémorise|mémorisez|note(?:z)? "
    r"(?:que|bien|ça)|n'oublie pas|n'oubliez pas|garde(?:z)? en (?:tête|mémoire)|à partir de maintenant|"
    r"désormais|dorénavant|à l'avenir)\b",
    re.IGNORECASE,
)
FORGET = re.compile(r"\b(?:oublie|oubliez)\b(?! pas)|\b(?:supprime|efface)\w*\b.{0,40}\bmémoire\b", re.IGNORECASE)
REMEMBER_LEAD = re.compile(
    r"^\W*(?:s'il te plaît,?\s+)?(?:retiens|retenez|souviens-toi|mémorise|mémorisez|note(?:z)?|n'oublie pas|"
    r"garde(?:z)? en (?:tête|mémoire))\b\s*[:,-]?\s*(?:(?:que|qu')\s*)?",
    re.IGNORECASE,
)
