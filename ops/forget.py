"""Erasure of one user (SPEC §9 ``forget-user``), and the audit that proves it.

The store deletes (``Store.forget_user``): the user's facts with their history, user
reflections and blobs, the user's own messages, the whole of every one-to-one session they
were the only human of (its messages, session memory, runs and caches), run records and
rejected events that name them, context caches, and their id in session user lists. In a
group chat, other people's messages and the group's session memory stay. ``traces`` scans a
full dump for anything left.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any

from pipeline.errors import InvalidInput
from pipeline.store.port import Store


def forget_user(store: Store, user_id: str, agent_id: str | None = None) -> dict[str, int]:
    """Delete everything of ``user_id`` under ``agent_id`` (None: every agent); counts per
    collection."""
    if not user_id or not user_id.strip():
        raise InvalidInput("user", "a user id is required")
    if agent_id is not None and not agent_id.strip():
        raise InvalidInput("agent", "an empty agent id; use --all-agents to erase under every agent")
    return store.forget_user(user_id, agent_id)


def _walk(value: Any, path: str) -> Iterator[tuple[str, str]]:
    if isinstance(value, dict):
        for key, item in value.items():
            yield from _walk(key, f"{path}.<key>")
            yield from _walk(item, f"{path}.{key}")
    elif isinstance(value, (list, tuple)):
        for i, item in enumerate(value):
            yield from _walk(item, f"{path}[{i}]")
    elif isinstance(value, (bytes, bytearray)):
        yield path, bytes(value).decode("utf-8", errors="ignore")
    elif value is not None:
        yield path, str(value)


def traces(dump: dict[str, list[dict]], needles: Iterable[str]) -> list[str]:
    """Where any needle still appears in a ``Store.dump_all()``: ``collection[i].field`` paths."""
    wanted = [n for n in needles if n]
    found = []
    for collection, rows in dump.items():
        for i, row in enumerate(rows):
            for path, text in _walk(row, f"{collection}[{i}]"):
                if any(needle in text for needle in wanted):
                    found.append(path)
    return found
