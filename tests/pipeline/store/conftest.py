"""The ``store`` fixture: every contract test runs once per adapter."""

from __future__ import annotations

import pytest

from pipeline.store.mongo import MongoStore
from pipeline.store.sqlite import SQLiteStore
from testkit.mongo_emulation import emulated_database

ADAPTERS = ["sqlite", "mongo"]


def open_adapter(kind: str, tmp_path):
    if kind == "sqlite":
        return SQLiteStore.from_url(f"sqlite:///{tmp_path / 'memory.db'}", prefix="memory2_")
    if kind == "mongo":
        return MongoStore(emulated_database(), prefix="memory2_")
    raise ValueError(kind)


@pytest.fixture(params=ADAPTERS)
def store(request, tmp_path):
    opened = open_adapter(request.param, tmp_path)
    opened.create_indexes()
    yield opened
    opened.close()
