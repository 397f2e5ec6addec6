from __future__ import annotations

import pytest

from tests.api.harness import build, seed_memory
from testkit.stores import sqlite_store  # noqa: F401  (the `store` fixture)


@pytest.fixture
def api(store):
    built = build(store)
    seed_memory(store, built.deps.clock.now())
    return built


@pytest.fixture
def client(api):
    with api.client() as c:
        yield c
