"""An in-memory MongoDB for tests: ``mongomock-ng`` (imported as ``mongomock_ng``), with every
collection operation serialized by one process-wide lock.

The emulation alone is not atomic under threads: racing ``find_one_and_update`` calls both
match the same document (double claims). A real server applies each single-document update
atomically; the lock restores exactly that guarantee, and nothing more (a sequence of calls
is still interleaved with other threads, as on a real server).
"""

from __future__ import annotations

import threading
import uuid

import mongomock_ng

_LOCK = threading.RLock()

# Calls that return a lazy cursor: materialized under the lock, so iteration never races.
_CURSORS = {"find", "aggregate", "list_indexes"}


class LockedCollection:
    def __init__(self, collection) -> None:
        self._collection = collection

    def __getattr__(self, name: str):
        attr = getattr(self._collection, name)
        if not callable(attr):
            return attr

        def locked(*args, **kwargs):
            with _LOCK:
                result = attr(*args, **kwargs)
                if name in _CURSORS:
                    return list(result)
                return result

        return locked


class LockedDatabase:
    def __init__(self, database) -> None:
        self._database = database
        self._collections: dict[str, LockedCollection] = {}

    def __getitem__(self, name: str) -> LockedCollection:
        with _LOCK:
            if name not in self._collections:
                self._collections[name] = LockedCollection(self._database[name])
            return self._collections[name]

    def __getattr__(self, name: str):
        return getattr(self._database, name)


def emulated_database(name: str | None = None) -> LockedDatabase:
    """A fresh, empty emulated database whose client returns timezone-aware datetimes."""
    client = mongomock_ng.MongoClient(tz_aware=True)
    return LockedDatabase(client[name or f"test_{uuid.uuid4().hex[:8]}"])
