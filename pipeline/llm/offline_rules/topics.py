"""The owner's topic lists, by rule (design §13): the offline rules honour the structured part
of Memory Instructions, ``focus:`` and ``ignore:`` lines, by matching words.

A topic matches a text when each of its words matches one of the text's words after a light
stemming ("catering" and "caterer" both read "cater"). A text is kept when it matches no
ignored topic and, if focus topics are given, at least one of them.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence

_WORD = re.compile(r"[^\W_]+", re.UNICODE)
_SUFFIXES = ("ings", "ing", "ers", "er", "s", "ed")


def _stem(word: str) -> str:
    for suffix in _SUFFIXES:
        if word.endswith(suffix) and len(word) - len(suffix) >= 4:
            return word[: -len(suffix)]
    return word


def stems(text: str) -> set[str]:
    """The text's words, lower-cased and lightly stemmed."""
    return {_stem(w) for w in _WORD.findall(text.lower())}


def matches(topic: str, said: set[str]) -> bool:
    """Whether each word of ``topic`` is among ``said`` (a text's ``stems``)."""
    words = [_stem(w) for w in _WORD.findall(topic.lower())]
    return bool(words) and all(w in said for w in words)


def kept(text: str, lists: Mapping[str, Sequence[str]] | None) -> bool:
    """Whether the owner's ``{"focus": [...], "ignore": [...]}`` lets ``text`` be kept."""
    if not lists:
        return True
    said = stems(text)
    if any(matches(t, said) for t in lists.get("ignore") or ()):
        return False
    focus = list(lists.get("focus") or ())
    return not focus or any(matches(t, said) for t in focus)
