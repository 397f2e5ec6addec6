"""Shared fixtures. Integration fixtures (real redis-server, real Celery worker) live in
``tests/integration/conftest.py``.

- ``celery_app_for`` (function): ``make(broker_url, result_backend=None)`` -> a Celery app
  built by ``workers.app.create_app`` with that broker and result backend (none when not
  given), for publishing from the test process; the process-wide settings are left as they
  were.

Node ids are unique: ``make test`` runs under pytest-xdist, which hands tests out by node id.
"""

from __future__ import annotations

from collections import Counter

import pytest


def pytest_collection_modifyitems(items):
    """Give each test a node id of its own. schemathesis names every operation of a
    ``schema.parametrize()`` test (``tests/api/test_fuzz.py``) by its operation but gives them
    all the function's node id, and pytest-xdist keeps one test per node id: it would fuzz one
    operation and skip the rest without a word."""
    counts = Counter(item.nodeid for item in items)
    for item in items:
        if counts[item.nodeid] > 1:
            _rename(item, f"{item.nodeid.rpartition('::')[0]}::{item.name}")
    # pytest offers no public way to rename a node: if the private one moves, fail here rather
    # than run one test of each name
    again = [nodeid for nodeid, n in Counter(item.nodeid for item in items).items() if n > 1]
    assert not again, f"tests share a node id, so pytest-xdist would run one of each: {again}"


def _rename(item, nodeid: str) -> None:
    if hasattr(item, "_id"):  # pytest 9 keeps a structured id
        from _pytest.nodeid import NodeId

        item._id = NodeId.parse(nodeid)
    else:
        item._nodeid = nodeid


@pytest.fixture
def celery_app_for(monkeypatch):
    from schemas.settings import get_settings

    apps = []

    def make(broker_url: str, result_backend: str | None = None):
        from workers.app import create_app

        with monkeypatch.context() as patch:
            patch.setenv("MEMORY_BROKER_URL", broker_url)
            if result_backend is None:
                patch.delenv("MEMORY_RESULT_BACKEND", raising=False)
            else:
                patch.setenv("MEMORY_RESULT_BACKEND", result_backend)
            get_settings.cache_clear()
            try:
                app = create_app()
            finally:
                get_settings.cache_clear()
        apps.append(app)
        return app

    yield make
    for app in apps:
        app.close()
