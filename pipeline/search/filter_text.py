"""A metadata filter as people write it in text (design §13 "Categories and metadata"):
``KEY=VALUE`` pairs (``memoryctl --meta``, the inspector's field) or a JSON object in one URL
query parameter (the HTTP context route). Either gives the ``metadata`` mapping that
``filters.check_filter`` then checks against the agent; here only the text's form is judged,
so that a typo is refused where it was typed instead of read as "no memory".
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from typing import Any

from pipeline.errors import InvalidInput

EXAMPLE = '{"project": "apollo", "tier": [1, 2]}'


def metadata_object(text: str | None, where: str = "metadata") -> dict[str, Any] | None:
    """The JSON object ``text`` holds (None when there is no text); ``InvalidInput`` at
    ``where`` for text that is not JSON, or JSON that is not an object."""
    if text is None or not text.strip():
        return None
    try:
        value = _strict_json(text)
    except (ValueError, RecursionError) as exc:
        reason = f"{exc.msg} at character {exc.pos}" if isinstance(exc, json.JSONDecodeError) else \
            "it nests deeper than a filter reads" if isinstance(exc, RecursionError) else str(exc)
        raise InvalidInput(where, f"is not JSON ({reason}); expected an object such as {EXAMPLE}") from None
    if not isinstance(value, dict):
        raise InvalidInput(where, f"is JSON {type(value).__name__}; expected an object such as {EXAMPLE}")
    return value


def metadata_pairs(pairs: Iterable[str], where: str = "metadata") -> dict[str, Any] | None:
    """``KEY=VALUE`` pairs as a metadata filter (None when there are none): a key given twice
    matches any of its values. ``InvalidInput`` at ``where`` for a pair without ``=`` or key."""
    values: dict[str, list[Any]] = {}
    for pair in pairs:
        key, sep, text = pair.partition("=")
        if not sep or not key.strip():
            raise InvalidInput(where, f"{pair[:80]!r} is not KEY=VALUE, e.g. project=apollo or tier=2")
        values.setdefault(key.strip(), []).append(pair_value(text))
    return {k: (v[0] if len(v) == 1 else v) for k, v in values.items()} or None


def pair_lines(metadata: Mapping[str, Any]) -> str:
    """``metadata`` as ``KEY=VALUE`` lines that ``metadata_pairs`` reads back as it is: one line a
    value (a key holding a list, one line each), a string quoted only where ``pair_value``
    would read it as something else (``code="2"``)."""
    lines = []
    for key, held in sorted(metadata.items()):
        for value in held if isinstance(held, list) else [held]:
            plain = isinstance(value, str) and value == value.strip() and pair_value(value) == value
            lines.append(f"{key}={value if plain else json.dumps(value, ensure_ascii=False)}")
    return "\n".join(lines)


def pair_value(text: str) -> Any:
    """A pair's VALUE: JSON when it is a JSON number, true/false or a quoted string, else the
    text as it is. ``tier=2`` is the number 2, ``code="2"`` the string "2", ``project=apollo``
    the string apollo (a fraction is kept as one, for the filter check to refuse by name)."""
    try:
        value = _strict_json(text)
    except (ValueError, RecursionError):
        return text
    return value if isinstance(value, (str, int, float, bool)) else text


def _strict_json(text: str) -> Any:
    """JSON as the standard has it: Python's reader also takes NaN and Infinity, which are not
    JSON (RFC 8259 §6) and no metadata value."""
    return json.loads(text, parse_constant=_not_json)


def _not_json(name: str) -> Any:
    raise ValueError(f"{name} is not a JSON value")
