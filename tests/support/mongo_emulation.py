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
                OUTAGE.before(name)
                result = attr(*args, **kwargs)
                OUTAGE.after(name)
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


class Outage:
    """Fault injection: while a window is open, collection operations fail as pymongo fails
    during a replica-set failover or a lost connection (``OUTAGE.open(seconds)``, or
    ``with OUTAGE.during():``).

    As strict as the real thing: a write may be applied on the server and its answer lost
    (``AutoReconnect``: "the operation which caused it has not necessarily succeeded",
    https://pymongo.readthedocs.io/en/stable/api/pymongo/errors.html), so some writes fail
    *after* they took effect. The errors are the driver's own classes with the server's codes
    (10107 NotWritablePrimary, 189 PrimarySteppedDown, 91 ShutdownInProgress; codes from the
    SDAM specification, as in pymongo's ``helpers_shared.py``).
    """

    WRITES = frozenset({
        "insert_one", "insert_many", "update_one", "update_many", "replace_one", "delete_one", "delete_many",
        "find_one_and_update", "find_one_and_replace", "find_one_and_delete", "bulk_write",
    })

    def __init__(self, seed: int = 0) -> None:
        import random

        self._rng = random.Random(seed)
        self._until = 0.0
        self.raised: dict[str, int] = {}

    def open(self, seconds: float) -> None:
        import time

        self._until = time.monotonic() + seconds

    def close(self) -> None:
        self._until = 0.0

    @property
    def is_open(self) -> bool:
        import time

        return time.monotonic() < self._until

    def during(self, seconds: float = 3600.0):
        import contextlib

        @contextlib.contextmanager
        def window():
            self.open(seconds)
            try:
                yield self
            finally:
                self.close()

        return window()

    def _error(self) -> Exception:
        from pymongo.errors import AutoReconnect, NetworkTimeout, NotPrimaryError, ServerSelectionTimeoutError

        kind = self._rng.choice(("not_primary", "stepped_down", "shutdown", "reconnect", "timeout", "selection"))
        self.raised[kind] = self.raised.get(kind, 0) + 1
        if kind == "not_primary":
            return NotPrimaryError("not primary", {"ok": 0, "code": 10107, "codeName": "NotWritablePrimary",
                                                   "errmsg": "not primary"})
        if kind == "stepped_down":
            return NotPrimaryError("primary stepped down", {"ok": 0, "code": 189, "codeName": "PrimarySteppedDown",
                                                            "errmsg": "PrimarySteppedDown"})
        if kind == "shutdown":
            return NotPrimaryError("shutdown in progress", {"ok": 0, "code": 91, "codeName": "ShutdownInProgress",
                                                            "errmsg": "The server is in quiesce mode"})
        if kind == "reconnect":
            return AutoReconnect("connection closed")
        if kind == "timeout":
            return NetworkTimeout("timed out")
        return ServerSelectionTimeoutError("No replica set members match selector \"Primary()\"")

    def before(self, operation: str) -> None:
        if self.is_open and not (operation in self.WRITES and self._rng.random() < 0.3):
            raise self._error()

    def after(self, operation: str) -> None:
        # the write went through; its answer is lost with the connection
        if self.is_open and operation in self.WRITES:
            self.raised["after_write"] = self.raised.get("after_write", 0) + 1
            from pymongo.errors import AutoReconnect

            raise AutoReconnect("connection closed before the reply")


#: the one switch every emulated collection checks (one lock, one process, like ``_LOCK``)
OUTAGE = Outage()
