"""Small text rules shared by formation, search and migration: normalisation, hashes, words."""

from __future__ import annotations

import hashlib
import re
import unicodedata

_SPACE = re.compile(r"\s+")
_TRAILING = re.compile(r"[\s.!;,]+$")


def normalize(text: str) -> str:
    """Case-, width- and whitespace-insensitive form used for exact-duplicate hashes."""
    text = unicodedata.normalize("NFKC", text).casefold()
    text = _SPACE.sub(" ", text).strip()
    return _TRAILING.sub("", text)


def text_hash(text: str) -> str:
    """The normalized-text hash of a fact: equal for texts that differ only in case/spacing."""
    return hashlib.sha256(normalize(text).encode("utf-8")).hexdigest()


def word_count(text: str) -> int:
    return len(text.split())
