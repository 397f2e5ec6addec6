"""A store formed by the demo, and the environment an MCP client would start the server with."""

from __future__ import annotations

import pytest

from testkit.demo_store import formed_demo_store


@pytest.fixture(scope="session")
def demo_store_url(tmp_path_factory) -> str:
    return f"sqlite:///{formed_demo_store(tmp_path_factory)}"


# a real redis-server and real Celery workers, as the integration tests have them (skipped on a
# laptop without redis-server, failed in CI)
from tests.integration.conftest import broker_urls, celery_worker_process, redis_server  # noqa: E402,F401


@pytest.fixture
def store_copy(tmp_path, tmp_path_factory) -> str:
    """A private copy of the demo store, for tests that write."""
    import shutil

    source = formed_demo_store(tmp_path_factory)
    target = tmp_path / "memory.db"
    for suffix in ("", "-wal", "-shm"):
        if source.with_name(source.name + suffix).exists():
            shutil.copy(source.with_name(source.name + suffix), target.with_name(target.name + suffix))
    return f"sqlite:///{target}"


@pytest.fixture(scope="module")
def api_server(tmp_path_factory):
    """uvicorn serving the API app, /mcp included, over a private copy of the demo store."""
    from testkit.api_server import demo_api

    with demo_api(tmp_path_factory) as server:
        yield server
