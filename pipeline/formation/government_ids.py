"""Government identifiers (design §11): a social security, social insurance, passport,
national id, national insurance, tax id or driver's licence number, named by its context
words and followed by a number. Pure, standard library;
``secrets.SecretGuard`` calls ``government_id``.

The context words are required: nine digits alone are an order number as often as an SSN,
and an "ID number" alone is an order's or an employee's as often as a state's.
The number must carry at least five digits, in one run of digits, spaces and dashes with at
most three letters before or after it ("X1234567", "123-45-6789", "QQ 12 34 56 C",
"12345678Z"). Kept: "Maya's passport expires in 2027" (four digits), "renew the passport
before 2026-03-21" (a date), "the social security office is at 1200 Main Street", "her
passport number is in the safe".
"""

from __future__ import annotations

import re

_CONTEXT = (
    r"social[\s-]security(?:\s+(?:number|no\.?|#|card))?|ssn|social[\s-]insurance(?:\s+number)?"
    r"|national[\s-]insurance(?:\s+number)?|nino|passport(?:\s+(?:number|no\.?|#|id))?"
    r"|national[\s-]id(?:entity)?(?:\s+(?:card|number|no\.?|#))?|(?:citizen|identity|id)\s+card(?:\s+number)?"
    r"|tax\s+(?:id|identification|number)(?:\s+number)?|nif|bsn|personnummer|aadhaar"
    r"|driver'?s?\s+licen[cs]e(?:\s+(?:number|no\.?|#))?"
)
_GOVERNMENT_ID = re.compile(
    rf"\b(?:{_CONTEXT})(?![\w-])"
    r"(?:\s+(?:for|of)\s+(?:[\w'.-]+\s+){0,2}?[\w'.-]+)?"                  # "... for Maya", "... of the CEO"
    r"(?:\s+(?:is|was|reads|ends\s+in)\b|\s*[:=#]|\s+no\.?)*\s*[\"'`]?"
    r"(?P<value>[A-Z]{0,3}[\s-]?\d[\d\s-]{3,16}\d(?:[\s-]?[A-Z]{1,3})?(?![\w-])|[A-Z]{1,3}\d{5,12}[A-Z]?\b)",
    re.IGNORECASE,
)
_DATE = re.compile(r"\d{4}-\d{1,2}-\d{1,2}|\d{1,2}[-\s]\d{1,2}[-\s]\d{2,4}")


def government_id(text: str) -> bool:
    """Whether ``text`` gives a government identifier's number after its context words."""
    for match in _GOVERNMENT_ID.finditer(text):
        value = match.group("value").strip(" -")
        digits = re.findall(r"\d+", value)
        if sum(len(d) for d in digits) >= 5 and not _DATE.fullmatch(value) and not _year_run(digits):
            return True
    return False


def _year_run(digits: list[str]) -> bool:
    """"expires 2027 2028": years side by side are no identifier."""
    return len(digits) > 1 and all(len(d) == 4 and d[:2] in ("19", "20") for d in digits)
