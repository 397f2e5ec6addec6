"""An in-memory MongoDB for tests: ``mongomock-ng`` (imported as ``mongomock_ng``), with every
collection operation serialized by one process-wide lock.

The emulation alone is not atomic under threads: racing ``find_one_and_update`` calls both
match the same document (double claims). A real server applies each single-document update
atomically; the lock restores exactly that guarantee, and nothing more (a sequence of calls
is still interleaved with other threads, as on a real server).

``mongo_explain.EXPLAIN``, when switched on, records the documents each filtered operation
examines by the indexes declared, as ``explain`` would report them (the missing-index check).

Atlas Search and Vector Search (index management, ``$vectorSearch`` and ``$search`` with the
server's rules, index build time and index lag) come from ``atlas_emulation``; the update
documents the server refuses and mongomock applies, from ``mongo_update_rules``: each
database's ``atlas`` settings (``AtlasSettings``) hold its clock, build time and lag.
"""

from __future__ import annotations

import threading
import uuid

import mongomock_ng

from pipeline.clock import Clock
from testkit.atlas_emulation import AtlasSettings, SearchCatalog
from testkit.mongo_explain import EXPLAIN
from testkit.mongo_update_rules import check_call

_LOCK = threading.RLock()

# Calls that return a lazy cursor: materialized under the lock, so iteration never races.
_CURSORS = {"find", "aggregate", "list_indexes"}
# Calls that change documents: with index lag on, each records what mongot will see later.
_WRITES = {"insert_one", "insert_many", "update_one", "update_many", "replace_one", "delete_one",
           "delete_many", "find_one_and_update", "find_one_and_replace", "find_one_and_delete", "bulk_write"}
_SEARCH_STAGES = ("$vectorSearch", "$search", "$searchMeta")


class LockedCollection:
    def __init__(self, collection, atlas: AtlasSettings) -> None:
        self._collection = collection
        self.search_catalog = SearchCatalog(collection, atlas)

    def __getattr__(self, name: str):
        attr = getattr(self._collection, name)
        if not callable(attr):
            return attr

        def locked(*args, **kwargs):
            with _LOCK:
                OUTAGE.before(name)
                check_call(name, args, kwargs)  # what the server refuses and mongomock applies
                EXPLAIN.record(self._collection, name, args, kwargs)  # before: a delete's matched set
                result = attr(*args, **kwargs)
                if name in _WRITES:
                    self.search_catalog.after_write()
                OUTAGE.after(name)
                if name in _CURSORS:
                    return list(result)
                return result

        return locked

    # ------------------------------------------------------------------ Atlas search --------
    def aggregate(self, pipeline, **kwargs):
        with _LOCK:
            OUTAGE.before("aggregate")  # a failover fails reads and searches too
            if any(key in _SEARCH_STAGES for stage in pipeline for key in stage):
                return self.search_catalog.aggregate(list(pipeline))
            return list(self._collection.aggregate(pipeline, **kwargs))

    def create_search_index(self, model):
        with _LOCK:
            return self.search_catalog.create(model)

    def create_search_indexes(self, models):
        with _LOCK:
            return [self.search_catalog.create(m) for m in models]

    def list_search_indexes(self, name=None, **kwargs):
        with _LOCK:
            return self.search_catalog.list(name)

    def update_search_index(self, name, definition):
        with _LOCK:
            self.search_catalog.update(name, definition)

    def drop_search_index(self, name):
        with _LOCK:
            self.search_catalog.drop(name)


class LockedDatabase:
    def __init__(self, database, atlas: AtlasSettings) -> None:
        self._database = database
        self._collections: dict[str, LockedCollection] = {}
        self.atlas = atlas

    def __getitem__(self, name: str) -> LockedCollection:
        with _LOCK:
            if name not in self._collections:
                self._collections[name] = LockedCollection(self._database[name], self.atlas)
            return self._collections[name]

    def set_index_lag(self, seconds: float) -> None:
        """Index lag on (``seconds`` > 0) or off: from now on a write becomes searchable only
        ``seconds`` later on the ``atlas.clock``; what is stored already counts as indexed."""
        with _LOCK:
            self.atlas.index_lag_s = seconds
            for collection in self._collections.values():
                collection.search_catalog.start_lag()

    def __getattr__(self, name: str):
        return getattr(self._database, name)


def emulated_database(name: str | None = None, *, clock: Clock | None = None,
                      build_s: float = 0.0, index_lag_s: float = 0.0) -> LockedDatabase:
    """A fresh, empty emulated database whose client returns timezone-aware datetimes.
    ``clock`` times search index builds (``build_s``) and index lag (``index_lag_s``)."""
    client = mongomock_ng.MongoClient(tz_aware=True)
    atlas = AtlasSettings(clock=clock or Clock(), build_s=build_s)
    database = LockedDatabase(client[name or f"test_{uuid.uuid4().hex[:8]}"], atlas)
    if index_lag_s:
        database.set_index_lag(index_lag_s)
    return database


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
