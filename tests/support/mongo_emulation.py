"""An in-memory MongoDB for tests: ``mongomock-ng`` (imported as ``mongomock_ng``), with every
collection operation serialized by one process-wide lock.

The emulation alone is not atomic under threads: racing ``find_one_and_update`` calls both
match the same document (double claims). A real server applies each single-document update
atomically; the lock restores exactly that guarantee, and nothing more (a sequence of calls
is still interleaved with other threads, as on a real server).

Atlas Search and Vector Search (index management, ``$vectorSearch`` and ``$search`` with the
server's rules, index build time and index lag) come from ``atlas_emulation``: each
database's ``atlas`` settings (``AtlasSettings``) hold its clock, build time and lag.
"""

from __future__ import annotations

import threading
import uuid

import mongomock_ng

from pipeline.clock import Clock
from tests.support.atlas_emulation import AtlasSettings, SearchCatalog

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
                result = attr(*args, **kwargs)
                if name in _WRITES:
                    self.search_catalog.after_write()
                if name in _CURSORS:
                    return list(result)
                return result

        return locked

    # ------------------------------------------------------------------ Atlas search --------
    def aggregate(self, pipeline, **kwargs):
        with _LOCK:
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
