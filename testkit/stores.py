"""Store fixtures shared by test modules: import one into a module to use it there."""

from __future__ import annotations

import pytest

from pipeline.store.sqlite import SQLiteStore


@pytest.fixture(name="store")
def sqlite_store(tmp_path):
    """A fresh SQLite store on disk (its schema and indexes created), closed afterwards."""
    opened = SQLiteStore(str(tmp_path / "memory.db"))
    opened.create_indexes()
    yield opened
    opened.close()
