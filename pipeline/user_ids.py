"""Where a user's id lives in stored documents: the id fields, never vectors or free text.

An id is matched by equality in the fields that hold one (``user_id``, ``sender_id``), by
membership in the lists of them (``users``, ``session_users``, ``user_ids``,
``source_user_ids``), and as the scope key ``user:<id>`` (``scope_key``, the keys of a
``versions`` map, the tail of a ``consolidate:<agent>:<scope key>`` lease name). A substring
test would find ``u1`` inside ``u10``, inside base64 vectors and inside anybody's message text.

``ID_FIELDS`` is the one table of those fields: a new provenance field is one more line.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from typing import Any

from schemas.documents import scope_key
from schemas.values import text_problem

Check = Callable[[Any, str], bool]


def _equal(value: Any, user_id: str) -> bool:
    return value == user_id


def _member(value: Any, user_id: str) -> bool:
    return isinstance(value, (list, tuple)) and user_id in value


def _scope(value: Any, user_id: str) -> bool:
    return value == scope_key("user", user_id=user_id)


def _scope_map(value: Any, user_id: str) -> bool:
    return isinstance(value, dict) and scope_key("user", user_id=user_id) in value


#: field name -> how it holds a user id, wherever the field appears in a document (stage
#: outputs of a run and the payload of a rejected event included).
ID_FIELDS: dict[str, Check] = {
    "user_id": _equal,
    "sender_id": _equal,
    "users": _member,
    "session_users": _member,
    "user_ids": _member,
    "source_user_ids": _member,  # provenance: the users whose messages a fact came from
    "scope_key": _scope,
    "versions": _scope_map,
}

LEASE_PREFIX = "consolidate:"


def lease_names_user(name: str, user_id: str) -> bool:
    """A consolidation lease (``consolidate:<agent>:<scope key>``) of the user's scope."""
    return name.startswith(LEASE_PREFIX) and name.endswith(":" + scope_key("user", user_id=user_id))


def id_paths(value: Any, user_id: str, path: str = "") -> Iterator[str]:
    """Dotted paths of every id field in ``value`` (nested dicts and lists) holding ``user_id``;
    a rejected event's ``raw`` payload is read as JSON (``raw_paths``)."""
    if isinstance(value, dict):
        for key, item in value.items():
            here = f"{path}.{key}" if path else str(key)
            check = ID_FIELDS.get(str(key))
            if check is not None and check(item, user_id):
                yield here
            if key == "raw" and isinstance(item, str):
                yield from (f"{here}:{p}" for p in raw_paths(item, user_id))
            else:
                yield from id_paths(item, user_id, here)
    elif isinstance(value, (list, tuple)):
        for i, item in enumerate(value):
            yield from id_paths(item, user_id, f"{path}[{i}]")


def raw_paths(raw: str, user_id: str) -> list[str]:
    """Where a rejected event's raw payload names the user. A rejected payload may hold the id
    under a misspelt field, so every JSON string equal to the id or to its scope key counts
    (equality, never a substring). A payload that is not JSON cannot be read by field: any
    mention of the id counts there, since erasing a broken payload beats keeping the user's."""
    try:
        parsed = json.loads(raw)
    except ValueError:
        return ["<text>"] if user_id in raw else []
    wanted = {user_id, scope_key("user", user_id=user_id)}
    return list(_equal_leaves(parsed, wanted, ""))


def _equal_leaves(value: Any, wanted: set[str], path: str) -> Iterator[str]:
    if isinstance(value, dict):
        for key, item in value.items():
            yield from _equal_leaves(item, wanted, f"{path}.{key}" if path else str(key))
    elif isinstance(value, list):
        for i, item in enumerate(value):
            yield from _equal_leaves(item, wanted, f"{path}[{i}]")
    elif isinstance(value, str) and value in wanted:
        yield path or "<value>"


def raw_names_user(raw: str, user_id: str) -> bool:
    return bool(raw_paths(raw, user_id))


#: ids are at most 128 characters (design §3): longer strings of a payload are never ids
MAX_ID_CHARS = 128


def raw_id_candidates(raw: str) -> list[str] | None:
    """Every string of id length in a rejected event's raw JSON payload, for an index that
    finds the payloads naming a user without reading them all; None when the payload is not
    JSON (then only reading it whole tells, ``raw_paths``)."""
    try:
        parsed = json.loads(raw)
    except (ValueError, RecursionError):  # not JSON, or nested past the parser's limit
        return None
    found: dict[str, None] = {}
    stack = [parsed]
    while stack:
        value = stack.pop()
        if isinstance(value, dict):
            stack.extend(value.values())
        elif isinstance(value, list):
            stack.extend(value)
        elif isinstance(value, str) and 0 < len(value) <= MAX_ID_CHARS and text_problem(value, id_rules=True) is None:
            found[value] = None  # only what may be an id: a lone surrogate would not even encode
    return list(found)
