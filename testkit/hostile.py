"""Inputs that have answered 500 at some door, as one catalog for the API's fuzz run
(``tests/api/test_fuzz.py``), the sweep over every route (``tests/api/test_hostile.py``) and the
inspector's forms (``tests/ui``): lone surrogates, NUL and control characters, datetimes at the
edges of Python's range and offsets of ±14:00, huge numbers and deep nesting.

``variants(value)`` gives, for a JSON value, copies of it with one leaf replaced by each hostile
value that fits where it sits (a date-time by edge times, a number by huge ones, any text by
hostile text), so that every field of a request is tried without knowing the route.
"""

from __future__ import annotations

import copy
import json
import re
from collections.abc import Iterator
from typing import Any

#: lone surrogates (as JSON ``\\udc00`` escapes decode) and NUL, which no text field stores,
#: control characters, which no id takes, and a non-character
TEXT = ("\udc00", "a\ud800b", "a\x00b", "\x01", "x\x1b[31m", "\x7f", "\ufffe")
#: what a URL or a form can carry of them (a lone surrogate cannot be UTF-8 encoded)
URL_TEXT = ("a\x00b", "\x01", "x\x1b[31m", "\x7f")
#: the edges of Python's datetime range, with the widest offsets in use
TIMES = ("0001-01-01T00:00:00Z", "0001-01-01T00:00:00+14:00", "9999-12-31T23:59:59Z",
         "9999-12-31T23:59:59-14:00", "2026-05-01T12:00:00+14:00", "2026-05-01T12:00:00-14:00")
#: the same as a browser's datetime-local field sends them (no zone)
FORM_TIMES = ("0001-01-01T00:00", "0001-01-01T00:00:00+14:00", "9999-12-31T23:59:59")
#: numbers past any limit (and past 64 bits)
NUMBERS = (10**30, -(10**30), 2**63, 2**64)
#: how deep ``deep_json`` nests: past any JSON parser's recursion limit
DEPTH = 10_000
_MARK = "\x00hostile-deep\x00"
_DATETIME = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d")


def deep_json(depth: int = DEPTH) -> str:
    return "[" * depth + "]" * depth


def _leaves(value: Any, path: tuple = ()) -> Iterator[tuple[tuple, Any]]:
    if isinstance(value, dict):
        for key, item in value.items():
            yield from _leaves(item, (*path, key))
    elif isinstance(value, list):
        for i, item in enumerate(value):
            yield from _leaves(item, (*path, i))
    else:
        yield path, value


def _set(value: Any, path: tuple, new: Any) -> Any:
    result = copy.deepcopy(value)
    holder = result
    for key in path[:-1]:
        holder = holder[key]
    holder[path[-1]] = new
    return result


def for_parameter(schema: dict) -> tuple[Any, ...]:
    """The hostile values for a query parameter of this JSON schema (a member of ``anyOf``
    counts): edge times for a date-time, huge numbers for an integer, what a URL carries of
    hostile text for a string."""
    for member in [schema, *schema.get("anyOf", [])]:
        if member.get("format") == "date-time":
            return TIMES
        if member.get("type") == "integer":
            return NUMBERS
        if member.get("type") == "string":
            return URL_TEXT
    return ()


def replacements(leaf: Any, *, in_url: bool = False) -> tuple[Any, ...]:
    """The hostile values that fit where ``leaf`` sits."""
    if isinstance(leaf, bool) or leaf is None:
        return ()
    if isinstance(leaf, (int, float)):
        return NUMBERS
    if isinstance(leaf, str) and _DATETIME.match(leaf):
        return TIMES
    return URL_TEXT if in_url else TEXT


def variants(value: Any, *, in_url: bool = False, times: tuple[str, ...] = ()) -> Iterator[tuple[str, Any]]:
    """(where, copy of ``value``) with one leaf replaced by each value of ``replacements``;
    ``times`` names absent top-level fields that take a date-time, tried with ``TIMES``."""
    if not isinstance(value, (dict, list)):
        return
    for path, leaf in _leaves(value):
        if not path:
            continue
        for new in replacements(leaf, in_url=in_url):
            yield ".".join(map(str, path)), _set(value, path, new)
    for name in times:
        if isinstance(value, dict) and name not in value:
            for new in TIMES:
                yield name, {**value, name: new}


def nested(body: Any) -> bytes | None:
    """``body`` as JSON bytes with its first leaf replaced by ``deep_json()`` (None: no leaf)."""
    leaves = [path for path, _ in _leaves(body) if path]
    if not leaves:
        return None
    text = json.dumps(_set(body, leaves[0], _MARK))
    return text.replace(json.dumps(_MARK), deep_json()).encode()
