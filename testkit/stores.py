"""Store fixtures shared by test modules: import one into a module to use it there."""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from contextlib import closing

import pytest

from pipeline.store.sqlite import SQLiteStore


@pytest.fixture(name="store")
def sqlite_store(tmp_path):
    """A fresh SQLite store on disk (its schema and indexes created), closed afterwards."""
    opened = SQLiteStore(str(tmp_path / "memory.db"))
    opened.create_indexes()
    yield opened
    opened.close()


def snapshot(store: SQLiteStore) -> Callable[[], None]:
    """A copy of ``store``'s file as it is now, and the function that puts it back.

    For a module that builds one store and app and has each test start from the same seeded
    memory: putting a small store back takes milliseconds, a new store, schema and app per test
    far longer. SQLite's online backup writes the copy into the file in place, under the usual
    locks, so the store's open connections read it at their next statement and the file stays
    the one they opened (a *replaced* file would make the store drop them)."""
    copy = sqlite3.connect(":memory:", check_same_thread=False)
    with closing(sqlite3.connect(store.db.path)) as source:
        source.backup(copy)

    def restore() -> None:
        with closing(sqlite3.connect(store.db.path, timeout=10)) as target:
            copy.backup(target)

    return restore
