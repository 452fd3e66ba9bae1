"""Spanish: the words to remember and forget, negation, and the labels of secrets (no other rule yet)."""
from __future__ import annotations

import re

CODE = "es"
FUNCTION_WORDS = frozenset(
    "yo me mi mis mío nosotros nuestro nuestra nuestros tú te ti tu tus usted él ella ellos ellas el la los las "
    "un una unos unas y o pero que qué quien es son soy estoy está están era con para por en de del al sin "
    "no nunca jamás ningún ninguna ya muy también siempre sí gracias lo se su sus este esta esto eso cómo".split()
)
SECRET_LABELS = ("contraseña", "clave", "código", "pin", "código pin", "combinación", "secreto", "token",
                 "clave api", "pregunta de seguridad", "respuesta de seguridad", "credenciales")
NEGATION = ("no", "nunca", "jamás", "ningún", "ninguna", "ninguno", "sin", "ni", "ya no")
CONTRAST = ("en vez de", "en lugar de", "más que", "que", "no", "nunca", "jamás", "sin", "ni", "contra")
REMEMBER = re.compile(
    r"\b(?:recuerda|recuerde|acuérdate|memoriza|memorice|apunta|anota|toma nota|ten en cuenta|no olvides|"
    r"guarda (?:esto|en (?:tu )?memoria)|a partir de ahora|de ahora en adelante|en (?:el )?futuro)\b",
    re.IGNORECASE,
)
FORGET = re.compile(r"\b(?:olvida|olvide)\b|\b(?:borra|elimina)\w*\b.{0,40}\bmemoria\b", re.IGNORECASE)
REMEMBER_LEAD = re.compile(
    r"^\W*(?:por favor,?\s+)?(?:recuerda|recuerde|acuérdate de|memoriza|apunta|anota|ten en cuenta|no olvides)\b"
    r"\s*[:,-]?\s*(?:que\s+)?",
    re.IGNORECASE,
)
